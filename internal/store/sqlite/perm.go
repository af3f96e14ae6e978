package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The database holds every token's hash and the workspaces' Terraform state: its files are the
// owner's only (0600). SQLite creates the -wal and -shm files with the database file's mode, so the
// database file is created 0600 before SQLite opens it; files an older version left readable by
// others are made 0600 too.

// privateFiles creates the database file at path (0600) when it does not exist, and takes group
// and others' access away from it and its -wal and -shm files.
func privateFiles(path string) error {
	if path == "" || strings.HasPrefix(path, ":") || strings.HasPrefix(path, "file:") {
		return nil // in memory, or a URI: SQLite's to handle
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err := f.Close(); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("make %s private (0600): %w", p, err)
			}
		}
	}
	return nil
}
