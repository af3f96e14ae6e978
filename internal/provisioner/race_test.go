package provisioner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// raceCoord is the real builder (on a real SQLite store) with one interleaving forced: the server
// answers the heartbeat the outcome ended with "not the owner" before the daemon hears that its
// outcome was taken — as happens over HTTP when the two answers cross.
type raceCoord struct {
	*tfbackend.Service
	heartbeats chan error // the result of each heartbeat
	acquired   int
	idle       chan struct{} // closed when the daemon asks for work again after its job
}

func (c *raceCoord) Acquire(ctx context.Context, workerID string, wait time.Duration) (*protocol.ProvisionerJob, error) {
	c.acquired++
	if c.acquired == 2 {
		close(c.idle)
	}
	return c.Service.Acquire(ctx, workerID, wait)
}

func (c *raceCoord) Heartbeat(ctx context.Context, jobID, workerID string, wait time.Duration) (bool, error) {
	canceled, err := c.Service.Heartbeat(ctx, jobID, workerID, wait)
	c.heartbeats <- err
	return canceled, err
}

func (c *raceCoord) Finish(ctx context.Context, jobID, workerID string, o build.Outcome) error {
	err := c.Service.Finish(ctx, jobID, workerID, o)
	for hb := range c.heartbeats {
		if errors.Is(hb, store.ErrNotOwner) {
			break
		}
	}
	return err
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A heartbeat that races the report of the build's outcome (the server ended the job, so it answers
// "not the owner") is not logged as a warning: the build was reported, nothing was taken away.
func TestHeartbeatRacingTheReportIsNotAWarning(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, t.TempDir()+"/hangar.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := storetest.NewBuildFixture(t, st, "race")
	_, b := f.Create(t, st, "w", time.Now())

	var logs syncLog
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	coord := &raceCoord{Service: tfbackend.New(tfbackend.Options{Store: st, Logger: logger}), heartbeats: make(chan error, 100), idle: make(chan struct{})}
	r := &fakeRunner{quick: true, started: make(chan struct{})}
	d := &Daemon{Coord: coord, Runner: r, WorkerID: "w1", Logger: logger, FlushEvery: time.Hour, HeartbeatWait: time.Minute}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(dctx); close(done) }()
	select {
	case <-coord.idle:
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing assertion
		t.Fatalf("the daemon never finished its job; log:\n%s", logs.String())
	}
	stop()
	<-done

	got, err := st.BuildByNumber(ctx, b.WorkspaceID, 1)
	if err != nil || got.Job.Status() != build.Succeeded {
		t.Fatalf("build after the run: %s %v", got.Job.Status(), err)
	}
	out := logs.String()
	if !strings.Contains(out, "build reported") {
		t.Fatalf("the daemon did not report the build:\n%s", out)
	}
	if strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") || strings.Contains(out, "no longer ours") {
		t.Errorf("the race of a heartbeat and the report was logged as a problem:\n%s", out)
	}
	if !strings.Contains(out, "heartbeat: the job has ended") {
		t.Errorf("the heartbeat that raced the report left no debug line:\n%s", out)
	}
}
