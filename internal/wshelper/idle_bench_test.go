package wshelper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// BenchmarkHelperIdle (docs/benchmarks.md, "Inside the workspace: the cost of metadata"): the
// helper's own CPU and memory in an idle workspace. The helper (Run: SSH served, no session, no
// command, reporting its metadata to a server) runs in a process of its own — this test binary
// started again (idleHelperMain, from TestMain) — so that its figures are its own: the server that
// answers the reports is this process, an httptest server that decodes each report and answers
// as a real one does. The child measures itself with getrusage and runtime.ReadMemStats:
//
//   - compressed: Config.After fires each metadata interval as soon as the previous report was
//     answered, for 360 intervals (one simulated hour): the CPU of 360 measurements and reports;
//   - real time: then 30 s with the real timer (3 reports): what an hour costs, idle between
//     reports included (the runtime's own timers, the SSH listener).
//
// Two roots for the kernel's files: "workspace", a directory laid out as a container sees its
// kernel (cgroup v2, five processes of the user in /proc, the editor's /proc/net/tcp), and "host",
// this machine's own / (cgroup v1, and every process of the machine, about 170 on a test node, in
// /proc: the activity sampler reads each of the user's, here root's).
func BenchmarkHelperIdle(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var reports atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep protocol.MetadataReport
		if r.Method != "PUT" || r.URL.Path != protocol.MetadataPath || json.NewDecoder(io.LimitReader(r.Body, protocol.MaxMetadataReportBytes)).Decode(&rep) != nil || rep.Check() != nil {
			http.Error(w, "bad report", http.StatusBadRequest)
			return
		}
		reports.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(protocol.MetadataAnswer{})
	}))
	defer srv.Close()
	b.Run("binary", func(b *testing.B) {
		benchHelperBinary(b, srv.URL, &reports)
	})
	for _, root := range []string{"workspace", "host"} {
		b.Run(root, func(b *testing.B) {
			dir := b.TempDir()
			kernel := "/"
			if root == "workspace" {
				kernel = workspaceKernel(b, filepath.Join(dir, "kernel"))
			}
			var m idleFigures
			for range b.N {
				reports.Store(0)
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), "WSHELPER_BENCH_IDLE="+srv.URL, "WSHELPER_BENCH_ROOT="+kernel, "WSHELPER_BENCH_DIR="+dir,
					"WSHELPER_BENCH_INTERVALS=360", "WSHELPER_BENCH_REAL=30s")
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("the helper's process: %v\n%s", err, out)
				}
				line := out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:]
				if err := json.Unmarshal(line, &m); err != nil {
					b.Fatalf("the helper's figures: %v\n%s", err, out)
				}
				if n := reports.Load(); n < 360+3 {
					b.Fatalf("the server answered %d reports, want at least 363", n)
				}
			}
			hour := float64(time.Hour / protocol.MetadataInterval)
			b.ReportMetric(m.CompressedCPU.Seconds()/float64(m.Intervals)*1e6, "cpu-µs/report")
			b.ReportMetric(m.CompressedCPU.Seconds()/float64(m.Intervals)*hour, "cpu-s/sim-hour")
			b.ReportMetric(m.RealCPU.Seconds()*float64(time.Hour)/float64(m.Real), "cpu-s/real-hour")
			b.ReportMetric(float64(m.RSS)/(1<<20), "rss-MiB")
			b.ReportMetric(float64(m.MaxRSS)/(1<<20), "maxrss-MiB")
			b.ReportMetric(float64(m.Anon)/(1<<20), "rss-anon-MiB")
			b.ReportMetric(float64(m.File)/(1<<20), "rss-file-MiB")
			b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-inuse-MiB")
			b.ReportMetric(float64(m.Sys)/(1<<20), "go-sys-MiB")
			b.ReportMetric(float64(m.Goroutines), "goroutines")
		})
	}
}

// idleFigures is what the helper's process measured of itself.
type idleFigures struct {
	Intervals     int
	CompressedCPU time.Duration
	Real          time.Duration
	RealCPU       time.Duration
	RSS, MaxRSS   int64
	Anon, File    int64
	HeapInuse     uint64
	Sys           uint64
	Goroutines    int
}

// idleHelperMain is BenchmarkHelperIdle's child: the helper, measured.
func idleHelperMain() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir := os.Getenv("WSHELPER_BENCH_DIR")
	intervals, err := strconv.Atoi(os.Getenv("WSHELPER_BENCH_INTERVALS"))
	if err != nil {
		fail(err)
	}
	realFor, err := time.ParseDuration(os.Getenv("WSHELPER_BENCH_REAL"))
	if err != nil {
		fail(err)
	}
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, nil, 0o600); err != nil {
		fail(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		fail(err)
	}
	var (
		figures   idleFigures
		calls     int
		cpu0      time.Duration
		realStart time.Time
		realCPU0  time.Duration
		done      = make(chan struct{})
	)
	fired := func() <-chan time.Time {
		c := make(chan time.Time, 1)
		c <- time.Now()
		return c
	}
	// Only the metadata loop asks for timers here (no editor, no commands); it asks for the next
	// interval after each report was answered.
	after := func(d time.Duration) <-chan time.Time {
		if d != protocol.MetadataInterval {
			return time.After(d)
		}
		calls++
		switch {
		case calls == 1: // the first report, made at start, was answered
			cpu0 = selfCPU()
			return fired()
		case calls <= intervals:
			return fired()
		case calls == intervals+1:
			figures.Intervals, figures.CompressedCPU = intervals, selfCPU()-cpu0
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			figures.HeapInuse, figures.Sys, figures.Goroutines = ms.HeapInuse, ms.Sys, runtime.NumGoroutine()
			figures.RSS, figures.MaxRSS = procStatusKiB(os.Getpid(), "VmRSS:")<<10, procStatusKiB(os.Getpid(), "VmHWM:")<<10
			figures.Anon, figures.File = procStatusKiB(os.Getpid(), "RssAnon:")<<10, procStatusKiB(os.Getpid(), "RssFile:")<<10
			realStart, realCPU0 = time.Now(), selfCPU()
			go func() {
				time.Sleep(realFor)
				figures.Real, figures.RealCPU = time.Since(realStart), selfCPU()-realCPU0
				close(done)
			}()
		}
		return time.After(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{SSHAddr: "127.0.0.1:0", ServerURL: os.Getenv("WSHELPER_BENCH_IDLE"), Token: "hwa_bench", NoGitCredentials: true,
			StateDir: filepath.Join(dir, "state"), AuthorizedKeysFile: keys, metadataRoot: os.Getenv("WSHELPER_BENCH_ROOT"), After: after,
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "SHELL=/bin/sh"}, Signals: make(chan os.Signal)})
		result <- err
	}()
	select {
	case <-done:
	case err := <-result:
		fail(fmt.Errorf("Run ended: %v", err))
	}
	cancel()
	if err := <-result; err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(figures); err != nil {
		fail(err)
	}
}

// selfCPU is the user and system CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workspaceKernel lays out under root the kernel's files as a workspace's container sees them:
// its cgroup (v2) at the hierarchy's root, the machine's memory, five processes of its user (the
// container's init, a shell, tmux and its shell, a sleep: each a stat and a command line), and a
// /proc/net/tcp with the SSH port listening.
func workspaceKernel(b *testing.B, root string) string {
	files := map[string]string{
		"proc/self/cgroup":                 "0::/\n",
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
		"sys/fs/cgroup/cpu.stat":           "usage_usec 8123456\nuser_usec 6000000\nsystem_usec 2123456\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
		"sys/fs/cgroup/cpu.max":            "200000 100000\n",
		"sys/fs/cgroup/memory.current":     "314572800\n",
		"sys/fs/cgroup/memory.max":         "4294967296\n",
		"sys/fs/cgroup/memory.events":      "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"proc/net/tcp": "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
			"   0: 00000000:08AE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0\n",
	}
	var stat strings.Builder
	for _, k := range []string{"anon", "file", "kernel", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "sock", "vmalloc", "shmem",
		"zswap", "zswapped", "file_mapped", "file_dirty", "file_writeback", "swapcached", "anon_thp", "file_thp", "shmem_thp",
		"inactive_anon", "active_anon", "inactive_file", "active_file", "unevictable", "slab_reclaimable", "slab_unreclaimable", "slab",
		"workingset_refault_anon", "workingset_refault_file", "workingset_activate_anon", "workingset_activate_file", "pgscan", "pgsteal",
		"pgfault", "pgmajfault", "pgrefill", "pgactivate", "pgdeactivate", "pglazyfree", "thp_fault_alloc"} {
		fmt.Fprintf(&stat, "%s %d\n", k, 1<<20)
	}
	files["sys/fs/cgroup/memory.stat"] = stat.String()
	if meminfo, err := os.ReadFile("/proc/meminfo"); err == nil {
		files["proc/meminfo"] = string(meminfo)
	}
	for i, p := range []struct{ comm, cmdline string }{
		{"hangar", "/usr/local/bin/hangar\x00workspace-helper\x00"}, {"bash", "/bin/bash\x00-l\x00"},
		{"tmux: server", "tmux\x00"}, {"bash", "-bash\x00"}, {"sleep", "sleep\x00infinity\x00"},
	} {
		pid := strconv.Itoa(1 + i*7)
		files["proc/"+pid+"/stat"] = pid + " (" + p.comm + ") S 1 1 1 0 -1 4194560 1200 0 0 0 35 12 0 0 20 0 1 0 4321 12000000 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
		files["proc/"+pid+"/cmdline"] = p.cmdline
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// benchHelperBinary runs the real `hangar workspace-helper`, built from this tree, as a Kubernetes
// workspace's container runs it (SSH served, reports to the server, no git credentials), on
// this machine's / with real time: its memory after a minute, and its CPU over that minute after
// the first report (the host key's generation and the start left out), summed over its threads
// from /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts 10 ms ticks).
func benchHelperBinary(b *testing.B, serverURL string, reports *atomic.Int64) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "hangar")
	build := exec.Command("go", "build", "-o", bin, "github.com/hangar-dev/hangar/cmd/hangar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build hangar: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		b.Fatal(err)
	}
	const window = time.Minute
	var cpu time.Duration
	var rss, hwm, anon, file, n int64
	for range b.N {
		cmd := exec.Command(bin, "workspace-helper")
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "HANGAR_HELPER_SERVER_URL=" + serverURL, "HANGAR_HELPER_TOKEN=hwa_bench",
			"HANGAR_HELPER_GIT_CREDENTIALS=false", "HANGAR_HELPER_SSH_ADDR=127.0.0.1:0", "HANGAR_HELPER_STATE_DIR=" + filepath.Join(dir, "state"),
			"HANGAR_HELPER_AUTHORIZED_KEYS_FILE=" + filepath.Join(dir, "authorized_keys")}
		var logs strings.Builder
		cmd.Stdout, cmd.Stderr = &logs, &logs
		reports.Store(0)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for reports.Load() == 0 {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				b.Fatalf("no report from the helper in 30 s:\n%s", logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		pid := cmd.Process.Pid
		cpu0 := threadsCPU(pid)
		time.Sleep(window)
		cpu = threadsCPU(pid) - cpu0
		rss, hwm, n = procStatusKiB(pid, "VmRSS:")<<10, procStatusKiB(pid, "VmHWM:")<<10, reports.Load()
		anon, file = procStatusKiB(pid, "RssAnon:")<<10, procStatusKiB(pid, "RssFile:")<<10
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Fatalf("the helper: %v\n%s", err, logs.String())
		}
		if n < 6 {
			b.Fatalf("%d reports in %v, want 6 or more:\n%s", n, window, logs.String())
		}
	}
	b.ReportMetric(cpu.Seconds()*float64(time.Hour/window), "cpu-s/real-hour")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(hwm)/(1<<20), "maxrss-MiB")
	b.ReportMetric(float64(anon)/(1<<20), "rss-anon-MiB")
	b.ReportMetric(float64(file)/(1<<20), "rss-file-MiB")
}

// threadsCPU is the time a process's threads ran, from their schedstat.
func threadsCPU(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// procStatusKiB reads a figure of /proc/PID/status ("VmRSS:"), in KiB.
func procStatusKiB(pid int, key string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
