package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallSelf: `hangar install-self DEST` copies the running binary to DEST, executable, over
// whatever was there, leaves no temporary file behind, and the copy runs.
func TestInstallSelf(t *testing.T) {
	bin := buildHangar(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "hangar")
	if err := os.WriteFile(dest, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "install-self", dest).CombinedOutput()
	if err != nil {
		t.Fatalf("install-self: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(bin)
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("DEST is not the binary (%d bytes, want %d): %v", len(got), len(want), err)
	}
	fi, _ := os.Stat(dest)
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only DEST: %v", len(entries), entries)
	}
	// The copy is a working hangar: it installs itself again.
	again := filepath.Join(dir, "again")
	if out, err := exec.Command(dest, "install-self", again).CombinedOutput(); err != nil {
		t.Fatalf("the copy does not run: %v\n%s", err, out)
	}

	// Errors: no argument, and a directory that does not exist (nothing left behind).
	if out, err := exec.Command(bin, "install-self").CombinedOutput(); err == nil {
		t.Errorf("install-self without DEST succeeded: %s", out)
	}
	out, err = exec.Command(bin, "install-self", filepath.Join(dir, "missing", "hangar")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "install-self") {
		t.Errorf("install-self into a missing directory: %v\n%s", err, out)
	}
	// Hidden: not in the help.
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	if strings.Contains(string(help), "install-self") {
		t.Errorf("install-self shows in the help:\n%s", help)
	}
}
