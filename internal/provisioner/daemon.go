// Package provisioner is `hangar provisioner`: a daemon that claims workspace builds from the
// server, runs Terraform for each (package terraform), streams the log, heartbeats (and learns of a
// cancel from the answer), and reports the outcome with the state Terraform wrote
// (../shared/seeds/terraform-state-management.md). `hangar server` runs one in process by default,
// through the same Coordinator interface the HTTP client implements.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/internal/backoff"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// Coordinator is the server's side of the protocol (protocol/provisioner.go): tfbackend.Service in
// process, Client over HTTP.
type Coordinator interface {
	// Acquire claims a job, waiting up to wait for one; nil when none came.
	Acquire(ctx context.Context, workerID string, wait time.Duration) (*protocol.ProvisionerJob, error)
	// Heartbeat records that the worker runs the job and waits up to wait for a cancel.
	Heartbeat(ctx context.Context, jobID, workerID string, wait time.Duration) (canceled bool, err error)
	AppendLogs(ctx context.Context, jobID, workerID string, lines []protocol.LogLine) error
	Finish(ctx context.Context, jobID, workerID string, o build.Outcome) error
}

// Runner runs Terraform for one build (terraform.Runner), keeping each run's work directory until
// the daemon has reported the outcome (KeepWorkDir), so that a daemon killed in between adopts the
// run when it comes back.
type Runner interface {
	Run(ctx context.Context, cancel <-chan struct{}, req terraform.Request) terraform.Result
	// Leftovers lists the runs a previous daemon left; Recover waits for and adopts one.
	Leftovers() ([]string, error)
	Recover(ctx context.Context, cancel <-chan struct{}, jobID string, log func(terraform.Line)) (terraform.Result, bool)
	Remove(jobID string) error
}

// Daemon claims and runs jobs one at a time until its context ends.
type Daemon struct {
	Coord    Coordinator
	Runner   Runner
	WorkerID string
	Logger   *slog.Logger
	// After makes timers (backoffs, log flushes); default time.After.
	After func(time.Duration) <-chan time.Time
	// AcquireWait and HeartbeatWait bound one long-poll (defaults 30 s and 10 s).
	AcquireWait, HeartbeatWait time.Duration
	// FlushEvery is how often buffered log lines are sent (default 200 ms).
	FlushEvery time.Duration
	// Now stamps log lines (default time.Now).
	Now func() time.Time
	// UnreportedDir keeps the state of builds the server no longer takes from this daemon ("":
	// not kept).
	UnreportedDir string
}

func (d *Daemon) defaults() {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.After == nil {
		d.After = time.After
	}
	if d.AcquireWait <= 0 {
		d.AcquireWait = 30 * time.Second
	}
	if d.HeartbeatWait <= 0 {
		d.HeartbeatWait = 10 * time.Second
	}
	if d.FlushEvery <= 0 {
		d.FlushEvery = 200 * time.Millisecond
	}
	if d.Now == nil {
		d.Now = time.Now
	}
}

// retry is the backoff of the daemon's retries (acquire, heartbeat, reports).
var retry = backoff.Policy{Base: 250 * time.Millisecond, Max: 30 * time.Second}

// Run claims and runs jobs until ctx ends. A job running when ctx ends is interrupted like a
// cancel, and its outcome (with whatever state Terraform wrote) is still reported.
func (d *Daemon) Run(ctx context.Context) error {
	d.defaults()
	d.Logger.Info("provisioner ready", "worker", d.WorkerID)
	// No job is asked for until the runs a previous daemon left are adopted: the server takes a
	// job this worker still holds when it asks for work for one it lost before Terraform started,
	// and queues it again (tfbackend.Service.Acquire).
	for failures := 1; !d.recoverLeftovers(ctx); failures++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.After(retry.Delay(failures)):
		}
	}
	failures := 0
	for ctx.Err() == nil {
		job, err := d.Coord.Acquire(ctx, d.WorkerID, d.AcquireWait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			wait := retry.Delay(failures)
			d.Logger.Warn("cannot acquire a job; retrying", "err", err, "retry_in", wait)
			select {
			case <-ctx.Done():
			case <-d.After(wait):
			}
			continue
		}
		failures = 0
		if job != nil {
			d.runJob(ctx, job)
		}
	}
	return ctx.Err()
}

// recoverLeftovers adopts the runs a previous daemon of this worker left (it was killed, or its
// machine stopped): it waits for the terraform still running, then reports the outcome with the
// state terraform wrote, so that no resource it created is forgotten. It reports false when it
// could not look for them (the daemon then asks for no job: it tries again).
func (d *Daemon) recoverLeftovers(ctx context.Context) bool {
	ids, err := d.Runner.Leftovers()
	if err != nil {
		d.Logger.Error("cannot look for builds a previous provisioner left; no build is taken until it can", "err", err)
		return false
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return true
		}
		log := d.Logger.With("job", id)
		log.Warn("adopting a build a previous provisioner left unfinished")
		d.execute(ctx, id, log, func(ctx context.Context, cancel <-chan struct{}, logf func(terraform.Line)) terraform.Result {
			res, found := d.Runner.Recover(ctx, cancel, id, logf)
			if !found {
				// Reported as a failure, so that the state the build started from is kept.
				return terraform.Result{Err: errors.New("the provisioner restarted and found no trace of this build's terraform run")}
			}
			return res
		})
	}
	return true
}

func (d *Daemon) runJob(ctx context.Context, job *protocol.ProvisionerJob) {
	log := d.Logger.With("job", job.ID, "workspace", job.WorkspaceName, "build", job.BuildNumber, "transition", job.Transition)
	log.Info("running build")
	d.execute(ctx, job.ID, log, func(ctx context.Context, cancel <-chan struct{}, logf func(terraform.Line)) terraform.Result {
		return d.Runner.Run(ctx, cancel, terraform.Request{
			JobID: job.ID, Transition: build.Transition(job.Transition), Archive: job.Archive, State: job.State,
			Variables: job.Variables, Env: tfprovider.JobEnv(job), LogLevel: job.LogLevel, Log: logf,
		})
	})
}

// execute runs one job's terraform (run) while heartbeating and shipping its log, reports the
// outcome, and then removes its work directory.
func (d *Daemon) execute(ctx context.Context, jobID string, log *slog.Logger, run func(ctx context.Context, cancel <-chan struct{}, logf func(terraform.Line)) terraform.Result) {
	job := struct{ ID string }{jobID}
	// The job's calls outlive ctx by a little: the outcome of an interrupted run is still reported.
	jctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()

	cancel := make(chan struct{})
	var cancelOnce sync.Once
	var userCanceled atomic.Bool // the build was canceled (or taken away), not the daemon stopped
	cancelRun := func() { cancelOnce.Do(func() { close(cancel) }) }
	go func() {
		select {
		case <-ctx.Done():
			cancelRun()
		case <-jctx.Done():
		}
	}()

	// ended is set once the run is over and its outcome about to be reported: from then on the
	// server may answer a heartbeat with "not the owner" because the outcome just ended the job.
	var ended atomic.Bool
	var hb sync.WaitGroup
	hb.Add(1)
	go func() {
		defer hb.Done()
		d.heartbeat(jctx, job.ID, log, ended.Load, func() { userCanceled.Store(true); cancelRun() })
	}()

	logs := newShipper(d, job.ID, log)
	go logs.run(jctx)

	res := run(jctx, cancel, logs.add)
	logs.close()

	o := build.Outcome{Canceled: res.Canceled && userCanceled.Load(), State: res.State, NothingRan: res.NotStarted}
	if res.Err != nil {
		o.Error = res.Err.Error()
	}
	if ctx.Err() != nil && !userCanceled.Load() && (res.Err != nil || res.Canceled) {
		// Stopped by the daemon's own shutdown: a failure, not the user's cancel; the state
		// Terraform wrote when interrupted is kept all the same (build.Finish on failure).
		o.Error = "the provisioner shut down during the build; Terraform was interrupted and the state it wrote is kept: " + o.Error
	}
	// The heartbeat goes on until the outcome is reported: a server that is slow to take it (or
	// down for a while) must not reap the job meanwhile.
	ended.Store(true)
	verdict := d.finish(ctx, job.ID, o, log)
	stop()
	hb.Wait()
	switch verdict {
	case reportPending:
		return // the work directory stays; the next start of this daemon reports it
	case reportRefused:
		d.keepUnreported(job.ID, o.State, log)
	}
	if err := d.Runner.Remove(job.ID); err != nil {
		log.Warn("cannot remove the build's work directory", "err", err)
	}
}

// keepUnreported saves the state of a build the server no longer takes from this daemon (the
// reaper failed it while the daemon was away), so that an operator can restore it; nothing
// Terraform wrote is thrown away.
func (d *Daemon) keepUnreported(jobID string, state []byte, log *slog.Logger) {
	if state == nil || d.UnreportedDir == "" {
		return
	}
	path := filepath.Join(d.UnreportedDir, jobID+".tfstate")
	if err := os.MkdirAll(d.UnreportedDir, 0o700); err == nil {
		err = os.WriteFile(path, state, 0o600)
		if err == nil {
			log.Error("the server no longer takes this build's outcome (it failed the build while this provisioner was away); "+
				"the state Terraform wrote is saved: compare it with the workspace's and restore it with `hangar state push WORKSPACE FILE --no-build` if it is newer",
				"file", path)
			return
		}
	}
	log.Error("the server no longer takes this build's outcome, and its state could not be saved", "dir", d.UnreportedDir)
}

// heartbeat keeps the job alive until ctx ends — through a cancel and the report of the outcome —
// and calls onCancel when the build is canceled, or when the job is no longer this worker's (the
// reaper failed it: Terraform must stop).
//
// ended says the run is over and its outcome is being reported. A heartbeat that then hears "not
// the owner" has most likely raced the report: the server ended the job with the outcome just
// before answering the heartbeat (or while it long-polled). That is no error and nothing is left to
// interrupt, so it is logged at debug level; were the job really taken away (reaped before the
// report arrived), finish says so when the server refuses the outcome.
func (d *Daemon) heartbeat(ctx context.Context, jobID string, log *slog.Logger, ended func() bool, onCancel func()) {
	failures := 0
	canceled := false
	for ctx.Err() == nil {
		wait := d.HeartbeatWait
		c, err := d.Coord.Heartbeat(ctx, jobID, d.WorkerID, wait)
		if errors.Is(err, store.ErrNotOwner) && ended() {
			// Said even when the report has already returned and ctx ended meanwhile, so that
			// the log tells why the heartbeats stopped.
			log.Debug("heartbeat: the job has ended (its outcome is being reported); heartbeats stop", "err", err)
			return
		}
		if ctx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, store.ErrNotOwner):
			log.Warn("the job is no longer ours (failed by the reaper?); interrupting Terraform")
			onCancel()
			return
		case err != nil:
			failures++
			log.Warn("heartbeat failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-d.After(retry.Delay(failures)):
			}
		case c:
			failures = 0
			if !canceled {
				canceled = true
				log.Info("build canceled; interrupting Terraform")
				onCancel()
			}
			// The server answers a canceled job at once: pace the heartbeats that keep it alive
			// while Terraform stops.
			select {
			case <-ctx.Done():
				return
			case <-d.After(wait):
			}
		default:
			failures = 0
		}
	}
}

type reportVerdict int

const (
	reportTaken   reportVerdict = iota // the server recorded the outcome
	reportRefused                      // the job is not ours any more, or unknown
	reportPending                      // not reported (the daemon is stopping): keep the work directory
)

// finish reports the outcome, retrying until the server takes it (its state must not be lost) or
// refuses it. It gives up only when the daemon stops (after a few tries): the work directory then
// stays, and the next start reports it. The daemon takes no new job meanwhile, so the server never
// mistakes this job for one the daemon lost.
func (d *Daemon) finish(ctx context.Context, jobID string, o build.Outcome, log *slog.Logger) reportVerdict {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	for attempt := 0; ; attempt++ {
		err := d.Coord.Finish(fctx, jobID, d.WorkerID, o)
		switch {
		case err == nil:
			log.Info("build reported", "canceled", o.Canceled, "failed", o.Error != "", "state_bytes", len(o.State))
			return reportTaken
		case errors.Is(err, store.ErrNotOwner):
			log.Warn("the server refused the outcome: the job is no longer ours", "err", err)
			return reportRefused
		case errors.Is(err, store.ErrNotFound):
			log.Warn("the server does not know the job (deleted?)", "err", err)
			return reportRefused
		case ctx.Err() != nil && attempt >= 2:
			log.Error("stopping before the build's outcome could be reported; its work directory (with the state) is kept and reported at the next start", "err", err)
			return reportPending
		}
		wait := retry.Delay(attempt)
		log.Warn("cannot report the build's outcome; retrying", "err", err, "retry_in", wait)
		select {
		case <-fctx.Done():
		case <-d.After(wait):
		}
	}
}

// shipper batches log lines and sends them in order.
type shipper struct {
	d     *Daemon
	jobID string
	log   *slog.Logger

	mu      sync.Mutex
	buf     []protocol.LogLine
	kick    chan struct{}
	closing chan struct{}
	done    chan struct{}
}

func newShipper(d *Daemon, jobID string, log *slog.Logger) *shipper {
	return &shipper{d: d, jobID: jobID, log: log, kick: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
}

func (s *shipper) add(l terraform.Line) {
	s.mu.Lock()
	s.buf = append(s.buf, protocol.LogLine{Time: s.d.Now().UTC(), Stage: l.Stage, Level: l.Level, Output: l.Output})
	full := len(s.buf) >= protocol.MaxLogLinesPerRequest/4
	s.mu.Unlock()
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *shipper) run(ctx context.Context) {
	defer close(s.done)
	for {
		closing := false
		select {
		case <-s.closing:
			closing = true
		case <-s.kick:
		case <-s.d.After(s.d.FlushEvery):
		}
		s.flush(ctx)
		if closing {
			return
		}
	}
}

func (s *shipper) flush(ctx context.Context) {
	s.mu.Lock()
	lines := s.buf
	s.buf = nil
	s.mu.Unlock()
	for len(lines) > 0 {
		n := min(len(lines), protocol.MaxLogLinesPerRequest)
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if err = s.d.Coord.AppendLogs(ctx, s.jobID, s.d.WorkerID, lines[:n]); err == nil || errors.Is(err, store.ErrNotOwner) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-s.d.After(retry.Delay(attempt)):
			}
		}
		if err != nil {
			s.log.Warn("dropped build log lines", "lines", n, "err", err)
		}
		lines = lines[n:]
	}
}

// close sends what is buffered and stops.
func (s *shipper) close() {
	close(s.closing)
	<-s.done
}

// String describes the daemon for logs.
func (d *Daemon) String() string { return fmt.Sprintf("provisioner %s", d.WorkerID) }
