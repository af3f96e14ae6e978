package server

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Users' SSH keys (docs/decisions.md, "SSH keys"): a user registers public keys, and the access
// proxy lets the holder of one into that user's workspaces (proxySSHCheck). A key identifies one
// user, by its SHA-256 fingerprint.

const (
	// MaxSSHKeysPerUser bounds the keys one user may register.
	MaxSSHKeysPerUser = 100
	// maxSSHKeyNameLen bounds a key's name, in characters.
	maxSSHKeyNameLen = 64
	// maxPublicKeyBytes bounds a public key as sent (an RSA key of 16384 bits is under 3 KiB).
	maxPublicKeyBytes = 16 << 10
	// minRSABits is the smallest RSA modulus accepted (NIST SP 800-131A's minimum).
	minRSABits = 2048
)

const dsaProblem = "is a DSA key, which is too weak (OpenSSH has refused them by default since 7.0): use an ed25519 key (ssh-keygen -t ed25519)"

// parseSSHKey reads the one public key of text, as a user pastes it or a .pub file holds it:
// blank lines and # comments around it are allowed, options and certificates are not, nor keys
// too weak to keep (DSA, RSA under 2048 bits). problem, when not empty, says what is wrong for the
// field public_key.
func parseSSHKey(text string) (key ssh.PublicKey, comment, problem string) {
	if len(text) > maxPublicKeyBytes {
		return nil, "", fmt.Sprintf("is too long (%d bytes; at most %d)", len(text), maxPublicKeyBytes)
	}
	if strings.Contains(text, "PRIVATE KEY") {
		return nil, "", "is a private key: never share it; give the public key, the .pub file beside it (for example ~/.ssh/id_ed25519.pub)"
	}
	var lines []string
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	switch len(lines) {
	case 0:
		return nil, "", "is required: an SSH public key in authorized_keys form, such as the content of ~/.ssh/id_ed25519.pub"
	case 1:
	default:
		return nil, "", fmt.Sprintf("must hold exactly one key, got %d lines: add each key on its own", len(lines))
	}
	if slices.Contains(strings.Fields(lines[0]), ssh.KeyAlgoDSA) {
		return nil, "", dsaProblem // also those x/crypto/ssh cannot parse (DSA keys of other sizes)
	}
	key, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(lines[0]))
	if err != nil {
		return nil, "", `must be an SSH public key in authorized_keys form, such as "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA... me@laptop"`
	}
	if len(options) > 0 {
		return nil, "", fmt.Sprintf("must have no options (%s): Hangar would not apply them", strings.Join(options, ","))
	}
	if _, ok := key.(*ssh.Certificate); ok {
		return nil, "", "must be a plain public key, not a certificate"
	}
	switch key.Type() {
	case ssh.KeyAlgoDSA:
		return nil, "", dsaProblem
	case ssh.KeyAlgoRSA:
		if ck, ok := key.(ssh.CryptoPublicKey); ok {
			if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
				return nil, "", fmt.Sprintf("is an RSA key of %d bits, which is too weak: RSA keys need at least %d (or use ssh-keygen -t ed25519)", rk.N.BitLen(), minRSABits)
			}
		}
	}
	return key, comment, ""
}

// sshKeyName is the name a key gets: name if given (problem says what is wrong with it), else the
// key's comment if it makes a name, else its type.
func sshKeyName(name, comment string, key ssh.PublicKey) (string, string) {
	if name != "" {
		switch {
		case utf8.RuneCountInString(name) > maxSSHKeyNameLen:
			return "", fmt.Sprintf("must be at most %d characters, got %d", maxSSHKeyNameLen, utf8.RuneCountInString(name))
		case strings.IndexFunc(name, unicode.IsControl) >= 0:
			return "", "must not contain control characters (newlines, tabs, ...)"
		case strings.TrimSpace(name) != name:
			return "", "must not begin or end with spaces"
		}
		return name, ""
	}
	if comment = strings.TrimSpace(comment); comment != "" && strings.IndexFunc(comment, unicode.IsControl) < 0 && utf8.ValidString(comment) {
		if r := []rune(comment); len(r) > maxSSHKeyNameLen {
			comment = strings.TrimSpace(string(r[:maxSSHKeyNameLen]))
		}
		return comment, ""
	}
	return key.Type(), ""
}

// listSSHKeys serves GET /api/v1/users/me/ssh-keys.
func (s *Server) listSSHKeys(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	keys, err := s.store.SSHKeys(r.Context(), u.ID)
	if err != nil {
		return err
	}
	out := sdk.SSHKeyList{SSHKeys: make([]sdk.SSHKey, len(keys))}
	for i, k := range keys {
		out.SSHKeys[i] = toSSHKey(k)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// addSSHKey serves POST /api/v1/users/me/ssh-keys.
func (s *Server) addSSHKey(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	var req sdk.AddSSHKeyRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	defer s.audit(&r, u, audit.SSHKeyAdd, audit.Target{Kind: audit.KindSSHKey})(&err)
	v := &workspace.ValidationError{}
	key, comment, problem := parseSSHKey(req.PublicKey)
	if problem != "" {
		v.Add("public_key", "%s", problem)
	}
	var name string
	if key != nil || req.Name != "" {
		if name, problem = sshKeyName(req.Name, comment, key); problem != "" {
			v.Add("name", "%s", problem)
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	k := store.SSHKey{ID: uuid.NewString(), UserID: u.ID, Name: name, Fingerprint: ssh.FingerprintSHA256(key),
		PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))), CreatedAt: s.clock.Now()}
	audit.From(r.Context()).SetTarget(audit.Target{Kind: audit.KindSSHKey, ID: k.ID, Name: k.Fingerprint})
	audit.From(r.Context()).Set("name", k.Name)
	audit.From(r.Context()).Set("type", key.Type())
	err = s.store.CreateSSHKey(r.Context(), k, MaxSSHKeysPerUser)
	switch {
	case errors.Is(err, store.ErrConflict):
		// Whose it is stays unsaid: a key identifies one user, and anyone may try any public key.
		return errConflict("this key is already registered",
			"a key can be registered once, since it identifies its user; if it is one of yours, 'hangar ssh-keys list' shows it, else use another key")
	case errors.Is(err, store.ErrQuota):
		return errConflict("too many SSH keys", fmt.Sprintf("a user may register at most %d; remove one first ('hangar ssh-keys remove')", MaxSSHKeysPerUser))
	case err != nil:
		return err
	}
	s.log.Info("ssh key added", "user", u.Username, "fingerprint", k.Fingerprint, "type", key.Type())
	writeJSON(w, http.StatusCreated, toSSHKey(k))
	return nil
}

// removeSSHKey serves DELETE /api/v1/users/me/ssh-keys/{key}: key is the id or the fingerprint.
func (s *Server) removeSSHKey(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	ref := r.PathValue("key")
	defer s.audit(&r, u, audit.SSHKeyRemove, audit.Target{Kind: audit.KindSSHKey, Name: clip(ref)})(&err)
	k, err := s.store.DeleteSSHKey(r.Context(), u.ID, ref)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("you have no SSH key %q (name it by its id or its fingerprint, SHA256:...)", ref)
	} else if err != nil {
		return err
	}
	s.log.Info("ssh key removed", "user", u.Username, "fingerprint", k.Fingerprint)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
