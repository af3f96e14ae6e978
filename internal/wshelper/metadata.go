//go:build unix

package wshelper

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// The workspace's metadata (docs/decisions.md, "Inside the workspace: metadata and resource
// alerts"): every protocol.MetadataInterval the helper measures the workspace's resources from
// the kernel's figures — its cgroup's (v2: cpu.stat, cpu.max, memory.current, memory.stat,
// memory.max, memory.events; v1: cpuacct.usage, cpu.cfs_quota_us, memory.usage_in_bytes,
// memory.limit_in_bytes, memory.oom_control) and the filesystems' (statfs) — and reports them
// with the latest value of each custom metadata command, which runs on its own interval.

// cgroupDirs are the directories of the cgroup the helper runs in, and which version they are.
// cgroup v2: one directory (mem, cpu and cpuacct are the same); v1 (a host with the hybrid
// layout): one per controller.
type cgroupDirs struct {
	v2                bool
	mem, cpu, cpuacct string
}

// findCgroup finds the helper's cgroup from /proc/self/cgroup under fsRoot: the unified one (v2)
// when its directory is a v2 cgroup (it has cgroup.controllers), else the memory, cpu and cpuacct
// controllers' (v1). Inside a container the hierarchies are mounted at the container's own cgroup,
// so a path that does not exist under a hierarchy is looked for at its root. ok is false when
// none is readable.
func findCgroup(fsRoot string) (cgroupDirs, bool) {
	b, err := os.ReadFile(filepath.Join(fsRoot, "proc/self/cgroup"))
	if err != nil {
		return cgroupDirs{}, false
	}
	base := filepath.Join(fsRoot, "sys/fs/cgroup")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	var d cgroupDirs
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := filepath.Clean("/" + parts[2])
		if parts[1] == "" {
			for _, dir := range []string{filepath.Join(base, path), base} {
				if exists(filepath.Join(dir, "cgroup.controllers")) && exists(filepath.Join(dir, "memory.current")) {
					return cgroupDirs{v2: true, mem: dir, cpu: dir, cpuacct: dir}, true
				}
			}
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			var found string
			for _, dir := range []string{filepath.Join(base, parts[1], path), filepath.Join(base, ctl, path), filepath.Join(base, parts[1]), filepath.Join(base, ctl)} {
				if exists(dir) {
					found = dir
					break
				}
			}
			switch ctl {
			case "memory":
				d.mem = found
			case "cpu":
				d.cpu = found
			case "cpuacct":
				d.cpuacct = found
			}
		}
	}
	return d, d.mem != "" || d.cpuacct != ""
}

// meter measures a workspace's resources. Its figures come from files under fsRoot ("/" in a
// workspace; a test's directory in tests).
type meter struct {
	fsRoot  string
	cg      cgroupDirs
	hasCG   bool
	volumes []protocol.VolumeThreshold
	memory  int // the memory alert's threshold

	// The previous CPU sample (microseconds used, at when), for the rate; the OOM kills counted
	// when the helper started.
	lastCPU   int64
	lastWhen  time.Time
	oomAtZero int64
	started   bool
}

// newMeter returns a meter of the cgroup the helper runs in, watching the volumes of spec (those
// of defaultVolume when it names none).
func newMeter(fsRoot string, spec protocol.ResourcesMonitoring, defaultVolume string) *meter {
	m := &meter{fsRoot: fsRoot, volumes: spec.Volumes, memory: spec.MemoryThreshold()}
	m.cg, m.hasCG = findCgroup(fsRoot)
	if len(m.volumes) == 0 && defaultVolume != "" {
		m.volumes = []protocol.VolumeThreshold{{Path: defaultVolume, Threshold: protocol.DefaultThresholdPercent}}
	}
	return m
}

// The files of each figure, in cgroup v2 and v1.
func (m *meter) cpuUsage() (usec int64, ok bool) {
	if m.cg.v2 {
		usec, ok = readKeyed(filepath.Join(m.cg.cpuacct, "cpu.stat"))["usage_usec"]
		return usec, ok
	}
	if m.cg.cpuacct == "" {
		return 0, false
	}
	ns, err := readInt(filepath.Join(m.cg.cpuacct, "cpuacct.usage"))
	return ns / 1000, err == nil
}

func (m *meter) memoryFigures() (used, limit, ooms int64, ok bool) {
	if m.cg.mem == "" {
		return 0, 0, 0, false
	}
	currentFile, limitFile, inactive, events, eventsFile := "memory.current", "memory.max", "inactive_file", "oom_kill", "memory.events"
	if !m.cg.v2 {
		currentFile, limitFile, inactive, eventsFile = "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file", "memory.oom_control"
	}
	current, err := readInt(filepath.Join(m.cg.mem, currentFile))
	if err != nil {
		return 0, 0, 0, false
	}
	used = current - readKeyed(filepath.Join(m.cg.mem, "memory.stat"))[inactive]
	limit, _ = readInt(filepath.Join(m.cg.mem, limitFile)) // "max" (v2): no limit
	// No limit, or one over the machine's memory (v1's "none" is a huge number): the machine's.
	if total := readKeyed(filepath.Join(m.fsRoot, "proc/meminfo"))["MemTotal:"] << 10; total > 0 && (limit <= 0 || limit > total) {
		limit = total
	}
	return max(used, 0), max(limit, 0), readKeyed(filepath.Join(m.cg.mem, eventsFile))[events], true
}

// cpuLimit is the cgroup's CPU quota in cores, else the machine's CPUs.
func (m *meter) cpuLimit() float64 {
	var quota, period float64
	if m.cg.v2 {
		b, err := os.ReadFile(filepath.Join(m.cg.cpu, "cpu.max"))
		if f := strings.Fields(string(b)); err == nil && len(f) == 2 && f[0] != "max" {
			quota, _ = strconv.ParseFloat(f[0], 64)
			period, _ = strconv.ParseFloat(f[1], 64)
		}
	} else if m.cg.cpu != "" {
		q, err1 := readInt(filepath.Join(m.cg.cpu, "cpu.cfs_quota_us"))
		p, err2 := readInt(filepath.Join(m.cg.cpu, "cpu.cfs_period_us"))
		if err1 == nil && err2 == nil && q > 0 {
			quota, period = float64(q), float64(p)
		}
	}
	if quota > 0 && period > 0 {
		return round2(quota / period)
	}
	return float64(runtime.NumCPU())
}

// measure returns the resources at now. CPU needs two samples: the first call has none.
func (m *meter) measure(now time.Time) protocol.Resources {
	var r protocol.Resources
	if m.hasCG {
		if usage, ok := m.cpuUsage(); ok {
			if m.started && now.After(m.lastWhen) && usage >= m.lastCPU {
				used := float64(usage-m.lastCPU) / float64(now.Sub(m.lastWhen).Microseconds())
				r.CPU = &protocol.CPUUsage{UsedCores: round2(used), LimitCores: m.cpuLimit()}
			}
			m.lastCPU, m.lastWhen = usage, now
		}
		// The working set, as the kubelet counts it: page cache the kernel can take back
		// (inactive files) is not in use.
		if used, limit, ooms, ok := m.memoryFigures(); ok {
			if !m.started {
				m.oomAtZero = ooms
			}
			r.Memory = &protocol.MemoryUsage{UsedBytes: used, LimitBytes: limit, Threshold: m.memory, OOMKills: max(ooms-m.oomAtZero, 0)}
		}
		m.started = true
	}
	for _, v := range m.volumes {
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Join(m.fsRoot, v.Path), &st); err != nil {
			continue
		}
		total := int64(st.Blocks) * int64(st.Bsize)
		r.Volumes = append(r.Volumes, protocol.VolumeUsage{Path: v.Path, TotalBytes: total,
			UsedBytes: total - int64(st.Bfree)*int64(st.Bsize), Threshold: v.Threshold})
	}
	return r
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// readInt reads a file holding one whole number ("max" is an error).
func readInt(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyed reads a file of "key value" lines (cpu.stat, memory.stat, memory.events,
// /proc/meminfo); what is not a number is left out.
func readKeyed(file string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(file)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out
}

// metadataItems runs the custom metadata commands, each on its own interval, and keeps their
// latest values.
type metadataItems struct {
	mu     sync.Mutex
	values map[string]protocol.MetadataValue
}

// runItem runs one command every its interval until ctx ends: `sh -c SCRIPT` with env, killed at
// its timeout; its output (trimmed, cut) is the value, its failure the error.
func (m *metadataItems) runItem(ctx context.Context, it protocol.MetadataItemSpec, env []string, now func() time.Time, after func(time.Duration) <-chan time.Time) {
	for {
		v := protocol.MetadataValue{Key: it.Key, DisplayName: it.DisplayName}
		v.Value, v.Error = runMetadataScript(ctx, it, env)
		v.CollectedAt = now()
		m.mu.Lock()
		m.values[it.Key] = v
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-after(time.Duration(it.Interval) * time.Second):
		}
	}
}

// runMetadataScript runs one command once and returns its value or why it has none.
func runMetadataScript(ctx context.Context, it protocol.MetadataItemSpec, env []string) (value, failure string) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(it.Timeout)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", it.Script)
	cmd.Env = env
	cmd.Dir = lookupEnv(env, "HOME")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out := &capped{max: protocol.MaxMetadataValueBytes}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if cmd.Process != nil {
		// What the command left in the background goes with it (a process that made a session
		// of its own with setsid escapes this: docs/decisions.md says so).
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // a background process kept the output open: the command itself succeeded
	}
	value = strings.TrimSpace(strings.ToValidUTF8(out.String(), "\uFFFD"))
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return value, fmt.Sprintf("timed out after %d s", it.Timeout)
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return value, exit.String()
		}
		return value, err.Error()
	}
	return value, ""
}

// capped keeps the first max bytes written to it and drops the rest, never failing a write. (Not
// an embedded bytes.Buffer: io.Copy would use its ReadFrom, which has no bound.)
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }

// snapshot returns the latest values in the specification's order.
func (m *metadataItems) snapshot(spec []protocol.MetadataItemSpec) []protocol.MetadataValue {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []protocol.MetadataValue
	for _, it := range spec {
		if v, ok := m.values[it.Key]; ok {
			out = append(out, v)
		}
	}
	return out
}

// reportMetadata measures and reports every protocol.MetadataInterval until ctx ends, running the
// commands of spec beside. A report that fails is logged once until one succeeds again: the
// workspace goes on whatever the server says.
// With each report goes the activity since the last (activity.go); output gives the bytes the
// SSH server's sessions wrote to terminals (nil: none counted).
func reportMetadata(ctx context.Context, cfg Config, spec protocol.MetadataSpec, env []string, output func() int64, log *slog.Logger) {
	after := cfg.After
	if after == nil {
		after = time.After
	}
	now := func() time.Time { return time.Now().UTC() }
	defaultVolume := lookupEnv(cfg.Env, "PROJECTS_ROOT")
	if defaultVolume == "" {
		defaultVolume = lookupEnv(cfg.Env, "HOME")
	}
	m := newMeter(cmp.Or(cfg.metadataRoot, "/"), spec.Monitoring, defaultVolume)
	if !m.hasCG {
		log.Warn("metadata: no cgroup to read: the workspace's CPU and memory are not reported")
	}
	items := &metadataItems{values: map[string]protocol.MetadataValue{}}
	for _, it := range spec.Items {
		go items.runItem(ctx, it, env, now, after)
	}
	act := &activitySampler{fsRoot: cmp.Or(cfg.metadataRoot, "/"), uid: uint32(os.Getuid()), self: os.Getpid(), output: output}
	if cfg.Editor != nil {
		act.editorPort = cfg.Editor.Port
	}
	act.sample(now()) // the first look: CPU is counted from here
	started := now()
	failing := false
	for {
		activity := act.sample(now())
		r := protocol.MetadataReport{CollectedAt: now(), Resources: m.measure(now()), Items: items.snapshot(spec.Items), Activity: &activity, HelperStarted: started}
		var answer protocol.MetadataAnswer
		err := cfg.putAnswered(ctx, protocol.MetadataPath, r, &answer)
		if err == nil {
			act.processes = answer.ActivityProcesses
		}
		if err != nil && ctx.Err() == nil {
			if !failing {
				log.Warn("metadata: cannot report to the server; trying again at every interval", "err", err)
			}
			failing = true
		} else {
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-after(protocol.MetadataInterval):
		}
	}
}
