package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/store"
)

func testSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "sess")
	ws := f.Workspace("dev")
	f.Create(t, s, ws)
	// The fixture's user's first token has the user's id (CreateUser); a second token expires at
	// t0+30m, a third is revoked below.
	short := store.APIToken{ID: uuid.NewString(), UserID: f.User.ID, Name: "short", Hash: []byte("short"), CreatedAt: t0, ExpiresAt: ptr(t0.Add(30 * time.Minute))}
	gone := store.APIToken{ID: uuid.NewString(), UserID: f.User.ID, Name: "gone", Hash: []byte("gone"), CreatedAt: t0}
	for _, tok := range []store.APIToken{short, gone} {
		if err := s.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(id, kind string, tokenID string, life time.Duration) store.Session {
		ss := store.Session{IDHash: []byte(id), Kind: kind, UserID: f.User.ID, TokenID: tokenID, CreatedAt: t0, ExpiresAt: t0.Add(life)}
		if kind != store.SessionServer {
			ss.WorkspaceID, ss.Host = ws.ID, "3000-dev--user-sess.example.com"
		}
		if err := s.CreateSession(ctx, ss); err != nil {
			t.Fatalf("CreateSession(%s): %v", id, err)
		}
		return ss
	}
	srv := mk("srv", store.SessionServer, f.User.ID, 12*time.Hour)
	wsess := mk("ws", store.SessionWorkspace, f.User.ID, time.Hour)
	mk("short", store.SessionServer, short.ID, time.Hour)
	mk("gone", store.SessionServer, gone.ID, time.Hour)
	if _, err := s.RevokeToken(ctx, f.User.ID, "gone", t0); err != nil {
		t.Fatal(err)
	}
	// A session begun without a token (an OIDC sign-in) lives while its user is active.
	tokenless := mk("tokenless", store.SessionServer, "", 24*time.Hour)
	if got, u, err := s.Session(ctx, tokenless.IDHash, store.SessionServer, t0.Add(20*time.Hour)); err != nil || got.TokenID != "" || u.ID != f.User.ID {
		t.Fatalf("Session(tokenless) = %+v, %+v, %v", got, u, err)
	}
	if got, _, err := s.Session(ctx, []byte("short"), store.SessionServer, t0.Add(29*time.Minute)); err != nil || got.TokenID != short.ID {
		t.Fatalf("Session(short) before its token expires = %+v, %v", got, err)
	}

	got, u, err := s.Session(ctx, srv.IDHash, store.SessionServer, t0.Add(time.Minute))
	if err != nil || u.ID != f.User.ID || u.Username != f.User.Username || got.Kind != store.SessionServer || !got.ExpiresAt.Equal(srv.ExpiresAt) {
		t.Fatalf("Session(srv) = %+v, %+v, %v", got, u, err)
	}
	got, _, err = s.Session(ctx, wsess.IDHash, store.SessionWorkspace, t0)
	if err != nil || got.WorkspaceID != ws.ID || got.Host != wsess.Host {
		t.Fatalf("Session(ws) = %+v, %v", got, err)
	}
	for _, c := range []struct {
		name, id, kind string
		at             time.Time
	}{
		{"wrong kind", "srv", store.SessionWorkspace, t0},
		{"unknown", "nope", store.SessionServer, t0},
		{"expired", "ws", store.SessionWorkspace, t0.Add(time.Hour)},
		{"its token expired", "short", store.SessionServer, t0.Add(30 * time.Minute)},
		{"its token was revoked", "gone", store.SessionServer, t0},
	} {
		if _, _, err := s.Session(ctx, []byte(c.id), c.kind, c.at); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: Session = %v, want ErrNotFound", c.name, err)
		}
	}

	// A code is consumed once, whoever races for it.
	code := mk("code", store.SessionCode, f.User.ID, time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			if _, u, err := s.ConsumeSession(ctx, code.IDHash, store.SessionCode, t0); err == nil && u.ID == f.User.ID {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ConsumeSession: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("code consumed %d times, want 1", wins)
	}
	code = mk("code2", store.SessionCode, f.User.ID, 24*time.Hour)
	late := mk("late", store.SessionCode, f.User.ID, time.Minute)
	if _, _, err := s.ConsumeSession(ctx, late.IDHash, store.SessionCode, t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired code: %v, want ErrNotFound", err)
	}

	// Signing out (deleting a server session) ends the codes and workspace sessions that came from
	// it, and no other.
	child := store.Session{IDHash: []byte("child"), Kind: store.SessionWorkspace, UserID: f.User.ID, TokenID: f.User.ID,
		WorkspaceID: ws.ID, Host: wsess.Host, ParentHash: srv.IDHash, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateSession(ctx, child); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.Session(ctx, child.IDHash, store.SessionWorkspace, t0); err != nil || string(got.ParentHash) != "srv" {
		t.Fatalf("Session(child) = %+v, %v", got, err)
	}
	if got, _, err := s.Session(ctx, wsess.IDHash, store.SessionWorkspace, t0); err != nil || got.ParentHash != nil {
		t.Fatalf("a session without a parent reads back %+v, %v", got, err)
	}
	if err := s.DeleteSession(ctx, srv.IDHash); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, srv.IDHash, store.SessionServer, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after DeleteSession: %v", err)
	}
	if _, _, err := s.Session(ctx, child.IDHash, store.SessionWorkspace, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a workspace session outlived the server session it came from: %v", err)
	}
	if _, _, err := s.Session(ctx, wsess.IDHash, store.SessionWorkspace, t0); err != nil {
		t.Fatalf("DeleteSession removed an unrelated session: %v", err)
	}
	if err := s.DeleteSession(ctx, []byte("never")); err != nil {
		t.Fatalf("DeleteSession of nothing: %v", err)
	}

	// Creating a session removes the expired ones; the live ones stay.
	later := t0.Add(2 * time.Hour)
	if err := s.CreateSession(ctx, store.Session{IDHash: []byte(uuid.NewString()), Kind: store.SessionServer, UserID: f.User.ID, TokenID: f.User.ID, CreatedAt: later, ExpiresAt: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ConsumeSession(ctx, late.IDHash, store.SessionCode, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired code outlived the clean-up: %v", err)
	}
	if err := s.CreateSession(ctx, code); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate session: %v, want ErrConflict", err)
	}

	// Resetting the user's tokens ends every session of the user: those begun with the old tokens,
	// and the tokenless ones (an OIDC sign-in) too; and it counts as a revocation.
	if _, _, err := s.Session(ctx, code.IDHash, store.SessionCode, later); err != nil {
		t.Fatalf("before the reset: %v", err)
	}
	if _, _, err := s.Session(ctx, tokenless.IDHash, store.SessionServer, later); err != nil {
		t.Fatalf("a tokenless session before the reset: %v", err)
	}
	seqBefore, err := s.RevocationSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An SSH key registered before the reset (perhaps with the leaked token) goes with it.
	key := f.sshKeyOf("before-the-reset", later)
	if err := s.CreateSSHKey(ctx, key, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetUserTokens(ctx, f.User.ID, store.APIToken{ID: uuid.NewString(), Name: "initial", Hash: []byte("a new token"), CreatedAt: later}, later); err != nil {
		t.Fatal(err)
	}
	if keys, err := s.SSHKeys(ctx, f.User.ID); err != nil || len(keys) != 0 {
		t.Fatalf("the user's SSH keys after the reset: %+v, %v; want none", keys, err)
	}
	if _, _, err := s.UserBySSHKey(ctx, key.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the key's user after the reset: %v, want ErrNotFound", err)
	}
	if seq, err := s.RevocationSeq(ctx); err != nil || seq <= seqBefore {
		t.Fatalf("revocation counter after the reset: %d, %v; want past %d", seq, err, seqBefore)
	}
	if _, _, err := s.Session(ctx, tokenless.IDHash, store.SessionServer, later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a tokenless session (an OIDC sign-in) after the user's tokens were reset: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Session(ctx, code.IDHash, store.SessionCode, later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a session after the user's tokens were reset: %v, want ErrNotFound", err)
	}
	if tok, u, err := s.TokenByHash(ctx, []byte("a new token")); err != nil || u.ID != f.User.ID || tok.RevokedAt != nil {
		t.Fatalf("the new token: %+v, %+v, %v", tok, u, err)
	}
	if tok, _, err := s.TokenByHash(ctx, []byte("u"+"sess")); err != nil || tok.RevokedAt == nil || !tok.RevokedAt.Equal(later) {
		t.Fatalf("the old token after the reset: %+v, %v; want revoked at %v", tok, err, later)
	}
	if err := s.ResetUserTokens(ctx, "nobody", store.APIToken{ID: uuid.NewString(), Name: "x", Hash: []byte("x"), CreatedAt: later}, later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResetUserTokens of nobody: %v", err)
	}
	// A tokenless session begun after the reset lives until the user is suspended.
	tokenless.IDHash = []byte("tokenless after the reset")
	if err := s.CreateSession(ctx, tokenless); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, tokenless.IDHash, store.SessionServer, later); err != nil {
		t.Fatalf("a tokenless session begun after the reset: %v", err)
	}
	if _, err := s.SetUserSuspended(ctx, f.User.ID, &later); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, tokenless.IDHash, store.SessionServer, later); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a session of a suspended user: %v, want ErrNotFound", err)
	}
	if _, err := s.SetUserSuspended(ctx, f.User.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, tokenless.IDHash, store.SessionServer, later); err != nil {
		t.Fatalf("a session once its user is reinstated: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
