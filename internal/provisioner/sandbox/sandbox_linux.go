//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported reports whether this platform can isolate builds.
const Supported = true

// Main is the sandbox stage: it enters the sandbox the Spec in the environment describes and
// becomes terraform with this process's arguments. It returns only on failure, with the exit
// status (126: the sandbox could not be set up, 127: terraform could not be started).
func Main() int {
	spec, err := Decode(os.Getenv(Env))
	if err != nil {
		fmt.Fprintf(os.Stderr, "hangar sandbox: %v\n", err)
		return 126
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		// HANGAR_RUN_DIR is the survival shim's (the work directory, for its shell).
		if !strings.HasPrefix(kv, Env+"=") && !strings.HasPrefix(kv, "HANGAR_RUN_DIR=") {
			env = append(env, kv)
		}
	}
	tf, err := enter(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hangar sandbox: %v\n", err)
		return 126
	}
	err = syscall.Exec(tf, append([]string{spec.Terraform}, os.Args[1:]...), env)
	fmt.Fprintf(os.Stderr, "hangar sandbox: run terraform %s as user %d: %v\n", spec.Terraform, spec.UID, err)
	return 127
}

// binDir holds, inside the sandbox, the terraform the stage becomes (bound from Spec.Terraform,
// which may lie in a directory the build user cannot reach).
const binDir = "/tmp/.hangar/bin"

// maskFile covers, inside the sandbox, the hidden files: empty, and readable by nobody but root.
const maskFile = "/tmp/.hangar/masked"

// enter sets up the sandbox in this process and drops to the build user. It returns the path of
// terraform inside the sandbox. The calling thread stays locked: the mount namespace is its own
// until it execs.
func enter(s Spec) (string, error) {
	runtime.LockOSThread() // never unlocked: this thread execs terraform
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return "", fmt.Errorf("create a private mount namespace: %w (this needs root, or CAP_SYS_ADMIN)", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make the mounts private: %w", err)
	}
	// What the build sees of the hidden paths is opened before anything is hidden (in the new
	// namespace: a bind mount's source must be one of its mounts).
	type source struct {
		fd   int
		path string
	}
	var exposed []source
	for _, p := range s.Expose {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("open %s: %w", p, err)
		}
		exposed = append(exposed, source{fd, p})
	}
	tfFD, err := unix.Open(s.Terraform, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open terraform %s: %w", s.Terraform, err)
	}
	provFD := -1
	if s.Provider != "" {
		if provFD, err = unix.Open(s.Provider, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return "", fmt.Errorf("open the provider %s: %w", s.Provider, err)
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}

	// The tmpfs mounts that hide something; directories created under them are the sandbox's.
	var ours []string
	hideDir := func(p string) error {
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		ours = append(ours, p)
		return nil
	}
	// Bounded: a tmpfs is memory, and tmpfs's default (half of RAM) would let a template take the
	// server's host's memory by filling /tmp.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size="+PrivateTmpSize); err != nil {
		return "", fmt.Errorf("a private /tmp: %w", err)
	}
	ours = append(ours, "/tmp")
	if err := os.MkdirAll(filepath.Dir(maskFile), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(maskFile, nil, 0); err != nil {
		return "", err
	}
	if err := os.Chmod(maskFile, 0); err != nil {
		return "", err
	}

	hide := append([]string{}, s.Hide...)
	sort.Strings(hide) // parents before what they hold
	for _, p := range hide {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // absent, or already under a hidden directory
		}
		if err != nil {
			return "", fmt.Errorf("hide %s: %w", p, err)
		}
		switch {
		case fi.IsDir():
			err = hideDir(p)
		case fi.Mode().IsRegular():
			err = bindRO(maskFile, p)
		default:
			err = fmt.Errorf("hide %s: neither a directory nor a regular file", p)
		}
		if err != nil {
			return "", err
		}
	}

	// reachable makes dir's ancestors ones the build user may traverse: the first it may not is
	// covered with an empty tmpfs (it saw nothing in it anyway), and the rest created in it.
	reachable := func(dir string) error {
		parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
		for i := range parts {
			p := "/" + strings.Join(parts[:i+1], "/")
			if under(p, ours) {
				return mkdirAllIn(dir, ours)
			}
			fi, err := os.Stat(p)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s does not exist outside a hidden directory", p)
			}
			if err != nil {
				return err
			}
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", p)
			}
			if i < len(parts)-1 && !traversable(fi, s.UID, s.GID) {
				if err := hideDir(p); err != nil {
					return err
				}
				return mkdirAllIn(dir, ours)
			}
		}
		return nil
	}
	for _, e := range exposed {
		var same bool
		if a, b := fstat(e.fd), stat(e.path); a != nil && b != nil && a.Dev == b.Dev && a.Ino == b.Ino {
			same = true
		}
		if err := reachable(e.path); err != nil {
			return "", fmt.Errorf("expose %s: %w", e.path, err)
		}
		if same && !under(e.path, ours) {
			continue // visible as it is
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(e.fd), e.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("expose %s: %w", e.path, err)
		}
	}
	tf := filepath.Join(binDir, "terraform")
	if err := bindFileRO(tfFD, tf); err != nil {
		return "", fmt.Errorf("offer terraform: %w", err)
	}
	if provFD >= 0 {
		typ := s.ProviderAddress[strings.LastIndex(s.ProviderAddress, "/")+1:]
		p := filepath.Join(PluginDir, s.ProviderAddress, s.ProviderVersion, runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-"+typ+"_v"+s.ProviderVersion)
		if err := bindFileRO(provFD, p); err != nil {
			return "", fmt.Errorf("offer the provider: %w", err)
		}
	}
	for _, fd := range append([]int{tfFD, provFD}, func() []int {
		var fds []int
		for _, e := range exposed {
			fds = append(fds, e.fd)
		}
		return fds
	}()...) {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}

	// The build user: only its own groups, no capability, no way back up (setuid binaries).
	var deathSig int
	_ = unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&deathSig)), 0, 0, 0)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", fmt.Errorf("no_new_privs: %w", err)
	}
	if err := syscall.Setgroups(s.Groups); err != nil {
		return "", fmt.Errorf("set the supplementary groups %v: %w", s.Groups, err)
	}
	if err := syscall.Setgid(s.GID); err != nil {
		return "", fmt.Errorf("switch to group %d: %w", s.GID, err)
	}
	if err := syscall.Setuid(s.UID); err != nil {
		return "", fmt.Errorf("switch to user %d: %w", s.UID, err)
	}
	if deathSig != 0 { // cleared by the change of user; terraform-exec asked it
		_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(deathSig), 0, 0, 0)
	}
	if err := os.Chdir(cwd); err != nil {
		return "", fmt.Errorf("the build user %d cannot enter the module directory: %w", s.UID, err)
	}
	return tf, nil
}

// under reports whether p is one of roots or below one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// mkdirAllIn creates dir, which lies under one of the sandbox's own tmpfs mounts (never on a real
// file system).
func mkdirAllIn(dir string, ours []string) error {
	if !under(dir, ours) {
		return fmt.Errorf("%s is not under a directory of the sandbox", dir)
	}
	return os.MkdirAll(dir, 0o755)
}

// traversable reports whether the user uid (group gid, no other group) may search the directory.
func traversable(fi os.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	m := fi.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		return m&0o100 != 0
	case int(st.Gid) == gid:
		return m&0o010 != 0
	}
	return m&0o001 != 0
}

func fstat(fd int) *unix.Stat_t {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil
	}
	return &st
}

func stat(p string) *unix.Stat_t {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return nil
	}
	return &st
}

// bindRO binds the file src over the file dst, read-only.
func bindRO(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", dst, err)
	}
	return nil
}

// bindFileRO offers the file open as fd at dst (created in the private /tmp), read-only.
func bindFileRO(fd int, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, nil, 0o755); err != nil {
		return err
	}
	return bindRO("/proc/self/fd/"+strconv.Itoa(fd), dst)
}

// openLock opens (or creates) a build user's lock file, not following a link.
func openLock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o644)
}

// lockFile takes the kernel's exclusive lock (flock) on f without waiting; errLocked when another
// open file (of any process, this one too) holds it.
func lockFile(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return errLocked
		}
		return err
	}
	return nil
}

// processOf returns a live process that runs as uid (real or effective), and its name; 0 when none.
func processOf(uid int) (int, string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, ""
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		st, ok := procStatus(pid)
		if ok && st.alive && (st.uid == uid || st.euid == uid) {
			return pid, st.name
		}
	}
	return 0, ""
}

// status is what /proc/<pid>/status says of a process.
type status struct {
	name      string
	uid, euid int
	alive     bool // not a zombie: a zombie is dead already (its parent has not reaped it)
}

func procStatus(pid int) (status, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return status{}, false
	}
	st := status{uid: -1, euid: -1}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "Name:":
			st.name = f[1]
		case len(f) >= 2 && f[0] == "State:":
			st.alive = f[1] != "Z" && f[1] != "X"
		case len(f) >= 3 && f[0] == "Uid:":
			st.uid, _ = strconv.Atoi(f[1])
			st.euid, _ = strconv.Atoi(f[2])
			return st, true
		}
	}
	return status{}, false
}

// GroupMembers lists the live processes of the process group pgid, with their command lines.
func GroupMembers(pgid int) []Process {
	if pgid <= 1 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so read after the
		// last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			out = append(out, Process{PID: pid, Args: cmdline(pid)})
		}
	}
	return out
}

// KillUser kills every process of the user uid: what a build left running (a daemonized
// local-exec) must not see the next build of the same user. It does nothing for root or this
// process's own user. It returns the processes it killed, with their command lines as they were.
func KillUser(uid int) []Process {
	if uid <= 0 || uid == os.Getuid() || uid == os.Geteuid() {
		return nil
	}
	var out []Process
	seen := map[int]bool{}
	for round := 0; round < 10; round++ {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return out
		}
		killed := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid <= 1 {
				continue
			}
			st, ok := procStatus(pid)
			if ok && st.alive && (st.uid == uid || st.euid == uid) {
				args := cmdline(pid)
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
					if !seen[pid] {
						seen[pid] = true
						out = append(out, Process{PID: pid, Args: args})
					}
				}
			}
		}
		if killed == 0 {
			return out
		}
	}
	return out
}

// cmdline reads a process's arguments (at most 4 KiB of them).
func cmdline(pid int) []string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, _ := f.Read(b)
	return strings.Split(strings.TrimRight(string(b[:n]), "\x00"), "\x00")
}
