package storetest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testStorage: StorageUsage counts the bytes of a user's builds' states and logs (multi-byte text
// by bytes), and nobody else's; PruneStorage frees the states of all but each workspace's latest
// build (which the next build starts from) and the logs of all but the latest, ended builds,
// replacing each with the note, and leaves other users' builds alone.
func testStorage(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "st")
	other := NewBuildFixture(t, s, "st2")
	state := func(n int) []byte { return bytes.Repeat([]byte{byte('0' + n)}, 1000) }
	line := strings.Repeat("é", 50) // 100 bytes, 50 characters

	// One workspace of each user, three builds each, every build 1000 bytes of state and one line.
	var ws [2]workspace.Workspace
	var lastJob [2]string
	for i, fx := range []BuildFixture{f, other} {
		w, b := fx.Create(t, s, "tf", t0)
		ws[i] = w
		at := t0
		for n := 1; ; n++ {
			acquire(t, s, "w", at)
			if err := s.AppendLogs(ctx, b.Job.ID, []store.LogLine{{CreatedAt: at, Stage: "apply", Level: "info", Output: line}}); err != nil {
				t.Fatal(err)
			}
			finish(t, s, b.Job.ID, build.Outcome{State: state(n)}, at)
			lastJob[i] = b.Job.ID
			if n == 3 {
				break
			}
			at = at.Add(time.Minute)
			_, nb, err := s.NewBuild(ctx, store.WorkspaceRef{ID: w.ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
				b := fx.Build(rec.Workspace, n+1, build.Stop, at)
				b.State, b.StateSource = build.InitialState(false, nil, rec.Build)
				return rec.Workspace, &b, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			b = *nb
		}
	}
	want := store.StorageUsage{StateBytes: 3000, LogBytes: 300}
	for _, u := range []string{f.User.ID, other.User.ID} {
		if got, err := s.StorageUsage(ctx, u); err != nil || got != want {
			t.Fatalf("StorageUsage(%s) = %+v, %v; want %+v", u, got, err, want)
		}
	}
	if n, err := s.LatestStateBytes(ctx, ws[0].ID); err != nil || n != 1000 {
		t.Fatalf("LatestStateBytes = %d, %v; want 1000", n, err)
	}
	if n, err := s.LatestStateBytes(ctx, "no-such-workspace"); err != nil || n != 0 {
		t.Fatalf("LatestStateBytes of no workspace = %d, %v; want 0", n, err)
	}
	if got, err := s.StorageUsage(ctx, "nobody"); err != nil || got.Total() != 0 {
		t.Fatalf("StorageUsage of a user without workspaces = %+v, %v", got, err)
	}

	const note = "log removed: over the storage limit"
	got, err := s.PruneStorage(ctx, f.User.ID, t0.Add(time.Hour), note)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.StorageUsage{StateBytes: 1000, LogBytes: 100 + 2*int64(len(note))}); got != want {
		t.Fatalf("after PruneStorage: %+v, want %+v", got, want)
	}
	list, err := s.ListBuilds(ctx, ws[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range list {
		b, err := s.BuildByNumber(ctx, ws[0].ID, lb.Number)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := s.JobLogs(ctx, b.Job.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if lb.Number == 3 {
			if !bytes.Equal(b.State, state(3)) || b.StatePruned || len(lines) != 1 || lines[0].Output != line {
				t.Errorf("the latest build lost something: state %d bytes, pruned %v, log %+v", len(b.State), b.StatePruned, lines)
			}
			continue
		}
		if b.State != nil || !b.StatePruned || len(lines) != 1 || lines[0].Output != note || lines[0].Level != "warn" {
			t.Errorf("build #%d: state %d bytes, pruned %v, log %+v; want both pruned", lb.Number, len(b.State), b.StatePruned, lines)
		}
	}
	// The next build still starts from the latest state.
	_, nb, err := s.NewBuild(ctx, store.WorkspaceRef{ID: ws[0].ID}, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		b := f.Build(rec.Workspace, 4, build.Start, t0.Add(2*time.Hour))
		b.State, b.StateSource = build.InitialState(false, nil, rec.Build)
		return rec.Workspace, &b, nil
	})
	if err != nil || !bytes.Equal(nb.State, state(3)) {
		t.Fatalf("the build after the prune starts from %d bytes (%v), want the latest state", len(nb.State), err)
	}
	// Build #4 is now the latest: a second prune frees #3's state and its (ended) log, and keeps
	// #4's state, the copy #4 starts from.
	if again, err := s.PruneStorage(ctx, f.User.ID, t0.Add(3*time.Hour), note); err != nil ||
		again != (store.StorageUsage{StateBytes: 1000, LogBytes: 3 * int64(len(note))}) {
		t.Fatalf("a second prune: %+v, %v", again, err)
	}
	if u, err := s.StorageUsage(ctx, other.User.ID); err != nil || u != want {
		t.Fatalf("the other user's usage after the prune: %+v, %v", u, err)
	}
	if lines, err := s.JobLogs(ctx, lastJob[1], 0, 0); err != nil || len(lines) != 1 || lines[0].Output != line {
		t.Fatalf("the other user's log: %+v, %v", lines, err)
	}
}
