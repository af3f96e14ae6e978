//go:build unix

// Package split holds the same call as unixonly, done right: the Unix call behind a build tag, with
// a counterpart elsewhere. crosscheck's test expects no problem on any target.
package split

import "syscall"

// Stop signals a process.
func Stop(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }
