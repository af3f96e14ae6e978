package loadcmd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// TestFaultsLoseNoAcknowledgedChange is the short run of the fault harness (the long one is run by
// hand: docs/benchmarks.md, "Faults"): the built hangar binary as two server replicas on a
// PostgreSQL of the test's own, the simulated agent in a process of its own and the real
// provisioner with the real terraform, under users' changes; kill -9 of a replica, of the agent,
// of the provisioner while a build runs, and an immediate restart of PostgreSQL. After each, every
// workspace converges and no acknowledged change is lost.
func TestFaultsLoseNoAcknowledgedChange(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hangar")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/hangar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hangar: %v\n%s", err, out)
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("the provisioner needs terraform on PATH: %v", err)
	}
	// The bounds are against the wall clock, and a busy machine is slow: a run takes about 30 s
	// alone, but other packages' tests may share the CPUs. The whole run may take what go test
	// leaves it, less a minute to stop and remove what it started (PostgreSQL, the replicas); each
	// wait for convergence 3 minutes (a build whose provisioner was killed between claiming it and
	// starting terraform is failed by the server only 30 s after the claim, at the provisioner's
	// next look for work, which may long-poll 30 s: tfbackend's abandoned).
	budget := 15 * time.Minute
	if d, ok := t.Deadline(); ok {
		budget = time.Until(d) - time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	// The run's files (the children's logs, the database) are kept when the test fails, and the
	// end of each log is printed: a failure that comes once in many runs must say why.
	dir, err := os.MkdirTemp("", "hangar-faults-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !t.Failed() {
			os.RemoveAll(dir)
			return
		}
		for _, name := range []string{"provisioner.log", "agent.log", "server-0.log", "server-1.log"} {
			t.Logf("---- the end of %s:\n%s", name, logTail(filepath.Join(dir, name), 60))
		}
		t.Logf("the run's files are kept in %s", dir)
	}()
	var log strings.Builder
	rep, err := RunFaults(ctx, FaultConfig{Binary: bin, Terraform: tf, Workspaces: 30, TFWorkspaces: 2, ChangesPerSecond: 20,
		Settle: 2 * time.Second, Down: 500 * time.Millisecond, ConvergeTimeout: 3 * time.Minute, Dir: dir, Log: &log})
	t.Logf("%s\n%s", log.String(), rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(AllFaults) {
		t.Fatalf("%d faults ran, want %d", len(rep.Results), len(AllFaults))
	}
	for _, f := range rep.Results {
		if len(f.Lost) > 0 {
			t.Errorf("%s: %d acknowledged changes lost: %v", f.Fault, len(f.Lost), f.Lost)
		}
		if f.Acked == 0 || f.Back <= 0 || f.Converged < f.Back {
			t.Errorf("%s: %d changes acknowledged, back after %v, converged after %v", f.Fault, f.Acked, f.Back, f.Converged)
		}
		if f.Fault == FaultProvisioner && (f.InFlight == 0 || f.Adopted != f.InFlight) {
			t.Errorf("provisioner: killed with %d builds in flight, %d adopted by its restart", f.InFlight, f.Adopted)
		}
	}
}

// logTail is the last n lines of the file at path (or why it cannot be read).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestFaultsLostDetection: the check finds a desired state that is neither the last acknowledged
// one nor one sent without an answer, and a workspace gone; a change in doubt that was made, or not,
// is no loss.
func TestFaultsLostDetection(t *testing.T) {
	r := &faultRun{wss: []*faultWorkspace{
		{ref: "dev/a", acked: "Stopped"},
		{ref: "dev/b", acked: "Stopped", inDoubt: "Running"},
		{ref: "dev/c", acked: "Running", inDoubt: "Stopped"},
		{ref: "dev/d", acked: "Running"},
		{ref: "dev/e", acked: "Running"},
	}}
	got := r.lost([]sdk.Workspace{
		{Owner: "dev", Name: "a", DesiredState: "Running"},
		{Owner: "dev", Name: "b", DesiredState: "Running"},
		{Owner: "dev", Name: "c", DesiredState: "Running"},
		{Owner: "dev", Name: "d", DesiredState: "Running"},
	})
	want := []string{"dev/a: acknowledged Stopped, has Running", "dev/e: gone"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lost = %q, want %q", got, want)
	}
	if r.wss[1].acked != "Running" || r.wss[1].inDoubt != "" {
		t.Errorf("a change in doubt found made is not settled: %+v", r.wss[1])
	}
}

// TestFaultsInFlight: the builds the provisioner fault counts in flight are those it saw running
// terraform that the server still has unfinished after the kill — by build number, so that a
// build that ended just before the kill is not counted, even when a user's change queued the
// workspace's next build meanwhile (the workspace is then Starting again, but that build was never
// the killed provisioner's to adopt). A build that only logged "Setting up" is no candidate: its
// work directory may not exist yet.
func TestFaultsInFlight(t *testing.T) {
	seen := []buildRef{{"dev/tf-00", 3}, {"dev/tf-01", 5}, {"dev/tf-02", 2}}
	status := map[buildRef]string{
		{"dev/tf-00", 3}: "running",   // killed during its apply
		{"dev/tf-01", 5}: "succeeded", // ended before the kill; #6 may be pending now: not looked at
		{"dev/tf-01", 6}: "pending",
		{"dev/tf-02", 2}: "canceling", // still the killed provisioner's
	}
	got, err := unfinished(seen, func(b buildRef) (string, error) { return status[b], nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := []buildRef{{"dev/tf-00", 3}, {"dev/tf-02", 2}}; !slices.Equal(got, want) {
		t.Fatalf("in flight = %v, want %v", got, want)
	}
	if _, err := unfinished(seen, func(buildRef) (string, error) { return "", errors.New("replica down") }); err == nil {
		t.Fatal("a status that could not be read was taken for an ended build")
	}
	for stage, want := range map[string]bool{"Setting up": false, "": false, "Recovering": false,
		"Initializing Terraform": true, "Applying": true, "Destroying": true} {
		if terraformStage(stage) != want {
			t.Errorf("terraformStage(%q) = %v, want %v", stage, !want, want)
		}
	}
}
