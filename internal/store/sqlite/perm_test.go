package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The database, its -wal and its -shm are the owner's only, whatever the umask, and a database an
// older version left readable by others is made private when opened.
func TestDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, under which files are created 0644
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		prepare func(path string)
	}{
		{"new", func(string) {}},
		{"left readable by an older version", func(path string) {
			for _, p := range []string{path, path + "-wal"} {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hangar.db")
			c.prepare(path)
			st, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// A write, so that the -wal and -shm files exist.
			if err := st.CreateUser(ctx, workspace.User{ID: uuid.NewString(), Username: "u", TokenHash: []byte("h"), CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(p), err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want -rw-------", filepath.Base(p), fi.Mode().Perm())
				}
			}
		})
	}
}
