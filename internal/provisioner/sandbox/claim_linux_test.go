package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestClaimUser: a build user another daemon holds, or a process runs as, is taken: the default
// user moves to the next free id and says why; a chosen one is refused. Released, a user can be
// claimed again.
func TestClaimUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("claiming build users writes /run/hangar and starts a process as another user, which needs root (CI runs as root)")
	}
	const base = 2000000700 // away from the defaults, which daemons of this host may hold
	held, err := ClaimUser(User{UID: base, GID: base}, false, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Release)
	busy := exec.Command("sleep", "600")
	busy.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: base + 1, Gid: base + 1}}
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })

	c, err := ClaimUser(User{UID: base, GID: base}, true, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	if c.User.UID != base+2 || c.User.GID != base+2 {
		t.Fatalf("the default user moved to %+v, want uid %d", c.User, base+2)
	}
	pid := strconv.Itoa(os.Getpid())
	want := []string{
		"uid " + strconv.Itoa(base) + ": another Hangar daemon (pid " + pid + ") builds as it, holding /run/hangar/build-uid-" + strconv.Itoa(base) + ".lock",
		"uid " + strconv.Itoa(base+1) + ": process " + strconv.Itoa(busy.Process.Pid) + " (sleep) runs as it",
	}
	if strings.Join(c.Skipped, "\n") != strings.Join(want, "\n") {
		t.Errorf("skipped %q, want %q", c.Skipped, want)
	}
	if s := c.Summary(); !strings.HasPrefix(s, "uid "+strconv.Itoa(base+2)+" (the default build user was taken") {
		t.Errorf("summary %q", s)
	}

	for _, uid := range []int{base, base + 1} {
		if _, err := ClaimUser(User{UID: uid, GID: uid}, false, ""); err == nil || !strings.Contains(err.Error(), "the build user uid "+strconv.Itoa(uid)+" is taken: ") {
			t.Errorf("a chosen user %d that is taken: %v, want a refusal", uid, err)
		}
	}
	held.Release()
	again, err := ClaimUser(User{UID: base, GID: base}, false, "")
	if err != nil {
		t.Fatalf("a released user cannot be claimed again: %v", err)
	}
	again.Release()

	// A daemon killed mid-build leaves its build running as its user: the same daemon, started
	// again, takes its user back (and adopts the build); another daemon does not.
	const owner = "hangar server /var/lib/hangar-test provisioner 0"
	first, err := ClaimUser(User{UID: base + 3, GID: base + 3}, false, owner)
	if err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "600")
	left.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: base + 3, Gid: base + 3}}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = left.Process.Kill(); _ = left.Wait() })
	first.Release() // the daemon is killed: its lock is free, its build still runs
	if _, err := ClaimUser(User{UID: base + 3, GID: base + 3}, false, "hangar provisioner /tmp/other"); err == nil || !strings.Contains(err.Error(), "(sleep) runs as it") {
		t.Errorf("another daemon took a user whose processes are not its own: %v", err)
	}
	back, err := ClaimUser(User{UID: base + 3, GID: base + 3}, false, owner)
	if err != nil {
		t.Fatalf("the same daemon, started again, cannot take its user back: %v", err)
	}
	defer back.Release()
	if want := "process " + strconv.Itoa(left.Process.Pid) + " (sleep)"; back.Leftover != want {
		t.Errorf("leftover %q, want %q", back.Leftover, want)
	}
}

// TestClaimUserFollowsNoLink: the lock file is truncated and written as root; a link planted in
// its place (by anyone who could write LockDir) is refused, and the file it points at is left as
// it was.
func TestClaimUserFollowsNoLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("claiming build users writes /run/hangar, which needs root (CI runs as root)")
	}
	const uid = 2000000790 // away from the defaults and TestClaimUser's
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(LockDir, "build-uid-"+strconv.Itoa(uid)+".lock")
	_ = os.Remove(link)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(link) })
	c, err := ClaimUser(User{UID: uid, GID: uid}, false, "hangar provisioner /tmp/test")
	if err == nil {
		c.Release()
		t.Error("a link in place of the lock file was taken as the lock")
	} else if !strings.Contains(err.Error(), "claim the build user uid "+strconv.Itoa(uid)) {
		t.Errorf("the refusal does not name the user: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the file the link points at was written: %q", b)
	}
}
