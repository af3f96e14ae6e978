package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBackupRestore follows docs/deploy-vm.md, "Backups": deploy/systemd/hangar-backup copies the
// SQLite database while the server runs and writes to it; a server started on the copy (put in
// place of hangar.db in a new data directory) has what was there at the backup, and not what came
// after.
func TestBackupRestore(t *testing.T) {
	h := startLoggedIn(t)
	h.must("agents", "create", "k1")
	h.must("create", "before", "--agent", "k1")
	backups := filepath.Join(t.TempDir(), "backups")
	cmd := exec.Command("../../deploy/systemd/hangar-backup")
	cmd.Env = append(os.Environ(), "HANGAR_DB="+filepath.Join(h.dir, "data", "hangar.db"), "HANGAR_BACKUP_DIR="+backups)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hangar-backup: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^hangar-backup: (\S+/hangar-\d{8}T\d{6}Z\.db)\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("hangar-backup said %q", out)
	}
	h.must("create", "after", "--agent", "k1")

	// Restore into a new data directory, as the guide restores in place.
	data := filepath.Join(t.TempDir(), "restored")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "hangar.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	lines, stderr := startServerOutput(t, h.bin, "--listen", "127.0.0.1:0", "--data-dir", data, "--provisioners", "0")
	url := make(chan string, 1)
	go func() {
		for line := range lines {
			if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line); m != nil {
				url <- m[1]
			}
		}
	}()
	var u string
	select {
	case u = <-url:
	case <-time.After(60 * time.Second):
		t.Fatalf("the restored server did not start:\n%s", stderr.String())
	}
	list, err := exec.Command(h.bin, "list", "--url", u, "--token", h.token).CombinedOutput()
	if err != nil {
		t.Fatalf("list on the restored server: %v\n%s", err, list)
	}
	if !regexp.MustCompile(`(?m)^admin\s+before\s+k1\s`).Match(list) || strings.Contains(string(list), "after") {
		t.Errorf("the restored server lists (want before, not after):\n%s", list)
	}
}
