// Package gitssh is a user's git SSH key (docs/decisions.md, "A team's repository: a git SSH key
// per user (issue 22)"): one ed25519 key per user, made by the server on first need, whose public
// half the user adds to their forge. The private key is kept sealed under the external auth key
// file and never leaves the server: a workspace's helper serves an SSH agent whose signatures the
// server makes (Sign) for the workspace's owner.
package gitssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// MaxSignData bounds what a signature is asked for: ssh signs a session identifier and a few
// names (well under 1 KiB) to authenticate.
const MaxSignData = 16 << 10

var (
	// ErrSuspended refuses a suspended user's signatures.
	ErrSuspended = errs.New(errs.Forbidden, "user suspended")
	// ErrRotated is a signature asked with a key that is no longer the user's (rotated since).
	ErrRotated = errs.New(errs.Conflict, "not the user's current git SSH key")
	// ErrTooLarge is data over MaxSignData.
	ErrTooLarge = errs.New(errs.TooLarge, "too much to sign")
)

// Key is the public part of a user's key.
type Key struct {
	// PublicKey is the authorized_keys form: "ssh-ed25519 BASE64 hangar:USERNAME".
	PublicKey   string
	Fingerprint string
	CreatedAt   time.Time
}

// Service makes, rotates and signs with users' keys.
type Service struct {
	Keys  *externalauth.Keyring
	Store store.GitSSHKeyStore
	Clock clock.Clock
}

// aad binds a sealed private key to its user and public key: a ciphertext copied into another
// user's row, or beside another public key, does not open.
func aad(userID, publicKey string) string {
	return "hangar git ssh key v1\x00" + userID + "\x00" + publicKey
}

func (s *Service) newKey(u workspace.User) (store.GitSSHKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return store.GitSSHKey{}, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return store.GitSSHKey{}, err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
	keyID, sealed := s.Keys.Seal(priv.Seed(), aad(u.ID, line))
	return store.GitSSHKey{UserID: u.ID, PublicKey: line, Fingerprint: ssh.FingerprintSHA256(sp), KeyID: keyID, PrivateKey: sealed,
		CreatedAt: s.Clock.Now()}, nil
}

func (s *Service) public(u workspace.User, k store.GitSSHKey) Key {
	return Key{PublicKey: k.PublicKey + " hangar:" + u.Username, Fingerprint: k.Fingerprint, CreatedAt: k.CreatedAt}
}

// key reads the user's key, making it on first need (of two replicas making it at once, the
// second reads the first's).
func (s *Service) key(ctx context.Context, u workspace.User) (store.GitSSHKey, error) {
	k, err := s.Store.GitSSHKey(ctx, u.ID)
	if !errors.Is(err, store.ErrNotFound) {
		return k, err
	}
	k, err = s.newKey(u)
	if err != nil {
		return store.GitSSHKey{}, err
	}
	if err := s.Store.CreateGitSSHKey(ctx, k); errors.Is(err, store.ErrConflict) {
		return s.Store.GitSSHKey(ctx, u.ID)
	} else if err != nil {
		return store.GitSSHKey{}, err
	}
	return k, nil
}

// PublicKey is the user's public key, made on first need.
func (s *Service) PublicKey(ctx context.Context, u workspace.User) (Key, error) {
	k, err := s.key(ctx, u)
	if err != nil {
		return Key{}, err
	}
	return s.public(u, k), nil
}

// Rotate makes the user a new key: the old one signs nothing more (the forge still lists it until
// the user removes it there). The new fingerprint goes into ctx's pending audit entry.
func (s *Service) Rotate(ctx context.Context, u workspace.User) (Key, error) {
	k, err := s.newKey(u)
	if err != nil {
		return Key{}, err
	}
	audit.From(ctx).Set("fingerprint", k.Fingerprint) // the pending entry, written with the key
	if err := s.Store.ReplaceGitSSHKey(ctx, k); err != nil {
		return Key{}, err
	}
	return s.public(u, k), nil
}

// Sign signs data with owner's key for a workspace of theirs. publicKey, when not empty, is the
// key the SSH client chose (authorized_keys form or wire format base64 is not accepted: the
// helper sends the marshalled key): a key rotated since is refused, so ssh is told and does not
// loop. A suspended owner gets no signature.
func (s *Service) Sign(ctx context.Context, owner workspace.User, publicKey []byte, data []byte) (*ssh.Signature, error) {
	if owner.SuspendedAt != nil {
		return nil, fmt.Errorf("%w: %s is suspended (since %s): no git SSH signature is made", ErrSuspended, owner.Username, owner.SuspendedAt.Format(time.RFC3339))
	}
	if len(data) > MaxSignData {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxSignData)
	}
	k, err := s.key(ctx, owner)
	if err != nil {
		return nil, err
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("the stored git SSH key of %s: %w", owner.Username, err)
	}
	if len(publicKey) > 0 && string(publicKey) != string(pub.Marshal()) {
		return nil, fmt.Errorf("%w: %s's key was rotated: the key asked for is not %s (see hangar gitssh)", ErrRotated, owner.Username, k.Fingerprint)
	}
	seed, err := s.Keys.Open(k.KeyID, k.PrivateKey, aad(owner.ID, k.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("open the git SSH key of %s: %w", owner.Username, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("open the git SSH key of %s: %d bytes, want an ed25519 seed", owner.Username, len(seed))
	}
	signer, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, err
	}
	return signer.Sign(rand.Reader, data)
}
