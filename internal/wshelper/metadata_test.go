//go:build unix

package wshelper

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// fakeKernel writes the files a meter reads under a directory: the helper's cgroup (v2) and
// /proc/meminfo.
func fakeKernel(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The meter reads the cgroup the helper is in: CPU from two samples of usage_usec over the time
// between them, against cpu.max's quota; memory in use without inactive page cache, against
// memory.max (the machine's memory when there is none); OOM kills since its first measure; a
// volume's figures from statfs.
func TestMeterReadsTheCgroup(t *testing.T) {
	cg := "sys/fs/cgroup/kubepods/pod1/"
	files := map[string]string{
		"proc/self/cgroup":        "0::/kubepods/pod1\n",
		"proc/meminfo":            "MemTotal:       16384000 kB\nMemFree: 1 kB\n",
		cg + "cgroup.controllers": "cpu memory\n",
		cg + "cpu.stat":           "usage_usec 1000000\nuser_usec 900000\n",
		cg + "cpu.max":            "200000 100000\n",
		cg + "memory.current":     "600000000\n",
		cg + "memory.stat":        "anon 400000000\ninactive_file 100000000\n",
		cg + "memory.max":         "1073741824\n",
		cg + "memory.events":      "low 0\noom 1\noom_kill 3\n",
	}
	root := fakeKernel(t, files)
	vol := filepath.Join(root, "projects")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newMeter(root, protocol.ResourcesMonitoring{}, "/projects")
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	r := m.measure(t0)
	if r.CPU != nil {
		t.Errorf("a CPU figure from one sample: %+v", r.CPU)
	}
	if r.Memory == nil || r.Memory.UsedBytes != 500000000 || r.Memory.LimitBytes != 1<<30 || r.Memory.Threshold != protocol.DefaultThresholdPercent || r.Memory.OOMKills != 0 {
		t.Fatalf("memory: %+v", r.Memory)
	}
	if len(r.Volumes) != 1 || r.Volumes[0].Path != "/projects" || r.Volumes[0].TotalBytes <= 0 || r.Volumes[0].UsedBytes <= 0 || r.Volumes[0].Threshold != 90 {
		t.Fatalf("volumes: %+v", r.Volumes)
	}
	// Ten seconds later, 5 s of CPU time used (half a core), and one more kill; no memory limit.
	files[cg+"cpu.stat"] = "usage_usec 6000000\n"
	files[cg+"memory.events"] = "oom_kill 4\n"
	files[cg+"memory.max"] = "max\n"
	files[cg+"cpu.max"] = "max 100000\n"
	for name, body := range files {
		_ = os.WriteFile(filepath.Join(root, name), []byte(body), 0o644)
	}
	r = m.measure(t0.Add(10 * time.Second))
	if r.CPU == nil || r.CPU.UsedCores != 0.5 || r.CPU.LimitCores < 1 {
		t.Fatalf("cpu: %+v", r.CPU)
	}
	if r.Memory.OOMKills != 1 || r.Memory.LimitBytes != 16384000<<10 {
		t.Fatalf("memory without a limit, after a kill: %+v", r.Memory)
	}
}

// On a host with cgroup v1 (the hybrid layout: a 0:: line without a v2 cgroup), the memory, cpu
// and cpuacct controllers' files are read, inside a container at the hierarchies' roots; v1's
// "no limit" is the machine's memory.
func TestMeterReadsCgroupV1(t *testing.T) {
	files := map[string]string{
		"proc/self/cgroup": "4:memory:/kubepods/pod1/c1\n3:cpu,cpuacct:/kubepods/pod1/c1\n0::/\n",
		"proc/meminfo":     "MemTotal: 1000 kB\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes":  "600000\n",
		"sys/fs/cgroup/memory/memory.stat":            "cache 1\ntotal_inactive_file 100000\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":  "9223372036854771712\n",
		"sys/fs/cgroup/memory/memory.oom_control":     "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"sys/fs/cgroup/cpu,cpuacct/cpuacct.usage":     "1000000000\n",
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "50000\n",
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
	}
	root := fakeKernel(t, files)
	m := newMeter(root, protocol.ResourcesMonitoring{Volumes: []protocol.VolumeThreshold{{Path: "/proc", Threshold: 50}}}, "")
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	if r := m.measure(t0); r.Memory == nil || r.Memory.UsedBytes != 500000 || r.Memory.LimitBytes != 1000<<10 {
		t.Fatalf("memory: %+v", r.Memory)
	}
	_ = os.WriteFile(filepath.Join(root, "sys/fs/cgroup/cpu,cpuacct/cpuacct.usage"), []byte("3000000000\n"), 0o644)
	_ = os.WriteFile(filepath.Join(root, "sys/fs/cgroup/memory/memory.oom_control"), []byte("oom_kill 5\n"), 0o644)
	r := m.measure(t0.Add(10 * time.Second))
	if r.CPU == nil || r.CPU.UsedCores != 0.2 || r.CPU.LimitCores != 0.5 || r.Memory.OOMKills != 3 {
		t.Fatalf("cpu %+v, memory %+v", r.CPU, r.Memory)
	}
}

// Without a cgroup to read, no CPU or memory figure is made up; volumes still are.
func TestMeterWithoutCgroup(t *testing.T) {
	root := fakeKernel(t, map[string]string{"proc/self/cgroup": "12:memory:/user\n", "home/.keep": ""})
	m := newMeter(root, protocol.ResourcesMonitoring{Volumes: []protocol.VolumeThreshold{{Path: "/home", Threshold: 0}}}, "/projects")
	m.measure(time.Now())
	r := m.measure(time.Now().Add(time.Second))
	if r.CPU != nil || r.Memory != nil || len(r.Volumes) != 1 || r.Volumes[0].Path != "/home" || r.Volumes[0].Threshold != 0 {
		t.Fatalf("resources %+v", r)
	}
}

// A custom metadata command's value is its trimmed output; a failure or a timeout is its error,
// and the command's whole process group is killed at the timeout.
func TestMetadataScript(t *testing.T) {
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "WHO=workspace"}
	if v, e := runMetadataScript(context.Background(), protocol.MetadataItemSpec{Script: "echo '  hello '$WHO; echo", Timeout: 5}, env); v != "hello workspace" || e != "" {
		t.Errorf("value %q, error %q", v, e)
	}
	if v, e := runMetadataScript(context.Background(), protocol.MetadataItemSpec{Script: "echo partial; exit 3", Timeout: 5}, env); v != "partial" || e != "exit status 3" {
		t.Errorf("a failure: value %q, error %q", v, e)
	}
	start := time.Now()
	if _, e := runMetadataScript(context.Background(), protocol.MetadataItemSpec{Script: "sleep 30 & sleep 30", Timeout: 1}, env); e != "timed out after 1 s" {
		t.Errorf("a timeout: error %q", e)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("the timeout waited for the command's children")
	}
	// What a command leaves in the background goes with it, and its output held open is no error.
	pidFile := filepath.Join(t.TempDir(), "pid")
	if v, e := runMetadataScript(context.Background(), protocol.MetadataItemSpec{Script: "echo $$ > " + pidFile + "; sleep 30 & echo ok", Timeout: 5}, env); v != "ok" || e != "" {
		t.Errorf("a background process: value %q, error %q", v, e)
	}
	b, _ := os.ReadFile(pidFile)
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	// Killed, its processes are gone once their new parent reaped them.
	eventually(t, "the command's process group to be gone", func() bool { return syscall.Kill(-pgid, 0) != nil })
	big, _ := runMetadataScript(context.Background(), protocol.MetadataItemSpec{Script: "head -c 100000 /dev/zero | tr '\\0' x", Timeout: 5}, env)
	if len(big) != protocol.MaxMetadataValueBytes {
		t.Errorf("a long output kept %d bytes", len(big))
	}
}

// The helper reports to the server at every interval with its token: its resources and the
// custom metadata commands' values; the intervals are the injected timer's.
func TestReportMetadata(t *testing.T) {
	var mu sync.Mutex
	var got []protocol.MetadataReport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep protocol.MetadataReport
		if r.URL.Path != protocol.MetadataPath || r.Method != "PUT" || r.Header.Get("Authorization") != "Bearer hwa_test" || json.NewDecoder(r.Body).Decode(&rep) != nil {
			http.Error(w, "bad", 400)
			return
		}
		mu.Lock()
		got = append(got, rep)
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	ticks := make(chan time.Time)
	var intervals sync.Map
	after := func(d time.Duration) <-chan time.Time { intervals.Store(d, true); return ticks }
	root := fakeKernel(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cgroup.controllers": "memory\n", "sys/fs/cgroup/memory.current": "1000\n", "sys/fs/cgroup/memory.max": "4000\n"})
	spec, err := protocol.ParseMetadataSpec(`{"items":[{"key":"answer","display_name":"Answer","script":"echo 42","interval":30}]}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	cfg := Config{ServerURL: srv.URL, Token: "hwa_test", After: after, metadataRoot: root, Env: []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}}
	go func() {
		defer close(done)
		reportMetadata(ctx, cfg, spec, cfg.Env, nil, (&logBuffer{}).logger())
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	// The first report goes at once; the next at each tick, with the command's value once it ran.
	eventually(t, "the first report", func() bool { return count() >= 1 })
	eventually(t, "a report with the command's value", func() bool {
		select {
		case ticks <- time.Now():
		case <-time.After(10 * time.Millisecond):
		}
		mu.Lock()
		defer mu.Unlock()
		last := got[len(got)-1]
		return len(last.Items) == 1 && last.Items[0].Value == "42" && last.Items[0].DisplayName == "Answer"
	})
	cancel()
	close(ticks)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if m := got[0].Resources.Memory; m == nil || m.UsedBytes != 1000 || m.LimitBytes != 4000 {
		t.Fatalf("the first report's memory: %+v", m)
	}
	for _, d := range []time.Duration{protocol.MetadataInterval, 30 * time.Second} {
		if _, ok := intervals.Load(d); !ok {
			t.Errorf("no timer of %v (the report's and the command's intervals)", d)
		}
	}
}
