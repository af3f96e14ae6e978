package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseForwardSpec(t *testing.T) {
	for in, want := range map[string]forwardSpec{"8080": {8080, 8080}, "0:7000": {0, 7000}, "9000:80": {9000, 80}} {
		got, err := parseForwardSpec(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":", "0", "80:0", "x:80", "80:x", "70000:80", "80:70000", "-1:80", "1:2:3"} {
		if _, err := parseForwardSpec(bad); err == nil || !strings.Contains(err.Error(), "LOCAL:REMOTE") {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

func TestReplaceSSHConfigBlock(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config")
	block := func(host string) string {
		return sshConfigStart + "\nHost " + host + "\n  User alice/" + host + "\n" + sshConfigEnd + "\n"
	}
	// No file: the block alone, mode 0600.
	if err := replaceSSHConfigBlock(file, block("a")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != block("a") {
		t.Errorf("new file: %q", b)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	// The user's own lines, before and after, stay; the block is replaced in place.
	mine := "Host work\n  User me\n"
	if err := os.WriteFile(file, []byte(mine+block("a")+"Host *\n  ServerAliveInterval 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSSHConfigBlock(file, block("b")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	if want := mine + block("b") + "Host *\n  ServerAliveInterval 9\n"; string(b) != want {
		t.Errorf("replaced:\n%s\nwant:\n%s", b, want)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o644 {
		t.Errorf("the file's mode changed to %v", st.Mode())
	}
	// A file without a block gets it first (ssh_config: the first value wins).
	if err := os.WriteFile(file, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replaceSSHConfigBlock(file, block("c")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != block("c")+"\n"+mine {
		t.Errorf("prepended: %q", b)
	}
	// Half a block is not guessed at, and the file is left as it was.
	half := mine + sshConfigStart + "\nHost x\n"
	_ = os.WriteFile(file, []byte(half), 0o600)
	if err := replaceSSHConfigBlock(file, block("d")); err == nil || !strings.Contains(err.Error(), "without the other") {
		t.Errorf("half a block: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != half {
		t.Errorf("a refused write changed the file: %q", b)
	}
}

func TestQuoteSSH(t *testing.T) {
	for in, want := range map[string]string{"/usr/bin/hangar": "/usr/bin/hangar", "/a b/hangar": `"/a b/hangar"`, `x"y`: `"x\"y"`, "": `""`} {
		if got := quoteSSH(in); got != want {
			t.Errorf("quoteSSH(%q) = %s, want %s", in, got, want)
		}
	}
}
