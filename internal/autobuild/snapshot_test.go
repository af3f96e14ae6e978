package autobuild

import (
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/lifecycle"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestSnapshotCountsWork: under a policy whose activity is work, a workspace's use is the work its
// helper saw, not the connections (an open shell that does nothing): with a 1-minute TTL it is
// stopped a minute after its last work although a connection was seen since; under the default
// policy the connection counts.
func TestSnapshotCountsWork(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	work, conn := t0.Add(2*time.Minute), t0.Add(5*time.Minute)
	w := workspace.Workspace{DesiredState: workspace.Running, ActualState: workspace.Running, CreatedAt: t0, DesiredStateUpdatedAt: t0,
		LastActivityAt: &conn, LastWorkAt: &work, LastWorkReason: "CPU: 1.00 cores"}
	now := t0.Add(4 * time.Minute)
	p := workspace.Lifecycle{DefaultTTL: workspace.Duration(time.Minute)}
	if a := lifecycle.Decide(now, Snapshot(w, p, false)); !a.None() {
		t.Fatalf("connections: %+v, want nothing (a connection at %v)", a, conn)
	}
	p.Activity = workspace.ActivityWork
	a := lifecycle.Decide(now, Snapshot(w, p, false))
	if a.To != workspace.Stopped || !a.Due.Equal(work.Add(time.Minute)) || a.Detail != "started 2026-11-27 10:00 UTC, last work seen inside 2026-11-27 10:02 UTC (TTL 1m0s)" {
		t.Fatalf("work: %+v", a)
	}
	w.LastWorkAt = nil
	if a := lifecycle.Decide(now, Snapshot(w, p, false)); a.To != workspace.Stopped || !a.Due.Equal(t0.Add(time.Minute)) ||
		a.Detail != "started 2026-11-27 10:00 UTC, no work seen inside (TTL 1m0s)" {
		t.Fatalf("no work ever: %+v", a)
	}
}
