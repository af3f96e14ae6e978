package server

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// External auth (docs/decisions.md, "Forge identities: external auth (issue 22)"): the decisions
// and the forges' OAuth2 are internal/externalauth's; these handlers read the request, call it and
// write its answer. A token leaves the server only in the answer to a workspace helper's
// git-credentials request, for the workspace's owner.

const (
	// ExternalAuthCallbackPath is where a forge sends the browser back; {id} is the forge's id, and
	// <access URL>/external-auth/{id}/callback must be a redirect URI of its OAuth2 application.
	ExternalAuthCallbackPath = "/external-auth/{id}/callback"
)

// ExternalAuthCallbackURL is the redirect URI of forge id for a server reached at accessURL.
func ExternalAuthCallbackURL(accessURL, id string) string {
	return accessURL + "/external-auth/" + url.PathEscape(id) + "/callback"
}

// errNoExternalAuth answers the external auth endpoints of a server configured with no forge.
var errNoExternalAuth = errCode(errs.NotFound, "no forge is configured",
	"this server has no external auth config (hangar server --external-auth-config)")

// extAuthAnswer gives externalauth's errors their whole sentence as the message: the workspace's
// credential helper shows git the message alone ("not linked: ... run `hangar external-auth link
// NAME`").
func extAuthAnswer(err error) error {
	for _, e := range []error{externalauth.ErrUnknownProvider, externalauth.ErrNotLinked, externalauth.ErrNoLink, externalauth.ErrRelink,
		externalauth.ErrSuspended, externalauth.ErrNoForge, externalauth.ErrForge, externalauth.ErrLinkState} {
		if errors.Is(err, e) {
			return errCode(errs.CodeOf(e), err.Error(), "")
		}
	}
	return err
}

// listExternalAuth serves GET /api/v1/external-auth.
func (s *Server) listExternalAuth(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	out := sdk.ExternalAuthList{Providers: []sdk.ExternalAuth{}}
	if s.extAuth != nil {
		links, err := s.extAuth.Links(r.Context(), u)
		if err != nil {
			return err
		}
		for _, l := range links {
			out.Providers = append(out.Providers, toExternalAuth(l))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func toExternalAuth(l externalauth.LinkStatus) sdk.ExternalAuth {
	a := sdk.ExternalAuth{ID: l.Provider.ID, Type: string(l.Provider.Type), Name: l.Provider.Name, Linked: l.Linked}
	if l.Linked {
		linked := l.Link.LinkedAt
		a.AccountLogin, a.AccountEmail, a.LinkedAt, a.RefreshedAt, a.ExpiresAt = l.Link.AccountLogin, l.Link.AccountEmail, &linked, l.Link.RefreshedAt, l.Link.ExpiresAt
		a.NeedsRelink, a.RelinkReason, a.LastRefreshError = l.Link.RelinkReason != "", l.Link.RelinkReason, l.Link.RefreshError
	}
	return a
}

// linkExternalAuth serves POST /api/v1/external-auth/{id}/link: the forge's authorize URL.
func (s *Server) linkExternalAuth(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	if s.extAuth == nil {
		return errNoExternalAuth
	}
	authURL, err := s.extAuth.BeginLink(r.Context(), u, r.PathValue("id"))
	if err != nil {
		return extAuthAnswer(err)
	}
	writeJSON(w, http.StatusOK, sdk.ExternalAuthLinkStart{AuthorizeURL: authURL, ExpiresAt: s.clock.Now().Add(externalauth.LinkLifetime)})
	return nil
}

// unlinkExternalAuth serves DELETE /api/v1/external-auth/{id}.
func (s *Server) unlinkExternalAuth(w http.ResponseWriter, r *http.Request, u workspace.User) (err error) {
	if s.extAuth == nil {
		return errNoExternalAuth
	}
	id := r.PathValue("id")
	defer s.audit(&r, u, audit.ExternalAuthUnlink, audit.Target{Kind: audit.KindForge, ID: clip(id), Name: clip(id)})(&err)
	if err := s.extAuth.Unlink(r.Context(), u, id); err != nil {
		return extAuthAnswer(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// externalAuthCallback serves GET /external-auth/{id}/callback: the browser back from the forge.
// The browser must be signed in to Hangar as the user who began the link (else it is sent to
// sign in first, and back here): a link URL someone else began cannot link the victim's forge
// account to the other's Hangar user.
func (s *Server) externalAuthCallback(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		writePage(w, status, page{Title: "Linking failed", Message: msg})
	}
	if s.extAuth == nil {
		fail(http.StatusNotFound, "This Hangar server has no forge configured.")
		return
	}
	u, ok, err := s.sessionOf(r)
	if err != nil {
		s.log.Error("external auth callback: read the session", "err", err)
		fail(http.StatusInternalServerError, "Internal error: the server log has the details.")
		return
	}
	if !ok {
		if back := r.URL.RequestURI(); SafeReturnPath(back) {
			http.Redirect(w, r, "/signin?"+url.Values{"return_to": {back}}.Encode(), http.StatusSeeOther)
			return
		}
		fail(http.StatusUnauthorized, "Sign in to Hangar in this browser, then start the link again.")
		return
	}
	q := r.URL.Query()
	st, err := s.extAuth.TakeState(r.Context(), r.PathValue("id"), q.Get("state"))
	if err != nil {
		status, body := statusOf(extAuthAnswer(err))
		fail(status, body.Message)
		return
	}
	p := st.Provider
	if st.UserID != u.ID {
		fail(http.StatusForbidden, "This link was begun by another Hangar user than the one signed in here ("+u.Username+"): begin it again as yourself.")
		return
	}
	target := audit.Target{Kind: audit.KindForge, ID: p.ID, Name: p.ID}
	if e := q.Get("error"); e != "" {
		msg := p.Name + " refused the link: " + clip(e)
		if d := q.Get("error_description"); d != "" {
			msg += ": " + clip(d)
		}
		s.auditor.Record(r.Context(), actorOf(u), audit.ExternalAuthLink, target, errors.New(msg), nil)
		fail(http.StatusBadRequest, msg+".")
		return
	}
	l, err := s.extAuth.CompleteLink(r.Context(), st, q.Get("code"))
	if err != nil {
		s.auditor.Record(r.Context(), actorOf(u), audit.ExternalAuthLink, target, auditErr(extAuthAnswer(err)), nil)
		status, body := statusOf(extAuthAnswer(err))
		if status >= 500 {
			s.log.Error("external auth callback", "forge", p.ID, "err", err)
		}
		fail(status, body.Message)
		return
	}
	s.auditor.Record(r.Context(), actorOf(u), audit.ExternalAuthLink, target, nil, map[string]any{"account": l.AccountLogin})
	writePage(w, http.StatusOK, page{Title: "Linked to " + p.Name,
		Message: "Your Hangar user " + u.Username + " is linked to " + p.Name + " as " + l.AccountLogin + ". You can close this page."})
}

// gitCredentials serves POST /api/v1/workspace-agent/git-credentials: a workspace's helper asks,
// with its token, for the credential git needs for a repository; the answer is the workspace
// owner's token at the forge that serves it. The helper asks at every git operation, so an unlink
// or a suspension takes effect at the next one.
func (s *Server) gitCredentials(w http.ResponseWriter, r *http.Request) {
	if err := s.gitCredentialsErr(w, r); err != nil {
		s.fail(w, r, err)
	}
}

func (s *Server) gitCredentialsErr(w http.ResponseWriter, r *http.Request) error {
	ws, _, err := s.helperOf(r)
	if err != nil {
		return err
	}
	var req sdk.GitCredentialRequest
	if err := decodeJSON(w, r, sdk.MaxBodyBytes, &req); err != nil {
		return err
	}
	v := &workspace.ValidationError{}
	if req.Protocol != "https" && req.Protocol != "http" {
		v.Add("protocol", "want https or http (git's credential protocol field), got %q", clip(req.Protocol))
	}
	if req.Host == "" || len(req.Host) > 255 {
		v.Add("host", "want the repository's host (git's credential host field)")
	}
	if len(req.Path) > 1024 {
		v.Add("path", "at most 1024 characters")
	}
	if err := v.Err(); err != nil {
		return err
	}
	if s.extAuth == nil {
		return errNoExternalAuth
	}
	owner, err := s.store.UserByUsername(r.Context(), ws.OwnerName)
	if errors.Is(err, store.ErrNotFound) {
		return errUnauthorized("invalid helper token: its workspace's owner is deleted")
	} else if err != nil {
		return err
	}
	tok, err := s.extAuth.GitCredential(r.Context(), owner, externalauth.CredentialRequest{Protocol: req.Protocol, Host: req.Host, Path: req.Path})
	if err != nil {
		return extAuthAnswer(err)
	}
	s.log.Debug("git credential handed out", "workspace", ws.ID, "owner", owner.Username, "forge", tok.Provider.ID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, sdk.GitCredential{Username: tok.Username, Password: tok.AccessToken, ExpiresAt: tok.ExpiresAt})
	return nil
}
