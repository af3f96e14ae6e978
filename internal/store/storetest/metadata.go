package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testWorkspaceMetadata: the latest metadata report is kept and replaced; none is ErrNotFound, and
// so is one for no workspace.
func testWorkspaceMetadata(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "meta")
	w := f.Workspace("meta")
	f.Create(t, s, w)
	if _, _, err := s.WorkspaceMetadata(ctx, w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no report yet: %v, want ErrNotFound", err)
	}
	for i, r := range []string{`{"a":1}`, `{"a":2}`} {
		if err := s.SetWorkspaceMetadata(ctx, w.ID, []byte(r), t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	got, at, err := s.WorkspaceMetadata(ctx, w.ID)
	if err != nil || string(got) != `{"a":2}` || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("read %q at %v, %v; want the second report", got, at, err)
	}
	if err := s.SetWorkspaceMetadata(ctx, "00000000-0000-0000-0000-000000000000", []byte(`{}`), t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a report for no workspace: %v, want ErrNotFound", err)
	}
}

// testWorkspaceAlerts: a condition is recorded once while open, cleared, and recorded again
// after; an event is recorded once per moment; the latest come first; at most MaxAlertsKept are
// kept, the oldest cleared going first (an open condition stays).
func testWorkspaceAlerts(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "alerts")
	w := f.Workspace("alerts")
	f.Create(t, s, w)
	record := func(a workspace.Alert) bool {
		t.Helper()
		wrote, err := s.RecordWorkspaceAlert(ctx, w.ID, a)
		if err != nil {
			t.Fatal(err)
		}
		return wrote
	}
	mem := workspace.Alert{Kind: workspace.AlertMemory, Detail: "memory at 95%", RaisedAt: t0}
	if !record(mem) || record(workspace.Alert{Kind: workspace.AlertMemory, Detail: "memory at 97%", RaisedAt: t0.Add(time.Second)}) {
		t.Fatal("an open condition was recorded twice, or not once")
	}
	vol := workspace.Alert{Kind: workspace.AlertVolume, Subject: "/projects", Detail: "volume /projects at 91%", RaisedAt: t0.Add(2 * time.Second)}
	if !record(vol) {
		t.Fatal("a volume's condition was not recorded beside the memory's")
	}
	cleared := t0.Add(3 * time.Second)
	if err := s.ClearWorkspaceAlert(ctx, w.ID, workspace.AlertMemory, "", cleared); err != nil {
		t.Fatal(err)
	}
	if !record(workspace.Alert{Kind: workspace.AlertMemory, Detail: "memory at 92%", RaisedAt: t0.Add(4 * time.Second)}) {
		t.Fatal("a condition raised again after it cleared was not recorded")
	}
	oom := workspace.Alert{Kind: workspace.AlertOOMKilled, Subject: "dev", Detail: "OOMKilled", RaisedAt: t0.Add(5 * time.Second)}
	oom.ClearedAt = &oom.RaisedAt
	if !record(oom) || record(oom) {
		t.Fatal("an event was not recorded exactly once")
	}
	got, err := s.WorkspaceAlerts(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, a := range got {
		open := "open"
		if a.ClearedAt != nil {
			open = "cleared"
		}
		kinds = append(kinds, a.Kind+":"+a.Detail+":"+open)
	}
	want := []string{"oom-killed:OOMKilled:cleared", "memory:memory at 92%:open", "volume:volume /projects at 91%:open", "memory:memory at 95%:cleared"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("alerts %q, want %q", kinds, want)
	}
	if !got[3].ClearedAt.Equal(cleared) || !got[0].ClearedAt.Equal(oom.RaisedAt) {
		t.Fatalf("cleared at %v and %v", got[3].ClearedAt, got[0].ClearedAt)
	}
	// Many events: the bound holds, and the open conditions stay.
	for i := range workspace.MaxAlertsKept + 5 {
		e := workspace.Alert{Kind: workspace.AlertOOMKilled, Subject: "dev", Detail: fmt.Sprint(i), RaisedAt: t0.Add(time.Minute + time.Duration(i)*time.Second)}
		e.ClearedAt = &e.RaisedAt
		record(e)
	}
	got, err = s.WorkspaceAlerts(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, a := range got {
		if a.ClearedAt == nil {
			open++
		}
	}
	if len(got) != workspace.MaxAlertsKept+2 || open != 2 || got[0].Detail != fmt.Sprint(workspace.MaxAlertsKept+4) {
		t.Fatalf("%d alerts kept (%d open), the latest %q; want %d with the 2 open", len(got), open, got[0].Detail, workspace.MaxAlertsKept+2)
	}
	if _, err := s.RecordWorkspaceAlert(ctx, "00000000-0000-0000-0000-000000000000", mem); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an alert for no workspace: %v, want ErrNotFound", err)
	}
}
