// Package unixonly makes the two cross-platform breaks hangar has had: Unix-only calls in a file
// with no build tag, so built on Windows too. crosscheck's test expects both to be reported for
// windows and none for linux.
package unixonly

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Enter joins a network namespace (unix.Setns exists on Linux only).
func Enter(fd int) error { return unix.Setns(fd, unix.CLONE_NEWNET) }

// Stop signals a process (syscall.Kill does not exist on Windows).
func Stop(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }
