package server_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

const proxyDevfile = `schemaVersion: 2.2.0
components:
- name: main
  container:
    image: alpine
    endpoints:
    - {name: web, targetPort: 8080}
    - {name: api, targetPort: 9000, exposure: internal}
    - {name: debug, targetPort: 5005, exposure: none}
`

// browser is a client that keeps no cookie jar and follows no redirect: each step is checked.
type browser struct {
	t      *testing.T
	env    *servertest.Env
	cookie string
	header http.Header // extra request headers
	body   string      // of the last response
}

func (b *browser) do(method, path string, form url.Values) *http.Response {
	b.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, b.env.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range b.header {
		req.Header[k] = v
	}
	if b.cookie != "" {
		name := server.SessionCookie
		if b.header.Get("X-Forwarded-Proto") == "https" {
			name = "__Host-" + name // the server's cookie over https
		}
		req.Header.Set("Cookie", name+"="+b.cookie)
	}
	resp, err := oaClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	body2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b.body = string(body2)
	return resp
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == server.SessionCookie || c.Name == "__Host-"+server.SessionCookie {
			return c
		}
	}
	return nil
}

// signIn signs the browser in with token and returns the session cookie.
func (b *browser) signIn(token string) *http.Cookie {
	b.t.Helper()
	resp := b.do("POST", "/signin", url.Values{"token": {token}, "return_to": {"/signin"}})
	c := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || c == nil {
		b.t.Fatalf("sign-in: %d, cookie %v", resp.StatusCode, c)
	}
	b.cookie = c.Value
	return c
}

// testNonce stands for what a proxy sends as a browser's nonce: the SHA-256 of its nonce cookie.
var testNonce = strings.Repeat("ab", 32)

// authorize asks for a code for host, bound to testNonce, and returns it ("" when not redirected
// to the proxy).
func (b *browser) authorize(host string) (string, *http.Response) {
	b.t.Helper()
	return b.authorizeWith(host, testNonce)
}

func (b *browser) authorizeWith(host, nonce string) (string, *http.Response) {
	b.t.Helper()
	resp := b.do("GET", protocol.ProxyAuthorizePath+"?"+url.Values{"host": {host}, "path": {"/"}, "nonce": {nonce}}.Encode(), nil)
	if resp.StatusCode != http.StatusFound {
		return "", resp
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Host != host {
		return "", resp
	}
	return loc.Query().Get("code"), resp
}

func TestProxySignIn(t *testing.T) {
	env := servertest.New(t)
	alice := createUser(t, env, "alice")
	b := &browser{t: t, env: env}

	t.Run("cookie", func(t *testing.T) {
		c := b.signIn(alice)
		if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure || c.Domain != "" || c.MaxAge != int(server.SessionLifetime/time.Second) {
			t.Errorf("session cookie over http: %+v", c)
		}
		if !strings.HasPrefix(c.Value, "hgs_") {
			t.Errorf("session %q", c.Value)
		}
		sec := &browser{t: t, env: env, header: http.Header{"X-Forwarded-Proto": {"https"}}}
		if c := sec.signIn(alice); !c.Secure || c.Name != "__Host-hangar_session" || c.Path != "/" || c.Domain != "" {
			t.Errorf("session cookie over https is not Secure and __Host- named: %+v", c)
		}
		// Over https only the __Host- cookie is a session: a hangar_session cookie, which another
		// host of the site could have set, is not.
		sec.cookie = c.Value
		if sec.do("GET", "/signin", nil); !strings.Contains(sec.body, "Signed in") {
			t.Errorf("the __Host- session is not read over https: %s", sec.body)
		}
		tossed := &browser{t: t, env: env, header: http.Header{"X-Forwarded-Proto": {"https"}, "Cookie": {"hangar_session=" + c.Value}}}
		if tossed.do("GET", "/signin", nil); strings.Contains(tossed.body, "Signed in") {
			t.Errorf("a hangar_session cookie is a session over https: %s", tossed.body)
		}
	})
	t.Run("cross-origin posts are refused", func(t *testing.T) {
		for _, h := range []http.Header{
			{"Sec-Fetch-Site": {"cross-site"}},
			{"Origin": {"https://evil.example.com"}},
		} {
			evil := &browser{t: t, env: env, header: h}
			if resp := evil.do("POST", "/signin", url.Values{"token": {alice}}); resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
				t.Errorf("sign-in with %v: %d", h, resp.StatusCode)
			}
		}
		same := &browser{t: t, env: env, header: http.Header{"Sec-Fetch-Site": {"same-origin"}}}
		same.signIn(alice)
	})
	t.Run("no open redirect", func(t *testing.T) {
		for _, rt := range []string{"https://evil.example.com/", "//evil.example.com/x", "/\\evil.example.com", "\\\\evil", "evil.example.com",
			"javascript:alert(1)", "/ok\r\nLocation: https://evil", "http:/evil", "/\t/evil.example.com"} {
			resp := b.do("POST", "/signin", url.Values{"token": {alice}, "return_to": {rt}})
			if resp.StatusCode == http.StatusSeeOther {
				t.Errorf("return_to %q redirected to %q", rt, resp.Header.Get("Location"))
			}
			if resp := b.do("GET", "/signin?"+url.Values{"return_to": {rt}}.Encode(), nil); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("GET /signin?return_to=%q: %d", rt, resp.StatusCode)
			}
		}
		if !server.SafeReturnPath("/proxy/authorize?host=a&path=%2F") || server.SafeReturnPath("//x") {
			t.Error("SafeReturnPath")
		}
	})
	t.Run("bad token, then sign-out", func(t *testing.T) {
		if resp := b.do("POST", "/signin", url.Values{"token": {"hgu_nope"}}); resp.StatusCode != http.StatusUnauthorized || sessionCookie(resp) != nil {
			t.Errorf("bad token: %d", resp.StatusCode)
		}
		b.signIn(alice)
		if resp := b.do("GET", "/signin?return_to=%2Fx", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/x" {
			t.Errorf("signed-in GET /signin: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp := b.do("POST", "/signout", nil); resp.StatusCode != http.StatusOK || sessionCookie(resp) == nil || sessionCookie(resp).MaxAge >= 0 {
			t.Errorf("sign-out: %d", resp.StatusCode)
		}
		if resp := b.do("GET", "/signin?return_to=%2Fx", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("after sign-out the old cookie still signs in: %d", resp.StatusCode)
		}
	})
	t.Run("session expires", func(t *testing.T) {
		b.signIn(alice)
		env.Clock.Advance(server.SessionLifetime)
		if resp := b.do("GET", "/signin?return_to=%2Fx", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("an expired session still signs in: %d", resp.StatusCode)
		}
	})
}

func TestProxyAuthorizeExchangeCheck(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1 := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			k2 := createAgent(t, env, "k2", map[string]any{"dns_zone": "other.example.com", "proxy_url_scheme": "http"})
			alice, bob := createUser(t, env, "alice"), createUser(t, env, "bob")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "k2"}, http.StatusCreated, nil)
			host := "8080-dev--alice.ws.example.com"

			ab := &browser{t: t, env: env}
			if code, resp := ab.authorize(host); code != "" || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?return_to=") {
				t.Fatalf("authorize without a session: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			ab.signIn(alice)
			code, resp := ab.authorize(host)
			if code == "" || !strings.HasPrefix(resp.Header.Get("Location"), "https://"+host+"/.hangar/callback?") {
				t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if c, resp := ab.authorize("3000-plain--alice.other.example.com"); c == "" || !strings.HasPrefix(resp.Header.Get("Location"), "http://") {
				t.Errorf("an http proxy's agent: %q", resp.Header.Get("Location"))
			}
			if c, _ := ab.authorize("8080-dev--alice.ws.example.com:8443"); c == "" {
				t.Error("a host with a port is refused")
			}
			// Internal and none ports, unknown names, other zones: no code.
			for _, h := range []string{"9000-dev--alice.ws.example.com", "5005-dev--alice.ws.example.com", "8080-nope--alice.ws.example.com",
				"8080-dev--alice.other.example.com", "8080-dev--alice.ws.example.com.evil.com", "evil.com/x", "8080-dev--alice"} {
				if c, resp := ab.authorize(h); c != "" || (resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest) {
					t.Errorf("authorize %q: %d %q", h, resp.StatusCode, resp.Header.Get("Location"))
				}
			}
			bb := &browser{t: t, env: env}
			bb.signIn(bob)
			if c, resp := bb.authorize(host); c != "" || resp.StatusCode != http.StatusNotFound {
				t.Errorf("bob authorizes alice's workspace: %d", resp.StatusCode)
			}
			admin := &browser{t: t, env: env}
			admin.signIn(env.AdminToken)
			if c, _ := admin.authorize(host); c == "" {
				t.Error("an admin gets no code")
			}

			// Exchange: once, by the workspace's agent, for the code's host, within 60 s.
			var ex protocol.ProxyExchangeResponse
			mustCall(t, env, k2, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: testNonce}, http.StatusForbidden, nil)
			code, _ = ab.authorize(host)
			mustCall(t, env, k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: "8080-dev--alice.ws.example.com:1", Nonce: testNonce}, http.StatusUnauthorized, nil)
			code, _ = ab.authorize(host)
			mustCall(t, env, k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: testNonce}, http.StatusOK, &ex)
			mustCall(t, env, k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: testNonce}, http.StatusUnauthorized, nil)
			if !strings.HasPrefix(ex.Session, "hgw_") || ex.User != "alice" || ex.Workspace != "alice/dev" || !ex.ExpiresAt.Equal(servertest.Start.Add(server.SessionLifetime)) {
				t.Errorf("exchange answered %+v", ex)
			}
			// The exchanges are sign-ins in the audit log: alice's into alice/dev, and the refused
			// ones (another agent, another host, a used code) by nobody known or alice.
			ins := auditPage(t, env, "action=signin.workspace").Entries
			if len(ins) != 4 || ins[1].Actor != "alice" || ins[1].TargetName != "alice/dev" || ins[1].Outcome != "success" ||
				ins[0].Outcome != "failure" || ins[0].Actor != "" || ins[2].Outcome != "failure" || ins[3].Outcome != "failure" {
				t.Errorf("workspace sign-ins in the audit log: %+v", ins)
			}
			late, _ := ab.authorize(host)
			env.Clock.Advance(server.CodeLifetime)
			mustCall(t, env, k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: late, Host: host, Nonce: testNonce}, http.StatusUnauthorized, nil)
			env.Clock.Set(servertest.Start)

			check := func(agent string, req protocol.ProxyCheckRequest) protocol.ProxyCheckResponse {
				t.Helper()
				var out protocol.ProxyCheckResponse
				mustCall(t, env, agent, "POST", protocol.ProxyCheckPath, req, http.StatusOK, &out)
				return out
			}
			want := func(what string, got protocol.ProxyCheckResponse, allowed bool, reason string) {
				t.Helper()
				if got.Allowed != allowed || got.Reason != reason {
					t.Errorf("%s: %+v, want allowed=%v reason=%q", what, got, allowed, reason)
				}
			}
			got := check(k1, protocol.ProxyCheckRequest{Host: host, Session: ex.Session})
			want("alice's session", got, true, "")
			if got.User != "alice" || got.Workspace != "alice/dev" || got.Status != "CreationRequested" {
				t.Errorf("alice's session: %+v", got)
			}
			want("alice's token", check(k1, protocol.ProxyCheckRequest{Host: strings.ToUpper(host), Token: alice}), true, "")
			want("the admin's token", check(k1, protocol.ProxyCheckRequest{Host: host, Token: env.AdminToken}), true, "")
			got = check(k1, protocol.ProxyCheckRequest{Host: host, Token: bob})
			want("bob's token", got, false, protocol.ProxyForbidden)
			if got.Status != "" || got.Workspace != "" {
				t.Errorf("bob learns of alice's workspace: %+v", got)
			}
			want("another agent", check(k2, protocol.ProxyCheckRequest{Host: host, Token: alice}), false, protocol.ProxyNotFound)
			want("the session on another host", check(k1, protocol.ProxyCheckRequest{Host: "8080-dev--alice.ws.example.com:8443", Session: ex.Session}), false, protocol.ProxyUnauthenticated)
			want("an internal port", check(k1, protocol.ProxyCheckRequest{Host: "9000-dev--alice.ws.example.com", Token: alice}), false, protocol.ProxyNotFound)
			want("a none port", check(k1, protocol.ProxyCheckRequest{Host: "5005-dev--alice.ws.example.com", Token: alice}), false, protocol.ProxyNotFound)
			want("a code as a session", check(k1, protocol.ProxyCheckRequest{Host: host, Session: late}), false, protocol.ProxyUnauthenticated)
			want("an unknown token", check(k1, protocol.ProxyCheckRequest{Host: host, Token: "hgu_nope"}), false, protocol.ProxyUnauthenticated)
			mustCall(t, env, alice, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host, Token: alice}, http.StatusUnauthorized, nil)
			mustCall(t, env, k1, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host, Token: alice, Session: ex.Session}, http.StatusBadRequest, nil)

			// Stopped: still allowed (the proxy says "not running"); deleted: not found, and the
			// session is no good for a workspace of the same name created again.
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/dev", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
			want("stopped", check(k1, protocol.ProxyCheckRequest{Host: host, Session: ex.Session}), true, "")
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/dev", map[string]any{"desired_state": "Terminated"}, http.StatusOK, nil)
			want("deleted", check(k1, protocol.ProxyCheckRequest{Host: host, Session: ex.Session}), false, protocol.ProxyNotFound)

			env.Clock.Advance(server.SessionLifetime)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev2", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
			want("an expired token-based check still works", check(k1, protocol.ProxyCheckRequest{Host: "8080-dev2--alice.ws.example.com", Token: alice}), true, "")
			want("an expired session", check(k1, protocol.ProxyCheckRequest{Host: "8080-dev2--alice.ws.example.com", Session: ex.Session}), false, protocol.ProxyUnauthenticated)
		})
	}
}

// A new token ends the old one and every session begun with it, browser and workspace alike.
func TestRotateTokenEndsSessions(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1 := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			alice, bob := createUser(t, env, "alice"), createUser(t, env, "bob")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
			host := "8080-dev--alice.ws.example.com"
			b := &browser{t: t, env: env}
			b.signIn(alice)
			code, _ := b.authorize(host)
			var ex protocol.ProxyExchangeResponse
			mustCall(t, env, k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: testNonce}, http.StatusOK, &ex)

			mustCall(t, env, bob, "POST", "/api/v1/users/alice/token", nil, http.StatusForbidden, nil)
			var u struct{ Token string }
			mustCall(t, env, alice, "POST", "/api/v1/users/me/token", nil, http.StatusOK, &u)
			if u.Token == "" || u.Token == alice {
				t.Fatalf("new token %q", u.Token)
			}
			mustCall(t, env, alice, "GET", "/api/v1/users/me", nil, http.StatusUnauthorized, nil)
			mustCall(t, env, u.Token, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)
			for what, req := range map[string]protocol.ProxyCheckRequest{
				"old token":         {Host: host, Token: alice},
				"workspace session": {Host: host, Session: ex.Session},
			} {
				var got protocol.ProxyCheckResponse
				mustCall(t, env, k1, "POST", protocol.ProxyCheckPath, req, http.StatusOK, &got)
				if got.Allowed || got.Reason != protocol.ProxyUnauthenticated {
					t.Errorf("%s after a new token: %+v", what, got)
				}
			}
			if c, resp := b.authorize(host); c != "" || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?") {
				t.Errorf("the browser session outlived the token: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			var got protocol.ProxyCheckResponse
			mustCall(t, env, k1, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: host, Token: u.Token}, http.StatusOK, &got)
			if !got.Allowed {
				t.Errorf("the new token: %+v", got)
			}
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/bob/token", nil, http.StatusOK, nil)
			mustCall(t, env, bob, "GET", "/api/v1/users/me", nil, http.StatusUnauthorized, nil)
		})
	}
}

// proxyEnv is a server with an https agent (zone ws.example.com) and an http one
// (other.example.com), alice's workspace dev on the first and plain on the second, and bob.
type proxyEnv struct {
	env                *servertest.Env
	k1, k2, alice, bob string
	host, plainHost    string
}

func newProxyEnv(t *testing.T, engine string) *proxyEnv {
	e := &proxyEnv{env: servertest.NewWith(t, engine), host: "8080-dev--alice.ws.example.com", plainHost: "3000-plain--alice.other.example.com"}
	e.k1 = createAgent(t, e.env, "k1", map[string]any{"dns_zone": "ws.example.com"})
	e.k2 = createAgent(t, e.env, "k2", map[string]any{"dns_zone": "other.example.com", "proxy_url_scheme": "http"})
	e.alice, e.bob = createUser(t, e.env, "alice"), createUser(t, e.env, "bob")
	mustCall(t, e.env, e.alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
	mustCall(t, e.env, e.alice, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "k2"}, http.StatusCreated, nil)
	return e
}

// A code is exchanged only with the nonce of the browser it was issued to (the proxy sends the
// SHA-256 of that browser's nonce cookie): a code carried to another browser is refused, and a
// link without a nonce gets no code.
func TestProxyCodeIsBoundToTheBrowser(t *testing.T) {
	e := newProxyEnv(t, "sqlite")
	b := &browser{t: t, env: e.env}
	b.signIn(e.alice)
	for _, n := range []string{"", "abc", strings.Repeat("AB", 32), strings.Repeat("zz", 32), strings.Repeat("ab", 33)} {
		if c, resp := b.authorizeWith(e.host, n); c != "" || resp.StatusCode != http.StatusBadRequest || !strings.Contains(b.body, "nonce") {
			t.Errorf("authorize with nonce %q: %d %q", n, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	code, resp := b.authorize(e.host)
	if code == "" {
		t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	exchange := func(nonce string, want int) {
		t.Helper()
		mustCall(t, e.env, e.k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: e.host, Nonce: nonce}, want, nil)
	}
	exchange(strings.Repeat("cd", 32), http.StatusUnauthorized) // another browser's nonce
	exchange("", http.StatusBadRequest)
	exchange(testNonce, http.StatusOK) // a wrong nonce did not use the code up
	exchange(testNonce, http.StatusUnauthorized)
}

// /proxy/authorize takes only workspace hosts of an agent's zone, before any sign-in: the sign-in
// page never leads anywhere else. Signed in, the owner is told when the port is not a public
// endpoint; anyone else sees the page of a workspace that does not exist.
func TestProxyAuthorizeOnlyWorkspaceHosts(t *testing.T) {
	e := newProxyEnv(t, "sqlite")
	anon := &browser{t: t, env: e.env}
	for _, h := range []string{"", "evil.example.com", "8080-dev--alice.evil.example.com", "8080-dev--alice.ws.example.com.evil.com",
		"ws.example.com", "dev--alice.ws.example.com", "0-dev--alice.ws.example.com", "8080-dev-alice.ws.example.com", "8080-dev--alice",
		"8080-dev--alice.ws.example.com:0", "8080-dev--alice.ws.example.com/x", "x.8080-dev--alice.ws.example.com"} {
		_, resp := anon.authorize(h)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(anon.body, "is not the address of a workspace") {
			t.Errorf("authorize %q without a session: %d %q", h, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, h := range []string{e.host, e.host + ":8443", strings.ToUpper(e.host), e.plainHost, "8080-nope--alice.ws.example.com"} {
		if _, resp := anon.authorize(h); resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?return_to=") {
			t.Errorf("authorize %q without a session: %d %q, want the sign-in", h, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	ab := &browser{t: t, env: e.env}
	ab.signIn(e.alice)
	bb := &browser{t: t, env: e.env}
	bb.signIn(e.bob)
	for _, port := range []string{"9000", "5005"} {
		h := port + "-dev--alice.ws.example.com"
		if c, resp := ab.authorize(h); c != "" || resp.StatusCode != http.StatusBadRequest ||
			!strings.Contains(ab.body, "Port "+port+" of workspace alice/dev is not a public endpoint") {
			t.Errorf("the owner authorizes %s: %d %q", h, resp.StatusCode, ab.body)
		}
		if c, resp := bb.authorize(h); c != "" || resp.StatusCode != http.StatusNotFound || strings.Contains(bb.body, "alice/dev") {
			t.Errorf("bob authorizes %s: %d %q", h, resp.StatusCode, bb.body)
		}
	}
	if c, resp := ab.authorize("8080-nope--alice.ws.example.com"); c != "" || resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown workspace: %d", resp.StatusCode)
	}
}

// The sign-in form on the way to a workspace is a POST whose redirects end on the workspace's
// proxy (/signin → /proxy/authorize → <scheme>://H/.hangar/callback). Chrome applies form-action to
// each redirect, so the page's CSP names that one origin besides its own, and no other.
func TestSignInPageAllowsTheRedirectToTheWorkspace(t *testing.T) {
	e := newProxyEnv(t, "sqlite")
	formAction := func(resp *http.Response) string {
		t.Helper()
		for _, d := range strings.Split(resp.Header.Get("Content-Security-Policy"), ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(d), "form-action "); ok {
				return v
			}
		}
		t.Fatalf("no form-action in %q", resp.Header.Get("Content-Security-Policy"))
		return ""
	}
	authorize := func(host string) string {
		return protocol.ProxyAuthorizePath + "?" + url.Values{"host": {host}, "path": {"/x"}, "nonce": {testNonce}}.Encode()
	}
	b := &browser{t: t, env: e.env}
	for returnTo, want := range map[string]string{
		"":                                 "'self'",
		"/signin":                          "'self'",
		authorize(e.host):                  "'self' https://8080-dev--alice.ws.example.com",
		authorize(e.host + ":8443"):        "'self' https://8080-dev--alice.ws.example.com:8443",
		authorize(strings.ToUpper(e.host)): "'self' https://8080-dev--alice.ws.example.com",
		authorize(e.plainHost):             "'self' http://3000-plain--alice.other.example.com",
		authorize("8080-x--y.evil.com"):    "'self'",
		authorize("evil.com;script-src *"): "'self'",
	} {
		resp := b.do("GET", "/signin?"+url.Values{"return_to": {returnTo}}.Encode(), nil)
		if got := formAction(resp); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("GET /signin?return_to=%q: %d, form-action %q, want %q", returnTo, resp.StatusCode, got, want)
		}
		if returnTo == "" {
			continue
		}
		resp = b.do("POST", "/signin", url.Values{"token": {"hgu_wrong"}, "return_to": {returnTo}})
		if got := formAction(resp); resp.StatusCode != http.StatusUnauthorized || got != want {
			t.Errorf("a failed sign-in with return_to=%q: %d, form-action %q, want %q", returnTo, resp.StatusCode, got, want)
		}
	}
	if csp := b.do("GET", "/signin", nil).Header.Get("Content-Security-Policy"); csp != "default-src 'none'; style-src "+server.PageStyleSource+"; form-action 'self'; frame-ancestors 'none'" {
		t.Errorf("CSP %q", csp)
	}
}

// Signing out ends the codes and workspace sessions that came from that sign-in: the proxy's check
// refuses them (the proxy then sends the browser to sign in). Another sign-in's are untouched.
func TestSignOutEndsItsWorkspaceSessions(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newProxyEnv(t, engine)
			session := func(b *browser) string {
				t.Helper()
				code, resp := b.authorize(e.host)
				if code == "" {
					t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
				}
				var ex protocol.ProxyExchangeResponse
				mustCall(t, e.env, e.k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: e.host, Nonce: testNonce}, http.StatusOK, &ex)
				return ex.Session
			}
			check := func(sess string) protocol.ProxyCheckResponse {
				t.Helper()
				var out protocol.ProxyCheckResponse
				mustCall(t, e.env, e.k1, "POST", protocol.ProxyCheckPath, protocol.ProxyCheckRequest{Host: e.host, Session: sess}, http.StatusOK, &out)
				return out
			}
			laptop, phone := &browser{t: t, env: e.env}, &browser{t: t, env: e.env}
			laptop.signIn(e.alice)
			phone.signIn(e.alice)
			mine, theirs := session(laptop), session(phone)
			pending, _ := laptop.authorize(e.host)
			if !check(mine).Allowed || !check(theirs).Allowed {
				t.Fatal("the new sessions are refused")
			}
			if resp := laptop.do("POST", "/signout", nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-out: %d", resp.StatusCode)
			}
			if got := check(mine); got.Allowed || got.Reason != protocol.ProxyUnauthenticated {
				t.Errorf("the signed-out browser's workspace session: %+v", got)
			}
			mustCall(t, e.env, e.k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: pending, Host: e.host, Nonce: testNonce}, http.StatusUnauthorized, nil)
			if got := check(theirs); !got.Allowed {
				t.Errorf("another browser's workspace session: %+v", got)
			}
		})
	}
}
