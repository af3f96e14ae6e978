//go:build !unix

package terraform

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
)

// The Terraform runner keeps terraform alive across a provisioner's crash by running it in a Unix
// session of its own and finding it again by its process group (procgroup_unix.go). Windows has
// neither: the runner refuses to start there (Supported), and these counterparts only keep the
// package building, so that the CLI in the same binary works on every system.

var errUnsupported = errors.New("the Terraform runner (hangar provisioner, and hangar server's in-process provisioners) needs Linux or macOS: " +
	"it runs terraform in a process group of its own that outlives the provisioner; on " + runtime.GOOS +
	", run the server with --provisioners 0 and a hangar provisioner on a Linux or macOS machine (or in WSL)")

// Supported says whether the Terraform runner works on this system: an error naming what to do
// instead.
func Supported() error { return errUnsupported }

func ownSession(*exec.Cmd) error                   { return errUnsupported }
func alive(int) bool                               { return false }
func signalProcessGroup(int, os.Signal)            {}
func interruptProcessGroup(int)                    {}
func killProcessGroup(int)                         {}
func notifyInterrupts() (<-chan os.Signal, func()) { return nil, func() {} }
func execProgram(string, []string, []string) error { return errUnsupported }
