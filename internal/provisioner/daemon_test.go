package provisioner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/store"
)

// fakeCoord hands out one job and records what the daemon reports. Its heartbeat blocks until the
// test cancels the build (or the call's context ends), as the server's long-poll does.
type fakeCoord struct {
	mu         sync.Mutex
	job        *protocol.ProvisionerJob
	lines      []protocol.LogLine
	finished   chan build.Outcome
	finishErrs []error // returned by the first Finish calls, in order
	cancel     chan struct{}
	notOwner   bool
	idle       chan struct{} // closed when the daemon asks for work again after its job
}

func (f *fakeCoord) Acquire(ctx context.Context, _ string, _ time.Duration) (*protocol.ProvisionerJob, error) {
	f.mu.Lock()
	j := f.job
	f.job = nil
	idle := f.idle
	if j != nil {
		idle = nil
	} else {
		f.idle = nil
	}
	f.mu.Unlock()
	if j == nil && idle != nil {
		close(idle)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if j == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return j, nil
}

func (f *fakeCoord) Heartbeat(ctx context.Context, _, _ string, _ time.Duration) (bool, error) {
	select {
	case <-f.cancel:
		if f.notOwner {
			return false, fmt.Errorf("job: %w", store.ErrNotOwner)
		}
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (f *fakeCoord) AppendLogs(_ context.Context, _, _ string, lines []protocol.LogLine) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines, lines...)
	return nil
}

func (f *fakeCoord) Finish(_ context.Context, _, _ string, o build.Outcome) error {
	f.mu.Lock()
	if len(f.finishErrs) > 0 {
		err := f.finishErrs[0]
		f.finishErrs = f.finishErrs[1:]
		f.mu.Unlock()
		return err
	}
	f.mu.Unlock()
	f.finished <- o
	return nil
}

// fakeRunner logs a few lines, then waits for the cancel (or returns at once when quick).
type fakeRunner struct {
	quick   bool
	started chan struct{}

	mu            sync.Mutex
	leftoverFails int // the first Leftovers calls that fail
	leftoverCalls int
	leftovers     []string         // runs a previous daemon left
	recovered     terraform.Result // what Recover finds of each
}

func (r *fakeRunner) Run(_ context.Context, cancel <-chan struct{}, req terraform.Request) terraform.Result {
	for i := 0; i < 3; i++ {
		req.Log(terraform.Line{Stage: "Applying", Level: "info", Output: fmt.Sprintf("line %d", i)})
	}
	close(r.started)
	if r.quick {
		return terraform.Result{State: []byte(`{"done":1}`)}
	}
	<-cancel
	return terraform.Result{Canceled: true, State: []byte(`{"partial":1}`), Err: errors.New("interrupted")}
}

func (r *fakeRunner) Leftovers() ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leftoverCalls++
	if r.leftoverCalls <= r.leftoverFails {
		return nil, errors.New("permission denied")
	}
	return r.leftovers, nil
}

func (r *fakeRunner) Recover(context.Context, <-chan struct{}, string, func(terraform.Line)) (terraform.Result, bool) {
	return r.recovered, r.leftovers != nil
}

func (r *fakeRunner) Remove(string) error { return nil }

func now(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

func newDaemon(f *fakeCoord, r *fakeRunner) *Daemon {
	return &Daemon{Coord: f, Runner: r, WorkerID: "w1", After: now, FlushEvery: time.Hour}
}

func newFake() *fakeCoord {
	return &fakeCoord{job: &protocol.ProvisionerJob{ID: "j1", Transition: "start"}, finished: make(chan build.Outcome, 1), cancel: make(chan struct{})}
}

func TestDaemonReportsSuccessAndLogsInOrder(t *testing.T) {
	f := newFake()
	f.finishErrs = []error{errors.New("server down"), errors.New("server down")} // retried
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = newDaemon(f, &fakeRunner{quick: true, started: make(chan struct{})}).Run(ctx) }()
	o := <-f.finished
	if o.Error != "" || o.Canceled || string(o.State) != `{"done":1}` {
		t.Fatalf("outcome %+v", o)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lines) != 3 || f.lines[0].Output != "line 0" || f.lines[2].Output != "line 2" || f.lines[0].Time.IsZero() {
		t.Fatalf("log lines %+v", f.lines)
	}
}

// A cancel the heartbeat reports interrupts the run, and the outcome is a cancel with the state.
func TestDaemonCancel(t *testing.T) {
	f := newFake()
	r := &fakeRunner{started: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = newDaemon(f, r).Run(ctx) }()
	<-r.started
	close(f.cancel)
	o := <-f.finished
	if !o.Canceled || string(o.State) != `{"partial":1}` {
		t.Fatalf("outcome %+v", o)
	}
}

// A daemon that shuts down interrupts its run and reports a failure (not a user's cancel) with the
// state Terraform wrote.
func TestDaemonShutdownIsAFailureWithState(t *testing.T) {
	f := newFake()
	r := &fakeRunner{started: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = newDaemon(f, r).Run(ctx); close(done) }()
	<-r.started
	stop()
	o := <-f.finished
	<-done
	if o.Canceled || o.Error == "" || string(o.State) != `{"partial":1}` {
		t.Fatalf("outcome %+v", o)
	}
}

// When the job is no longer the daemon's (the reaper failed it), Terraform is interrupted and the
// refused report ends the job.
func TestDaemonStopsWhenTheJobIsTaken(t *testing.T) {
	f := newFake()
	f.notOwner = true
	idle := make(chan struct{})
	f.idle = idle
	f.finishErrs = []error{fmt.Errorf("x: %w", store.ErrNotOwner)}
	r := &fakeRunner{started: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	d := newDaemon(f, r)
	d.UnreportedDir = t.TempDir()
	go func() { _ = d.Run(ctx) }()
	<-r.started
	close(f.cancel)
	// Finish was refused (not our job): the daemon asks for new work without reporting again,
	// and keeps the state Terraform wrote for an operator.
	<-idle
	if len(f.finished) != 0 {
		t.Fatalf("reported after the refusal: %+v", <-f.finished)
	}
	if b, err := os.ReadFile(filepath.Join(d.UnreportedDir, "j1.tfstate")); err != nil || string(b) != `{"partial":1}` {
		t.Fatalf("unreported state: %q %v", b, err)
	}
}

// acquireWatch records how many times the runner was asked for leftovers when the daemon first
// asks for work.
type acquireWatch struct {
	*fakeCoord
	r     *fakeRunner
	first chan int
}

func (a *acquireWatch) Acquire(ctx context.Context, worker string, wait time.Duration) (*protocol.ProvisionerJob, error) {
	a.r.mu.Lock()
	n := a.r.leftoverCalls
	a.r.mu.Unlock()
	select {
	case a.first <- n:
	default:
	}
	return a.fakeCoord.Acquire(ctx, worker, wait)
}

// TestDaemonTakesNoJobBeforeItLooksForLeftovers: a daemon that cannot read its work directory
// asks for no job (the server would take a job it still holds for one it lost before Terraform
// started, and queue it again, while a terraform it left may still run): it tries again until it
// can, then works.
func TestDaemonTakesNoJobBeforeItLooksForLeftovers(t *testing.T) {
	f := newFake()
	r := &fakeRunner{quick: true, started: make(chan struct{}), leftoverFails: 3}
	a := &acquireWatch{fakeCoord: f, r: r, first: make(chan int, 1)}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	d := newDaemon(f, r)
	d.Coord = a
	go func() { _ = d.Run(ctx) }()
	if n := <-a.first; n != 4 {
		t.Fatalf("the daemon asked for work after %d looks for leftovers, want 4 (3 failed)", n)
	}
	if o := <-f.finished; o.Error != "" {
		t.Fatalf("the job after the leftovers: %+v", o)
	}
}

// TestDaemonReportsAnAdoptedRunThatNeverStarted: a run left by a previous daemon that never
// reached terraform's apply or destroy is reported with NothingRan (the server queues the build
// again), with the error and the state it started from.
func TestDaemonReportsAnAdoptedRunThatNeverStarted(t *testing.T) {
	f := newFake()
	f.job = nil
	r := &fakeRunner{started: make(chan struct{}), leftovers: []string{"j0"},
		recovered: terraform.Result{NotStarted: true, Err: errors.New("stopped before terraform applied anything"), State: []byte(`{"serial":3}`)}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = newDaemon(f, r).Run(ctx) }()
	if o := <-f.finished; !o.NothingRan || o.Error != "stopped before terraform applied anything" || string(o.State) != `{"serial":3}` || o.Canceled {
		t.Fatalf("the adopted run's outcome %+v", o)
	}
}
