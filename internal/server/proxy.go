package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/redirect"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The access proxy's side on the server (docs/decisions.md, "The access proxy"): a browser signs in
// here (a server session), the server hands the proxy a one-time code through the browser's
// redirect, the proxy exchanges it for a workspace session, and asks the server at every request
// (cached briefly) whether a session or a token may still enter a host.

const (
	// SessionCookie is the server's browser session cookie over plain http; over https its name
	// has the __Host- prefix (sessionCookie), so that no other host of the same site (a
	// workspace's app, whose pages its owner writes) can set it for the server, with a Domain
	// attribute, to sign a visitor in as someone else.
	SessionCookie = "hangar_session"
	// SessionLifetime bounds server and workspace sessions.
	SessionLifetime = 12 * time.Hour
	// CodeLifetime bounds a one-time code: the browser follows the redirect at once.
	CodeLifetime = 60 * time.Second

	sessionTokenPrefix   = "hgs_"
	codePrefix           = "hgc_"
	workspaceTokenPrefix = "hgw_"
	maxFormBytes         = 16 << 10

	// DefaultReturnTo is where a sign-in that names no return_to lands: the web UI.
	DefaultReturnTo = "/ui/"
)

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} · Hangar</title><style>` + pageStyle + `</style>{{if .Refresh}}
<meta http-equiv="refresh" content="0; url={{.Refresh}}">{{end}}</head>
<body>
<header class="top"><a class="brand" href="/ui/">Hangar</a></header>
<main>
<h1>{{.Title}}</h1>
{{if .Message}}<p{{if .Failed}} class="error"{{end}} id="message">{{.Message}}</p>{{end}}
{{if .Form}}<form method="post" action="/signin">
<input type="hidden" name="return_to" value="{{.ReturnTo}}">
<label>Hangar token <input type="password" name="token" autocomplete="current-password" autofocus required size="40"></label>
<button type="submit" class="primary">Sign in</button>
</form>
<p class="muted"><small>Your token is what <code>hangar login</code> uses (an admin creates it with <code>hangar users create</code>).</small></p>{{end}}
{{if .OIDCLink}}<p><a href="{{.OIDCLink}}" id="oidc-signin">Sign in with {{.OIDCName}}</a></p>{{end}}
{{if .SignedIn}}<form method="post" action="/signout"><button type="submit">Sign out</button></form>{{end}}
{{if .Refresh}}<p><a href="{{.Refresh}}" id="continue">{{.Continue}}</a></p>{{end}}
{{if not .Form}}<p class="back"><a href="/ui/" id="back">Back to Hangar</a></p>{{end}}
</main>
</body></html>
`))

type page struct {
	Title, Message, ReturnTo string
	Form, SignedIn           bool
	// Failed shows the message as an error (set by writePage from the status).
	Failed bool
	// OIDCName and OIDCLink are the "Sign in with <name>" link, when OIDC is configured
	// (oidcButton).
	OIDCName, OIDCLink string
	// FormTargets are origins, besides this server's, where the form's submission may end up
	// through redirects (formTargets); they are not shown.
	FormTargets []string
	// Refresh is a path on this server the page moves on to by itself, with a link saying
	// Continue (the sign-out on its way to the provider: oidclogout.go).
	Refresh, Continue string
}

func writePage(w http.ResponseWriter, status int, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy(p.FormTargets))
	w.WriteHeader(status)
	p.Failed = status >= 400
	_ = pageTemplate.Execute(w, p)
}

// contentSecurityPolicy allows the pages nothing but their own style element and their own forms, whose
// submissions may also end up, through redirects, at the origins in formTargets. Chrome applies
// form-action to each redirect of a form's submission, so the sign-in on the way to a workspace
// (POST /signin → 303 /proxy/authorize → 302 the workspace's /.hangar/callback) needs the
// workspace's origin there; every origin comes from workspaceOrigins (DNS characters and a port
// only), so nothing else can be smuggled into the header.
func contentSecurityPolicy(formTargets []string) string {
	formAction := "'self'"
	for _, o := range formTargets {
		formAction += " " + o
	}
	return "default-src 'none'; style-src " + pageStyleSource + "; form-action " + formAction + "; frame-ancestors 'none'"
}

// formTargets returns the origins a sign-in form with this return_to may be redirected to: when
// return_to is a /proxy/authorize link, the origin of its workspace host (workspaceOrigins); else
// none. On an error, none: the browser then stops at the workspace's redirect, and the log says why.
func (s *Server) formTargets(ctx context.Context, returnTo string) []string {
	u, err := url.Parse(returnTo)
	if err != nil || u.Path != protocol.ProxyAuthorizePath {
		return nil
	}
	origins, err := s.workspaceOrigins(ctx, u.Query().Get("host"))
	if err != nil {
		s.log.Error("sign-in page: the workspace's origin", "return_to", returnTo, "err", err)
		return nil
	}
	return origins
}

// workspaceOrigins returns where a proxy serves host when host is a workspace endpoint's host
// (`<port>-<name>--<owner>.<zone>`, optionally with a port) in the DNS zone of an agent:
// `<proxy_url_scheme>://<host>` for each such agent. None (nil, nil) means host is not one. It
// says nothing of whether that workspace exists.
func (s *Server) workspaceOrigins(ctx context.Context, host string) ([]string, error) {
	h, ok := parseWorkspaceHost(host)
	if !ok {
		return nil, nil
	}
	agents, err := s.store.ListAgents(ctx)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	var origins []string
	if s.apps.inZone(h) {
		origins = append(origins, s.apps.scheme+"://"+h.withPort)
	}
	for _, a := range agents {
		if !h.inZoneOf(a) {
			continue
		}
		if o := proxyScheme(a) + "://" + h.withPort; !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	return origins, nil
}

// workspaceHost is a host read as a workspace endpoint's: `<port>-<name>--<owner>.<zone>`.
type workspaceHost struct {
	withPort          string // the host as NormalizeHost gives it back, with its port if any
	port              int
	name, owner, zone string
}

func parseWorkspaceHost(host string) (workspaceHost, bool) {
	name, withPort, ok := workspace.NormalizeHost(host)
	if !ok {
		return workspaceHost{}, false
	}
	label, zone, ok := strings.Cut(name, ".")
	if !ok {
		return workspaceHost{}, false
	}
	port, wsName, owner, ok := workspace.ParseHostLabel(label)
	if !ok {
		return workspaceHost{}, false
	}
	return workspaceHost{withPort: withPort, port: port, name: wsName, owner: owner, zone: zone}, true
}

// hostWorkspace is the workspace h names (store.ErrNotFound when its owner or it is unknown).
func (s *Server) hostWorkspace(ctx context.Context, h workspaceHost) (workspace.Workspace, error) {
	owner, err := s.store.UserByUsername(ctx, h.owner)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return workspace.Workspace{}, err
		}
		return workspace.Workspace{}, fmt.Errorf("read owner %q: %w", h.owner, err)
	}
	ws, err := s.store.Workspace(ctx, store.WorkspaceRef{OwnerID: owner.ID, Name: h.name})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return workspace.Workspace{}, fmt.Errorf("read workspace %s/%s: %w", h.owner, h.name, err)
	}
	return ws, err
}

// inZoneOf reports whether the host is in the agent's DNS zone.
func (h workspaceHost) inZoneOf(a workspace.Agent) bool {
	return strings.EqualFold(h.zone, strings.TrimSuffix(a.Config.DNSZone, "."))
}

// proxyScheme is how browsers reach an agent's proxy: https unless its config says http.
func proxyScheme(a workspace.Agent) string {
	if a.Config.ProxyURLScheme == "http" {
		return "http"
	}
	return "https"
}

// SafeReturnPath reports whether p is a path on this server to send a browser back to
// (redirect.SafePath).
func SafeReturnPath(p string) bool { return redirect.SafePath(p) }

// secureRequest reports whether the browser reached the server over https (directly, or through a
// proxy that says so).
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// sessionCookie is the name of the server's session cookie for r: __Host-hangar_session over
// https, hangar_session over plain http (where browsers refuse the prefix).
func sessionCookie(r *http.Request) string {
	if secureRequest(r) {
		return "__Host-" + SessionCookie
	}
	return SessionCookie
}

// browserUser returns the user of the request's server session, and the session's IDHash.
func (s *Server) browserUser(r *http.Request) (workspace.User, []byte, bool, error) {
	u, sess, ok, err := s.browserSession(r)
	return u, sess.IDHash, ok, err
}

// browserSession returns the user and the server session of the request's cookie.
func (s *Server) browserSession(r *http.Request) (workspace.User, store.Session, bool, error) {
	c, err := r.Cookie(sessionCookie(r))
	if err != nil || c.Value == "" {
		return workspace.User{}, store.Session{}, false, nil
	}
	sess, u, err := s.store.Session(r.Context(), HashToken(c.Value), store.SessionServer, s.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return workspace.User{}, store.Session{}, false, nil
	}
	return u, sess, err == nil, err
}

// signinPage serves GET /signin: the form, or who is signed in.
func (s *Server) signinPage(w http.ResponseWriter, r *http.Request) {
	returnTo := r.URL.Query().Get("return_to")
	if returnTo != "" && !SafeReturnPath(returnTo) {
		writePage(w, http.StatusBadRequest, page{Title: "Cannot sign in", Message: "return_to must be a path on this server."})
		return
	}
	u, _, ok, err := s.browserUser(r)
	if err != nil {
		s.log.Error("read browser session", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot sign in", Message: "The server could not read your session; its log has the details."})
		return
	}
	if ok && returnTo != "" {
		http.Redirect(w, r, returnTo, http.StatusSeeOther)
		return
	}
	if ok {
		writePage(w, http.StatusOK, page{Title: "Signed in", Message: "You are signed in to Hangar as " + u.Username + ".", SignedIn: true})
		return
	}
	writePage(w, http.StatusOK, s.oidcButton(page{Title: "Sign in to Hangar", ReturnTo: returnTo, Form: true, FormTargets: s.formTargets(r.Context(), returnTo)}))
}

// signin serves POST /signin (a form: token, return_to). CSRF: the route is wrapped in
// http.CrossOriginProtection (Sec-Fetch-Site / Origin must be this origin), and the cookie is
// SameSite=Lax.
func (s *Server) signin(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		writePage(w, http.StatusUnsupportedMediaType, page{Title: "Cannot sign in", Message: "Send the sign-in form."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writePage(w, http.StatusBadRequest, page{Title: "Cannot sign in", Message: "The form could not be read."})
		return
	}
	returnTo := r.PostForm.Get("return_to")
	if returnTo == "" {
		returnTo = DefaultReturnTo
	}
	if !SafeReturnPath(returnTo) {
		writePage(w, http.StatusBadRequest, page{Title: "Cannot sign in", Message: "return_to must be a path on this server."})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	// The sign-in's entry: its user once known; a refused token names nobody.
	ctx, entry := s.auditor.Begin(r.Context(), audit.Actor{}, audit.SignIn, audit.Target{})
	entry.Set("method", "token")
	entry.Set("remote", r.RemoteAddr)
	var failed error
	defer func() { s.auditor.End(ctx, entry, failed) }()
	var u workspace.User
	var tok store.APIToken
	err := errUnauthorized("invalid token")
	if token != "" {
		u, tok, err = s.userByToken(r.Context(), token)
	}
	if errs.Is(err, errs.Unauthorized) {
		failed = err
		s.log.Info("sign-in refused", "reason", err.Error(), "remote", r.RemoteAddr)
		msg := "That token is not valid."
		if err.Error() != "invalid token" {
			msg = "That token cannot be used: " + err.Error() + "."
		}
		writePage(w, http.StatusUnauthorized, s.oidcButton(page{Title: "Sign in to Hangar", Message: msg, ReturnTo: returnTo, Form: true,
			FormTargets: s.formTargets(r.Context(), returnTo)}))
		return
	}
	if err != nil {
		failed = err
		s.log.Error("sign-in", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot sign in", Message: "The server failed; its log has the details."})
		return
	}
	entry.SetActor(actorOf(u))
	entry.SetTarget(audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})
	if err := s.beginServerSession(ctx, w, r, u, &tok); err != nil {
		failed = err
		s.log.Error("sign-in: create session", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot sign in", Message: "The server failed; its log has the details."})
		return
	}
	s.log.Info("signed in", "user", u.Username)
	http.Redirect(w, r, returnTo, http.StatusSeeOther)
}

// beginServerSession stores a new server session of u (bound to tok, the API token it was begun
// with, so that it ends with it; nil for none: an OIDC sign-in) and sets its cookie. A session
// begun with a token does not outlive it: its expiry and its cookie's are the token's when that
// comes first. The pending audit entry in ctx (the sign-in) is written in the session's transaction.
func (s *Server) beginServerSession(ctx context.Context, w http.ResponseWriter, r *http.Request, u workspace.User, tok *store.APIToken) error {
	now := s.clock.Now()
	expires := now.Add(SessionLifetime)
	var tokenID string
	if tok != nil {
		tokenID = tok.ID
		if tok.ExpiresAt != nil && tok.ExpiresAt.Before(expires) {
			expires = *tok.ExpiresAt
		}
	}
	secret := NewToken(sessionTokenPrefix)
	if err := s.store.CreateSession(ctx, store.Session{IDHash: HashToken(secret), Kind: store.SessionServer, UserID: u.ID,
		TokenID: tokenID, CreatedAt: now, ExpiresAt: expires}); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie(r), Value: secret, Path: "/", Expires: expires,
		MaxAge: max(1, int(expires.Sub(now)/time.Second)), HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode})
	return nil
}

// signout serves POST /signout: the session is removed with the codes and workspace sessions
// that came from it (the proxies refuse those within their cache's time), and the cookie cleared.
func (s *Server) signout(w http.ResponseWriter, r *http.Request) {
	var sess store.Session
	var found bool
	if c, err := r.Cookie(sessionCookie(r)); err == nil && c.Value != "" {
		// Which session it was decides whether the sign-out goes on to the provider (oidclogout.go).
		_, sess, found, _ = s.browserSession(r)
		if err := s.store.DeleteSession(r.Context(), HashToken(c.Value)); err != nil {
			s.log.Error("sign-out", "err", err)
			writePage(w, http.StatusInternalServerError, page{Title: "Cannot sign out", Message: "The server failed; its log has the details."})
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie(r), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode})
	if s.signingOutAtProvider(sess, found) {
		s.signedOutPage(w)
		return
	}
	s.forgetIDToken(w, r) // an ID token an earlier sign-in through the provider left (oidclogout.go)
	writePage(w, http.StatusOK, page{Title: "Signed out", Message: "You are signed out of Hangar."})
}

// accessScope is which workspaces a check may find: a Kubernetes proxy's checks find its agent's
// workspaces only, the server's apps handler's the Terraform workspaces only; the zero scope (the
// sign-in, which any of them may have sent the browser to) finds both.
type accessScope struct {
	agentID   string
	terraform bool
}

// proxyTarget is the workspace a host names, once proxyAccess found it.
type proxyTarget struct {
	ws     workspace.Workspace
	scheme string // how browsers reach the host: its agent's proxy's, or the server's apps' scheme
	host   string // with its port, if any
	reason string // "" when the user may enter
	// notPublic is the workspace the host names when it is live but the host's port is not one of
	// its public endpoints (reason not found), for a clearer page to its owner; port is that port.
	notPublic *workspace.Workspace
	port      int
}

// proxyAccess decides whether u may enter the workspace endpoint at host: the host must be a public
// endpoint of a live Kubernetes workspace in its agent's DNS zone, or any port of a live Terraform
// workspace in the server's apps zone (apps.go), within scope; and u its owner or an admin. Store
// errors are returned (the caller fails closed).
func (s *Server) proxyAccess(ctx context.Context, scope accessScope, host string, u workspace.User) (proxyTarget, error) {
	notFound := proxyTarget{reason: protocol.ProxyNotFound}
	h, ok := parseWorkspaceHost(host)
	if !ok {
		return notFound, nil
	}
	port := h.port
	ws, err := s.hostWorkspace(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return notFound, nil
	} else if err != nil {
		return notFound, err
	}
	if ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return notFound, nil
	}
	allow := func(t proxyTarget) proxyTarget {
		if !u.Admin && u.ID != ws.OwnerID {
			t.reason = protocol.ProxyForbidden
		}
		return t
	}
	if ws.Backend == workspace.KindTerraform {
		// Any port: the owner reaches every port of the machine with port-forward already.
		if scope.agentID != "" || !s.apps.inZone(h) {
			return notFound, nil
		}
		return allow(proxyTarget{ws: ws, scheme: s.apps.scheme, host: h.withPort}), nil
	}
	if ws.Backend != workspace.KindKubernetes || scope.terraform || (scope.agentID != "" && ws.AgentID != scope.agentID) {
		return notFound, nil
	}
	agent, err := s.store.AgentByName(ctx, ws.AgentName)
	if err != nil {
		return notFound, fmt.Errorf("read agent of %s/%s: %w", h.owner, h.name, err)
	}
	if !h.inZoneOf(agent) {
		return notFound, nil
	}
	df, err := s.kube.Devfile(ctx, ws)
	if err != nil {
		return notFound, fmt.Errorf("read devfile of %s/%s: %w", h.owner, h.name, err)
	}
	if !df.IsPublicPort(port) {
		notFound.notPublic, notFound.port = &ws, port
		return notFound, nil
	}
	return allow(proxyTarget{ws: ws, scheme: proxyScheme(agent), host: h.withPort}), nil
}

// proxyAuthorize serves GET /proxy/authorize?host=H&path=P&nonce=N, where a proxy sends a browser
// without a workspace session: sign in first if need be, then back to H with a one-time code that
// only the browser holding the nonce cookie whose SHA-256 is N can have exchanged.
func (s *Server) proxyAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	host, path, nonce := q.Get("host"), q.Get("path"), q.Get("nonce")
	if path == "" {
		path = "/"
	}
	if !SafeReturnPath(path) {
		writePage(w, http.StatusBadRequest, page{Title: "Bad link", Message: "This link's path is not a path on the workspace."})
		return
	}
	if !validNonce(nonce) {
		writePage(w, http.StatusBadRequest, page{Title: "Bad link", Message: "This link was not made by a Hangar proxy (it has no valid nonce). Open the workspace's address instead."})
		return
	}
	origins, err := s.workspaceOrigins(r.Context(), host)
	if err != nil {
		s.log.Error("proxy authorize", "host", host, "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot open the workspace", Message: "The server failed; its log has the details."})
		return
	}
	if len(origins) == 0 {
		// Checked before signing in: the sign-in page never leads anywhere but to a workspace host.
		writePage(w, http.StatusBadRequest, page{Title: "Not a workspace address",
			Message: fmt.Sprintf("%q is not the address of a workspace: one is <port>-<workspace>--<owner>.<DNS zone of a Hangar agent, or the server's apps zone>.", host)})
		return
	}
	u, sess, ok, err := s.browserSession(r)
	if err != nil {
		s.log.Error("proxy authorize: read session", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot open the workspace", Message: "The server failed; its log has the details."})
		return
	}
	if !ok {
		back := protocol.ProxyAuthorizePath + "?" + url.Values{"host": {host}, "path": {path}, "nonce": {nonce}}.Encode()
		http.Redirect(w, r, "/signin?"+url.Values{"return_to": {back}}.Encode(), http.StatusFound)
		return
	}
	t, err := s.proxyAccess(r.Context(), accessScope{}, host, u)
	if err != nil {
		s.log.Error("proxy authorize", "host", host, "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot open the workspace", Message: "The server failed; its log has the details."})
		return
	}
	if ws := t.notPublic; ws != nil && workspace.Visible(u, *ws) {
		s.log.Info("proxy authorize refused", "user", u.Username, "host", host, "reason", "not a public endpoint")
		writePage(w, http.StatusBadRequest, page{Title: "Not a public endpoint", SignedIn: true,
			Message: fmt.Sprintf("Port %d of workspace %s/%s is not a public endpoint: only endpoints with exposure public are served through the proxy.", t.port, ws.OwnerName, ws.Name)})
		return
	}
	if t.reason != "" {
		// Forbidden and not found look alike: a workspace that is not yours might as well not exist.
		s.log.Info("proxy authorize refused", "user", u.Username, "host", host, "reason", t.reason)
		writePage(w, http.StatusNotFound, page{Title: "No such workspace", Message: "There is no running workspace of yours at " + host + ".", SignedIn: true})
		return
	}
	now := s.clock.Now()
	code := NewToken(codePrefix)
	if err := s.store.CreateSession(r.Context(), store.Session{IDHash: codeKey(code, nonce), Kind: store.SessionCode, UserID: u.ID, TokenID: sess.TokenID,
		WorkspaceID: t.ws.ID, Host: t.host, ParentHash: sess.IDHash, CreatedAt: now, ExpiresAt: now.Add(CodeLifetime)}); err != nil {
		s.log.Error("proxy authorize: create code", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot open the workspace", Message: "The server failed; its log has the details."})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	target := t.scheme + "://" + t.host + protocol.ProxyCallbackPath + "?" + url.Values{"code": {code}, "path": {path}}.Encode()
	http.Redirect(w, r, target, http.StatusFound)
}

// validNonce reports whether n is what a proxy sends as a browser's nonce: the SHA-256 of its nonce
// cookie, in lower-case hex.
func validNonce(n string) bool {
	if len(n) != 64 || strings.ToLower(n) != n {
		return false
	}
	_, err := hex.DecodeString(n)
	return err == nil
}

// codeKey is what a one-time code is stored under: the hash of the code and of the nonce of the
// browser it was issued to, so that the code is found (exchanged) only with that nonce — which only
// the proxy that set that browser's nonce cookie, reading it back, can send.
func codeKey(code, nonce string) []byte { return HashToken(code + "\x00" + nonce) }

// proxyExchange serves POST /api/v1/proxy/exchange (agent token): a code, once, for a workspace
// session bound to the same user, workspace and host.
func (s *Server) proxyExchange(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	var req protocol.ProxyExchangeRequest
	if err := decodeJSON(w, r, protocol.MaxProxyBodyBytes, &req); err != nil {
		return err
	}
	resp, err := s.exchangeCode(r.Context(), accessScope{agentID: agent.ID}, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// exchangeCode turns a one-time code into a workspace session (proxyExchange, and the server's
// apps handler in process).
func (s *Server) exchangeCode(ctx context.Context, scope accessScope, req protocol.ProxyExchangeRequest) (_ protocol.ProxyExchangeResponse, err error) {
	// The sign-in's entry: its user and workspace once known; a refused code names nobody.
	ctx, entry := s.auditor.Begin(ctx, audit.Actor{}, audit.SignInWorkspace, audit.Target{Kind: audit.KindWorkspace})
	entry.Set("host", clip(req.Host))
	defer func() { s.auditor.End(ctx, entry, auditErr(err)) }()
	v := &workspace.ValidationError{}
	if !strings.HasPrefix(req.Code, codePrefix) || len(req.Code) > 128 {
		v.Add("code", "must be a code the server issued (%s...)", codePrefix)
	}
	if !validNonce(req.Nonce) {
		v.Add("nonce", "must be the SHA-256, in lower-case hex, of the nonce cookie of the browser that brought the code")
	}
	_, host, ok := workspace.NormalizeHost(req.Host)
	if !ok {
		v.Add("host", "must be a host name, got %q", req.Host)
	}
	if err := v.Err(); err != nil {
		return protocol.ProxyExchangeResponse{}, err
	}
	now := s.clock.Now()
	code, u, err := s.store.ConsumeSession(ctx, codeKey(req.Code, req.Nonce), store.SessionCode, now)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.ProxyExchangeResponse{}, errUnauthorized("unknown, used or expired code, or a code issued to another browser")
	} else if err != nil {
		return protocol.ProxyExchangeResponse{}, err
	}
	entry.SetActor(actorOf(u))
	if code.Host != host {
		return protocol.ProxyExchangeResponse{}, errUnauthorized("the code was issued for another host")
	}
	t, err := s.proxyAccess(ctx, scope, host, u)
	if err != nil {
		return protocol.ProxyExchangeResponse{}, err
	}
	if t.ws.ID != "" {
		entry.SetTarget(audit.Workspace(t.ws.ID, t.ws.OwnerName, t.ws.Name))
	}
	if t.reason != "" || t.ws.ID != code.WorkspaceID {
		return protocol.ProxyExchangeResponse{}, errForbidden("the code's user may no longer enter this workspace")
	}
	secret := NewToken(workspaceTokenPrefix)
	expires := now.Add(SessionLifetime)
	if err := s.store.CreateSession(ctx, store.Session{IDHash: HashToken(secret), Kind: store.SessionWorkspace, UserID: u.ID,
		TokenID: code.TokenID, WorkspaceID: t.ws.ID, Host: host, ParentHash: code.ParentHash, CreatedAt: now, ExpiresAt: expires}); err != nil {
		return protocol.ProxyExchangeResponse{}, err
	}
	s.log.Info("workspace session created", "user", u.Username, "workspace", t.ws.OwnerName+"/"+t.ws.Name, "host", host)
	return protocol.ProxyExchangeResponse{Session: secret, ExpiresAt: expires, User: u.Username, Workspace: t.ws.OwnerName + "/" + t.ws.Name}, nil
}

// proxyCheck serves POST /api/v1/proxy/check (agent token): may this workspace session or this
// user token enter host? Refusals are answers (200, allowed false), so that the proxy can tell them
// from failures, on which it refuses too.
func (s *Server) proxyCheck(w http.ResponseWriter, r *http.Request, agent workspace.Agent) error {
	var req protocol.ProxyCheckRequest
	if err := decodeJSON(w, r, protocol.MaxProxyBodyBytes, &req); err != nil {
		return err
	}
	resp, err := s.checkAccess(r.Context(), accessScope{agentID: agent.ID}, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// checkAccess decides whether a workspace session or a user token may enter a host (proxyCheck,
// and the server's apps handler in process).
func (s *Server) checkAccess(ctx context.Context, scope accessScope, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error) {
	v := &workspace.ValidationError{}
	_, host, ok := workspace.NormalizeHost(req.Host)
	if !ok {
		v.Add("host", "must be a host name, got %q", req.Host)
	}
	if (req.Session == "") == (req.Token == "") {
		v.Add("session", "exactly one of session and token is required")
	}
	if len(req.Session) > 128 {
		v.Add("session", "is too long")
	}
	if len(req.Token) > 512 {
		v.Add("token", "is too long")
	}
	client := parseClientAddress(v, req.ClientAddress)
	if err := v.Err(); err != nil {
		return protocol.ProxyCheckResponse{}, err
	}
	if req.Token != "" {
		// A token from an address over the limit of failed authentications is refused before it is
		// looked up (proxylimit.go); sessions, like the server's own cookies, are not limited.
		if wait, limited := s.proxiedLimited(client); limited {
			return rateLimitedCheck(wait), nil
		}
	}
	refuse := func(reason string, t proxyTarget, u workspace.User) (protocol.ProxyCheckResponse, error) {
		resp := protocol.ProxyCheckResponse{Reason: reason, User: u.Username}
		if t.ws.ID != "" {
			resp.Workspace, resp.Status = t.ws.OwnerName+"/"+t.ws.Name, string(t.ws.ActualState)
		}
		return resp, nil
	}
	var u workspace.User
	var boundTo string // the workspace a session is bound to
	var err error
	if req.Session != "" {
		var sess store.Session
		sess, u, err = s.store.Session(ctx, HashToken(req.Session), store.SessionWorkspace, s.clock.Now())
		if err == nil && sess.Host != host {
			err = store.ErrNotFound // a session is good for the host it was made for only
		}
		boundTo = sess.WorkspaceID
	} else {
		u, _, err = s.userByToken(ctx, req.Token)
	}
	if errors.Is(err, store.ErrNotFound) || errs.Is(err, errs.Unauthorized) {
		if req.Token != "" {
			s.proxiedFailed(client)
		}
		return refuse(protocol.ProxyUnauthenticated, proxyTarget{}, workspace.User{})
	} else if err != nil {
		return protocol.ProxyCheckResponse{}, err
	}
	t, err := s.proxyAccess(ctx, scope, host, u)
	if err != nil {
		return protocol.ProxyCheckResponse{}, err
	}
	if t.reason == "" && boundTo != "" && t.ws.ID != boundTo {
		// The host now names another workspace (deleted and created again): sign in again.
		return refuse(protocol.ProxyUnauthenticated, proxyTarget{}, workspace.User{})
	}
	if t.reason != "" {
		if t.reason == protocol.ProxyForbidden {
			t.ws = workspace.Workspace{} // tell nobody else's workspace's state
		}
		return refuse(t.reason, t, u)
	}
	return protocol.ProxyCheckResponse{Allowed: true, User: u.Username, Workspace: t.ws.OwnerName + "/" + t.ws.Name, Status: string(t.ws.ActualState)}, nil
}
