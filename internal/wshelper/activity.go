//go:build unix

package wshelper

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// Idle by real work (docs/decisions.md, "Inside the workspace: idle by real work"): at each
// metadata interval the helper looks at what its user's processes did since the last look — the
// CPU time they used (/proc/PID/stat), whether one of the processes the server names runs
// (/proc/PID/cmdline), the bytes its sessions wrote to their terminals, the connections open to
// the web editor (/proc/net/tcp) — and reports it; the server decides whether that is work.

// userHZ is the unit of /proc/PID/stat's CPU times: USER_HZ, 100 on every Linux.
const userHZ = 100

// procKey names one process across looks: a PID is reused, its start time with it is not.
type procKey struct {
	pid   int
	start uint64
}

// activitySampler looks at the processes of uid under fsRoot/proc, but the helper's own (self)
// and those it lists in skip.
type activitySampler struct {
	fsRoot string
	uid    uint32
	self   int
	// processes are the commands whose running is work (the server's answer).
	processes []string
	// editorPort, when set, is the web editor's: connections to it from elsewhere are work.
	editorPort int
	// output returns the bytes sessions wrote to terminals since it was last called.
	output func() int64

	last   map[procKey]uint64 // CPU ticks at the last look
	lastAt time.Time
}

// sample returns the activity since the last call (the first call sees CPU only from then on).
func (a *activitySampler) sample(now time.Time) protocol.Activity {
	var act protocol.Activity
	seen := map[procKey]uint64{}
	var busiest uint64
	var total uint64
	entries, _ := os.ReadDir(filepath.Join(a.fsRoot, "proc"))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == a.self {
			continue
		}
		dir := filepath.Join(a.fsRoot, "proc", e.Name())
		if fi, err := os.Stat(dir); err != nil {
			continue
		} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != a.uid {
			continue
		}
		comm, ticks, start, ok := readProcStat(filepath.Join(dir, "stat"))
		if !ok {
			continue
		}
		k := procKey{pid, start}
		seen[k] = ticks
		if prev, ok := a.last[k]; ok && ticks >= prev && !a.lastAt.IsZero() {
			d := ticks - prev
			total += d
			if d > busiest {
				busiest, act.TopProcess = d, comm
			}
		} else if !a.lastAt.IsZero() {
			// Started since the last look: all its time is new.
			total += ticks
			if ticks > busiest {
				busiest, act.TopProcess = ticks, comm
			}
		}
		if act.Matched == "" && len(a.processes) > 0 {
			// The policy's entry is reported, not the command line: its arguments may hold secrets.
			if cmd := readCmdline(filepath.Join(dir, "cmdline")); cmd != "" {
				if c, ok := matchesProcess(cmd, comm, a.processes); ok {
					act.Matched = fmt.Sprintf("%s (pid %d)", protocol.TruncateMessage(c, protocol.MaxActivityTextBytes-32), pid)
				}
			}
		}
	}
	if !a.lastAt.IsZero() && now.After(a.lastAt) {
		act.CPUCores = round2(float64(total) / userHZ / now.Sub(a.lastAt).Seconds())
	}
	if act.CPUCores == 0 {
		act.TopProcess = ""
	}
	a.last, a.lastAt = seen, now
	if a.output != nil {
		act.TerminalOutput = a.output()
	}
	if a.editorPort > 0 {
		act.EditorConnections = countConnections(a.fsRoot, a.editorPort)
	}
	return act
}

// readProcStat reads a process's name, CPU time (user and system, in ticks) and start time from
// /proc/PID/stat. The name is in parentheses and may hold anything but the last ')'.
func readProcStat(file string) (comm string, ticks, start uint64, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	f := strings.Fields(s[end+1:])
	// After the name: state (field 3) ... utime (14), stime (15) ... starttime (22).
	if len(f) < 20 {
		return "", 0, 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return s[open+1 : end], utime + stime, start, true
}

// readCmdline reads a process's command line as words: its program's base name, then its
// arguments, separated by spaces ("" for a kernel thread or a process gone).
func readCmdline(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxCmdline))
	if len(b) == 0 {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	args[0] = filepath.Base(args[0])
	return strings.ToValidUTF8(strings.Join(args, " "), "\uFFFD")
}

// maxCmdline is how much of a command line is read: enough for a command's first words.
const maxCmdline = 4 << 10

// matchesProcess returns the command that a command line (readCmdline's words) or its process's
// name is: the same words, or those words followed by more ("go test" matches "go test ./...",
// "make" matches "make -j4", not "makefile-lint").
func matchesProcess(cmd, comm string, commands []string) (string, bool) {
	for _, c := range commands {
		if cmd == c || strings.HasPrefix(cmd, c+" ") || comm == c {
			return c, true
		}
	}
	return "", false
}

// countConnections counts the TCP connections established to port from another host
// (/proc/net/tcp and tcp6 of the helper's network namespace): the helper's own readiness checks
// come from the loopback and are left out.
func countConnections(fsRoot string, port int) int {
	n := 0
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(fsRoot, "proc/net", name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...: addresses are HEXIP:HEXPORT, st 01 established.
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" {
				continue
			}
			local, remote := fields[1], fields[2]
			i := strings.LastIndexByte(local, ':')
			if i < 0 {
				continue
			}
			if p, err := strconv.ParseUint(local[i+1:], 16, 16); err != nil || int(p) != port || loopbackHex(remote) {
				continue
			}
			n++
		}
		f.Close()
	}
	return n
}

// loopbackHex reports whether a /proc/net/tcp address (little-endian hex IPv4, or IPv6 in four
// little-endian words) is a loopback one: 127.0.0.0/8, ::1 or ::ffff:127.x.
func loopbackHex(addr string) bool {
	ip, _, _ := strings.Cut(addr, ":")
	switch len(ip) {
	case 8:
		return strings.HasSuffix(ip, "7F")
	case 32:
		return ip == "00000000000000000000000001000000" || (ip[:16] == "0000000000000000" && ip[16:24] == "FFFF0000" && strings.HasSuffix(ip, "7F"))
	}
	return false
}
