package provisioner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LockWorkRoot takes the work root of one daemon for this process: a daemon adopts the runs it
// finds there (Recover), so two daemons must never share one. It returns the function that
// releases it. The lock is the kernel's (flock): it goes with the process, however it ends.
func LockWorkRoot(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the work directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the work directory %s: %w", dir, err)
	}
	unlockFile, err := lockFile(f)
	if err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("the work directory %s is in use by another provisioner: give each its own --work-dir and --identity", dir)
		}
		return nil, fmt.Errorf("lock the work directory %s: %w", dir, err)
	}
	return func() { unlockFile(); f.Close() }, nil
}

// errLocked: another process holds the lock.
var errLocked = errors.New("locked by another process")
