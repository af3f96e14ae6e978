//go:build unix

package provisioner

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes the kernel's exclusive lock (flock) on f without waiting; errLocked when another
// process holds it.
func lockFile(f *os.File) (unlock func(), err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
