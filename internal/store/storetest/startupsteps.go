package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testStartupSteps: the startup steps a reconcile records are read back in the order reported;
// a later report replaces each step it names; an empty log keeps the stored log of the same run
// (same started_at) but not of a new run; the write rolls back with its reconcile; a workspace
// without steps reads an empty list; a step a helper reports is stored in its place, and one for
// no workspace is ErrNotFound.
func testStartupSteps(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "steps")
	w := f.Workspace("steps")
	f.Create(t, s, w)
	record := func(steps []workspace.StartupStep, fail error) error {
		return s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID, Full: true}, func(tx store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
			if len(rows) != 1 {
				t.Fatalf("rows %d, want 1", len(rows))
			}
			if err := tx.SetStartupSteps(rows[0].ID, steps); err != nil {
				return nil, err
			}
			return nil, fail
		})
	}
	read := func() []workspace.StartupStep {
		t.Helper()
		got, err := s.WorkspaceStartupSteps(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); len(got) != 0 || got == nil {
		t.Fatalf("before any report: %#v, want an empty list", got)
	}
	at := func(m int) *time.Time { x := t0.Add(time.Duration(m) * time.Minute); return &x }
	first := []workspace.StartupStep{
		{Name: "image-prepare", Position: 0, State: "done", StartedAt: at(0), EndedAt: at(1), Detail: "building r/i:abc from debian: 3 steps, 1 feature", Log: "fetching debian\n", UpdatedAt: t0},
		{Name: "image-build", Position: 1, State: "running", StartedAt: at(1), Detail: "step 2/3: RUN make", Log: "step 1/3: ENV A=1\nstep 2/3: RUN make\ncc -o é\n", UpdatedAt: t0},
		{Name: "image-push", Position: 2, State: "pending", UpdatedAt: t0},
	}
	if err := record(first, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(); !reflect.DeepEqual(got, first) {
		t.Fatalf("read back\n%#v\nwant\n%#v", got, first)
	}
	// A restarted agent reports the same runs without their logs: the logs stay.
	later := []workspace.StartupStep{
		{Name: "image-prepare", Position: 0, State: "done", StartedAt: at(0), EndedAt: at(1), Detail: first[0].Detail, UpdatedAt: t0.Add(time.Hour)},
		{Name: "image-build", Position: 1, State: "failed", StartedAt: at(1), EndedAt: at(5), Detail: "step 3/3: RUN false", UpdatedAt: t0.Add(time.Hour)},
		{Name: "image-push", Position: 2, State: "pending", UpdatedAt: t0.Add(time.Hour)},
	}
	if err := record(later, nil); err != nil {
		t.Fatal(err)
	}
	want := append([]workspace.StartupStep(nil), later...)
	want[0].Log, want[1].Log = first[0].Log, first[1].Log
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a report without logs\n%#v\nwant\n%#v", got, want)
	}
	// A new run of a step (a new pod) does not keep the old run's log.
	again := []workspace.StartupStep{
		{Name: "image-prepare", Position: 0, State: "done", StartedAt: at(29), EndedAt: at(30), UpdatedAt: t0.Add(2 * time.Hour)},
		{Name: "image-build", Position: 1, State: "running", StartedAt: at(30), UpdatedAt: t0.Add(2 * time.Hour)},
		{Name: "image-push", Position: 2, State: "pending", UpdatedAt: t0.Add(2 * time.Hour)},
	}
	if err := record(again, nil); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 3 || got[1].Log != "" || got[1].State != "running" || got[0].Log != "" {
		t.Fatalf("after a new run: %#v", got)
	}
	// A reconcile that fails writes nothing.
	boom := errors.New("boom")
	if err := record([]workspace.StartupStep{{Name: "image-push", Position: 2, State: "running", StartedAt: at(40), UpdatedAt: t0}}, boom); !errors.Is(err, boom) {
		t.Fatalf("failing reconcile: %v", err)
	}
	if got := read(); got[2].State != "pending" {
		t.Fatalf("a failed reconcile's steps were kept: %#v", got[2])
	}
	// A step the workspace's helper reports, outside any reconcile: read back in its place.
	post := workspace.StartupStep{Name: "post-start", Position: 4, State: "failed", StartedAt: at(31), EndedAt: at(32), Detail: "command 1/1: setup",
		Log: "npm ERR! missing script: setup\n", UpdatedAt: t0.Add(3 * time.Hour)}
	if err := s.SetWorkspaceStartupStep(ctx, w.ID, post); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 4 || !reflect.DeepEqual(got[3], post) {
		t.Fatalf("with the helper's step: %#v", got)
	}
	if err := s.SetWorkspaceStartupStep(ctx, "00000000-0000-0000-0000-000000000000", post); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a step of no workspace: %v, want ErrNotFound", err)
	}
}

// testServerKeys: a server key is made once, by whichever replica asks first, and every later or
// concurrent ask reads that one; keys of other names are other keys.
func testServerKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := s.ServerKey(ctx, "helper-tokens", func() []byte { return []byte(fmt.Sprintf("key of replica %d", i)) }, t0)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for _, k := range keys {
		if !bytes.Equal(k, keys[0]) || !bytes.HasPrefix(k, []byte("key of replica ")) {
			t.Fatalf("replicas read %q, want one key", keys)
		}
	}
	if k, err := s.ServerKey(ctx, "helper-tokens", func() []byte { return []byte("a later key") }, t0); err != nil || !bytes.Equal(k, keys[0]) {
		t.Fatalf("asked again: %q, %v; want %q", k, err, keys[0])
	}
	if k, err := s.ServerKey(ctx, "other", func() []byte { return []byte{0, 1, 2, 255} }, t0); err != nil || !bytes.Equal(k, []byte{0, 1, 2, 255}) {
		t.Fatalf("another key: %q, %v", k, err)
	}
}
