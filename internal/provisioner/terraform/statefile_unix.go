//go:build unix

package terraform

import (
	"os"
	"syscall"
)

// openBuildFile opens a file the build wrote, without following a symbolic link at its last
// element and without blocking on a FIFO: the module directory belongs to the template's user,
// and the provisioner reads it as root outside the sandbox.
func openBuildFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}
