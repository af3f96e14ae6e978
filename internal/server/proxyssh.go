package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The access proxy's SSH side on the server (docs/decisions.md, "SSH keys" and "Activity"): the
// proxy, with its agent's token, asks whether the client of an SSH connection may enter the
// workspace its user name names, and reports which workspaces were used.

const (
	// maxSSHCheckBodyBytes caps an SSH check: a public key of up to maxPublicKeyBytes, a token, a
	// workspace.
	maxSSHCheckBodyBytes = 32 << 10
	// maxActivityBodyBytes caps an activity report: protocol.MaxActivityItems items of about 100
	// bytes each.
	maxActivityBodyBytes = 256 << 10
	// maxSSHWorkspaceLen and maxTokenLen bound the SSH check's workspace and token.
	maxSSHWorkspaceLen = 200
	maxTokenLen        = 512
	// maxWorkspaceIDLen bounds a workspace id in an activity report (ids are UUIDs, 36 characters).
	maxWorkspaceIDLen = 64
	// activityClockSkew is how far in the future an activity's time may be before it is taken as
	// now: the proxy's clock may run a little ahead of the server's, but a time far ahead would
	// keep a workspace "in use" until then.
	activityClockSkew = time.Minute
)

// proxySSHCheck serves POST /api/v1/proxy/ssh-check (agent token): may the holder of this public
// key, or of this user token (or server session: the browser terminal's), enter this workspace by
// SSH? Refusals are answers (200, allowed false), as for proxyCheck. A stopped workspace is allowed, with its state, so that the proxy can
// say so.
func (s *Server) proxySSHCheck(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	var req protocol.ProxySSHCheckRequest
	if err := decodeJSON(w, r, maxSSHCheckBodyBytes, &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	if len(req.Workspace) > maxSSHWorkspaceLen {
		v.Add("workspace", "is too long (%d bytes; at most %d)", len(req.Workspace), maxSSHWorkspaceLen)
	}
	if (req.PublicKey == "") == (req.Token == "") {
		v.Add("public_key", "exactly one of public_key and token is required")
	}
	var key ssh.PublicKey
	if len(req.PublicKey) > maxPublicKeyBytes {
		v.Add("public_key", "is too long (%d bytes; at most %d)", len(req.PublicKey), maxPublicKeyBytes)
	} else if req.PublicKey != "" {
		var err error
		if key, _, _, _, err = ssh.ParseAuthorizedKey([]byte(req.PublicKey)); err != nil {
			v.Add("public_key", "must be the client's public key in authorized_keys form")
		}
	}
	if len(req.Token) > maxTokenLen {
		v.Add("token", "is too long (%d bytes; at most %d)", len(req.Token), maxTokenLen)
	}
	client := parseClientAddress(v, req.ClientAddress)
	if err := v.Err(); err != nil {
		return err
	}
	if req.Token != "" {
		// A password (token) from an address over the limit is refused before it is looked up
		// (proxylimit.go); a public key is no guessable secret, and is not limited.
		if wait, limited := s.proxiedLimited(client); limited {
			s.log.Debug("ssh check refused", "agent", agent.Name, "workspace", req.Workspace, "client", client.String(), "reason", protocol.ProxyRateLimited)
			writeJSON(w, http.StatusOK, protocol.ProxySSHCheckResponse{Reason: protocol.ProxyRateLimited, RetryAfter: wait})
			return nil
		}
	}

	refuse := func(reason string, u workspace.User) error {
		s.log.Debug("ssh check refused", "agent", agent.Name, "workspace", req.Workspace, "user", u.Username, "reason", reason)
		writeJSON(w, http.StatusOK, protocol.ProxySSHCheckResponse{Reason: reason, User: u.Username})
		return nil
	}
	var u workspace.User
	var err error
	if key != nil {
		u, _, err = s.store.UserBySSHKey(r.Context(), ssh.FingerprintSHA256(key))
		if err == nil && u.SuspendedAt != nil {
			return refuse(protocol.ProxyUnauthenticated, workspace.User{})
		}
	} else if strings.HasPrefix(req.Token, sessionTokenPrefix) {
		// A browser's server session: the server itself connects with it for the workspace page's
		// terminal (terminal.go), so that the proxy decides, and rechecks, as for a token.
		_, u, err = s.store.Session(r.Context(), HashToken(req.Token), store.SessionServer, s.clock.Now())
		if err == nil && u.SuspendedAt != nil {
			return refuse(protocol.ProxyUnauthenticated, workspace.User{})
		}
	} else {
		u, _, err = s.userByToken(r.Context(), req.Token)
	}
	if errors.Is(err, store.ErrNotFound) || errs.Is(err, errs.Unauthorized) {
		if key == nil {
			s.proxiedFailed(client)
		}
		return refuse(protocol.ProxyUnauthenticated, workspace.User{})
	} else if err != nil {
		return err
	}
	// The workspace is whatever SSH user name the client typed (root, Alice, ...): one that cannot
	// name a workspace names none, which is an answer, not a bad request.
	ref, err := workspace.ParseRef("workspace", req.Workspace)
	if err != nil {
		return refuse(protocol.ProxyNotFound, u)
	}
	owner := u
	if ref.Owner != "" && ref.Owner != u.Username {
		if !u.Admin {
			// Not looked up: whether another user's workspace exists is not told.
			return refuse(protocol.ProxyForbidden, u)
		}
		if owner, err = s.store.UserByUsername(r.Context(), ref.Owner); errors.Is(err, store.ErrNotFound) {
			return refuse(protocol.ProxyNotFound, u)
		} else if err != nil {
			return fmt.Errorf("read owner %q: %w", ref.Owner, err)
		}
	}
	ws, err := s.store.Workspace(r.Context(), store.WorkspaceRef{OwnerID: owner.ID, Name: ref.Name})
	if errors.Is(err, store.ErrNotFound) {
		return refuse(protocol.ProxyNotFound, u)
	} else if err != nil {
		return fmt.Errorf("read workspace %s/%s: %w", owner.Username, ref.Name, err)
	}
	if ws.Backend != workspace.KindKubernetes || ws.AgentID != agent.ID || ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return refuse(protocol.ProxyNotFound, u)
	}
	writeJSON(w, http.StatusOK, protocol.ProxySSHCheckResponse{Allowed: true, User: u.Username, Workspace: ws.OwnerName + "/" + ws.Name,
		WorkspaceID: ws.ID, Status: string(ws.ActualState)})
	return nil
}

// activityResponse is the answer to an activity report: how many of the workspaces it named are
// the calling agent's (each counted once).
type activityResponse struct {
	Recorded int `json:"recorded"`
}

// proxyActivity serves POST /api/v1/proxy/activity (agent token): the proxy's report of when
// workspaces were last used. Per workspace of the calling agent the server keeps the latest time
// (never moving it back); other workspaces are ignored. A time more than a minute ahead of the
// server's clock is taken as now.
func (s *Server) proxyActivity(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	var req protocol.ProxyActivityRequest
	if err := decodeJSON(w, r, maxActivityBodyBytes, &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	if len(req.Activity) > protocol.MaxActivityItems {
		v.Add("activity", "must have at most %d items, got %d", protocol.MaxActivityItems, len(req.Activity))
		return v.Err()
	}
	now := s.clock.Now()
	items := make([]store.Activity, 0, len(req.Activity))
	for i, a := range req.Activity {
		f := fmt.Sprintf("activity[%d]", i)
		if a.Kind != protocol.ActivitySSH && a.Kind != protocol.ActivityHTTP {
			v.Add(f+".kind", "must be %s or %s, got %q", protocol.ActivitySSH, protocol.ActivityHTTP, a.Kind)
		}
		switch {
		case a.WorkspaceID == "":
			v.Add(f+".workspace_id", "is required")
		case len(a.WorkspaceID) > maxWorkspaceIDLen || strings.IndexFunc(a.WorkspaceID, unicode.IsControl) >= 0:
			v.Add(f+".workspace_id", "must be a workspace id (at most %d characters, no control characters)", maxWorkspaceIDLen)
		}
		if a.At.IsZero() {
			v.Add(f+".at", "is required: when the workspace was last used (RFC 3339)")
		}
		at := a.At
		if at.After(now.Add(activityClockSkew)) {
			at = now
		}
		items = append(items, store.Activity{WorkspaceID: a.WorkspaceID, At: at})
	}
	if err := v.Err(); err != nil {
		return err
	}
	n, err := s.store.RecordActivity(r.Context(), agent.ID, items)
	if err != nil {
		return err
	}
	s.log.Debug("activity recorded", "agent", agent.Name, "items", len(items), "workspaces", n)
	writeJSON(w, http.StatusOK, activityResponse{Recorded: n})
	return nil
}
