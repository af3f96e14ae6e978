package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// sshKeyOf returns a key row of f's user; the store does not read keys, so any text will do.
func (f Fixture) sshKeyOf(n string, at time.Time) store.SSHKey {
	return store.SSHKey{ID: uuid.NewString(), UserID: f.User.ID, Name: "key " + n, Fingerprint: "SHA256:" + n,
		PublicKey: "ssh-ed25519 AAAA" + n, CreatedAt: at}
}

func testSSHKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	alice, bob := NewFixture(t, s, "alice"), NewFixture(t, s, "bob")
	k1, k2 := alice.sshKeyOf("k1", t0.Add(time.Second+7*time.Microsecond)), alice.sshKeyOf("k2", t0.Add(2*time.Second))
	for _, k := range []store.SSHKey{k2, k1} { // listed by age, not by insertion
		if err := s.CreateSSHKey(ctx, k, 3); err != nil {
			t.Fatalf("CreateSSHKey(%s): %v", k.Name, err)
		}
	}
	list, err := s.SSHKeys(ctx, alice.User.ID)
	if err != nil || len(list) != 2 || list[0] != k1 || list[1] != k2 {
		t.Fatalf("SSHKeys = %+v, %v; want k1 then k2, every field as written", list, err)
	}
	if list, err := s.SSHKeys(ctx, bob.User.ID); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("SSHKeys of a user without keys = %#v, %v; want an empty list", list, err)
	}

	// A key belongs to one user: registering it again, by anyone, is a conflict and writes nothing.
	for _, f := range []Fixture{alice, bob} {
		again := f.sshKeyOf("k1", t0)
		if err := s.CreateSSHKey(ctx, again, 3); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("k1 again for %s: %v, want ErrConflict", f.User.Username, err)
		}
	}
	if list, _ := s.SSHKeys(ctx, bob.User.ID); len(list) != 0 {
		t.Fatalf("bob has %d keys after a refused addition", len(list))
	}

	u, k, err := s.UserBySSHKey(ctx, k2.Fingerprint)
	if err != nil || u.ID != alice.User.ID || u.Username != alice.User.Username || u.SuspendedAt != nil ||
		!u.CreatedAt.Equal(alice.User.CreatedAt) || k != k2 {
		t.Fatalf("UserBySSHKey(k2) = %+v, %+v, %v", u, k, err)
	}
	if _, _, err := s.UserBySSHKey(ctx, "SHA256:nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserBySSHKey of an unknown key: %v, want ErrNotFound", err)
	}

	// At most maxPerUser keys.
	if err := s.CreateSSHKey(ctx, alice.sshKeyOf("k3", t0), 2); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a third key with a limit of 2: %v, want ErrQuota", err)
	}
	if _, _, err := s.UserBySSHKey(ctx, "SHA256:k3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a key refused for the limit was stored: %v", err)
	}

	// Removal: by id or by fingerprint, one's own only.
	if _, err := s.DeleteSSHKey(ctx, bob.User.ID, k1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob removes alice's key by id: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteSSHKey(ctx, bob.User.ID, k1.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob removes alice's key by fingerprint: %v, want ErrNotFound", err)
	}
	if got, err := s.DeleteSSHKey(ctx, alice.User.ID, k1.ID); err != nil || got != k1 {
		t.Fatalf("DeleteSSHKey(k1 by id) = %+v, %v", got, err)
	}
	if got, err := s.DeleteSSHKey(ctx, alice.User.ID, k2.Fingerprint); err != nil || got != k2 {
		t.Fatalf("DeleteSSHKey(k2 by fingerprint) = %+v, %v", got, err)
	}
	if _, err := s.DeleteSSHKey(ctx, alice.User.ID, k2.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteSSHKey of a removed key: %v, want ErrNotFound", err)
	}
	if list, _ := s.SSHKeys(ctx, alice.User.ID); len(list) != 0 {
		t.Fatalf("alice has %d keys after removing both", len(list))
	}
	if _, _, err := s.UserBySSHKey(ctx, k1.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed key still finds its user: %v", err)
	}
	// Once removed, anyone may register it.
	if err := s.CreateSSHKey(ctx, bob.sshKeyOf("k1", t0), 3); err != nil {
		t.Fatalf("k1 for bob once alice removed it: %v", err)
	}

	// The limit holds under concurrent additions.
	var wg sync.WaitGroup
	var mu sync.Mutex
	added, refused := 0, 0
	for i := range 8 {
		wg.Go(func() {
			err := s.CreateSSHKey(ctx, alice.sshKeyOf(fmt.Sprintf("c%d", i), t0), 3)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				added++
			case errors.Is(err, store.ErrQuota):
				refused++
			default:
				t.Errorf("concurrent CreateSSHKey: %v", err)
			}
		})
	}
	wg.Wait()
	if list, _ := s.SSHKeys(ctx, alice.User.ID); added != 3 || refused != 5 || len(list) != 3 {
		t.Fatalf("8 concurrent additions with a limit of 3: %d added, %d refused, %d stored", added, refused, len(list))
	}
}

func testActivity(t *testing.T, s store.Store) {
	ctx := context.Background()
	f, other := NewFixture(t, s, "act"), NewFixture(t, s, "act-other")
	w1, w2, x := f.Workspace("w1"), f.Workspace("w2"), other.Workspace("x")
	f.Create(t, s, w1, w2)
	other.Create(t, s, x)
	lastActivity := func(ref store.WorkspaceRef) *time.Time {
		t.Helper()
		w, err := s.Workspace(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return w.LastActivityAt
	}
	if at := lastActivity(f.Ref("w1")); at != nil {
		t.Fatalf("a new workspace was last used at %v, want never", at)
	}
	record := func(want int, items ...store.Activity) {
		t.Helper()
		if n, err := s.RecordActivity(ctx, f.Agent.ID, items); err != nil || n != want {
			t.Fatalf("RecordActivity(%+v) = %d, %v; want %d", items, n, err, want)
		}
	}
	a1, a2 := t0.Add(time.Minute+123456789), t0.Add(2*time.Minute) // a1 has nanoseconds: stored to the microsecond
	record(2,
		store.Activity{WorkspaceID: w1.ID, At: a1}, store.Activity{WorkspaceID: w1.ID, At: a2}, store.Activity{WorkspaceID: w1.ID, At: t0},
		store.Activity{WorkspaceID: w2.ID, At: a1},
		store.Activity{WorkspaceID: x.ID, At: a2},             // another agent's: ignored
		store.Activity{WorkspaceID: uuid.NewString(), At: a2}, // unknown: ignored
	)
	if at := lastActivity(f.Ref("w1")); at == nil || !at.Equal(a2) {
		t.Fatalf("w1 last used at %v, want the latest of its items, %v", at, a2)
	}
	if at := lastActivity(f.Ref("w2")); at == nil || !at.Equal(a1.Truncate(time.Microsecond)) {
		t.Fatalf("w2 last used at %v, want %v", at, a1.Truncate(time.Microsecond))
	}
	if at := lastActivity(other.Ref("x")); at != nil {
		t.Fatalf("another agent's report recorded %v for x", at)
	}
	// Never back; forward again; nothing to record.
	record(1, store.Activity{WorkspaceID: w1.ID, At: a1})
	if at := lastActivity(f.Ref("w1")); !at.Equal(a2) {
		t.Fatalf("an older report moved w1 back to %v", at)
	}
	a3 := a2.Add(time.Hour)
	record(1, store.Activity{WorkspaceID: w1.ID, At: a3})
	if at := lastActivity(f.Ref("w1")); !at.Equal(a3) {
		t.Fatalf("w1 last used at %v, want %v", at, a3)
	}
	record(0)

	// The user's and the agent's writes leave it as it is, whatever their rows say.
	if _, err := s.UpdateWorkspace(ctx, f.Ref("w1"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.DesiredStateUpdatedAt, w.LastActivityAt = workspace.Stopped, t0.Add(time.Second), nil
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reconcile(ctx, store.ReconcileScope{AgentID: f.Agent.ID, Full: true}, func(_ store.ReconcileTx, rows []workspace.Workspace) ([]workspace.Workspace, error) {
		for i := range rows {
			responded := t0.Add(3 * time.Second)
			rows[i].RespondedToAgentAt, rows[i].LastActivityAt = &responded, nil
		}
		return rows, nil
	}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListWorkspaces(ctx, store.ListFilter{OwnerID: f.User.ID})
	if err != nil || len(list) != 2 {
		t.Fatalf("ListWorkspaces = %d, %v", len(list), err)
	}
	for _, w := range list {
		if want := map[string]time.Time{"w1": a3, "w2": a1.Truncate(time.Microsecond)}[w.Name]; w.LastActivityAt == nil || !w.LastActivityAt.Equal(want) {
			t.Errorf("%s after a user's change and a reconcile: last used at %v, want %v", w.Name, w.LastActivityAt, want)
		}
	}
}
