//go:build unix

package terraform

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// What a template can leave in its module directory instead of terraform's state is refused, not
// read: a link to a file the sandbox hid (its content would become the workspace's state, which
// its owner can pull), a FIFO (the provisioner would block), a sparse file of any size (read whole
// into memory).
func TestReadStateRefusesPlantedFiles(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "admin-token.json")
	if err := os.WriteFile(secret, []byte(`{"token":"s3cret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		plant func(path string) error
		want  string
	}{
		"symlink": {func(p string) error { return os.Symlink(secret, p) }, "symbolic link"},
		"fifo":    {func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		"sparse": {func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(protocol.MaxStateBytes + 1)
		}, "over the"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := c.plant(filepath.Join(dir, stateFile)); err != nil {
				t.Fatal(err)
			}
			state, _, err := readState(dir)
			if err == nil || state != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("readState = %q, %v; want refused with %q", state, err, c.want)
			}
			if strings.Contains(string(state), "s3cret") {
				t.Fatal("the hidden file's content became the state")
			}
		})
	}
	// The backup is read the same way: a cut-short state with a planted backup reports nothing.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"version":4,`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, stateFile+".backup")); err != nil {
		t.Fatal(err)
	}
	if state, _, err := readState(dir); err == nil || state != nil {
		t.Fatalf("a planted backup was read: %q, %v", state, err)
	}
}
