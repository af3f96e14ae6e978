//go:build unix

package wshelper

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// ReaperEnv marks the helper started by Reap, so that it does not start another reaper.
const ReaperEnv = "HANGAR_HELPER_REAPED"

// forwardedSignals are passed from the reaper to its child.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Reap is the init process of a container (tini's job): it starts cmd, passes it the signals a
// container is sent, waits for every child that ends — cmd, and the orphans the kernel gives to PID
// 1, which nobody else would wait for and which would stay zombies — and returns cmd's exit code
// (128 + the signal when a signal ended it) once cmd has ended.
//
// The helper runs itself under Reap when it is PID 1 and does its real work in the child. Waiting
// for any child (wait4(-1)) is then safe: the reaper has no other children of its own, so it never
// takes the exit status of a process someone else waits for (the helper's own children — session
// shells, the container's command — are the child's, which waits for them normally). Reap must be
// called in a process that has no other children.
func Reap(cmd *exec.Cmd, log *slog.Logger) (int, error) {
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwardedSignals...)...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("reaper: start %s: %w", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Release()
	for {
		// Wait for every child that has ended; SIGCHLDs merge, so one may stand for several.
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || p <= 0 {
				break
			}
			if p == pid {
				return exitCode(ws), nil
			}
			log.Debug("reaped an orphan", "pid", p)
		}
		if sig := <-sigs; sig != syscall.SIGCHLD {
			_ = cmd.Process.Signal(sig)
		}
	}
}

// exitCode is the code a shell would show for a process that ended with ws.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// processExitCode is exitCode for an os.ProcessState.
func processExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return exitCode(ws)
	}
	return ps.ExitCode()
}
