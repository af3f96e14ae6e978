package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// testGitSSHKeys: a user has no key until one is made; a second first key is ErrConflict (the
// loser of two replicas reads the winner's); a replacement (rotation) overwrites every field; the
// key goes with its user.
func testGitSSHKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	f := NewFixture(t, s, "gitssh")
	if _, err := s.GitSSHKey(ctx, f.User.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GitSSHKey before any = %v, want ErrNotFound", err)
	}
	k := store.GitSSHKey{UserID: f.User.ID, PublicKey: "ssh-ed25519 AAAA1", Fingerprint: "SHA256:one", KeyID: "k1", PrivateKey: []byte("sealed-1"), CreatedAt: t0}
	if err := s.CreateGitSSHKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateGitSSHKey(ctx, store.GitSSHKey{UserID: f.User.ID, PublicKey: "ssh-ed25519 AAAA2", Fingerprint: "SHA256:two", KeyID: "k1",
		PrivateKey: []byte("sealed-2"), CreatedAt: t0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second first key = %v, want ErrConflict", err)
	}
	got, err := s.GitSSHKey(ctx, f.User.ID)
	if err != nil || got.PublicKey != k.PublicKey || got.Fingerprint != k.Fingerprint || got.KeyID != "k1" || !bytes.Equal(got.PrivateKey, k.PrivateKey) || !got.CreatedAt.Equal(t0) {
		t.Fatalf("GitSSHKey = %+v, %v; want %+v", got, err, k)
	}
	at := t0.Add(time.Hour)
	r := store.GitSSHKey{UserID: f.User.ID, PublicKey: "ssh-ed25519 AAAA3", Fingerprint: "SHA256:three", KeyID: "k2", PrivateKey: []byte("sealed-3"), CreatedAt: at}
	if err := s.ReplaceGitSSHKey(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err = s.GitSSHKey(ctx, f.User.ID)
	if err != nil || got.PublicKey != r.PublicKey || got.Fingerprint != r.Fingerprint || got.KeyID != "k2" || !bytes.Equal(got.PrivateKey, r.PrivateKey) || !got.CreatedAt.Equal(at) {
		t.Fatalf("GitSSHKey after a rotation = %+v, %v; want %+v", got, err, r)
	}
	other := NewFixture(t, s, "gitssh2")
	if err := s.ReplaceGitSSHKey(ctx, store.GitSSHKey{UserID: other.User.ID, PublicKey: "ssh-ed25519 B", Fingerprint: "SHA256:b", KeyID: "k1", PrivateKey: []byte("b"), CreatedAt: t0}); err != nil {
		t.Fatalf("ReplaceGitSSHKey without a key yet = %v, want it made", err)
	}
	if got, err := s.GitSSHKey(ctx, f.User.ID); err != nil || got.PublicKey != r.PublicKey {
		t.Fatalf("another user's key changed this one's: %+v, %v", got, err)
	}
}
