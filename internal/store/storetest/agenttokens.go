package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func agentToken(w workspace.Workspace, hash string, buildNumber int) store.WorkspaceAgentToken {
	return store.WorkspaceAgentToken{Hash: []byte(hash), WorkspaceID: w.ID, BuildNumber: buildNumber, CreatedAt: t0.Add(time.Duration(buildNumber)*time.Second + 3*time.Microsecond)}
}

// testAgentTokens: tokens of Terraform workspaces' helpers are found by hash; keeping a set
// removes the others of the builds up to the one named, never those of later builds nor another
// workspace's.
func testAgentTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "alice")
	w1, _ := f.Create(t, s, "tf1", t0)
	w2, _ := f.Create(t, s, "tf2", t0)
	t1, t2, t3, other := agentToken(w1, "h1", 1), agentToken(w1, "h2", 2), agentToken(w1, "h3", 3), agentToken(w2, "o1", 1)
	for _, tk := range []store.WorkspaceAgentToken{t1, t2, t3, other} {
		if err := s.CreateWorkspaceAgentToken(ctx, tk); err != nil {
			t.Fatalf("CreateWorkspaceAgentToken(%s): %v", tk.Hash, err)
		}
	}
	if err := s.CreateWorkspaceAgentToken(ctx, agentToken(w2, "h1", 4)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a hash stored twice: %v, want ErrConflict", err)
	}
	if err := s.CreateWorkspaceAgentToken(ctx, store.WorkspaceAgentToken{Hash: []byte("x"), WorkspaceID: "no-such-workspace", CreatedAt: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a token of an unknown workspace: %v, want ErrNotFound", err)
	}
	got, err := s.WorkspaceAgentTokenByHash(ctx, []byte("h2"))
	if err != nil || string(got.Hash) != "h2" || got.WorkspaceID != w1.ID || got.BuildNumber != 2 || !got.CreatedAt.Equal(t2.CreatedAt) {
		t.Fatalf("WorkspaceAgentTokenByHash(h2) = %+v, %v; want %+v", got, err, t2)
	}
	if _, err := s.WorkspaceAgentTokenByHash(ctx, []byte("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown hash: %v, want ErrNotFound", err)
	}

	// Build 2 finished with h1 in its state: h2 goes, h1 stays, h3 (build 3) and w2's stay.
	if n, err := s.KeepWorkspaceAgentTokens(ctx, w1.ID, 2, [][]byte{[]byte("h1"), []byte("unknown")}); err != nil || n != 1 {
		t.Fatalf("KeepWorkspaceAgentTokens(up to 2, keep h1) = %d, %v; want 1 removed", n, err)
	}
	for hash, want := range map[string]bool{"h1": true, "h2": false, "h3": true, "o1": true} {
		_, err := s.WorkspaceAgentTokenByHash(ctx, []byte(hash))
		if want && err != nil || !want && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after keeping h1 up to build 2, %s: %v (want kept: %v)", hash, err, want)
		}
	}
	// A state without agents (a stop, a delete) removes them all, up to its build.
	if n, err := s.KeepWorkspaceAgentTokens(ctx, w1.ID, 3, nil); err != nil || n != 2 {
		t.Fatalf("KeepWorkspaceAgentTokens(up to 3, none) = %d, %v; want 2 removed", n, err)
	}
	if _, err := s.WorkspaceAgentTokenByHash(ctx, []byte("o1")); err != nil {
		t.Fatalf("another workspace's token was removed: %v", err)
	}
}

// testWorkspaceActivity: RecordWorkspaceActivity and UpdateWorkspace keep the latest time of a
// workspace of either backend, never moving it back.
func testWorkspaceActivity(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "alice")
	w, _ := f.Create(t, s, "tf1", t0)
	at := t0.Add(time.Hour + 5*time.Microsecond)
	for _, a := range []time.Time{at, at.Add(-time.Minute)} {
		if err := s.RecordWorkspaceActivity(ctx, w.ID, a); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.WorkspaceByID(ctx, w.ID)
	if err != nil || got.LastActivityAt == nil || !got.LastActivityAt.Equal(at) {
		t.Fatalf("last activity %v (%v), want %v", got.LastActivityAt, err, at)
	}
	if err := s.RecordWorkspaceActivity(ctx, "no-such-workspace", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("activity of an unknown workspace: %v, want ErrNotFound", err)
	}

	// UpdateWorkspace writes the row's use with the change, in its transaction, and likewise only
	// forward: an earlier time, or none, leaves the later one.
	later := at.Add(time.Minute)
	for _, a := range []*time.Time{&later, nil, &at} {
		if _, err := s.UpdateWorkspace(ctx, store.WorkspaceRef{ID: w.ID}, func(cur workspace.Workspace) (workspace.Workspace, error) {
			cur.LastActivityAt = a
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.WorkspaceByID(ctx, w.ID); err != nil || got.LastActivityAt == nil || !got.LastActivityAt.Equal(later) {
			t.Fatalf("after UpdateWorkspace with use %v: last activity %v (%v), want %v", a, got.LastActivityAt, err, later)
		}
	}
}

// testAgentConnections: the replica a helper is connected to is recorded per workspace, replaced
// by a later connection, and cleared only by the connection that recorded it.
func testAgentConnections(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "alice")
	w, _ := f.Create(t, s, "tf1", t0)
	if _, err := s.WorkspaceAgentConnection(ctx, w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no connection yet: %v, want ErrNotFound", err)
	}
	at := t0.Add(time.Minute + 9*time.Microsecond)
	for _, r := range []string{"replica-a", "replica-b"} {
		if err := s.SetWorkspaceAgentConnection(ctx, store.AgentConnection{WorkspaceID: w.ID, Replica: r, RelayURL: "http://" + r + ":7080", ConnectedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	want := store.AgentConnection{WorkspaceID: w.ID, Replica: "replica-b", RelayURL: "http://replica-b:7080", ConnectedAt: at}
	if got, err := s.WorkspaceAgentConnection(ctx, w.ID); err != nil || got.Replica != want.Replica || got.RelayURL != want.RelayURL || !got.ConnectedAt.Equal(at) || got.WorkspaceID != w.ID {
		t.Fatalf("WorkspaceAgentConnection = %+v, %v; want %+v", got, err, want)
	}
	if err := s.ClearWorkspaceAgentConnection(ctx, store.AgentConnection{WorkspaceID: w.ID, Replica: "replica-a", ConnectedAt: at}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkspaceAgentConnection(ctx, w.ID); err != nil || got.Replica != "replica-b" {
		t.Fatalf("another replica cleared the record: %+v, %v", got, err)
	}
	// An earlier connection of the same replica, ending after a later one was recorded, leaves the
	// later one's record.
	if err := s.ClearWorkspaceAgentConnection(ctx, store.AgentConnection{WorkspaceID: w.ID, Replica: "replica-b", ConnectedAt: at.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkspaceAgentConnection(ctx, w.ID); err != nil || got.Replica != "replica-b" {
		t.Fatalf("an earlier connection cleared the record: %+v, %v", got, err)
	}
	if err := s.ClearWorkspaceAgentConnection(ctx, want); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WorkspaceAgentConnection(ctx, w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after clearing: %v, want ErrNotFound", err)
	}
}

// testHelperRecord: workspace reads (by id, by name, in lists) carry the helper's record: its
// connection while one is recorded, the end of its last connection with why (the latest end
// replacing an earlier one), and whether a helper token of the workspace is valid.
func testHelperRecord(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewBuildFixture(t, s, "alice")
	w, _ := f.Create(t, s, "tf1", t0)
	reads := func() []workspace.Workspace {
		t.Helper()
		byID, err := s.WorkspaceByID(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.ListWorkspaces(ctx, store.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.ID == w.ID {
				return []workspace.Workspace{byID, l}
			}
		}
		t.Fatalf("workspace %s not listed", w.ID)
		return nil
	}
	for _, got := range reads() {
		if h := got.Helper; h.ConnectedAt != nil || h.DisconnectedAt != nil || h.LastError != "" || h.HasToken {
			t.Fatalf("a new workspace's helper record: %+v", h)
		}
	}
	at := t0.Add(time.Minute + 7*time.Microsecond)
	conn := store.AgentConnection{WorkspaceID: w.ID, Replica: "replica-a", ConnectedAt: at}
	if err := s.SetWorkspaceAgentConnection(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWorkspaceAgentToken(ctx, store.WorkspaceAgentToken{Hash: []byte("helper-record-token-hash"), WorkspaceID: w.ID, BuildNumber: 1, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, got := range reads() {
		if h := got.Helper; h.ConnectedAt == nil || !h.ConnectedAt.Equal(at) || h.DisconnectedAt != nil || !h.HasToken {
			t.Fatalf("a connected helper's record: %+v", h)
		}
	}
	if err := s.ClearWorkspaceAgentConnection(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for i, why := range []string{"the connection was lost", "the server closed it: its token is gone"} {
		if err := s.RecordWorkspaceHelperDisconnect(ctx, w.ID, at.Add(time.Duration(i+1)*time.Minute), why); err != nil {
			t.Fatal(err)
		}
	}
	ended := at.Add(2 * time.Minute)
	for _, got := range reads() {
		if h := got.Helper; h.ConnectedAt != nil || h.DisconnectedAt == nil || !h.DisconnectedAt.Equal(ended) || h.LastError != "the server closed it: its token is gone" {
			t.Fatalf("a disconnected helper's record: %+v, want ended at %v with the latest reason", h, ended)
		}
	}
	if _, err := s.KeepWorkspaceAgentTokens(ctx, w.ID, 1, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WorkspaceByID(ctx, w.ID); err != nil || got.Helper.HasToken {
		t.Fatalf("after its token is removed: %+v, %v", got.Helper, err)
	}
	if err := s.RecordWorkspaceHelperDisconnect(ctx, "no-such-workspace", at, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the end of a helper connection of no workspace: %v, want ErrNotFound", err)
	}
}
