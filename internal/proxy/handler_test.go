package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

const (
	zone      = "ws.example.com"
	aliceHost = "8080-dev--alice.ws.example.com"
)

type staticRoutes map[string]Route

func (s staticRoutes) Lookup(host string) Route { return s[host] }

// fakeExchanger answers as the server: a code is found by itself, its host and the nonce (hash)
// it was issued with, and used once.
type fakeExchanger struct {
	mu    sync.Mutex
	codes map[string]protocol.ProxyExchangeResponse // by code+" "+host+" "+nonce
	err   error
}

func (f *fakeExchanger) Exchange(_ context.Context, req protocol.ProxyExchangeRequest) (protocol.ProxyExchangeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return protocol.ProxyExchangeResponse{}, f.err
	}
	key := req.Code + " " + req.Host + " " + req.Nonce
	r, ok := f.codes[key]
	if !ok {
		return r, &StatusError{Code: 401, Body: "unknown code"}
	}
	delete(f.codes, key)
	return r, nil
}

// issue makes code for alice on aliceHost, bound to nonce (the hash an authorize link carried),
// as the server's /proxy/authorize does.
func (f *fakeExchanger) issue(code, nonce string, expires time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes[code+" "+aliceHost+" "+nonce] = protocol.ProxyExchangeResponse{Session: "hgw_alice", ExpiresAt: expires, User: "alice", Workspace: "alice/dev"}
}

// wsHeaders holds the headers of the last WebSocket request upstream received.
var wsHeaders sync.Map

// upstream is a workspace's server: it echoes what it received as JSON, and WebSocket messages.
func upstream(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		wsHeaders.Store(t.Name(), r.Header.Clone())
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for {
			typ, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, data); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/set-cookies", func(w http.ResponseWriter, r *http.Request) {
		for _, c := range []string{"app=1; Path=/; HttpOnly", "wide=2; Domain=" + zone + "; Path=/", "__Host-app=3; Path=/; Secure",
			"hangar_ws_session=evil; Domain=" + zone, "__Host-hangar_ws_session=evil; Path=/; Secure", "__Host-hangar_ws_nonce=evil; Path=/; Secure"} {
			w.Header().Add("Set-Cookie", c)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "path": r.URL.RequestURI(), "header": r.Header, "body_len": len(body)})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type harness struct {
	t       *testing.T
	checker *fakeChecker
	ex      *fakeExchanger
	routes  staticRoutes
	clock   *clock.Fake
	handler *Handler
	proxy   *httptest.Server
	up      *httptest.Server

	mu       sync.Mutex
	activity []string // what Options.Activity was told
}

func newHarness(t *testing.T, tlsOn bool) *harness {
	h := &harness{t: t, clock: clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)), up: upstream(t)}
	h.checker = &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{
		"hgu_alice": {Allowed: true, User: "alice", Workspace: "alice/dev", Status: "Running"},
		"hgw_alice": {Allowed: true, User: "alice", Workspace: "alice/dev", Status: "Running"},
		"hgu_bob":   {Reason: protocol.ProxyForbidden, User: "bob"},
	}}
	h.ex = &fakeExchanger{codes: map[string]protocol.ProxyExchangeResponse{}}
	h.routes = staticRoutes{aliceHost: {Known: true, Addr: strings.TrimPrefix(h.up.URL, "http://"), WorkspaceID: "ws-alice-dev"}}
	h.handler = NewHandler(Options{
		Routes: h.routes, Auth: &Auth{Checker: h.checker, Clock: h.clock, AllowTTL: 5 * time.Second, DenyTTL: time.Second},
		Exchanger: h.ex, ServerURL: "https://hangar.example.com", Zone: zone, TLS: tlsOn, MaxBodyBytes: 1 << 10, Clock: h.clock,
		Activity: func(id, kind string) {
			h.mu.Lock()
			h.activity = append(h.activity, id+" "+kind)
			h.mu.Unlock()
		},
	})
	if tlsOn {
		h.proxy = httptest.NewUnstartedServer(h.handler)
		h.proxy.EnableHTTP2 = true
		h.proxy.StartTLS()
	} else {
		h.proxy = httptest.NewServer(h.handler)
	}
	t.Cleanup(h.proxy.Close)
	return h
}

// client reaches every host at the proxy, without following redirects.
func (h *harness) client() *http.Client {
	c := h.proxy.Client()
	addr := h.proxy.Listener.Addr().String()
	tr := c.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	if tr.TLSClientConfig != nil {
		tr.TLSClientConfig.InsecureSkipVerify = true
	}
	c.Transport = tr
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func (h *harness) url(host, path string) string {
	scheme := "http"
	if h.proxy.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + host + path
}

func (h *harness) get(host, path string, hdr http.Header) (*http.Response, map[string]any) {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.url(host, path), nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := h.client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var echo map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.NewDecoder(resp.Body).Decode(&echo)
	}
	return resp, echo
}

func TestBrowserSignInFlow(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tlsOn], func(t *testing.T) {
			h := newHarness(t, tlsOn)
			browser := http.Header{"Accept": {"text/html,application/xhtml+xml"}}
			resp, _ := h.get(aliceHost, "/app?x=1", browser)
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || loc == nil || loc.Host != "hangar.example.com" || loc.Path != protocol.ProxyAuthorizePath ||
				loc.Query().Get("host") != aliceHost || loc.Query().Get("path") != "/app?x=1" {
				t.Fatalf("browser without a session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			nonce := cookieOf(resp, cookieName(NonceCookieName, tlsOn))
			if nonce == nil || loc.Query().Get("nonce") != nonceHash(nonce.Value) {
				t.Fatalf("the redirect's nonce %q and cookie %v", loc.Query().Get("nonce"), resp.Header.Values("Set-Cookie"))
			}
			h.ex.issue("hgc_1", loc.Query().Get("nonce"), h.clock.Now().Add(12*time.Hour))
			browser.Set("Cookie", nonce.Name+"="+nonce.Value)
			// An API client is told 401.
			if resp, _ := h.get(aliceHost, "/app", nil); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("API client without a token: %d", resp.StatusCode)
			}
			// The callback: cookie, then back to the path (never elsewhere).
			resp, _ = h.get(aliceHost, protocol.ProxyCallbackPath+"?code=hgc_1&path="+url.QueryEscape("//evil.example.com/x"), browser)
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/" {
				t.Fatalf("callback: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			ck := cookieOf(resp, SessionCookieName(tlsOn))
			if ck == nil || ck.Value != "hgw_alice" || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Secure != tlsOn ||
				ck.MaxAge != 12*3600 {
				t.Fatalf("cookie %+v (raw %q)", ck, resp.Header.Values("Set-Cookie"))
			}
			if raw := strings.Join(resp.Header.Values("Set-Cookie"), "\n"); strings.Contains(strings.ToLower(raw), "domain=") {
				t.Errorf("the cookie names a domain: %s", raw)
			}
			// The code is used: a second visit is refused.
			if resp, _ := h.get(aliceHost, protocol.ProxyCallbackPath+"?code=hgc_1&path=%2F", browser); resp.StatusCode != http.StatusForbidden {
				t.Errorf("a used code: %d", resp.StatusCode)
			}
			// With the cookie: the page, and neither the cookie nor anything of the proxy's upstream.
			resp, echo := h.get(aliceHost, "/app?x=1", http.Header{"Cookie": {"a=1; " + ck.Name + "=hgw_alice; b=2; " + nonce.Name + "=" + nonce.Value}, "Accept": {"text/html"}})
			if resp.StatusCode != http.StatusOK || echo["path"] != "/app?x=1" || echo["host"] != aliceHost {
				t.Fatalf("with the cookie: %d %v", resp.StatusCode, echo)
			}
			hdr := echo["header"].(map[string]any)
			if c := hdr["Cookie"].([]any)[0].(string); c != "a=1; b=2" {
				t.Errorf("upstream got Cookie %q", c)
			}
			wantProto := map[bool]string{false: "http", true: "https"}[tlsOn]
			if hdr["X-Forwarded-Host"].([]any)[0] != aliceHost || hdr["X-Forwarded-Proto"].([]any)[0] != wantProto || hdr["X-Forwarded-For"] == nil {
				t.Errorf("forwarded headers %v", hdr)
			}
			if tlsOn && resp.ProtoMajor != 2 {
				t.Errorf("over TLS the client spoke %s, want HTTP/2", resp.Proto)
			}
		})
	}
}

func TestBearerAndRefusals(t *testing.T) {
	h := newHarness(t, false)
	resp, echo := h.get(aliceHost, "/api", http.Header{"Authorization": {"Bearer hgu_alice"}, "Cookie": {"x=1"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer: %d", resp.StatusCode)
	}
	hdr := echo["header"].(map[string]any)
	if hdr["Authorization"] != nil {
		t.Errorf("the token reached the workspace: %v", hdr["Authorization"])
	}
	// The scheme in any case: a lower-case one is the credential too, and never reaches the
	// workspace, even with a cookie beside it.
	resp, echo = h.get(aliceHost, "/api", http.Header{"Authorization": {"bearer hgu_alice"}, "Cookie": {CookieName + "=hgw_alice"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lower-case bearer: %d", resp.StatusCode)
	}
	if hdr := echo["header"].(map[string]any); hdr["Authorization"] != nil {
		t.Errorf("a lower-case bearer token reached the workspace: %v", hdr["Authorization"])
	}
	// The two requests let through are the workspace's activity; refusals are not.
	h.mu.Lock()
	if got := strings.Join(h.activity, ","); got != "ws-alice-dev http,ws-alice-dev http" {
		t.Errorf("activity %q, want two HTTP uses of ws-alice-dev", got)
	}
	h.mu.Unlock()
	// Another user: 404, the same as no workspace.
	if resp, _ := h.get(aliceHost, "/", http.Header{"Authorization": {"Bearer hgu_bob"}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob: %d", resp.StatusCode)
	}
	h.mu.Lock()
	if len(h.activity) != 2 {
		t.Errorf("a refused request counted as activity: %q", h.activity)
	}
	h.mu.Unlock()
	// A session the server no longer knows: the cookie is cleared and the browser sent to sign in.
	resp, _ = h.get(aliceHost, "/", http.Header{"Cookie": {CookieName + "=hgw_old"}, "Accept": {"text/html"}})
	if resp.StatusCode != http.StatusFound || !strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ""), CookieName+"=;") {
		t.Errorf("stale session: %d %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
	}
	// Hosts outside the zone or not workspace hosts: 404 without asking the server.
	calls := h.checker.calls
	for _, host := range []string{"ws.example.com", "8080-dev--alice.evil.com", "dev.ws.example.com", "8080-dev--alice.ws.example.com.evil.com"} {
		if resp, _ := h.get(host, "/", http.Header{"Authorization": {"Bearer hgu_alice"}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("host %s: %d", host, resp.StatusCode)
		}
	}
	if h.checker.calls != calls {
		t.Errorf("foreign hosts were checked with the server")
	}
	// Allowed but not running: 503 and why.
	h.checker.set("hgu_alice", protocol.ProxyCheckResponse{Allowed: true, User: "alice", Workspace: "alice/dev", Status: "Stopped"})
	h.routes[aliceHost] = Route{Known: true}
	h.clock.Advance(time.Minute)
	if resp, _ := h.get(aliceHost, "/", http.Header{"Authorization": {"Bearer hgu_alice"}}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stopped: %d", resp.StatusCode)
	}
	// The server down: refused (fail closed), whatever the credential.
	h.checker.err = errors.New("connection refused")
	h.clock.Advance(time.Minute)
	if resp, _ := h.get(aliceHost, "/", http.Header{"Authorization": {"Bearer hgu_alice"}}); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("server down: %d", resp.StatusCode)
	}
}

func TestBodyLimitAndWebSocket(t *testing.T) {
	h := newHarness(t, true)
	c := h.client()
	post := func(n int) int {
		req, _ := http.NewRequest("POST", h.url(aliceHost, "/upload"), strings.NewReader(strings.Repeat("x", n)))
		req.Header.Set("Authorization", "Bearer hgu_alice")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post(1 << 10); s != http.StatusOK {
		t.Errorf("a body at the limit: %d", s)
	}
	if s := post(1<<10 + 1); s != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d", s)
	}

	// A WebSocket through the proxy (HTTP/1.1 upgrade; the client's HTTP/2 is for plain requests).
	tr := c.Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = false
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, h.url(aliceHost, "/ws"), &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr}, HTTPHeader: http.Header{"Authorization": {"Bearer hgu_alice"}},
	})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	for _, msg := range []string{"hello", strings.Repeat("y", 100<<10)} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := ws.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	hv, _ := wsHeaders.Load(t.Name())
	if hdr, _ := hv.(http.Header); hdr == nil || hdr.Get("Authorization") != "" || hdr.Get("X-Forwarded-Proto") != "https" ||
		hdr.Get("X-Forwarded-Host") != aliceHost || !strings.EqualFold(hdr.Get("Upgrade"), "websocket") {
		t.Errorf("the workspace's WebSocket request had headers %v", hdr)
	}
	// A workspace that does not switch: its answer, as is.
	req, _ := http.NewRequest("GET", h.url(aliceHost, "/plain"), nil)
	req.Header.Set("Authorization", "Bearer hgu_alice")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	if resp, err := (&http.Client{Transport: tr}).Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("an upgrade the workspace refuses: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// Without a token the upgrade is refused before it reaches the workspace.
	if _, resp, err := websocket.Dial(ctx, h.url(aliceHost, "/ws"), &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}}); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unauthenticated WebSocket: %v %v", err, resp)
	}
}

func TestStripCookies(t *testing.T) {
	for in, want := range map[string]string{
		CookieName + "=x":                          "",
		"a=1; " + CookieName + "=x; b=2":           "a=1; b=2",
		"a=1;" + CookieName + "=x":                 "a=1",
		"hangar_ws_session_other=1; " + CookieName: "hangar_ws_session_other=1",
		"__Host-hangar_ws_session=x; __Host-hangar_ws_nonce=y; hangar_ws_nonce=z; " + CookieName + "=w; __Host-app=1": "__Host-app=1",
	} {
		h := http.Header{"Cookie": {in}}
		stripCookies(h, ownCookies)
		if got := h.Get("Cookie"); got != want {
			t.Errorf("stripCookie(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every workspace host is one site to a browser: a page of another workspace must not open a
// WebSocket or post to this one with the user's cookie. A bearer token is never sent by a browser
// on its own, so it is not asked where it comes from.
func TestCrossSiteRequestsWithACookieAreRefused(t *testing.T) {
	h := newHarness(t, false)
	cookie := CookieName + "=hgw_alice"
	other := "http://8080-x--bob." + zone
	self := "http://" + aliceHost
	for _, tc := range []struct {
		name   string
		method string
		hdr    http.Header
		want   int
	}{
		{"websocket from another workspace's page", "GET", http.Header{"Cookie": {cookie}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Origin": {other}}, http.StatusForbidden},
		{"post from another workspace's page", "POST", http.Header{"Cookie": {cookie}, "Origin": {other}}, http.StatusForbidden},
		{"post that the browser calls same-site", "POST", http.Header{"Cookie": {cookie}, "Sec-Fetch-Site": {"same-site"}, "Origin": {self}}, http.StatusForbidden},
		{"post from a sandboxed frame", "POST", http.Header{"Cookie": {cookie}, "Origin": {"null"}}, http.StatusForbidden},
		{"post from its own page", "POST", http.Header{"Cookie": {cookie}, "Origin": {self}, "Sec-Fetch-Site": {"same-origin"}}, http.StatusOK},
		{"post without Origin (no browser page)", "POST", http.Header{"Cookie": {cookie}}, http.StatusOK},
		{"a link from another workspace (GET)", "GET", http.Header{"Cookie": {cookie}, "Sec-Fetch-Site": {"same-site"}}, http.StatusOK},
		{"bearer token from anywhere", "POST", http.Header{"Authorization": {"Bearer hgu_alice"}, "Origin": {other}}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, h.url(aliceHost, "/x"), nil)
			for k, v := range tc.hdr {
				req.Header[k] = v
			}
			resp, err := h.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// The upstream echo server does not speak WebSocket: anything but 403 means the proxy
			// let the request through.
			if got := resp.StatusCode; (got == http.StatusForbidden) != (tc.want == http.StatusForbidden) {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
}

func cookieOf(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// A code is exchanged only with the nonce of the browser that began the sign-in: the redirect to
// the server sets a fresh random nonce cookie (host-only, HttpOnly, Lax, Secure with TLS) and sends
// its hash; the callback sends the cookie's hash with the code, so a code carried to another
// browser is refused.
func TestCodeIsBoundToTheBrowser(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tlsOn], func(t *testing.T) {
			h := newHarness(t, tlsOn)
			browser := http.Header{"Accept": {"text/html"}}
			begin := func() (*http.Cookie, string) {
				t.Helper()
				resp, _ := h.get(aliceHost, "/", browser)
				loc, _ := url.Parse(resp.Header.Get("Location"))
				c := cookieOf(resp, cookieName(NonceCookieName, tlsOn))
				if resp.StatusCode != http.StatusFound || c == nil || loc == nil || loc.Query().Get("nonce") != nonceHash(c.Value) {
					t.Fatalf("redirect to sign in: %d %q %q", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Values("Set-Cookie"))
				}
				if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" || c.Secure != tlsOn ||
					c.MaxAge != int(NonceLifetime/time.Second) || len(c.Value) < 20 {
					t.Errorf("nonce cookie %+v", c)
				}
				return c, loc.Query().Get("nonce")
			}
			mine, sent := begin()
			theirs, _ := begin()
			if mine.Value == theirs.Value {
				t.Fatal("two sign-ins got the same nonce")
			}
			h.ex.issue("hgc_1", sent, h.clock.Now().Add(time.Hour))
			callback := func(cookie string) *http.Response {
				t.Helper()
				hdr := http.Header{"Accept": {"text/html"}}
				if cookie != "" {
					hdr.Set("Cookie", cookie)
				}
				resp, _ := h.get(aliceHost, protocol.ProxyCallbackPath+"?code=hgc_1&path=%2F", hdr)
				return resp
			}
			for _, other := range []string{"", theirs.Name + "=" + theirs.Value, "a=" + mine.Value, CookieName + "=" + mine.Value} {
				if resp := callback(other); resp.StatusCode != http.StatusForbidden || cookieOf(resp, SessionCookieName(tlsOn)) != nil {
					t.Errorf("the code with cookies %q: %d %q", other, resp.StatusCode, resp.Header.Values("Set-Cookie"))
				}
			}
			resp := callback(mine.Name + "=" + mine.Value)
			if resp.StatusCode != http.StatusFound || cookieOf(resp, SessionCookieName(tlsOn)) == nil {
				t.Fatalf("the code in the browser that began the sign-in: %d %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
			}
			if c := cookieOf(resp, mine.Name); c == nil || c.MaxAge >= 0 {
				t.Errorf("the used nonce is not cleared: %q", resp.Header.Values("Set-Cookie"))
			}
		})
	}
}

// Cookie tossing: every workspace host is one site, so another workspace's page could set a
// cookie for the whole zone. Over TLS the proxy's cookies have __Host- names, which only this host
// can set, and the bare name is no credential; a workspace's Set-Cookie loses its Domain and may
// not set the proxy's cookies; several session cookies are each tried.
func TestCookieTossing(t *testing.T) {
	t.Run("host-prefixed names over TLS", func(t *testing.T) {
		h := newHarness(t, true)
		if got := SessionCookieName(true); got != "__Host-hangar_ws_session" {
			t.Fatalf("session cookie over TLS: %q", got)
		}
		// A tossed (bare) cookie with a valid session is not a credential over TLS.
		resp, _ := h.get(aliceHost, "/", http.Header{"Cookie": {CookieName + "=hgw_alice"}, "Accept": {"text/html"}})
		if resp.StatusCode != http.StatusFound {
			t.Errorf("a bare session cookie over TLS: %d", resp.StatusCode)
		}
		if resp, _ := h.get(aliceHost, "/", http.Header{"Cookie": {"__Host-hangar_ws_session=hgw_alice"}}); resp.StatusCode != http.StatusOK {
			t.Errorf("the __Host- session cookie over TLS: %d", resp.StatusCode)
		}
	})
	t.Run("several session cookies", func(t *testing.T) {
		h := newHarness(t, false)
		for _, cookie := range []string{
			CookieName + "=hgw_tossed; " + CookieName + "=hgw_alice",
			CookieName + "=hgw_alice; " + CookieName + "=hgw_tossed",
			CookieName + "=hgu_alice; " + CookieName + "=hgw_alice; " + CookieName + "=hgw_x",
		} {
			if resp, _ := h.get(aliceHost, "/", http.Header{"Cookie": {cookie}}); resp.StatusCode != http.StatusOK {
				t.Errorf("cookies %q: %d", cookie, resp.StatusCode)
			}
		}
		many := strings.Repeat(CookieName+"=hgw_x1; "+CookieName+"=hgw_x2; ", 2) + CookieName + "=hgw_x3; " + CookieName + "=hgw_x4; " + CookieName + "=hgw_alice"
		if resp, _ := h.get(aliceHost, "/", http.Header{"Cookie": {many}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("five session cookies: %d", resp.StatusCode)
		}
		// A nonce cookie tossed in beside the browser's own: the code is exchanged with each.
		resp, _ := h.get(aliceHost, "/", http.Header{"Accept": {"text/html"}})
		mine := cookieOf(resp, NonceCookieName)
		loc, _ := url.Parse(resp.Header.Get("Location"))
		h.ex.issue("hgc_2", loc.Query().Get("nonce"), h.clock.Now().Add(time.Hour))
		resp, _ = h.get(aliceHost, protocol.ProxyCallbackPath+"?code=hgc_2&path=%2F",
			http.Header{"Accept": {"text/html"}, "Cookie": {NonceCookieName + "=tossed; " + NonceCookieName + "=" + mine.Value}})
		if resp.StatusCode != http.StatusFound || cookieOf(resp, CookieName) == nil {
			t.Errorf("the callback with a tossed nonce beside the browser's: %d %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
		}
		// None valid: the browser signs in again, and only its host's cookie is cleared.
		resp, _ = h.get(aliceHost, "/", http.Header{"Cookie": {CookieName + "=hgw_x; " + CookieName + "=hgw_y"}, "Accept": {"text/html"}})
		if resp.StatusCode != http.StatusFound || !strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ""), CookieName+"=;") {
			t.Errorf("no valid session cookie: %d %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
		}
	})
	t.Run("workspace Set-Cookie", func(t *testing.T) {
		for _, tlsOn := range []bool{false, true} {
			h := newHarness(t, tlsOn)
			resp, _ := h.get(aliceHost, "/set-cookies", http.Header{"Authorization": {"Bearer hgu_alice"}})
			got := resp.Header.Values("Set-Cookie")
			want := []string{"app=1; Path=/; HttpOnly", "wide=2; Path=/", "__Host-app=3; Path=/; Secure"}
			if resp.StatusCode != http.StatusOK || !slices.Equal(got, want) {
				t.Errorf("TLS %v: Set-Cookie %q, want %q", tlsOn, got, want)
			}
		}
	})
}

func TestSanitizeSetCookie(t *testing.T) {
	for in, want := range map[string]string{
		"a=1; Domain=ws.example.com; Path=/":   "a=1; Path=/",
		"a=1;domain=.ws.example.com":           "a=1",
		"a=1; DOMAIN = ws.example.com; Secure": "a=1; Secure",
		"a=domain=x; Path=/":                   "a=domain=x; Path=/",
		"domain=1; Path=/":                     "domain=1; Path=/",
		"__Host-hangar_ws_session=x; Path=/":   "",
		"hangar_ws_nonce=x":                    "",
		"__HOST-HANGAR_WS_SESSION=x; Path=/":   "",
		" hangar_ws_session =x; Domain=a.b":    "",
	} {
		h := http.Header{"Set-Cookie": {in}}
		sanitizeSetCookie(h)
		if got := h.Get("Set-Cookie"); got != want {
			t.Errorf("sanitizeSetCookie(%q) = %q, want %q", in, got, want)
		}
	}
}

// noDeadlines is a connection whose deadlines do nothing, as an SSH channel's.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error      { return errors.New("deadline not supported") }
func (noDeadlines) SetReadDeadline(time.Time) error  { return errors.New("deadline not supported") }
func (noDeadlines) SetWriteDeadline(time.Time) error { return errors.New("deadline not supported") }

// TestUpgradeHandshakeIsBounded: a workspace that accepts a WebSocket's connection and never answers
// gets a 502 once UpgradeTimeout has passed, even over a connection without deadlines.
func TestUpgradeHandshakeIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never answered
		}
	}()
	h := NewHandler(Options{
		Routes: staticRoutes{aliceHost: {Known: true, Addr: ln.Addr().String()}},
		Auth: &Auth{Checker: &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{"hgu_alice": {Allowed: true, User: "alice", Workspace: "alice/dev"}}},
			Clock: clock.NewFake(time.Now()), AllowTTL: time.Minute},
		Zone: zone, UpgradeTimeout: 100 * time.Millisecond,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return noDeadlines{c}, nil
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/ws", nil)
	req.Host = aliceHost
	req.Header.Set("Authorization", "Bearer hgu_alice")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a silent workspace's upgrade: %d, want 502", resp.StatusCode)
	}
	select {
	case c := <-accepted:
		c.Close()
	default:
		t.Fatal("the workspace was never asked")
	}
}

// A proxy that cannot reach the pod network at all (a dial ends "no route to host", as it does on
// the host of the local test cluster) says so in its 502 page, naming the address and the way out,
// for requests and WebSockets alike; a workspace that refuses keeps the "not answering" page.
func TestUnreachablePodNetworkPage(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		want  []string
	}{
		{syscall.EHOSTUNREACH, []string{"Pod network not reachable", "10.244.0.7:8080", "no route to host", "--pod-netns /run/netns/$(cat DIR/netns)"}},
		{syscall.ENETUNREACH, []string{"Pod network not reachable", "10.244.0.7:8080", "network is unreachable", "--pod-netns"}},
		{syscall.ECONNREFUSED, []string{"Workspace not answering"}},
	} {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			h := newHarness(t, false)
			h.routes[aliceHost] = Route{Known: true, Addr: "10.244.0.7:8080", WorkspaceID: "ws-alice-dev"}
			h.handler = NewHandler(Options{
				Routes: h.routes, Auth: &Auth{Checker: h.checker, Clock: h.clock}, Exchanger: h.ex, ServerURL: "https://hangar.example.com",
				Zone: zone, Clock: h.clock,
				Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
					return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", tc.errno)}
				},
			})
			for _, hdr := range []http.Header{
				{"Authorization": {"Bearer hgu_alice"}},
				{"Authorization": {"Bearer hgu_alice"}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}},
			} {
				req := httptest.NewRequest("GET", "http://"+aliceHost+"/", nil)
				req.Header = hdr
				rec := httptest.NewRecorder()
				h.handler.ServeHTTP(rec, req)
				page := html.UnescapeString(rec.Body.String())
				if rec.Code != http.StatusBadGateway {
					t.Errorf("%v: status %d, want 502", hdr, rec.Code)
				}
				for _, w := range tc.want {
					if !strings.Contains(page, w) {
						t.Errorf("%v: the page does not say %q:\n%s", hdr, w, page)
					}
				}
			}
		})
	}
}
