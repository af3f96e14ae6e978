package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/gitssh"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// A user's git SSH key (docs/decisions.md, "A team's repository: a git SSH key per user (issue
// 22)"): the decisions are internal/gitssh's; these handlers read the request, call it and write
// its answer. The private key never leaves the server: a workspace's helper asks for signatures.

// errNoGitSSH answers the git SSH endpoints of a server without the external auth key file.
var errNoGitSSH = errCode(errs.NotFound, "git SSH keys are not configured",
	"this server keeps git SSH keys sealed under the external auth key file, and has none (hangar server --external-auth-key-file)")

// gitSSHSignBodyBytes bounds a sign request: the data (gitssh.MaxSignData) and a public key, in
// base64 inside JSON.
const gitSSHSignBodyBytes = 2*gitssh.MaxSignData + 4096

func toGitSSHKey(k gitssh.Key) sdk.GitSSHKey {
	return sdk.GitSSHKey{PublicKey: k.PublicKey, Fingerprint: k.Fingerprint, CreatedAt: k.CreatedAt}
}

// gitSSHKey serves GET /api/v1/users/me/gitssh: the caller's public key, made on first need.
func (s *Server) gitSSHKey(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	if s.gitSSH == nil {
		return errNoGitSSH
	}
	k, err := s.gitSSH.PublicKey(r.Context(), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toGitSSHKey(k))
	return nil
}

// rotateGitSSHKey serves POST /api/v1/users/me/gitssh/rotate: a new key, audited.
func (s *Server) rotateGitSSHKey(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	if s.gitSSH == nil {
		return errNoGitSSH
	}
	defer s.audit(&r, u, audit.GitSSHRotate, audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})(&err)
	k, err := s.gitSSH.Rotate(r.Context(), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toGitSSHKey(k))
	return nil
}

// helperOwner is the owner of the workspace whose helper sent r (with its token), read now: a
// suspension is seen at the next request.
func (s *Server) helperOwner(r *http.Request) (workspace.User, error) {
	ws, _, err := s.helperOf(r)
	if err != nil {
		return workspace.User{}, err
	}
	owner, err := s.store.UserByUsername(r.Context(), ws.OwnerName)
	if errors.Is(err, store.ErrNotFound) {
		return workspace.User{}, errUnauthorized("invalid helper token: its workspace's owner is deleted")
	}
	return owner, err
}

// gitSSHAnswer gives gitssh's refusals their whole sentence as the message (the helper's agent
// logs it, and ssh shows a failed signature).
func gitSSHAnswer(err error) error {
	for _, e := range []error{gitssh.ErrSuspended, gitssh.ErrRotated, gitssh.ErrTooLarge} {
		if errors.Is(err, e) {
			return errCode(errs.CodeOf(e), err.Error(), "")
		}
	}
	return err
}

// helperGitSSHKey serves GET /api/v1/workspace-agent/gitssh: the workspace owner's public key,
// for the helper's agent to list and the clone at the start to sign with, and the forges' SSH host
// keys (their ssh_known_hosts), which the workspace's ssh checks.
func (s *Server) helperGitSSHKey(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		owner, err := s.helperOwner(r)
		if err != nil {
			return err
		}
		if s.gitSSH == nil {
			return errNoGitSSH
		}
		if owner.SuspendedAt != nil {
			return gitSSHAnswer(fmt.Errorf("%w: %s is suspended: no git SSH key is handed out", gitssh.ErrSuspended, owner.Username))
		}
		k, err := s.gitSSH.PublicKey(r.Context(), owner)
		if err != nil {
			return err
		}
		answer := sdk.WorkspaceGitSSH{GitSSHKey: toGitSSHKey(k)}
		if s.extAuth != nil {
			answer.KnownHosts = externalauth.KnownHosts(s.extAuth.Providers())
		}
		writeJSON(w, http.StatusOK, answer)
		return nil
	}()
	if err != nil {
		s.fail(w, r, err)
	}
}

// helperGitSSHSign serves POST /api/v1/workspace-agent/gitssh/sign: a signature with the
// workspace owner's key (never another user's: the owner is the token's workspace's), refused
// once the owner is suspended or when the key asked for was rotated away.
func (s *Server) helperGitSSHSign(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		owner, err := s.helperOwner(r)
		if err != nil {
			return err
		}
		var req sdk.GitSSHSignRequest
		if err := decodeJSON(w, r, gitSSHSignBodyBytes, &req); err != nil {
			return err
		}
		v := &workspace.ValidationError{}
		if len(req.Data) == 0 {
			v.Add("data", "want the data to sign (base64)")
		} else if len(req.Data) > gitssh.MaxSignData {
			v.Add("data", "at most %d bytes", gitssh.MaxSignData)
		}
		if len(req.PublicKey) > 1024 {
			v.Add("public_key", "at most 1024 bytes (an ed25519 key in SSH wire format)")
		}
		if err := v.Err(); err != nil {
			return err
		}
		if s.gitSSH == nil {
			return errNoGitSSH
		}
		sig, err := s.gitSSH.Sign(r.Context(), owner, req.PublicKey, req.Data)
		if err != nil {
			return gitSSHAnswer(err)
		}
		s.log.Debug("git SSH signature made", "owner", owner.Username)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, sdk.GitSSHSignature{Format: sig.Format, Blob: sig.Blob})
		return nil
	}()
	if err != nil {
		s.fail(w, r, err)
	}
}
