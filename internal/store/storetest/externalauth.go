package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// testExternalAuthLinks: a link is stored, read, listed, replaced by a link again (new version),
// updated by compare-and-swap (a stale version loses with ErrConflict, an unlinked one is
// ErrNotFound), and of two concurrent updates from one read exactly one wins.
func testExternalAuthLinks(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "ext")
	exp := t0.Add(time.Hour)
	l, err := s.PutExternalAuthLink(ctx, store.ExternalAuthLink{UserID: f.User.ID, ProviderID: "gitea", KeyID: "k1",
		AccessToken: []byte("sealed-a1"), RefreshToken: []byte("sealed-r1"), ExpiresAt: &exp, AccountLogin: "alice",
		AccountEmail: "alice@example.com", LinkedAt: t0})
	if err != nil || l.Version != 1 {
		t.Fatalf("PutExternalAuthLink = %+v, %v; want version 1", l, err)
	}
	got, err := s.ExternalAuthLink(ctx, f.User.ID, "gitea")
	if err != nil || !bytes.Equal(got.AccessToken, []byte("sealed-a1")) || !bytes.Equal(got.RefreshToken, []byte("sealed-r1")) ||
		got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.AccountLogin != "alice" || got.AccountEmail != "alice@example.com" ||
		!got.LinkedAt.Equal(t0) || got.RefreshedAt != nil || got.Version != 1 || got.KeyID != "k1" {
		t.Fatalf("ExternalAuthLink = %+v, %v", got, err)
	}
	if _, err := s.ExternalAuthLink(ctx, f.User.ID, "github"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ExternalAuthLink(unlinked) = %v, want ErrNotFound", err)
	}
	// A token that never expires and no refresh token: NULLs round-trip.
	if _, err := s.PutExternalAuthLink(ctx, store.ExternalAuthLink{UserID: f.User.ID, ProviderID: "github", KeyID: "k1",
		AccessToken: []byte("sealed-gh"), LinkedAt: t0}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ExternalAuthLinks(ctx, f.User.ID)
	if err != nil || len(list) != 2 || list[0].ProviderID != "gitea" || list[1].ProviderID != "github" || list[1].ExpiresAt != nil || list[1].RefreshToken != nil {
		t.Fatalf("ExternalAuthLinks = %+v, %v", list, err)
	}
	// Compare-and-swap: the update from version 1 wins once; a second from version 1 loses.
	at := t0.Add(time.Minute)
	upd := got
	upd.AccessToken, upd.RefreshToken, upd.RefreshedAt, upd.RefreshClaimedUntil = []byte("sealed-a2"), []byte("sealed-r2"), &at, &exp
	won, err := s.UpdateExternalAuthLink(ctx, upd)
	if err != nil || won.Version != 2 {
		t.Fatalf("UpdateExternalAuthLink = %+v, %v; want version 2", won, err)
	}
	if _, err := s.UpdateExternalAuthLink(ctx, upd); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("UpdateExternalAuthLink(stale version) = %v, want ErrConflict", err)
	}
	if got, _ := s.ExternalAuthLink(ctx, f.User.ID, "gitea"); !bytes.Equal(got.RefreshToken, []byte("sealed-r2")) || got.RefreshedAt == nil || got.Version != 2 ||
		got.RefreshClaimedUntil == nil || !got.RefreshClaimedUntil.Equal(exp) {
		t.Fatalf("after the update: %+v", got)
	}
	// Two concurrent updates from the same read: one wins, one gets ErrConflict.
	base, _ := s.ExternalAuthLink(ctx, f.User.ID, "gitea")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := base
			u.AccessToken = []byte{byte('a' + i)}
			_, errs[i] = s.UpdateExternalAuthLink(ctx, u)
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs[0], errs[1]), store.ErrConflict) {
		t.Fatalf("concurrent updates: %v, %v; want one winner and one ErrConflict", errs[0], errs[1])
	}
	// A link again replaces the tokens, clears the relink reason and bumps the version.
	cur, _ := s.ExternalAuthLink(ctx, f.User.ID, "gitea")
	relinked, err := s.PutExternalAuthLink(ctx, store.ExternalAuthLink{UserID: f.User.ID, ProviderID: "gitea", KeyID: "k2",
		AccessToken: []byte("sealed-a3"), AccountLogin: "alice2", LinkedAt: t0.Add(time.Hour)})
	if err != nil || relinked.Version != cur.Version+1 {
		t.Fatalf("link again = %+v, %v; want version %d", relinked, err, cur.Version+1)
	}
	if got, _ := s.ExternalAuthLink(ctx, f.User.ID, "gitea"); got.AccountLogin != "alice2" || got.RefreshToken != nil || got.KeyID != "k2" {
		t.Fatalf("after a link again: %+v", got)
	}
	// Unlink: gone, an update of it is ErrNotFound, a second unlink too.
	if err := s.DeleteExternalAuthLink(ctx, f.User.ID, "gitea"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateExternalAuthLink(ctx, relinked); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateExternalAuthLink(unlinked) = %v, want ErrNotFound", err)
	}
	if err := s.DeleteExternalAuthLink(ctx, f.User.ID, "gitea"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second unlink = %v, want ErrNotFound", err)
	}
}

// testExternalAuthStates: a state is taken once, not after it expired, and expired ones are
// deleted when a new one is recorded.
func testExternalAuthStates(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "extstate")
	st := store.ExternalAuthState{StateHash: []byte("h1"), UserID: f.User.ID, ProviderID: "gitea", CodeVerifier: "v1", ExpiresAt: t0.Add(10 * time.Minute)}
	if err := s.CreateExternalAuthState(ctx, st, t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.TakeExternalAuthState(ctx, []byte("h1"), t0.Add(time.Minute))
	if err != nil || got.UserID != f.User.ID || got.ProviderID != "gitea" || got.CodeVerifier != "v1" || !got.ExpiresAt.Equal(st.ExpiresAt) {
		t.Fatalf("TakeExternalAuthState = %+v, %v", got, err)
	}
	if _, err := s.TakeExternalAuthState(ctx, []byte("h1"), t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second take = %v, want ErrNotFound (single use)", err)
	}
	st.StateHash = []byte("h2")
	if err := s.CreateExternalAuthState(ctx, st, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeExternalAuthState(ctx, []byte("h2"), st.ExpiresAt); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("take when expired = %v, want ErrNotFound", err)
	}
	if _, err := s.TakeExternalAuthState(ctx, []byte("h2"), t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("take after an expired take = %v, want ErrNotFound (it was deleted)", err)
	}
	// h3 expired; recording h4 later deletes it.
	st.StateHash = []byte("h3")
	if err := s.CreateExternalAuthState(ctx, st, t0); err != nil {
		t.Fatal(err)
	}
	st.StateHash, st.ExpiresAt = []byte("h4"), t0.Add(time.Hour)
	if err := s.CreateExternalAuthState(ctx, st, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeExternalAuthState(ctx, []byte("h3"), t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("take of a state expired before a later record = %v, want ErrNotFound (pruned)", err)
	}
}
