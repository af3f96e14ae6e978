package gitssh

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/workspace"
)

const testKeys = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"

func newService(t *testing.T) (*Service, store.Store, workspace.User, workspace.User) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hangar.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	var users []workspace.User
	for i, name := range []string{"alice", "bob"} {
		u := workspace.User{ID: "00000000-0000-4000-8000-00000000000" + string(rune('1'+i)), Username: name, TokenHash: []byte(name), CreatedAt: clk.Now()}
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	keys, err := externalauth.ParseKeys([]byte(testKeys))
	if err != nil {
		t.Fatal(err)
	}
	return &Service{Keys: keys, Store: st, Clock: clk}, st, users[0], users[1]
}

// Many first reads at once (replicas, helpers) make one key; a signature verifies with it.
func TestOneKeyPerUserAndItsSignatures(t *testing.T) {
	s, st, alice, _ := newService(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make([]Key, 8)
	for i := range got {
		wg.Go(func() {
			k, err := s.PublicKey(ctx, alice)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		})
	}
	wg.Wait()
	for _, k := range got[1:] {
		if k.Fingerprint != got[0].Fingerprint {
			t.Fatalf("concurrent first reads made two keys: %s and %s", got[0].Fingerprint, k.Fingerprint)
		}
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(got[0].PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(ctx, alice, pub.Marshal(), []byte("data"))
	if err != nil || pub.Verify([]byte("data"), sig) != nil {
		t.Fatalf("Sign = %v, %v; want a signature that verifies", sig, err)
	}
	row, _ := st.GitSSHKey(ctx, alice.ID)
	if len(row.PrivateKey) < 32+28 || bytes.Contains(row.PrivateKey, pub.Marshal()[len(pub.Marshal())-32:]) {
		t.Fatalf("the stored private key does not look sealed: %x", row.PrivateKey)
	}
}

// A sealed key moved to another user's row does not open; a suspended user and too much data
// get no signature; a rotation's old key is refused.
func TestSignRefusals(t *testing.T) {
	s, st, alice, bob := newService(t)
	ctx := context.Background()
	ka, _ := s.PublicKey(ctx, alice)
	if _, err := s.PublicKey(ctx, bob); err != nil {
		t.Fatal(err)
	}
	row, _ := st.GitSSHKey(ctx, alice.ID)
	row.UserID = bob.ID
	if err := st.ReplaceGitSSHKey(ctx, row); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(ctx, bob, nil, []byte("x")); !errors.Is(err, externalauth.ErrUnsealable) {
		t.Fatalf("Sign with alice's sealed key in bob's row = %v, want ErrUnsealable", err)
	}
	now := time.Now()
	suspended := alice
	suspended.SuspendedAt = &now
	if _, err := s.Sign(ctx, suspended, nil, []byte("x")); !errors.Is(err, ErrSuspended) {
		t.Fatalf("Sign for a suspended user = %v", err)
	}
	if _, err := s.Sign(ctx, alice, nil, make([]byte, MaxSignData+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Sign of too much = %v", err)
	}
	old, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(ka.PublicKey))
	kb, err := s.Rotate(ctx, alice)
	if err != nil || kb.Fingerprint == ka.Fingerprint {
		t.Fatalf("Rotate = %+v, %v", kb, err)
	}
	if _, err := s.Sign(ctx, alice, old.Marshal(), []byte("x")); !errors.Is(err, ErrRotated) {
		t.Fatalf("Sign with the rotated key = %v", err)
	}
}
