package postgres_test

import (
	"context"
	"database/sql"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/internal/store/storetest"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var t0 = time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func open(t *testing.T, url string) *sqlstore.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestReplicaNotifications: a change through one store (replica) wakes a subscriber of another
// store on the same database, through LISTEN/NOTIFY, and only the subscribers of the agent changed.
func TestReplicaNotifications(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	a, b := open(t, url), open(t, url)
	f := storetest.NewFixture(t, a, "r")
	other := storetest.NewFixture(t, a, "o")
	ch, cancel := b.SubscribeAgent(f.Agent.ID)
	defer cancel()
	otherCh, otherCancel := b.SubscribeAgent(other.Agent.ID)
	defer otherCancel()
	// b's barrier: its deliveries come in commit order, whoever committed.
	settle := storetest.Settler(t, b)

	f.Create(t, a, f.Workspace("w"))
	if !storetest.Woken(ch) {
		t.Fatal("a creation through replica a did not wake replica b's subscriber")
	}
	if settle(); !storetest.Quiet(otherCh) {
		t.Fatal("a creation for one agent woke another agent's subscriber on replica b")
	}
	if _, err := a.UpdateWorkspace(ctx, f.Ref("w"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.DesiredStateUpdatedAt = workspace.Stopped, w.DesiredStateUpdatedAt.Add(time.Second)
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !storetest.Woken(ch) {
		t.Fatal("a stop through replica a did not wake replica b's subscriber")
	}
	if settle(); !storetest.Quiet(otherCh) || !storetest.Quiet(ch) {
		t.Fatal("spurious wake-ups on replica b")
	}
}

// TestListenerReconnects: when the LISTEN connection is killed, the store reconnects, wakes every
// subscriber once (notifications sent meanwhile are lost), and delivers notifications again.
func TestListenerReconnects(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, writer := open(t, url), open(t, url)
	f := storetest.NewFixture(t, s, "rc")
	ch, cancel := s.SubscribeAgent(f.Agent.ID)
	defer cancel()

	// Kill s's listener (writer's, too: both are named alike; which one is which does not matter,
	// s's is among them).
	var killed int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, postgres.ListenerApplicationName).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Fatalf("terminated %d listener connections, want 2 (one per store)", killed)
	}
	if !storetest.Woken(ch) {
		t.Fatal("the subscriber was not woken after the listener reconnected")
	}
	// Listening again: another replica's change arrives.
	f.Create(t, writer, f.Workspace("after"))
	if !storetest.Woken(ch) {
		t.Fatal("a change after the reconnect did not arrive")
	}
}

// TestCloseStopsListener: Close ends the listener's goroutine (and so its connection).
func TestCloseStopsListener(t *testing.T) {
	url := pgtest.NewDatabase(t)
	for range 3 {
		s, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		_, cancel := s.SubscribeAgent("x")
		cancel()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "internal/store/postgres.listen") || strings.Contains(g, "internal/store/sqlstore.") {
			t.Errorf("a goroutine of the store outlives Close:\n%s", g)
		}
	}
}

// TestReplicasStartTogether: several stores opening one empty database at once (replicas started
// together) all succeed: migrations run under an advisory lock, once.
func TestReplicasStartTogether(t *testing.T) {
	url := pgtest.NewDatabase(t)
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			s, err := postgres.Open(context.Background(), url)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestUpgradeFromV1: a database written by schema version 1 keeps its rows through migration 2.
func TestUpgradeFromV1(t *testing.T) {
	url := pgtest.NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.UpgradeFromV1(t, db, postgres.Dialect, func(t *testing.T) store.Store { return open(t, url) })
}

// TestUpgradeFromV2: a database written by schema version 2 keeps its rows through migration 3.
func TestUpgradeFromV2(t *testing.T) {
	url := pgtest.NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.UpgradeFromV2(t, db, postgres.Dialect, func(t *testing.T) store.Store { return open(t, url) })
}

// TestUpgradeToTokens: users' tokens and sessions survive migration 16 (API tokens).
func TestUpgradeToTokens(t *testing.T) {
	url := pgtest.NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.UpgradeToTokens(t, db, postgres.Dialect, func(t *testing.T) store.Store { return open(t, url) })
}

// TestReplicaJobNotifications: a job queued, logged, canceled through one store (replica) wakes the
// subscribers of another store on the same database, which can claim it.
func TestReplicaJobNotifications(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	a, b := open(t, url), open(t, url)
	f := storetest.NewBuildFixture(t, a, "rj")
	jobs, cancelJobs := b.SubscribeJobs()
	defer cancelJobs()
	settle := storetest.Settler(t, b)

	_, first := f.Create(t, a, "tf", t0)
	if !storetest.Woken(jobs) {
		t.Fatal("a job queued through replica a did not wake replica b's SubscribeJobs")
	}
	job, cancelJob := b.SubscribeJob(first.Job.ID)
	defer cancelJob()
	claimed, ok, err := b.AcquireJob(ctx, "worker-b", t0.Add(time.Second))
	if err != nil || !ok || claimed.Job.ID != first.Job.ID {
		t.Fatalf("replica b's AcquireJob = %v, %v, %v; want the job queued through a", claimed.Job.ID, ok, err)
	}
	if !storetest.Woken(job) {
		t.Fatal("the claim did not wake the job's subscriber")
	}
	if err := a.AppendLogs(ctx, first.Job.ID, []store.LogLine{{CreatedAt: t0, Stage: "init", Level: "info", Output: "hello"}}); err != nil {
		t.Fatal(err)
	}
	if !storetest.Woken(job) {
		t.Fatal("log lines through replica a did not wake replica b's job subscriber")
	}
	if settle(); !storetest.Quiet(jobs) {
		t.Fatal("a claim or log lines woke SubscribeJobs")
	}
	if _, err := a.UpdateBuild(ctx, first.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		nb, err := build.Cancel(*rec.Build, "alice", t0.Add(2*time.Second))
		rec.Build = &nb
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	if !storetest.Woken(job) || !storetest.Woken(jobs) {
		t.Fatal("a cancel through replica a did not wake replica b's subscribers")
	}
	// The runner on b learns of the cancel from its heartbeat.
	if j, err := b.Heartbeat(ctx, first.Job.ID, "worker-b", t0.Add(3*time.Second)); err != nil || j.Status() != build.Canceling {
		t.Fatalf("Heartbeat after the cancel = %+v, %v", j, err)
	}
}

// TestAcquireSkipsLockedJob: a provisioner claiming while another transaction holds the oldest
// pending job (an UpdateBuild canceling it) gets the next job at once, rather than waiting for the
// lock and then finding nothing (FOR UPDATE SKIP LOCKED).
func TestAcquireSkipsLockedJob(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	s := open(t, url)
	f := storetest.NewBuildFixture(t, s, "sk")
	_, older := f.Create(t, s, "older", t0)
	_, younger := f.Create(t, s, "younger", t0.Add(time.Second))

	type claim struct {
		id  string
		ok  bool
		err error
	}
	claimed := make(chan claim, 1)
	if _, err := s.UpdateBuild(ctx, older.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		// The older job's row is locked until this transaction ends.
		go func() {
			b, ok, err := s.AcquireJob(ctx, "w", t0.Add(time.Minute))
			claimed <- claim{b.Job.ID, ok, err}
		}()
		select {
		case c := <-claimed:
			if c.err != nil || !c.ok || c.id != younger.Job.ID {
				t.Errorf("AcquireJob while the older job is locked = %v, %v, %v; want the younger job", c.id, c.ok, c.err)
			}
		case <-time.After(10 * time.Second):
			t.Error("AcquireJob waited for the lock of the older job")
		}
		nb, err := build.Cancel(*rec.Build, "alice", t0.Add(time.Minute))
		rec.Build = &nb
		return rec, err
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.AcquireJob(ctx, "w", t0.Add(time.Minute)); ok || err != nil {
		t.Fatalf("AcquireJob after the cancel = %v, %v; want none pending", ok, err)
	}
}

// TestWorkspaceChangesOutOfOrderCommit: transactions commit out of the order of their ids. A
// change by a transaction that began first but commits after a reader's read is still returned
// by the reader's next read (the cursor is a snapshot, not the highest id seen), and a change made
// through another replica wakes this replica's stream.
func TestWorkspaceChangesOutOfOrderCommit(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	a, b := open(t, url), open(t, url)
	f := storetest.NewFixture(t, a, "ooo")
	f.Create(t, a, f.Workspace("early"), f.Workspace("late"))
	ch, cancel := b.SubscribeWorkspaces()
	defer cancel()
	cursor, err := b.WorkspaceCursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The slow transaction writes first (its id is the lower) and stays open.
	slow, err := a.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback()
	if _, err := slow.ExecContext(ctx, `UPDATE workspaces SET actual_state = 'Running' WHERE name = 'early'`); err != nil {
		t.Fatal(err)
	}
	// A quick one commits through the store.
	if _, err := a.UpdateWorkspace(ctx, f.Ref("late"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.DesiredStateUpdatedAt = workspace.Stopped, t0.Add(1)
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !storetest.Woken(ch) {
		t.Fatal("a change through replica a did not wake replica b's stream")
	}
	rows, cursor, err := b.WorkspaceChanges(ctx, cursor, store.ListFilter{})
	if err != nil || len(rows) != 1 || rows[0].Name != "late" {
		t.Fatalf("first read: %+v, %v; want late", rows, err)
	}
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	if !storetest.Woken(ch) {
		t.Fatal("the slow commit did not wake the stream")
	}
	rows, _, err = b.WorkspaceChanges(ctx, cursor, store.ListFilter{})
	if err != nil || len(rows) != 1 || rows[0].Name != "early" || rows[0].ActualState != workspace.Running {
		t.Fatalf("second read: %+v, %v; want early Running", rows, err)
	}
}
