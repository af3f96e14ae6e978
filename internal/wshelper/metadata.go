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
// the kernel's figures — its cgroup's (cgroup v2: cpu.stat, cpu.max, memory.current, memory.stat,
// memory.max, memory.events) and the filesystems' (statfs) — and reports them with the latest
// value of each custom metadata command, which runs on its own interval.

// cgroupRoot is where the helper's cgroup (v2) is: /sys/fs/cgroup and the path /proc/self/cgroup
// gives (inside a container with its own cgroup namespace, "/": the container's cgroup).
func cgroupRoot(fsRoot string) string {
	b, err := os.ReadFile(filepath.Join(fsRoot, "proc/self/cgroup"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(fsRoot, "sys/fs/cgroup", filepath.Clean("/"+rest))
		}
	}
	return ""
}

// meter measures a workspace's resources. Its figures come from files under fsRoot ("/" in a
// workspace; a test's directory in tests).
type meter struct {
	fsRoot  string
	cgroup  string // the cgroup's directory ("": none readable)
	volumes []protocol.VolumeThreshold
	memory  int // the memory alert's threshold

	// The previous CPU sample (usage_usec at when), for the rate; the OOM kills counted when the
	// helper started.
	lastCPU   int64
	lastWhen  time.Time
	oomAtZero int64
	started   bool
}

// newMeter returns a meter of the cgroup the helper runs in, watching the volumes of spec (those
// of defaultVolume when it names none).
func newMeter(fsRoot string, spec protocol.ResourcesMonitoring, defaultVolume string) *meter {
	m := &meter{fsRoot: fsRoot, cgroup: cgroupRoot(fsRoot), volumes: spec.Volumes, memory: spec.MemoryThreshold()}
	if len(m.volumes) == 0 && defaultVolume != "" {
		m.volumes = []protocol.VolumeThreshold{{Path: defaultVolume, Threshold: protocol.DefaultThresholdPercent}}
	}
	return m
}

// measure returns the resources at now. CPU needs two samples: the first call has none.
func (m *meter) measure(now time.Time) protocol.Resources {
	var r protocol.Resources
	if m.cgroup != "" {
		stat := readKeyed(filepath.Join(m.cgroup, "cpu.stat"))
		if usage, ok := stat["usage_usec"]; ok {
			if m.started && now.After(m.lastWhen) && usage >= m.lastCPU {
				used := float64(usage-m.lastCPU) / float64(now.Sub(m.lastWhen).Microseconds())
				r.CPU = &protocol.CPUUsage{UsedCores: round2(used), LimitCores: m.cpuLimit()}
			}
			m.lastCPU, m.lastWhen = usage, now
		}
		if current, err := readInt(filepath.Join(m.cgroup, "memory.current")); err == nil {
			// The working set, as the kubelet counts it: page cache the kernel can take back
			// (inactive files) is not in use.
			used := current - readKeyed(filepath.Join(m.cgroup, "memory.stat"))["inactive_file"]
			ooms := readKeyed(filepath.Join(m.cgroup, "memory.events"))["oom_kill"]
			if !m.started {
				m.oomAtZero = ooms
			}
			r.Memory = &protocol.MemoryUsage{UsedBytes: max(used, 0), LimitBytes: m.memoryLimit(), Threshold: m.memory, OOMKills: max(ooms-m.oomAtZero, 0)}
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

// cpuLimit is the cgroup's CPU quota in cores, else the machine's CPUs.
func (m *meter) cpuLimit() float64 {
	b, err := os.ReadFile(filepath.Join(m.cgroup, "cpu.max"))
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 && f[0] != "max" {
		quota, err1 := strconv.ParseFloat(f[0], 64)
		period, err2 := strconv.ParseFloat(f[1], 64)
		if err1 == nil && err2 == nil && period > 0 {
			return round2(quota / period)
		}
	}
	return float64(runtime.NumCPU())
}

// memoryLimit is the cgroup's memory.max, else (no limit) the machine's memory.
func (m *meter) memoryLimit() int64 {
	if n, err := readInt(filepath.Join(m.cgroup, "memory.max")); err == nil && n > 0 {
		return n
	}
	if kb := readKeyed(filepath.Join(m.fsRoot, "proc/meminfo"))["MemTotal:"]; kb > 0 {
		return kb << 10
	}
	return 0
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
func reportMetadata(ctx context.Context, cfg Config, spec protocol.MetadataSpec, env []string, log *slog.Logger) {
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
	if m.cgroup == "" {
		log.Warn("metadata: no cgroup v2 to read: the workspace's CPU and memory are not reported")
	}
	items := &metadataItems{values: map[string]protocol.MetadataValue{}}
	for _, it := range spec.Items {
		go items.runItem(ctx, it, env, now, after)
	}
	failing := false
	for {
		r := protocol.MetadataReport{CollectedAt: now(), Resources: m.measure(now()), Items: items.snapshot(spec.Items)}
		if err := cfg.put(ctx, protocol.MetadataPath, r); err != nil && ctx.Err() == nil {
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
