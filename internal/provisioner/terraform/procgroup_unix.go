//go:build unix

package terraform

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// The survival shim's process handling (shim.go, recover.go): terraform runs in a session of its
// own, found again by its process group after the provisioner comes back. Unix only; see
// procgroup_other.go for the rest.

// Supported says whether the Terraform runner works on this system: nil on Unix.
func Supported() error { return nil }

// ownSession makes cmd start in a session (and process group) of its own, so that it outlives the
// shim and the provisioner.
func ownSession(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}

// alive reports whether a process of the group still runs.
func alive(pgid int) bool { return pgid > 0 && syscall.Kill(-pgid, 0) == nil }

// signalProcessGroup sends sig to every process of the group.
func signalProcessGroup(pgid int, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok && pgid > 0 {
		_ = syscall.Kill(-pgid, s)
	}
}

func interruptProcessGroup(pgid int) { signalProcessGroup(pgid, syscall.SIGINT) }
func killProcessGroup(pgid int)      { signalProcessGroup(pgid, syscall.SIGKILL) }

// notifyInterrupts delivers the interrupts terraform-exec sends the shim (SIGINT, SIGTERM).
func notifyInterrupts() (<-chan os.Signal, func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	return sigs, func() { signal.Stop(sigs) }
}

// execProgram replaces this process with path (the shim becomes terraform); it returns only on
// failure.
func execProgram(path string, args, env []string) error {
	return syscall.Exec(path, append([]string{path}, args...), env)
}
