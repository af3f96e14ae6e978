package main

// Stopping a cluster with a real node leaves nothing behind: the programs kube-up started, the
// containerd shims and every container process, the mounts under DIR (container root filesystems,
// pod volumes, the pods' network namespaces), the cluster's network namespace with its interfaces and
// iptables rules, and its cgroups.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cleanupNode runs after stopAll: it kills what the node left running, unmounts, and deletes the
// namespace and the cgroups. It is idempotent and reports what it could not undo.
func cleanupNode(dir string, out io.Writer) error {
	id := clusterID(dir)
	var problems []string

	// Container processes (in the cluster's cgroups) and shims (their command line names DIR).
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := nodeProcesses(dir, id)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			problems = append(problems, fmt.Sprintf("processes %v survive SIGKILL", pids))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Mounts under DIR, deepest first, until none is left (mounts can be stacked).
	for range 5 {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			break
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil {
				_ = syscall.Unmount(mp, syscall.MNT_DETACH)
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		problems = append(problems, fmt.Sprintf("mounts left: %v", left))
	}

	if _, err := os.Stat(netnsPath(dir)); err == nil {
		if err := run("ip", "netns", "delete", id); err != nil {
			problems = append(problems, err.Error())
		}
	}

	for _, h := range cgroupHierarchies() {
		if err := removeCgroupTree(filepath.Join(h, id)); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("kube-down: could not clean up everything of %s: %s", dir, strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "kube-down: no container, mount, network namespace or cgroup of %s is left\n", dir)
	return nil
}

// nodeProcesses lists the processes of the real node that outlive the programs kube-up started:
// containerd shims (their arguments name DIR) and the containers (in the cluster's cgroups).
func nodeProcesses(dir, id string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if ours(pid, dir) {
			pids = append(pids, pid)
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(b), "/"+id+"/") && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mps []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroupTree removes a cgroup and its children, deepest first (cgroup directories go with
// rmdir only, once they hold no process).
func removeCgroupTree(root string) error {
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var last error
	for _, d := range dirs {
		for attempt := 0; ; attempt++ {
			err := syscall.Rmdir(d)
			if err == nil || os.IsNotExist(err) {
				break
			}
			if attempt == 40 { // processes can take a moment to leave a cgroup after SIGKILL
				last = fmt.Errorf("cgroup %s: %v", d, err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return last
}
