package sandbox

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillUser: what a build left running as its user (a process in a session of its own, as a
// daemonized local-exec is) is killed; a process of another user is not.
func TestKillUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test starts processes as other users, which needs root (CI runs as root)")
	}
	start := func(uid uint32) (*exec.Cmd, chan error) {
		// sleep itself, not through a shell: Start returns once it runs, so its command line is read
		// as it is (a shell's "exec sleep" may not have happened yet when KillUser reads it).
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-ended })
		return cmd, ended
	}
	_, ended := start(64077)
	other, _ := start(64078)
	killed := KillUser(64077)
	if len(killed) != 1 || strings.Join(killed[0].Args, " ") != "sleep 600" || killed[0].IsHelper() {
		t.Errorf("KillUser reports %+v, want the one process with its command line", killed)
	}
	select {
	case err := <-ended:
		ended <- err // for the cleanup
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the build user's process ended with %v, want killed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the build user's process still runs")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("another user's process was killed: %v", err)
	}
	KillUser(0) // root: nothing
	KillUser(os.Getuid())
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("KillUser of root killed another user's process: %v", err)
	}
}
