package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func newToken(userID, name string, expires *time.Time) store.APIToken {
	return store.APIToken{ID: uuid.NewString(), UserID: userID, Name: name, Hash: []byte("hash-" + uuid.NewString()), CreatedAt: t0, ExpiresAt: expires}
}

func testTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "tok")
	other := NewFixture(t, s, "tok2")

	laptop := newToken(f.User.ID, "laptop", ptr(t0.Add(30*24*time.Hour)))
	if err := s.CreateToken(ctx, laptop); err != nil {
		t.Fatal(err)
	}
	// A name is unique among the user's live tokens; another user may use it.
	dup := newToken(f.User.ID, "laptop", nil)
	if err := s.CreateToken(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second live token named laptop: %v, want ErrConflict", err)
	}
	if err := s.CreateToken(ctx, newToken(other.User.ID, "laptop", nil)); err != nil {
		t.Fatalf("another user's laptop: %v", err)
	}
	if err := s.CreateToken(ctx, newToken("nobody", "x", nil)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a token of nobody: %v, want ErrNotFound", err)
	}

	got, u, err := s.TokenByHash(ctx, laptop.Hash)
	if err != nil || got.ID != laptop.ID || got.Name != "laptop" || u.ID != f.User.ID || got.ExpiresAt == nil || !got.ExpiresAt.Equal(*laptop.ExpiresAt) ||
		got.LastUsedAt != nil || got.RevokedAt != nil || !got.Expired(*laptop.ExpiresAt) || got.Expired(t0) {
		t.Fatalf("TokenByHash(laptop) = %+v, %+v, %v", got, u, err)
	}

	// Uses are recorded at most once per interval.
	if err := s.TouchToken(ctx, got, t0.Add(time.Minute), time.Minute); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.TokenByHash(ctx, laptop.Hash)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("last used = %v, want %v", got.LastUsedAt, t0.Add(time.Minute))
	}
	if err := s.TouchToken(ctx, got, t0.Add(90*time.Second), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got2, _, _ := s.TokenByHash(ctx, laptop.Hash); !got2.LastUsedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a use within the interval moved last used to %v", got2.LastUsedAt)
	}

	list, err := s.ListTokens(ctx, f.User.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListTokens = %+v, %v; want initial and laptop", list, err)
	}
	names := []string{list[0].Name, list[1].Name}
	if !(names[0] == "initial" || names[0] == "laptop") || names[0] == names[1] {
		t.Fatalf("tokens listed %v", names)
	}

	// Revoking by name, then the name is free; revoking again by id changes nothing.
	revoked, err := s.RevokeToken(ctx, f.User.ID, "laptop", t0.Add(time.Hour))
	if err != nil || revoked.ID != laptop.ID || revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("RevokeToken(laptop) = %+v, %v", revoked, err)
	}
	if got, _, err := s.TokenByHash(ctx, laptop.Hash); err != nil || got.RevokedAt == nil {
		t.Fatalf("a revoked token reads back %+v, %v (it is found, marked revoked)", got, err)
	}
	again, err := s.RevokeToken(ctx, f.User.ID, laptop.ID, t0.Add(2*time.Hour))
	if err != nil || !again.RevokedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("revoking again = %+v, %v; want the first revocation kept", again, err)
	}
	if err := s.CreateToken(ctx, dup); err != nil {
		t.Fatalf("a new laptop once the old is revoked: %v", err)
	}
	if _, err := s.RevokeToken(ctx, f.User.ID, "nothing", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking no token: %v, want ErrNotFound", err)
	}
	// Another user's token is not found by id or by name.
	otherList, _ := s.ListTokens(ctx, other.User.ID)
	if _, err := s.RevokeToken(ctx, f.User.ID, otherList[0].ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking another user's token: %v, want ErrNotFound", err)
	}

	// CreateUserWithToken writes both or neither.
	carol := workspace.User{ID: uuid.NewString(), Username: "carol", CreatedAt: t0}
	bad := newToken("", "x", nil)
	bad.Hash = laptop.Hash // taken
	if err := s.CreateUserWithToken(ctx, carol, bad); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateUserWithToken with a taken hash: %v, want ErrConflict", err)
	}
	if _, err := s.UserByUsername(ctx, "carol"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("carol was created without her token: %v", err)
	}
	ct := newToken("", "initial", ptr(t0.Add(time.Hour)))
	if err := s.CreateUserWithToken(ctx, carol, ct); err != nil {
		t.Fatal(err)
	}
	if tok, u, err := s.TokenByHash(ctx, ct.Hash); err != nil || u.Username != "carol" || tok.UserID != carol.ID {
		t.Fatalf("carol's token = %+v, %+v, %v", tok, u, err)
	}
	// A user created without a token hash has none.
	dave := workspace.User{ID: uuid.NewString(), Username: "dave", CreatedAt: t0}
	if err := s.CreateUser(ctx, dave); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListTokens(ctx, dave.ID); err != nil || len(list) != 0 {
		t.Fatalf("dave's tokens = %+v, %v", list, err)
	}

	// Audited: the revocation's entry commits with it.
	actx, _ := (&audit.Recorder{W: s, Now: func() time.Time { return t0 }}).Begin(ctx, audit.Actor{ID: f.User.ID, Name: f.User.Username}, audit.TokenRevoke,
		audit.Target{Kind: audit.KindToken, Name: "initial"})
	if _, err := s.RevokeToken(actx, f.User.ID, "initial", t0); err != nil {
		t.Fatal(err)
	}
	entries, err := s.ListAudit(ctx, audit.Filter{Action: audit.TokenRevoke})
	if err != nil || len(entries) != 1 || entries[0].Outcome != audit.Success || entries[0].Target.Name != "initial" {
		t.Fatalf("audit = %+v, %v", entries, err)
	}
}

func testSuspendAndDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	admin := workspace.User{ID: uuid.NewString(), Username: "root", Admin: true, TokenHash: []byte("root"), CreatedAt: t0}
	if err := s.CreateUser(ctx, admin); err != nil {
		t.Fatal(err)
	}
	f := NewFixture(t, s, "sus")
	key := store.SSHKey{ID: uuid.NewString(), UserID: f.User.ID, Name: "k", Fingerprint: "SHA256:sus", PublicKey: "ssh-ed25519 AAAA", CreatedAt: t0}
	if err := s.CreateSSHKey(ctx, key, 10); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Hour)
	u, err := s.SetUserSuspended(ctx, f.User.ID, &at)
	if err != nil || u.SuspendedAt == nil || !u.SuspendedAt.Equal(at) {
		t.Fatalf("SetUserSuspended = %+v, %v", u, err)
	}
	// Suspended: found (an admin reinstates it), marked, its token found but its user marked.
	if u, err := s.UserByUsername(ctx, f.User.Username); err != nil || u.SuspendedAt == nil {
		t.Fatalf("UserByUsername(suspended) = %+v, %v", u, err)
	}
	if _, u, err := s.TokenByHash(ctx, f.User.TokenHash); err != nil || u.SuspendedAt == nil {
		t.Fatalf("TokenByHash of a suspended user = %+v, %v", u, err)
	}
	if u, _, err := s.UserBySSHKey(ctx, key.Fingerprint); err != nil || u.SuspendedAt == nil {
		t.Fatalf("UserBySSHKey of a suspended user = %+v, %v", u, err)
	}
	// Suspending again keeps the first time.
	later := at.Add(time.Hour)
	if u, err := s.SetUserSuspended(ctx, f.User.ID, &later); err != nil || !u.SuspendedAt.Equal(at) {
		t.Fatalf("suspending again = %+v, %v", u, err)
	}
	if u, err := s.SetUserSuspended(ctx, f.User.ID, nil); err != nil || u.SuspendedAt != nil {
		t.Fatalf("reinstating = %+v, %v", u, err)
	}
	users, err := s.ListUsers(ctx)
	if err != nil || len(users) != 2 || users[0].Username != "root" || users[1].Username != f.User.Username {
		t.Fatalf("ListUsers = %+v, %v", users, err)
	}

	// Deleting is refused while the user owns a workspace that is not Terminated, naming it.
	ws := f.Workspace("keep")
	f.Create(t, s, ws)
	err = s.DeleteUser(ctx, f.User.ID, later)
	if !errors.Is(err, store.ErrOwnsWorkspaces) || !strings.Contains(err.Error(), "keep") {
		t.Fatalf("DeleteUser with a workspace: %v, want ErrOwnsWorkspaces naming keep", err)
	}
	if _, err := s.UserByUsername(ctx, f.User.Username); err != nil {
		t.Fatalf("a refused delete deleted: %v", err)
	}
	if _, err := s.UpdateWorkspace(ctx, f.Ref("keep"), func(w workspace.Workspace) (workspace.Workspace, error) {
		w.DesiredState, w.ActualState = workspace.Terminated, workspace.Terminated
		return w, nil
	}); err != nil {
		t.Fatal(err)
	}
	sess := store.Session{IDHash: []byte("sus-session"), Kind: store.SessionServer, UserID: f.User.ID, CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	// Its forge links (sealed tokens) and links in progress go with it: nothing keeps a deleted
	// user's forge tokens.
	if _, err := s.PutExternalAuthLink(ctx, store.ExternalAuthLink{UserID: f.User.ID, ProviderID: "gitea", KeyID: "k1",
		AccessToken: []byte("sealed-a"), RefreshToken: []byte("sealed-r"), AccountLogin: "sus", LinkedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateExternalAuthState(ctx, store.ExternalAuthState{StateHash: []byte("sus-state"), UserID: f.User.ID, ProviderID: "gitea",
		CodeVerifier: "v", ExpiresAt: later.Add(time.Hour)}, later); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, f.User.ID, later); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if links, err := s.ExternalAuthLinks(ctx, f.User.ID); err != nil || len(links) != 0 {
		t.Fatalf("the deleted user's forge links = %+v, %v; want none", links, err)
	}
	if _, err := s.TakeExternalAuthState(ctx, []byte("sus-state"), later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TakeExternalAuthState(deleted user's) = %v, want ErrNotFound", err)
	}
	// Gone: not found by name, token, key or session; not listed; its name stays taken; its
	// Terminated workspace keeps its owner.
	if _, err := s.UserByUsername(ctx, f.User.Username); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByUsername(deleted): %v", err)
	}
	if _, _, err := s.TokenByHash(ctx, f.User.TokenHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TokenByHash(deleted user's): %v", err)
	}
	if _, _, err := s.UserBySSHKey(ctx, key.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserBySSHKey(deleted user's): %v", err)
	}
	if _, _, err := s.Session(ctx, sess.IDHash, store.SessionServer, later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Session(deleted user's): %v", err)
	}
	if users, _ := s.ListUsers(ctx); len(users) != 1 {
		t.Fatalf("ListUsers after delete = %+v", users)
	}
	if err := s.CreateUser(ctx, workspace.User{ID: uuid.NewString(), Username: f.User.Username, CreatedAt: later}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a new user with a deleted user's name: %v, want ErrConflict", err)
	}
	if w, err := s.Workspace(ctx, store.WorkspaceRef{ID: ws.ID}); err != nil || w.OwnerName != f.User.Username {
		t.Fatalf("the deleted user's terminated workspace = %+v, %v", w, err)
	}
	if err := s.DeleteUser(ctx, f.User.ID, later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting twice: %v, want ErrNotFound", err)
	}
	if _, err := s.SetUserSuspended(ctx, f.User.ID, &later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("suspending a deleted user: %v, want ErrNotFound", err)
	}
	if _, err := s.SetUserSuspended(ctx, store.AutomationUserID, &later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("suspending the automation: %v, want ErrNotFound", err)
	}
}

func testLastAdmin(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(name string) workspace.User {
		u := workspace.User{ID: uuid.NewString(), Username: name, Admin: true, CreatedAt: t0}
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	a, b := mk("a"), mk("b")
	at := t0
	if _, err := s.SetUserSuspended(ctx, a.ID, &at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetUserSuspended(ctx, b.ID, &at); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("suspending the last active admin: %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(ctx, b.ID, at); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("deleting the last active admin: %v, want ErrLastAdmin", err)
	}
	// A suspended admin may be deleted: it is not active.
	if err := s.DeleteUser(ctx, a.ID, at); err != nil {
		t.Fatalf("deleting a suspended admin: %v", err)
	}
	// Two admins suspended at once: one wins, one is refused, one admin stays.
	c := mk("c")
	for range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, u := range []workspace.User{b, c} {
			wg.Go(func() { _, errs[i] = s.SetUserSuspended(ctx, u.ID, &at) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if !errors.Is(err, store.ErrLastAdmin) && !isBusy(err) {
				t.Fatalf("concurrent suspend: %v", err)
			}
		}
		if ok > 1 {
			t.Fatalf("both of the last two admins were suspended")
		}
		users, _ := s.ListUsers(ctx)
		active := 0
		for _, u := range users {
			if u.Admin && u.SuspendedAt == nil {
				active++
			}
		}
		if active != 2-ok {
			t.Fatalf("%d active admins after a round", active)
		}
		for _, u := range []workspace.User{b, c} {
			if _, err := s.SetUserSuspended(ctx, u.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// isBusy reports a SQLite "database is locked" answer to concurrent writers (SQLite serializes
// writers; the store's callers retry such a request).
func isBusy(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "database is locked"))
}

func testAgentAndProvisionerTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "agt")
	if err := s.SetAgentToken(ctx, f.Agent.ID, []byte("new agent token"), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AgentByTokenHash(ctx, f.Agent.TokenHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old agent token: %v, want ErrNotFound", err)
	}
	if a, err := s.AgentByTokenHash(ctx, []byte("new agent token")); err != nil || a.ID != f.Agent.ID || !a.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the new agent token = %+v, %v", a, err)
	}
	if err := s.SetAgentToken(ctx, "nope", []byte("x"), t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetAgentToken(nope): %v", err)
	}
	cfg := f.Agent.Config
	cfg.WorkspacesQuota = ptr(7)
	a, err := s.SetAgentConfig(ctx, f.Agent.ID, cfg, t0.Add(2*time.Hour))
	if err != nil || a.Config.WorkspacesQuota == nil || *a.Config.WorkspacesQuota != 7 || !a.UpdatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("SetAgentConfig = %+v, %v", a, err)
	}
	if a, _ := s.AgentByName(ctx, f.Agent.Name); a.Config.WorkspacesQuota == nil || *a.Config.WorkspacesQuota != 7 {
		t.Fatalf("the config reads back %+v", a.Config)
	}
	if _, err := s.SetAgentConfig(ctx, "nope", cfg, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetAgentConfig(nope): %v", err)
	}

	p := store.Provisioner{ID: uuid.NewString(), Name: "p", TokenHash: []byte("p-old"), CreatedAt: t0}
	if err := s.CreateProvisioner(ctx, p); err != nil {
		t.Fatal(err)
	}
	provSeq, err := s.RevocationSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.SetProvisionerToken(ctx, "p", []byte("p-new")); err != nil || got.ID != p.ID {
		t.Fatalf("SetProvisionerToken = %+v, %v", got, err)
	}
	if seq, err := s.RevocationSeq(ctx); err != nil || seq <= provSeq {
		t.Fatalf("revocation counter after SetProvisionerToken: %d, %v; want past %d", seq, err, provSeq)
	}
	if _, err := s.ProvisionerByTokenHash(ctx, []byte("p-old")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old provisioner token: %v", err)
	}
	if got, err := s.ProvisionerByTokenHash(ctx, []byte("p-new")); err != nil || got.ID != p.ID {
		t.Fatalf("the new provisioner token = %+v, %v", got, err)
	}
	if _, err := s.SetProvisionerToken(ctx, "nope", []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetProvisionerToken(nope): %v", err)
	}
}

func testRevocations(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "rev")
	ch, cancel := s.SubscribeRevocations()
	defer cancel()
	seq := func() int64 {
		n, err := s.RevocationSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n0 := seq()
	expectWake := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up after %s", what)
		}
		if n := seq(); n <= n0 {
			t.Fatalf("after %s the revocation counter is %d, was %d", what, n, n0)
		} else {
			n0 = n
		}
	}
	if _, err := s.RevokeToken(ctx, f.User.ID, "initial", t0); err != nil {
		t.Fatal(err)
	}
	expectWake("a token revoked")
	at := t0
	if _, err := s.SetUserSuspended(ctx, f.User.ID, &at); err != nil {
		t.Fatal(err)
	}
	expectWake("a user suspended")
	if err := s.DeleteSession(ctx, []byte("none")); err != nil {
		t.Fatal(err)
	}
	expectWake("a sign-out")
	if err := s.SetAgentToken(ctx, f.Agent.ID, []byte("rotated"), t0); err != nil {
		t.Fatal(err)
	}
	expectWake("an agent token replaced")
	// A failed write counts nothing.
	if _, err := s.RevokeToken(ctx, f.User.ID, "nothing", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if n := seq(); n != n0 {
		t.Fatalf("a failed revocation moved the counter to %d from %d", n, n0)
	}
}
