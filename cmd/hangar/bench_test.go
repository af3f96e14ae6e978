package main_test

// Benchmarks of the Terraform backend (issue 4, item 10; figures in docs/benchmarks.md): the real
// `hangar` binary as server (and as `hangar provisioner`) running the real terraform. They run only
// with -bench:
//
//	CGO_ENABLED=0 go test -run '^$' -bench Terraform -benchtime 1x -count 3 -timeout 60m ./cmd/hangar/
//
// Each reports its figures as custom metrics (p50-ms, p95-ms: nearest-rank percentiles over all
// runs) and suppresses ns/op, which would only time the whole series; the samples and where the
// time went are logged. The Postgres sub-benchmarks use internal/testutil/pgtest, as the tests do.
//
// Terraform is observed without touching product code: the server's --terraform is a small shell
// script (tfbProbe) that writes the terraform command and its working directory to a FIFO this
// process reads, then execs the real terraform; the benchmark stamps each line as it arrives.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

const (
	// tfbRuns is how many builds BenchmarkTerraformRequestToInit measures per store.
	tfbRuns = 20
	// tfbWorkspaces and tfbBuilds: BenchmarkTerraformThroughput runs tfbBuilds builds, tfbBuilds /
	// tfbWorkspaces per workspace, one after the other in each workspace.
	tfbWorkspaces = 4
	tfbBuilds     = 60
	// tfbStateRuns is how many builds BenchmarkTerraformStateSize measures per state size and store.
	tfbStateRuns = 5
	// tfbPoll is how often the benchmarks read a workspace while waiting for its build to end.
	tfbPoll = 10 * time.Millisecond
	// tfbBuildTimeout bounds one build.
	tfbBuildTimeout = 5 * time.Minute
)

// --- BenchmarkTerraformRequestToInit

// BenchmarkTerraformRequestToInit: from POST /api/v1/workspaces/{name}/builds returning to
// `terraform init` starting, with one in-process provisioner, on the marker template; builds
// alternate stop and start on one workspace, one at a time, each after a random 0–300 ms pause. The
// time is split at the job's claim (the build's started_at, stamped by the server when a
// provisioner claims the job), at the first line of the build's log (the runner's "Setting up",
// stamped by the provisioner) and at the `terraform version` the runner runs before init. The
// baseline sub-benchmark times bare terraform processes on this machine.
func BenchmarkTerraformRequestToInit(b *testing.B) {
	bin := tfbBinary(b)
	b.Run("baseline", func(b *testing.B) { tfbProcessBaseline(b, bin) })
	for _, st := range []string{"sqlite", "postgres"} {
		b.Run(st, func(b *testing.B) { tfbRequestToInit(b, bin, st) })
	}
}

func tfbRequestToInit(b *testing.B, bin, st string) {
	probe := tfbNewProbe(b)
	srv := tfbStartServer(b, bin, tfbStore(b, st), 1, probe.path, "MARKER_DIR="+filepath.Join(b.TempDir(), "markers"))
	c := srv.c
	ctx := context.Background()
	tfbPushTemplate(b, c, "markers", "testdata/markers")
	if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "lat", Template: "markers"}); err != nil {
		b.Fatal(err)
	}
	tfbWait(b, srv, "lat", 1) // warm-up: not counted

	var total, claim, sentToClaim, claimToInit, claimToSetup, setupToVersion, versionToInit, post []time.Duration
	transitions := [2]string{"stop", "start"}
	for i := 0; i < b.N; i++ {
		for j := 0; j < tfbRuns; j++ {
			time.Sleep(rand.N(300 * time.Millisecond))
			probe.drain()
			sent := time.Now()
			bd, err := c.CreateBuild(ctx, "lat", sdk.CreateBuildRequest{Transition: transitions[j%2]})
			returned := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			seen := probe.until(b, srv.dataDir, "init")
			got, _ := tfbWait(b, srv, "lat", bd.Number)
			stages, _ := tfbStages(b, c, "lat", bd.Number)
			claimed, setup := *got.StartedAt, stages[terraform.StageSetup]
			version, init := seen["version"], seen["init"]
			if setup.IsZero() {
				b.Fatalf("build #%d: terraform init started, but no %q stage before it", bd.Number, terraform.StageSetup)
			}
			if version.IsZero() {
				version = setup // the runner asks terraform's version once per process: none here
			}
			total = append(total, init.Sub(returned))
			claim = append(claim, claimed.Sub(returned))
			sentToClaim = append(sentToClaim, claimed.Sub(sent))
			claimToInit = append(claimToInit, init.Sub(claimed))
			claimToSetup = append(claimToSetup, setup.Sub(claimed))
			setupToVersion = append(setupToVersion, version.Sub(setup))
			versionToInit = append(versionToInit, init.Sub(version))
			post = append(post, returned.Sub(sent))
		}
	}
	tfbReport(b, "", total)
	tfbReport(b, "claim-", claim)
	tfbReport(b, "sent-to-claim-", sentToClaim)
	tfbReport(b, "claim-to-init-", claimToInit)
	tfbReport(b, "claim-to-setup-", claimToSetup)
	tfbReport(b, "setup-to-version-", setupToVersion)
	tfbReport(b, "version-to-init-", versionToInit)
	tfbReport(b, "post-", post)
	b.Logf("server: %s", srv.problems())
}

// tfbProcessBaseline times bare terraform processes started the way the runner starts them (its
// CLI config, CHECKPOINT_DISABLE), the probe script's own cost, and that of the survival shim (the
// hangar binary, which the in-process provisioners start for every terraform command, and which
// execs terraform for version and init).
func tfbProcessBaseline(b *testing.B, bin string) {
	tf := tfbTerraform(b)
	probe := tfbNewProbe(b)
	dir := b.TempDir()
	env := tfbTerraformEnv(b, dir)
	shimEnv := append(slices.Clone(env), "HANGAR_TF_SHIM_TERRAFORM="+probe.path, "HANGAR_TF_SHIM_DIR="+dir)
	run := func(env []string, path string, args ...string) time.Duration {
		cmd := exec.Command(path, args...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", path, args, err, out)
		}
		return time.Since(start)
	}
	// started runs path and returns how long the probe took to say terraform starts.
	started := func(env []string, path string) (time.Duration, time.Duration) {
		probe.drain()
		start := time.Now()
		d := run(env, path, "version", "-json")
		return probe.until(b, dir, "version")["version"].Sub(start), d
	}
	var version, versionJSON, viaProbe, probeStart, viaShim, shimStart []time.Duration
	for i := 0; i < b.N; i++ {
		for range tfbRuns {
			version = append(version, run(env, tf, "version"))
			versionJSON = append(versionJSON, run(env, tf, "version", "-json"))
			s, d := started(env, probe.path)
			probeStart, viaProbe = append(probeStart, s), append(viaProbe, d)
			s, d = started(shimEnv, bin)
			shimStart, viaShim = append(shimStart, s), append(viaShim, d)
		}
	}
	tfbReport(b, "version-", version)
	tfbReport(b, "version-json-", versionJSON)
	tfbReport(b, "probe-version-json-", viaProbe)
	tfbReport(b, "probe-start-", probeStart)
	tfbReport(b, "shim-probe-version-json-", viaShim)
	tfbReport(b, "shim-probe-start-", shimStart)
}

// --- BenchmarkTerraformThroughput

// BenchmarkTerraformThroughput: tfbBuilds builds of the marker template (alternately stop and
// start) on tfbWorkspaces workspaces, each workspace's builds back to back (the next is requested
// once the previous one's log ends, as `hangar start --wait` sees it), with one in-process
// provisioner, four in-process provisioners, and four `hangar provisioner` processes. It reports
// builds per minute, the CPU the server, the provisioner processes and terraform (with everything it
// starts) used per build, their share of the machine's CPU, and how busy the machine was (with
// whatever else ran).
func BenchmarkTerraformThroughput(b *testing.B) {
	bin := tfbBinary(b)
	rates := map[string][]float64{}
	for _, cfg := range []struct {
		name                string
		inProcess, external int
	}{{"in-process-1", 1, 0}, {"in-process-4", 4, 0}, {"external-4", 0, 4}} {
		b.Run(cfg.name, func(b *testing.B) {
			rates[cfg.name] = append(rates[cfg.name], tfbThroughput(b, bin, cfg.inProcess, cfg.external))
		})
	}
	median := func(name string) float64 {
		r := slices.Sorted(slices.Values(rates[name]))
		if len(r) == 0 {
			return 0
		}
		return r[(len(r)-1)/2]
	}
	if r1 := median("in-process-1"); r1 > 0 {
		b.Logf("builds/min (median of runs): %v; 4:1 in process %.2f, external 4 : in-process 1 %.2f",
			rates, median("in-process-4")/r1, median("external-4")/r1)
	}
}

func tfbThroughput(b *testing.B, bin string, inProcess, external int) float64 {
	tf := tfbTerraform(b)
	markerEnv := "MARKER_DIR=" + filepath.Join(b.TempDir(), "markers")
	srv := tfbStartServer(b, bin, "", inProcess, tf, markerEnv)
	c := srv.c
	ctx := context.Background()
	pids := []int{srv.pid}
	var provs []*tfbProc
	if external > 0 {
		p, err := c.CreateProvisioner(ctx, sdk.CreateProvisionerRequest{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		tokenFile := filepath.Join(b.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(p.Token+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		for i := range external {
			pr := tfbStartProc(b, bin, []string{"provisioner", "--server", srv.url, "--token-file", tokenFile, "--terraform", tf,
				"--work-dir", filepath.Join(b.TempDir(), "work"), "--identity", fmt.Sprintf("bench-%d", i)}, markerEnv)
			provs = append(provs, pr)
			pids = append(pids, pr.pid)
		}
	}
	tfbPushTemplate(b, c, "markers", "testdata/markers")
	names := make([]string, tfbWorkspaces)
	for i := range names {
		names[i] = fmt.Sprintf("tp%d", i)
		if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: names[i], Template: "markers"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range names { // warm-up: the first builds are not counted
		if st, err := tfbFollow(c, n, 1); err != nil || st != "succeeded" {
			b.Fatalf("%s build #1: %s %v; server: %s", n, st, err, srv.problems())
		}
	}

	var elapsed time.Duration
	var lat []time.Duration
	var own, children time.Duration
	var busy float64
	for i := 0; i < b.N; i++ {
		cpu0, sys0 := tfbCPUOf(pids), tfbSystemCPU()
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, len(names))
		for _, n := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range tfbBuilds / tfbWorkspaces {
					sent := time.Now()
					bd, err := c.CreateBuild(ctx, n, sdk.CreateBuildRequest{Transition: [2]string{"stop", "start"}[k%2]})
					if err != nil {
						errs <- err
						return
					}
					if st, err := tfbFollow(c, n, bd.Number); err != nil || st != "succeeded" {
						errs <- fmt.Errorf("%s build #%d: %s %v", n, bd.Number, st, err)
						return
					}
					mu.Lock()
					lat = append(lat, time.Since(sent))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatalf("%v; server: %s", err, srv.problems())
		}
		elapsed += time.Since(start)
		cpu1, sys1 := tfbCPUOf(pids), tfbSystemCPU()
		own += cpu1.own - cpu0.own
		children += cpu1.children - cpu0.children
		busy += sys1.busyFraction(sys0)
	}
	builds := float64(b.N * tfbBuilds)
	rate := builds / elapsed.Minutes()
	b.ReportMetric(rate, "builds/min")
	b.ReportMetric(tfbMs(elapsed)/builds, "ms/build")
	b.ReportMetric(tfbMs(tfbPercentile(lat, 0.5)), "latency-p50-ms")
	b.ReportMetric(tfbMs(tfbPercentile(lat, 0.95)), "latency-p95-ms")
	b.ReportMetric(own.Seconds()*1000/builds, "hangar-cpu-ms/build")
	b.ReportMetric(children.Seconds()*1000/builds, "terraform-cpu-ms/build")
	b.ReportMetric(100*busy/float64(b.N), "machine-busy-%")
	b.ReportMetric(100*(own+children).Seconds()/elapsed.Seconds()/float64(runtime.NumCPU()), "hangar+terraform-cpu-%")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d builds in %v; server: %s", int(builds), elapsed.Round(time.Millisecond), srv.problems())
	for i, p := range provs {
		b.Logf("provisioner %d: %s", i, p.problems())
	}
	return rate
}

// --- BenchmarkTerraformStateSize

// tfbStateSizes are the state sizes BenchmarkTerraformStateSize measures (the Terraform state file
// as stored, in bytes).
var tfbStateSizes = []struct {
	name  string
	bytes int
}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}, {"10MiB", 10 << 20}, {"50MiB", 50 << 20}}

// BenchmarkTerraformStateSize: the end-to-end time of a build (POST .../builds sent → the API shows
// the workspace Running or Stopped again) whose Terraform state is 1 KiB to 50 MiB, on SQLite and on
// Postgres, with one in-process provisioner. The template (testdata/bench-state) has one resource
// whose state the benchmark inflates and pushes (PUT .../state); every build is a no-op apply that
// reads and writes the whole state. terraform-alone times the same init and apply by hand, with
// the same state, for the part that is Terraform's own. Each build's time is split with its log's
// stage lines (stamped by the provisioner) and the job's started_at and completed_at; pull-* is
// GET .../state afterwards, one read of the state through the API.
func BenchmarkTerraformStateSize(b *testing.B) {
	bin := tfbBinary(b)
	results := map[string][]time.Duration{} // p50 of each run (-count), by store/size
	var mu sync.Mutex
	record := func(key string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		results[key] = append(results[key], d)
	}
	b.Run("terraform-alone", func(b *testing.B) {
		for _, sz := range tfbStateSizes {
			b.Run(sz.name, func(b *testing.B) { record("terraform-alone/"+sz.name, tfbTerraformAlone(b, sz.bytes)) })
		}
	})
	for _, st := range []string{"sqlite", "postgres"} {
		b.Run(st, func(b *testing.B) {
			srv := tfbStartServer(b, bin, tfbStore(b, st), 1, tfbTerraform(b))
			tfbPushTemplate(b, srv.c, "blob", "testdata/bench-state")
			for _, sz := range tfbStateSizes {
				b.Run(sz.name, func(b *testing.B) { record(st+"/"+sz.name, tfbStateSize(b, srv, sz.name, sz.bytes)) })
			}
			b.Logf("server: %s", srv.problems())
		})
	}
	median := func(key string) time.Duration { return tfbPercentile(results[key], 0.5) }
	var lines []string
	for _, st := range []string{"terraform-alone", "sqlite", "postgres"} {
		base := median(st + "/1KiB")
		for _, sz := range tfbStateSizes {
			if d := median(st + "/" + sz.name); base > 0 && d > 0 {
				lines = append(lines, fmt.Sprintf("%s/%s: p50 %v = %.2f× 1KiB (runs: %v)", st, sz.name, d.Round(time.Millisecond),
					float64(d)/float64(base), results[st+"/"+sz.name]))
			}
		}
	}
	b.Logf("state size, ratios against 1 KiB of the same run (median of the runs' p50):\n%s", strings.Join(lines, "\n"))
}

// tfbWorkspaceSeq numbers the workspaces of BenchmarkTerraformStateSize: -count runs a
// sub-benchmark again against the same server.
var tfbWorkspaceSeq atomic.Int64

func tfbStateSize(b *testing.B, srv *tfbServer, sizeName string, size int) time.Duration {
	c := srv.c
	ctx := context.Background()
	name := fmt.Sprintf("s-%s-%d", strings.ToLower(sizeName), tfbWorkspaceSeq.Add(1))
	if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Template: "blob"}); err != nil {
		b.Fatal(err)
	}
	tfbWait(b, srv, name, 1)
	state, _, err := c.PullState(ctx, name, 0)
	if err != nil {
		b.Fatal(err)
	}
	big := tfbInflate(b, state, size)
	pushStart := time.Now()
	if err := c.PushState(ctx, name, big, true); err != nil {
		b.Fatal(err)
	}
	b.Logf("pushed a state of %d bytes in %v", len(big), time.Since(pushStart).Round(time.Millisecond))

	var total, post, queue, setup, tfInit, tfApply, finish, visible []time.Duration
	var own, children time.Duration
	for i := 0; i < b.N; i++ {
		for k := range tfbStateRuns {
			time.Sleep(rand.N(300 * time.Millisecond))
			cpu0 := tfbCPUOf([]int{srv.pid})
			sent := time.Now()
			bd, err := c.CreateBuild(ctx, name, sdk.CreateBuildRequest{Transition: [2]string{"stop", "start"}[k%2]})
			returned := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			seen := tfbWaitSeen(b, srv, name, bd.Number)
			cpu1 := tfbCPUOf([]int{srv.pid})
			got := tfbBuild(b, srv, name, bd.Number)
			own += cpu1.own - cpu0.own
			children += cpu1.children - cpu0.children
			stages, stateBytes := tfbStages(b, c, name, bd.Number)
			if stateBytes < size {
				b.Fatalf("build #%d read back a state of %d bytes, want at least %d", bd.Number, stateBytes, size)
			}
			total = append(total, seen.Sub(sent))
			post = append(post, returned.Sub(sent))
			queue = append(queue, got.StartedAt.Sub(returned))
			setup = append(setup, stages[terraform.StageInit].Sub(*got.StartedAt))
			tfInit = append(tfInit, stages[terraform.StageApply].Sub(stages[terraform.StageInit]))
			tfApply = append(tfApply, stages[terraform.StageReadState].Sub(stages[terraform.StageApply]))
			finish = append(finish, got.CompletedAt.Sub(stages[terraform.StageReadState]))
			visible = append(visible, seen.Sub(*got.CompletedAt))
		}
	}
	tfbReport(b, "", total)
	tfbReport(b, "post-", post)
	tfbReport(b, "queue-", queue)
	tfbReport(b, "setup-", setup)
	tfbReport(b, "init-", tfInit)
	tfbReport(b, "apply-", tfApply)
	tfbReport(b, "finish-", finish)
	tfbReport(b, "visible-", visible)
	var pull []time.Duration
	for range 3 {
		start := time.Now()
		if _, _, err := c.PullState(ctx, name, 0); err != nil {
			b.Fatal(err)
		}
		pull = append(pull, time.Since(start))
	}
	tfbReport(b, "pull-", pull)
	runs := float64(len(total))
	b.ReportMetric(own.Seconds()*1000/runs, "server-cpu-ms/build")
	b.ReportMetric(children.Seconds()*1000/runs, "terraform-cpu-ms/build")
	b.ReportMetric(tfbStatusKB(srv.pid, "VmHWM")/1024, "server-hwm-MB")
	return tfbPercentile(total, 0.5)
}

// tfbTerraformAlone runs, in a directory of its own, what a build of the bench-state template runs
// (terraform version, init in a fresh directory, apply) with a state of size bytes, tfbStateRuns
// times, and returns the median.
func tfbTerraformAlone(b *testing.B, size int) time.Duration {
	tf := tfbTerraform(b)
	dir := b.TempDir()
	env := tfbTerraformEnv(b, dir)
	module := filepath.Join(dir, "module")
	if err := os.MkdirAll(module, 0o700); err != nil {
		b.Fatal(err)
	}
	src, err := os.ReadFile("testdata/bench-state/main.tf")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "main.tf"), src, 0o600); err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	run := func(args ...string) time.Duration {
		cmd := exec.Command(tf, args...)
		cmd.Dir, cmd.Env = module, env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
		d := time.Since(start)
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return d
	}
	fresh := func() {
		for _, p := range []string{".terraform", ".terraform.lock.hcl", "terraform.tfstate.backup"} {
			if err := os.RemoveAll(filepath.Join(module, p)); err != nil {
				b.Fatal(err)
			}
		}
	}
	run("init", "-input=false", "-no-color")
	run("apply", "-auto-approve", "-input=false", "-no-color")
	state, err := os.ReadFile(filepath.Join(module, "terraform.tfstate"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "terraform.tfstate"), tfbInflate(b, state, size), 0o600); err != nil {
		b.Fatal(err)
	}
	var total, version, init, apply []time.Duration
	cpu = 0
	for i := 0; i < b.N; i++ {
		for range tfbStateRuns {
			fresh()
			v := run("version", "-json")
			in := run("init", "-input=false", "-no-color")
			ap := run("apply", "-auto-approve", "-input=false", "-no-color")
			total, version, init, apply = append(total, v+in+ap), append(version, v), append(init, in), append(apply, ap)
		}
	}
	if st, err := os.Stat(filepath.Join(module, "terraform.tfstate")); err != nil || st.Size() < int64(size) {
		b.Fatalf("the state shrank: %v %v", st, err)
	}
	tfbReport(b, "", total)
	tfbReport(b, "version-", version)
	tfbReport(b, "init-", init)
	tfbReport(b, "apply-", apply)
	b.ReportMetric(cpu.Seconds()*1000/float64(len(total)), "terraform-cpu-ms/build")
	return tfbPercentile(total, 0.5)
}

// tfbInflate returns state (a Terraform state of the bench-state template) with the resource's input
// and output made long enough for the whole state, as terraform writes it, to be about size bytes,
// and its serial bumped.
func tfbInflate(b *testing.B, state []byte, size int) []byte {
	var s map[string]any
	if err := json.Unmarshal(state, &s); err != nil {
		b.Fatalf("state: %v\n%s", err, state)
	}
	attrs := s["resources"].([]any)[0].(map[string]any)["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
	set := func(n int) []byte {
		v := strings.Repeat("x", n)
		attrs["input"].(map[string]any)["value"] = v
		attrs["output"].(map[string]any)["value"] = v
		out, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		return append(out, '\n')
	}
	s["serial"] = s["serial"].(float64) + 1
	base := len(set(0))
	return set(max(0, (size-base+1)/2))
}

// tfbStages returns when each stage of a build's log began (as the provisioner stamped it), and the
// size of the state it read back.
func tfbStages(b *testing.B, c *sdk.Client, ws string, number int) (map[string]time.Time, int) {
	stages := map[string]time.Time{}
	stateBytes := -1
	re := regexp.MustCompile(`^Read the state \((\d+) bytes\)$`)
	err := c.BuildLogs(context.Background(), ws, number, 0, false, func(l sdk.BuildLog) error {
		if l.Stage != "" && l.Output == l.Stage {
			if _, ok := stages[l.Stage]; !ok {
				stages[l.Stage] = l.Time
			}
		}
		if m := re.FindStringSubmatch(l.Output); m != nil {
			stateBytes, _ = strconv.Atoi(m[1])
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{terraform.StageInit, terraform.StageApply, terraform.StageReadState} {
		if _, ok := stages[s]; !ok {
			b.Fatalf("build #%d of %s: no %q stage in its log (%v)", number, ws, s, stages)
		}
	}
	return stages, stateBytes
}

// --- the server, provisioners and terraform

// tfbBinary builds the binary once per test binary, as buildHangar does (sharing its result), for
// a benchmark.
func tfbBinary(b *testing.B) string {
	b.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hangar-cmd-test")
		if err != nil {
			buildErr = err.Error()
			return
		}
		builtBin = filepath.Join(dir, "hangar")
		build := exec.Command("go", "build", "-o", builtBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = err.Error() + "\n" + string(out)
		}
	})
	if buildErr != "" {
		b.Fatalf("build hangar: %s", buildErr)
	}
	return builtBin
}

// tfbTerraform is the real terraform.
func tfbTerraform(b *testing.B) string {
	p, err := exec.LookPath("terraform")
	if err != nil {
		b.Fatalf("these benchmarks run the real terraform: %v", err)
	}
	return p
}

// tfbTerraformEnv is the environment the runner gives terraform: no TF_* of ours, its own CLI
// config (disable_checkpoint), CHECKPOINT_DISABLE=1 and TF_IN_AUTOMATION=1.
func tfbTerraformEnv(b *testing.B, dir string) []string {
	rc := filepath.Join(dir, "terraform.rc")
	if err := os.WriteFile(rc, []byte("disable_checkpoint = true\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TF_") && !strings.HasPrefix(kv, "CHECKPOINT_DISABLE=") {
			env = append(env, kv)
		}
	}
	return append(env, "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
}

// tfbStore returns the --postgres-url for st: "" for SQLite, a new pgtest database for Postgres.
func tfbStore(b *testing.B, st string) string {
	if st == "postgres" {
		return pgtest.NewDatabase(b)
	}
	return ""
}

// tfbProc is a hangar process; its output is kept.
type tfbProc struct {
	pid    int
	stderr *syncBuffer
}

// problems counts the process's warnings and errors, and quotes the first few.
func (p *tfbProc) problems() string {
	var bad []string
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			bad = append(bad, l)
		}
	}
	if len(bad) == 0 {
		return "no warnings or errors in its log"
	}
	return fmt.Sprintf("%d warnings or errors in its log, first: %s", len(bad), strings.Join(bad[:min(len(bad), 3)], "\n"))
}

// tfbStartProc starts bin with args and env added to this process's environment; it is interrupted
// (and given 30 s to stop) when the benchmark ends. Its stdout is read and dropped.
func tfbStartProc(b *testing.B, bin string, args []string, env ...string) *tfbProc {
	p, lines := tfbStartProcOut(b, bin, args, env...)
	go func() {
		for lines.Scan() {
		}
	}()
	return p
}

// tfbStartProcOut is tfbStartProc that returns the process's stdout, for the caller to read to the
// end.
func tfbStartProcOut(b *testing.B, bin string, args []string, env ...string) (*tfbProc, *bufio.Scanner) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), append(templateTestEnv, unisolated)...), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p := &tfbProc{stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p.pid = cmd.Process.Pid
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if b.Failed() {
			b.Logf("%s %s log:\n%s", filepath.Base(bin), args[0], p.stderr.String())
		}
	})
	return p, bufio.NewScanner(stdout)
}

// tfbServer is a `hangar server` process and an API client logged in as its admin.
type tfbServer struct {
	*tfbProc
	url     string
	dataDir string
	c       *sdk.Client
}

// tfbStartServer starts `hangar server` on SQLite (postgresURL "") or Postgres, with provisioners
// in-process provisioners running terraform, and env added to its environment.
func tfbStartServer(b *testing.B, bin, postgresURL string, provisioners int, terraform string, env ...string) *tfbServer {
	dataDir := filepath.Join(b.TempDir(), "data")
	args := []string{"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--provisioners", strconv.Itoa(provisioners), "--terraform", terraform}
	if postgresURL != "" {
		args = append(args, "--postgres-url", postgresURL)
	}
	p, lines := tfbStartProcOut(b, bin, args, env...)
	var url, tokenFile string
	for lines.Scan() && (url == "" || tokenFile == "") {
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			url = m[1]
		}
		if m := regexp.MustCompile(`token is in (\S+) `).FindStringSubmatch(lines.Text()); m != nil {
			tokenFile = m[1]
		}
	}
	if url == "" || tokenFile == "" {
		b.Fatalf("server printed url %q token file %q; stderr:\n%s", url, tokenFile, p.stderr.String())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		b.Fatal(err)
	}
	c, err := sdk.New(url, strings.TrimSpace(string(tok)))
	if err != nil {
		b.Fatal(err)
	}
	return &tfbServer{tfbProc: p, url: url, dataDir: dataDir, c: c}
}

func tfbPushTemplate(b *testing.B, c *sdk.Client, name, dir string) {
	archive, err := tfmodule.Pack(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.PushTemplateVersion(context.Background(), name, sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		b.Fatal(err)
	}
}

// tfbWait waits for the build to end (tfbWaitSeen) and returns it, with when it was seen ended.
func tfbWait(b *testing.B, srv *tfbServer, ws string, number int) (sdk.Build, time.Time) {
	seen := tfbWaitSeen(b, srv, ws, number)
	return tfbBuild(b, srv, ws, number), seen
}

// tfbWaitSeen reads the workspace every tfbPoll until its build has ended (it is no longer
// Starting, Stopping or Terminating), and returns when it saw that.
func tfbWaitSeen(b *testing.B, srv *tfbServer, ws string, number int) time.Time {
	deadline := time.Now().Add(tfbBuildTimeout)
	for {
		w, err := srv.c.Workspace(context.Background(), ws)
		if err != nil {
			b.Fatal(err)
		}
		seen := time.Now()
		switch w.ActualState {
		case "Starting", "Stopping", "Terminating":
			if seen.After(deadline) {
				b.Fatalf("build #%d of %s still %s after %v", number, ws, w.ActualState, tfbBuildTimeout)
			}
			time.Sleep(tfbPoll)
		default:
			return seen
		}
	}
}

// tfbBuild reads a build, which must have succeeded.
func tfbBuild(b *testing.B, srv *tfbServer, ws string, number int) sdk.Build {
	bd, err := srv.c.Build(context.Background(), ws, number)
	if err != nil {
		b.Fatal(err)
	}
	if bd.Status != "succeeded" || bd.StartedAt == nil || bd.CompletedAt == nil {
		b.Fatalf("build #%d of %s: %+v; server: %s", number, ws, bd, srv.problems())
	}
	return bd
}

// tfbFollow follows a build's log to its end, as `hangar start --wait` does, and returns the
// build's final status.
func tfbFollow(c *sdk.Client, ws string, number int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tfbBuildTimeout)
	defer cancel()
	status := ""
	err := c.BuildLogs(ctx, ws, number, 0, true, func(l sdk.BuildLog) error {
		if l.End {
			status = l.Status
		}
		return nil
	})
	return status, err
}

// tfbProbe is the terraform the benchmarked processes run: a shell script that writes "<command>
// <working directory>" to a FIFO this process reads, then execs the real terraform.
type tfbProbe struct {
	path   string
	events chan tfbEvent
}

type tfbEvent struct {
	cmd, dir string
	at       time.Time
}

func tfbNewProbe(b *testing.B) *tfbProbe {
	dir := b.TempDir()
	fifo := filepath.Join(dir, "events")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	// Read and write: the FIFO never reads end-of-file, and a writer never blocks opening it.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	p := &tfbProbe{path: filepath.Join(dir, "terraform"), events: make(chan tfbEvent, 4096)}
	script := "#!/bin/sh\n" +
		"# Benchmark probe: tell the benchmark which terraform command starts where, then become terraform.\n" +
		"printf '%s %s\\n' \"$1\" \"$PWD\" >" + tfbShellQuote(fifo) + "\n" +
		"exec " + tfbShellQuote(tfbTerraform(b)) + " \"$@\"\n"
	if err := os.WriteFile(p.path, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			at := time.Now()
			cmd, dir, _ := strings.Cut(sc.Text(), " ")
			select {
			case p.events <- tfbEvent{cmd: cmd, dir: dir, at: at}:
			default: // nobody reads: dropped
			}
		}
	}()
	return p
}

func (p *tfbProbe) drain() {
	for {
		select {
		case <-p.events:
		default:
			return
		}
	}
}

// until returns when each terraform command run in a directory under root first started, once cmd
// has.
func (p *tfbProbe) until(b *testing.B, root, cmd string) map[string]time.Time {
	seen := map[string]time.Time{}
	timeout := time.After(tfbBuildTimeout)
	for {
		select {
		case ev := <-p.events:
			if !strings.HasPrefix(ev.dir, root) {
				continue
			}
			if _, ok := seen[ev.cmd]; !ok {
				seen[ev.cmd] = ev.at
			}
			if ev.cmd == cmd {
				return seen
			}
		case <-timeout:
			b.Fatalf("terraform %s did not start under %s within %v (saw %v)", cmd, root, tfbBuildTimeout, seen)
		}
	}
}

func tfbShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// --- CPU and memory

// tfbCPU is CPU time: a process's own, and that of its children it waited for (terraform, and
// everything terraform started, for a process running builds).
type tfbCPU struct{ own, children time.Duration }

// tfbCPUOf adds up the CPU time of the processes (/proc/PID/stat, in clock ticks of 10 ms).
func tfbCPUOf(pids []int) tfbCPU {
	var out tfbCPU
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// After the command: state (field 3), …, utime (14), stime (15), cutime (16), cstime (17).
		tick := func(i int) time.Duration {
			n, _ := strconv.ParseInt(fields[i-3], 10, 64)
			return time.Duration(n) * 10 * time.Millisecond
		}
		out.own += tick(14) + tick(15)
		out.children += tick(16) + tick(17)
	}
	return out
}

// tfbSys is the machine's CPU time from /proc/stat, in ticks.
type tfbSys struct{ busy, total uint64 }

func tfbSystemCPU() tfbSys {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return tfbSys{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var out tfbSys
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		out.total += n
		if i != 3 && i != 4 { // idle, iowait
			out.busy += n
		}
	}
	return out
}

// busyFraction is the share of the machine's CPU time that was busy since before.
func (s tfbSys) busyFraction(before tfbSys) float64 {
	if s.total == before.total {
		return 0
	}
	return float64(s.busy-before.busy) / float64(s.total-before.total)
}

// tfbStatusKB reads a kB field of /proc/PID/status (VmRSS, VmHWM).
func tfbStatusKB(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return n
		}
	}
	return 0
}

// --- reporting

// tfbPercentile is the nearest-rank percentile p (0 < p ≤ 1) of ds; 0 for none.
func tfbPercentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func tfbMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tfbReport reports p50, p95 and max in milliseconds, with prefix before each unit, logs the
// samples, and suppresses ns/op.
func tfbReport(b *testing.B, prefix string, ds []time.Duration) {
	b.ReportMetric(tfbMs(tfbPercentile(ds, 0.5)), prefix+"p50-ms")
	b.ReportMetric(tfbMs(tfbPercentile(ds, 0.95)), prefix+"p95-ms")
	b.ReportMetric(tfbMs(slices.Max(append([]time.Duration{math.MinInt64}, ds...))), prefix+"max-ms")
	b.ReportMetric(0, "ns/op")
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(100 * time.Microsecond).String()
	}
	b.Logf("%s%d samples: %s", prefix, len(ds), strings.Join(s, " "))
}
