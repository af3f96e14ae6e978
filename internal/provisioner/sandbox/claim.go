package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockDir is where build users are claimed: one lock file per user id, build-uid-<uid>.lock, on
// the host's /run (a tmpfs, so nothing is left after a reboot), shared by every Hangar installation
// of the host whatever its data or work directory. A daemon holds the lock (flock) of its build
// user as long as it runs; the kernel drops it when the process ends, however it ends.
const LockDir = "/run/hangar"

// claimTries bounds the search for a free default build user.
const claimTries = 100

// Claim is a build user this process holds: no other Hangar installation of the host builds as
// it while the claim is held, and no process ran as it when it was taken.
type Claim struct {
	User User
	// Skipped says, for a default build user, which ids were taken and by what, in order.
	Skipped []string
	// Leftover names a process that ran as the user when it was claimed, left by this daemon's own
	// earlier run (killed: its builds are adopted); empty when none ran.
	Leftover string
	file     *os.File
}

// Release gives the user back (the process's end does too).
func (c *Claim) Release() {
	if c != nil && c.file != nil {
		_ = c.file.Close()
		c.file = nil
	}
}

// Summary says which user the builds run as and, when the default was taken, why another.
func (c *Claim) Summary() string {
	s := fmt.Sprintf("uid %d", c.User.UID)
	if len(c.Skipped) > 0 {
		s += " (the default build user was taken, so a free one was picked: " + strings.Join(c.Skipped, "; ") + ")"
	}
	return s
}

// ClaimUser takes the build user u for this process. Every process of a build user is killed when
// one of its builds ends (KillUser), so a build user serves one daemon of one installation only.
// A user is taken when another daemon holds its lock in LockDir, or, its lock free, when a process
// runs as it (a daemon of a Hangar without these locks, a build a killed daemon left, or anything
// else). The lock is taken before the processes are looked at, so two daemons starting at the same
// time never both take one user.
//
// owner names the daemon (its installation and slot, e.g. "hangar server /var/lib/hangar
// provisioner 0"); it is written in the lock file. A daemon killed mid-build leaves that build's
// processes running as its user, which it adopts when it starts again: processes of a user whose
// free lock names the same owner are this daemon's leftovers, and do not make the user taken.
//
// With auto (the default build user, not one the operator chose) the next free id is taken
// instead: u.UID+1, u.UID+2, … (the group the same number). A chosen user that is taken is an
// error: it is not Hangar's to pick another.
func ClaimUser(u User, auto bool, owner string) (*Claim, error) {
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return nil, fmt.Errorf("claim the build user: %w", err)
	}
	var skipped []string
	for i := 0; i < claimTries; i++ {
		cand := u
		if auto {
			cand = User{UID: u.UID + i, GID: u.GID + i}
		}
		f, why, leftover, err := claimOne(cand.UID, owner)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return &Claim{User: cand, Skipped: skipped, Leftover: leftover, file: f}, nil
		}
		if !auto {
			return nil, fmt.Errorf("the build user uid %d is taken: %s; every process of a build user is killed when one of its builds ends, so it must serve this daemon only: give --provisioner-user a user nothing else runs as, or auto", cand.UID, why)
		}
		skipped = append(skipped, fmt.Sprintf("uid %d: %s", cand.UID, why))
	}
	return nil, fmt.Errorf("no free build user among uid %d to %d: %s", u.UID, u.UID+claimTries-1, strings.Join(skipped[:min(len(skipped), 3)], "; "))
}

// claimOne locks uid's file. It returns the held file (and a leftover process of owner's earlier
// run, if one runs as uid), or why uid is taken.
func claimOne(uid int, owner string) (f *os.File, why, leftover string, err error) {
	path := filepath.Join(LockDir, "build-uid-"+strconv.Itoa(uid)+".lock")
	// Not following a link: the file is truncated and written as root, and a link planted in
	// LockDir (by whoever else could write there) would point that at any file of the host.
	f, err = openLock(path)
	if err != nil {
		return nil, "", "", fmt.Errorf("claim the build user uid %d: %w (it must be a regular file, not a link)", uid, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, "", "", fmt.Errorf("claim the build user uid %d: %s is not a regular file", uid, path)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			holder, _ := os.ReadFile(path)
			who := "another Hangar daemon"
			if pid, _ := lockHolder(holder); pid != "" {
				who += " (pid " + pid + ")"
			}
			return nil, who + " builds as it, holding " + path, "", nil
		}
		return nil, "", "", fmt.Errorf("claim the build user uid %d: lock %s: %w", uid, path, err)
	}
	if pid, name := processOf(uid); pid != 0 {
		prev, _ := io.ReadAll(io.LimitReader(f, 4096))
		if _, was := lockHolder(prev); owner == "" || was != owner {
			f.Close()
			return nil, fmt.Sprintf("process %d (%s) runs as it", pid, name), "", nil
		}
		leftover = fmt.Sprintf("process %d (%s)", pid, name)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+owner+"\n"), 0)
	}
	return f, "", leftover, nil
}

// lockHolder reads a lock file's content: the holder's pid, then its owner.
func lockHolder(b []byte) (pid, owner string) {
	pid, rest, _ := strings.Cut(string(b), "\n")
	owner, _, _ = strings.Cut(rest, "\n")
	return strings.TrimSpace(pid), owner
}

// errLocked: another process holds the lock.
var errLocked = errors.New("locked by another process")
