package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// testWorkspaceChanges: the live list's feed. A creation, a user's change, a reconcile's write, an
// error and a deletion each wake the subscriber and come back from WorkspaceChanges, only to their
// owner's filter (and the admin's, which has none); a write of nothing the list shows (the agent's
// answer time) wakes the subscriber at most and returns nothing.
func testWorkspaceChanges(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := NewFixture(t, s, "wca")
	b := NewFixture(t, s, "wcb")
	ch, cancel := s.SubscribeWorkspaces()
	defer cancel()
	cursorA, err := s.WorkspaceCursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cursorAll := cursorA
	// changes reads what changed since the cursor for owner ("" = admin) and moves the cursor.
	changes := func(cursor *string, owner string) []workspace.Workspace {
		t.Helper()
		rows, next, err := s.WorkspaceChanges(ctx, *cursor, store.ListFilter{OwnerID: owner})
		if err != nil {
			t.Fatalf("WorkspaceChanges: %v", err)
		}
		*cursor = next
		return rows
	}
	names := func(rows []workspace.Workspace) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Name+"="+string(r.ActualState))
		}
		slices.Sort(out)
		return out
	}
	want := func(what string, got []workspace.Workspace, w ...string) {
		t.Helper()
		if g := names(got); !slices.Equal(g, w) {
			t.Fatalf("%s: changes %v, want %v", what, g, w)
		}
	}

	a.Create(t, s, a.Workspace("a1"))
	b.Create(t, s, b.Workspace("b1"))
	if !Woken(ch) {
		t.Fatal("a creation woke no stream")
	}
	want("created, for a", changes(&cursorA, a.User.ID), "a1=CreationRequested")
	want("created, for the admin", changes(&cursorAll, ""), "a1=CreationRequested", "b1=CreationRequested")
	want("nothing new", changes(&cursorA, a.User.ID))

	// A user's change (desired state).
	Quiet(ch)
	if _, err := s.UpdateWorkspace(ctx, a.Ref("a1"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.DesiredStateUpdatedAt = workspace.Stopped, t0.Add(1)
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !Woken(ch) {
		t.Fatal("a user's change woke no stream")
	}
	got := changes(&cursorA, a.User.ID)
	if len(got) != 1 || got[0].DesiredState != workspace.Stopped {
		t.Fatalf("user's change: %+v", got)
	}

	// A reconcile's write (actual state, error), through the batch writer agents' answers use.
	w1, err := s.Workspace(ctx, a.Ref("a1"))
	if err != nil {
		t.Fatal(err)
	}
	w1.ActualState, w1.ErrorType, w1.ErrorMessage = workspace.Failed, "ImagePullBackOff", "image not found"
	if err := s.UpdateWorkspacesBatch(ctx, []workspace.Workspace{w1}); err != nil {
		t.Fatal(err)
	}
	if !Woken(ch) {
		t.Fatal("a reconcile's write woke no stream")
	}
	got = changes(&cursorA, a.User.ID)
	if len(got) != 1 || got[0].ActualState != workspace.Failed || got[0].ErrorMessage != "image not found" {
		t.Fatalf("reconcile's change: %+v", got)
	}

	// Only the answer time: nothing the list shows.
	now := t0.Add(5)
	w1.RespondedToAgentAt = &now
	if err := s.UpdateWorkspacesBatch(ctx, []workspace.Workspace{w1}); err != nil {
		t.Fatal(err)
	}
	want("an unshown column", changes(&cursorA, a.User.ID))

	// Another owner's change is not a's.
	wb, err := s.Workspace(ctx, b.Ref("b1"))
	if err != nil {
		t.Fatal(err)
	}
	wb.ActualState = workspace.Running
	if err := s.UpdateWorkspacesBatch(ctx, []workspace.Workspace{wb}); err != nil {
		t.Fatal(err)
	}
	want("another owner's", changes(&cursorA, a.User.ID))

	// A deletion (Terminated) is a change.
	w1.DesiredState, w1.ActualState = workspace.Terminated, workspace.Terminated
	if err := s.UpdateWorkspacesBatch(ctx, []workspace.Workspace{w1}); err != nil {
		t.Fatal(err)
	}
	want("deleted", changes(&cursorA, a.User.ID), "a1=Terminated")
	want("the admin sees both owners' changes since", changes(&cursorAll, ""), "a1=Terminated", "b1=Running")
}
