package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/redirect"
	"github.com/hangar-dev/hangar/internal/web"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The proxy's cookies (docs/decisions.md, "Cookies: host-only, __Host- names over TLS"). Both are
// host-only (no Domain attribute): the browser sends them to the one workspace host that set them,
// so one workspace never sees another's. Over TLS their names carry the __Host- prefix, with which
// a browser keeps only a cookie set by this very host over https with Path=/ and no Domain: no
// other workspace host (all of them are one site) can toss one in, whether by a Set-Cookie with
// Domain=<zone> or by document.cookie. Browsers refuse the prefix over plain http, so a proxy
// without TLS (trials, tests) uses the bare names, and there tossing remains possible.
const (
	// CookieName is the workspace session's cookie, bare.
	CookieName = "hangar_ws_session"
	// NonceCookieName is the cookie that binds a sign-in to the browser that began it, bare.
	NonceCookieName = "hangar_ws_nonce"
	// HostPrefix is the prefix of both names over TLS.
	HostPrefix = "__Host-"
	// NonceLifetime bounds a sign-in begun in a browser (the sign-in form, then the code).
	NonceLifetime = 10 * time.Minute
	// maxCookies is how many cookies of one name a request may carry: each is tried in turn.
	maxCookies = 4
)

// SessionCookieName is the workspace session cookie's name for a proxy with or without TLS.
func SessionCookieName(tls bool) string { return cookieName(CookieName, tls) }

func cookieName(bare string, tls bool) string {
	if tls {
		return HostPrefix + bare
	}
	return bare
}

// ownCookies are every name of the proxy's cookies, with and without the prefix: none of them
// reaches a workspace, and a workspace sets none of them.
var ownCookies = []string{CookieName, NonceCookieName, HostPrefix + CookieName, HostPrefix + NonceCookieName}

// Exchanger turns a one-time code into a workspace session (POST /api/v1/proxy/exchange).
type Exchanger interface {
	Exchange(ctx context.Context, req protocol.ProxyExchangeRequest) (protocol.ProxyExchangeResponse, error)
}

// RouteLookup finds where a host goes (Routes).
type RouteLookup interface {
	Lookup(host string) Route
}

// Options configure a Handler.
type Options struct {
	Routes    RouteLookup
	Auth      *Auth
	Exchanger Exchanger
	// ServerURL is the server as browsers reach it (its /proxy/authorize).
	ServerURL string
	// Zone is the agent's DNS zone: hosts `<port>-<name>--<owner>.<zone>`.
	Zone string
	// TLS says the proxy serves https: its cookies are then Secure, with __Host- names.
	TLS bool
	// MaxBodyBytes caps a request body (0: no cap); WriteTimeout caps the writing of a response
	// (0: none). Neither applies to upgraded connections (WebSockets).
	MaxBodyBytes int64
	WriteTimeout time.Duration
	// UpgradeTimeout bounds a WebSocket's handshake with the workspace (0: DefaultUpgradeTimeout).
	UpgradeTimeout time.Duration
	Logger         *slog.Logger
	Metrics        *Metrics
	Clock          clock.Clock
	// Dial reaches a route's Addr (default: TCP). Transport, when nil, is NewTransport with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Transport reaches the workspaces (default: NewTransport()).
	Transport http.RoundTripper
	// Activity, when set, is told of every request let through to a workspace (Activity.Record).
	Activity func(workspaceID, kind string)
	// ClientAddr is the address of a request's client, which the server counts refused tokens
	// against (Credential.From). Default: the TCP peer (ClientAddr). The server's apps handler
	// gives its own, which believes X-Forwarded-For from its --trusted-proxies.
	ClientAddr func(*http.Request) netip.Addr
}

// Handler is the proxy's HTTP handler.
type Handler struct {
	o  Options
	rp *httputil.ReverseProxy
	// The names of the session and nonce cookies (cookieName).
	sessionCookie, nonceCookie string
}

// NewTransport returns the transport to workspaces: HTTP/1.1 (WebSockets need it), keep-alive.
func NewTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1000,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
	}
}

type ctxKey int

const (
	upstreamKey ctxKey = iota
	credKey
	infoKey
)

// NewHandler returns the proxy's handler.
func NewHandler(o Options) *Handler {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ClientAddr == nil {
		o.ClientAddr = ClientAddr
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if o.Transport == nil {
		t := NewTransport()
		t.DialContext = o.Dial
		o.Transport = t
	}
	h := &Handler{o: o, sessionCookie: cookieName(CookieName, o.TLS), nonceCookie: cookieName(NonceCookieName, o.TLS)}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		ModifyResponse: func(resp *http.Response) error { sanitizeSetCookie(resp.Header); return nil },
		Transport:      o.Transport,
		FlushInterval:  -1, // stream: server-sent events, long polls, downloads
		ErrorHandler:   h.upstreamError,
		BufferPool:     bufferPool{},
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	return h
}

// bufferPool lends the reverse proxy 256 KiB copy buffers (its default is a new 32 KiB one per
// response): fewer, larger reads and writes for downloads.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

// accessInfo is what the access log says of a request.
type accessInfo struct {
	user, workspace, upstream string
	cached                    bool
	hijacked                  bool
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.o.Clock.Now()
	rec := &recorder{ResponseWriter: w}
	info := &accessInfo{}
	upgrade := isUpgrade(r)
	if upgrade && h.o.Metrics != nil {
		h.o.Metrics.upgrades.Inc()
		defer h.o.Metrics.upgrades.Dec()
	}
	defer func() {
		status := rec.status
		if status == 0 && upgrade && info.upstream != "" {
			status = http.StatusSwitchingProtocols
		}
		d := h.o.Clock.Now().Sub(start)
		h.o.Logger.Info("request", "host", r.Host, "method", r.Method, "path", r.URL.Path, "proto", r.Proto, "status", status, "bytes", rec.bytes,
			"duration_ms", float64(d.Microseconds())/1000, "user", info.user, "workspace", info.workspace, "upstream", info.upstream, "auth_cached", info.cached)
		if h.o.Metrics != nil {
			h.o.Metrics.observe(status, d, rec.bytes)
		}
	}()
	h.serve(rec, r.WithContext(context.WithValue(r.Context(), infoKey, info)), info)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, info *accessInfo) {
	name, host, ok := workspace.NormalizeHost(r.Host)
	if ok {
		_, _, _, ok = workspace.ParseHost(name, h.o.Zone)
	}
	if !ok {
		h.page(w, http.StatusNotFound, "No such workspace", "There is no workspace at this address.")
		return
	}
	if r.URL.Path == protocol.ProxyCallbackPath {
		h.callback(w, r, host)
		return
	}
	creds, fromHeader := h.credentials(r)
	if len(creds) == 0 {
		h.unauthenticated(w, r, host)
		return
	}
	if len(creds) > maxCookies {
		h.page(w, http.StatusBadRequest, "Too many session cookies",
			"Your browser sent more than a few session cookies to this address, which another page may have set. Clear this site's cookies and open it again.")
		return
	}
	if !fromHeader && upgradeOrUnsafe(r) && crossSite(r) {
		// Every workspace host is one "site" to a browser, so a page of another workspace (anyone's)
		// could make the user's browser open a WebSocket or post here with the user's cookie, and
		// read the WebSocket: refuse what comes from another origin with a cookie.
		h.page(w, http.StatusForbidden, "Cross-site request refused", "This workspace accepts WebSockets and changes only from its own pages.")
		return
	}
	d, err := h.decide(r.Context(), host, creds, info)
	if err != nil {
		// Fail closed: no answer from the server, no entry.
		h.o.Logger.Warn("cannot check access with the server", "host", host, "err", err)
		h.page(w, http.StatusBadGateway, "Cannot check your access", "The proxy cannot reach the Hangar server right now. Try again in a moment.")
		return
	}
	info.user, info.workspace = d.User, d.Workspace
	if !d.Allowed {
		if d.Reason == protocol.ProxyRateLimited {
			h.rateLimited(w, r, d)
			return
		}
		if d.Reason == protocol.ProxyUnauthenticated {
			if !fromHeader {
				h.clearCookie(w, h.sessionCookie)
			}
			h.unauthenticated(w, r, host)
			return
		}
		// Another user's workspace looks like no workspace at all.
		h.page(w, http.StatusNotFound, "No such workspace", "There is no workspace of yours at this address.")
		return
	}
	route := h.o.Routes.Lookup(name)
	if route.Addr == "" {
		w.Header().Set("Retry-After", "5")
		if route.Why != "" {
			h.page(w, http.StatusServiceUnavailable, "Workspace not reachable", route.Why)
			return
		}
		msg := "The workspace " + d.Workspace + " is not running"
		if d.Status != "" {
			msg += " (it is " + d.Status + ")"
		}
		h.page(w, http.StatusServiceUnavailable, "Workspace not running", msg+". Start it with `hangar start "+d.Workspace+"`.")
		return
	}
	info.upstream = route.Addr
	if h.o.Activity != nil {
		h.o.Activity(route.WorkspaceID, protocol.ActivityHTTP)
	}
	rc := http.NewResponseController(w)
	if isUpgrade(r) {
		// A WebSocket lives as long as its user wants: no deadlines.
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	} else {
		if h.o.MaxBodyBytes > 0 {
			if r.ContentLength > h.o.MaxBodyBytes {
				h.page(w, http.StatusRequestEntityTooLarge, "Request too large", "The request body is larger than this proxy accepts.")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, h.o.MaxBodyBytes)
		}
		if h.o.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(h.o.WriteTimeout))
		}
	}
	ctx := context.WithValue(r.Context(), upstreamKey, route.Addr)
	ctx = context.WithValue(ctx, credKey, fromHeader)
	if isUpgrade(r) {
		if switched, err := h.upgrade(w, r.WithContext(ctx), route.Addr); err != nil && !switched {
			h.upstreamError(w, r.WithContext(ctx), err)
		}
		return
	}
	h.rp.ServeHTTP(w, r.WithContext(ctx))
}

// rewrite makes the request to the workspace: its pod's address, the original Host, the
// X-Forwarded-* headers, and none of the proxy's own credentials.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	addr, _ := pr.In.Context().Value(upstreamKey).(string)
	pr.SetURL(&url.URL{Scheme: "http", Host: addr})
	pr.Out.Host = pr.In.Host
	pr.SetXForwarded()
	if h.o.TLS || pr.In.TLS != nil {
		pr.Out.Header.Set("X-Forwarded-Proto", "https")
	}
	stripCookies(pr.Out.Header, ownCookies)
	if fromHeader, _ := pr.In.Context().Value(credKey).(bool); fromHeader {
		pr.Out.Header.Del("Authorization")
	}
}

func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		h.page(w, http.StatusRequestEntityTooLarge, "Request too large", "The request body is larger than this proxy accepts.")
		return
	}
	if r.Context().Err() != nil {
		return // the client went away
	}
	addr, _ := r.Context().Value(upstreamKey).(string)
	if msg, ok := PodNetworkUnreachable(addr, err); ok {
		h.o.Logger.Warn("the pod network is not reachable from this proxy", "host", r.Host, "upstream", addr, "err", err)
		h.page(w, http.StatusBadGateway, "Pod network not reachable", msg)
		return
	}
	h.o.Logger.Warn("workspace did not answer", "host", r.Host, "err", err)
	h.page(w, http.StatusBadGateway, "Workspace not answering", "The workspace is running but its server did not answer on this port.")
}

// upgradeOrUnsafe reports whether r opens a WebSocket (or another upgrade) or may change state
// (any method but GET, HEAD and OPTIONS).
func upgradeOrUnsafe(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return isUpgrade(r)
	}
	return true
}

// crossSite reports whether a browser sent r from a page of another origin: Sec-Fetch-Site says
// so, or else Origin names another host. A request with neither comes from no browser page, or
// from a browser too old to say (which then sends no cookie cross-site with SameSite=Lax on POST).
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default: // same-site, cross-site
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return true // "null" (sandboxed frames, file:) or garbage
	}
	return !strings.EqualFold(u.Host, r.Host)
}

// credentials reads the request's user token (Authorization: Bearer) or else its workspace
// sessions (the session cookie; a browser may send several of that name when another host tossed
// one in, and each is tried). fromHeader says the token came from the header (which is then not
// forwarded). The scheme is matched in any case, as RFC 9110 says: a `bearer` token must not slip
// through to the workspace.
func (h *Handler) credentials(r *http.Request) (creds []Credential, fromHeader bool) {
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
		return []Credential{{Token: strings.TrimSpace(token), From: h.o.ClientAddr(r)}}, true
	}
	for _, v := range cookieValues(r, h.sessionCookie) {
		creds = append(creds, Credential{Session: v})
	}
	return creds, false
}

// cookieValues returns the distinct non-empty values of the cookies named name, in the order the
// browser sent them.
func cookieValues(r *http.Request, name string) []string {
	var out []string
	for _, c := range r.CookiesNamed(name) {
		if c.Value != "" && !slices.Contains(out, c.Value) {
			out = append(out, c.Value)
		}
	}
	return out
}

// decide asks Auth about each credential in turn and returns the first allowed decision; failing
// that, the first refusal that is not "unauthenticated" (a session of this host that may no longer
// enter says more than one tossed in from elsewhere), else the last. An error ends it (the caller
// fails closed).
func (h *Handler) decide(ctx context.Context, host string, creds []Credential, info *accessInfo) (protocol.ProxyCheckResponse, error) {
	var refusal *protocol.ProxyCheckResponse
	var d protocol.ProxyCheckResponse
	for _, cred := range creds {
		var cached bool
		var err error
		d, cached, err = h.o.Auth.Check(ctx, host, cred)
		info.cached = cached
		if h.o.Metrics != nil {
			h.o.Metrics.checked(d, cached, err)
		}
		if err != nil || d.Allowed {
			return d, err
		}
		if refusal == nil && d.Reason != protocol.ProxyUnauthenticated {
			refusal = &d
		}
	}
	if refusal != nil {
		return *refusal, nil
	}
	return d, nil
}

// Allowed reports whether r carries a credential (a bearer token, or a session cookie of its
// host) that may enter its host, through the decision cache; a failure to ask counts as no.
func (h *Handler) Allowed(r *http.Request) bool {
	_, host, ok := workspace.NormalizeHost(r.Host)
	if !ok {
		return false
	}
	creds, _ := h.credentials(r)
	if len(creds) == 0 || len(creds) > maxCookies {
		return false
	}
	d, err := h.decide(r.Context(), host, creds, &accessInfo{})
	return err == nil && d.Allowed
}

// unauthenticated sends a browser to the server's sign-in (through /proxy/authorize) and answers
// an API client 401.
func (h *Handler) unauthenticated(w http.ResponseWriter, r *http.Request, host string) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.Contains(r.Header.Get("Accept"), "text/html") && !isUpgrade(r) {
		path := r.URL.RequestURI()
		if !redirect.SafePath(path) {
			path = "/"
		}
		// The sign-in will come back to the callback with a code bound to this nonce: only this
		// browser, holding the cookie, can have it exchanged.
		nonce := rand.Text()
		http.SetCookie(w, &http.Cookie{Name: h.nonceCookie, Value: nonce, Path: "/", MaxAge: int(NonceLifetime / time.Second),
			HttpOnly: true, Secure: h.o.TLS, SameSite: http.SameSiteLaxMode})
		loc := strings.TrimRight(h.o.ServerURL, "/") + protocol.ProxyAuthorizePath + "?" +
			url.Values{"host": {host}, "path": {path}, "nonce": {nonceHash(nonce)}}.Encode()
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, loc, http.StatusFound)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="hangar"`)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("sign in: open this address in a browser, or send Authorization: Bearer <your Hangar token>\n"))
}

// rateLimited answers a token from an address that sent too many wrong ones lately: 429, with
// the server's Retry-After.
func (h *Handler) rateLimited(w http.ResponseWriter, r *http.Request, d protocol.ProxyCheckResponse) {
	wait := max(1, d.RetryAfter)
	// The access log has the 429 of every such request; the server logs the limit once per window.
	h.o.Logger.Debug("token refused: too many failed authentications from this client", "host", r.Host, "client", h.o.ClientAddr(r).String(), "retry_after", wait)
	w.Header().Set("Retry-After", strconv.Itoa(wait))
	h.page(w, http.StatusTooManyRequests, "Too many failed sign-ins",
		"Too many wrong tokens were sent from your address lately. Try again in "+strconv.Itoa(wait)+" s.")
}

// ClientAddr is the address of r's client as the proxy sees it: its TCP peer (the zero Addr when
// RemoteAddr is not an address). The proxy believes no X-Forwarded-For: it is the first hop, or
// behind an L4 load balancer that keeps the client's address.
func ClientAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	a, _ := netip.ParseAddr(strings.Trim(r.RemoteAddr, "[]"))
	return a.Unmap().WithZone("")
}

// nonceHash is what the server sees of a nonce: its SHA-256 in hex.
func nonceHash(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return hex.EncodeToString(sum[:])
}

// callback serves /.hangar/callback?code=C&path=P: the code, exchanged with the nonce of this
// browser's cookie, becomes the workspace session cookie, and the browser goes on to P (a path on
// this host only). A code brought by a browser without the nonce it was issued for is refused.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request, host string) {
	q := r.URL.Query()
	code, path := q.Get("code"), q.Get("path")
	if !redirect.SafePath(path) {
		path = "/"
	}
	if code == "" || len(code) > 128 {
		h.page(w, http.StatusBadRequest, "Bad sign-in link", "This link holds no sign-in code.")
		return
	}
	nonces := cookieValues(r, h.nonceCookie)
	if len(nonces) == 0 || len(nonces) > maxCookies {
		h.o.Logger.Info("sign-in code refused", "host", host, "err", "no nonce cookie, or too many", "nonce_cookies", len(nonces))
		h.page(w, http.StatusForbidden, "Sign-in link not for this browser",
			"This sign-in link was not begun in this browser, or it took too long. Open the workspace's address again.")
		return
	}
	var ex protocol.ProxyExchangeResponse
	var err error
	for _, nonce := range nonces {
		ex, err = h.o.Exchanger.Exchange(r.Context(), protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: nonceHash(nonce)})
		var se *StatusError
		if !errors.As(err, &se) || se.Code/100 != 4 {
			break // exchanged, or the server failed: another nonce would change nothing
		}
	}
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Code/100 == 4:
		h.o.Logger.Info("sign-in code refused", "host", host, "err", err)
		h.page(w, http.StatusForbidden, "Sign-in link expired", "This sign-in link was used already, has expired, or was begun in another browser. Open the workspace's address again.")
		return
	case err != nil:
		h.o.Logger.Warn("cannot exchange a sign-in code", "host", host, "err", err)
		h.page(w, http.StatusBadGateway, "Cannot sign you in", "The proxy cannot reach the Hangar server right now. Try again in a moment.")
		return
	}
	if info, ok := r.Context().Value(infoKey).(*accessInfo); ok {
		info.user, info.workspace = ex.User, ex.Workspace
	}
	maxAge := int(ex.ExpiresAt.Sub(h.o.Clock.Now()) / time.Second)
	http.SetCookie(w, &http.Cookie{Name: h.sessionCookie, Value: ex.Session, Path: "/", MaxAge: max(maxAge, 1), Expires: ex.ExpiresAt,
		HttpOnly: true, Secure: h.o.TLS, SameSite: http.SameSiteLaxMode})
	h.clearCookie(w, h.nonceCookie)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, path, http.StatusFound)
}

func (h *Handler) clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: h.o.TLS, SameSite: http.SameSiteLaxMode})
}

// sanitizeSetCookie edits a workspace's Set-Cookie headers: a Domain attribute is removed, so
// that a workspace sets cookies for its own host only, never for the zone that every other
// workspace (and its sessions) lives under; a cookie with one of the proxy's names is dropped.
func sanitizeSetCookie(h http.Header) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, line := range lines {
		attrs := strings.Split(line, ";")
		name, _, _ := strings.Cut(attrs[0], "=")
		if slices.ContainsFunc(ownCookies, func(own string) bool { return strings.EqualFold(strings.TrimSpace(name), own) }) {
			continue
		}
		kept := attrs[:1]
		for _, a := range attrs[1:] {
			if k, _, _ := strings.Cut(a, "="); !strings.EqualFold(strings.TrimSpace(k), "domain") {
				kept = append(kept, a)
			}
		}
		h.Add("Set-Cookie", strings.Join(kept, ";"))
	}
}

// stripCookies removes the cookies of these names from the Cookie headers of h, keeping the others.
func stripCookies(h http.Header, names []string) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		for _, part := range strings.Split(line, ";") {
			p := strings.TrimSpace(part)
			if p == "" {
				continue
			}
			if n, _, _ := strings.Cut(p, "="); slices.Contains(names, strings.TrimSpace(n)) {
				continue
			}
			kept = append(kept, p)
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} · Hangar</title><style>` + web.PageStyle + `</style></head>
<body><header class="top"><a class="brand" href="{{.Home}}">Hangar</a></header>
<main><h1>{{.Title}}</h1><p class="error" id="message">{{.Message}}</p>
<p class="back"><a href="{{.Home}}" id="back">Back to Hangar</a></p></main></body></html>
`))

// pageCSP allows the proxy's own pages their style and nothing else.
var pageCSP = "default-src 'none'; style-src " + web.PageStyleSource + "; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// page answers with one of the proxy's own pages, in the UI's look, linking back to the UI.
func (h *Handler) page(w http.ResponseWriter, status int, title, message string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.WriteHeader(status)
	home := strings.TrimRight(h.o.ServerURL, "/") + "/ui/"
	_ = pageTemplate.Execute(w, struct{ Title, Message, Home string }{title, message, home})
}

// recorder notes the status and the bytes of a response for the access log; Unwrap lets
// http.ResponseController (flushes, hijacks, deadlines) reach the connection.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
