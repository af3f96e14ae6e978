package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

// newOIDCLogoutEnv starts a provider that remembers browsers' sign-ins (single sign-on) and has an
// end_session endpoint, and a server signing in through it; the server's signed-out page is a
// post-logout redirect URI of its client.
func newOIDCLogoutEnv(t *testing.T, engine string, more ...func(*server.OIDCOptions)) (*servertest.Env, *oidctest.Provider) {
	t.Helper()
	p := oidctest.New(t, oidctest.Options{RememberSessions: true})
	p.AddUser(oidctest.User{Subject: "sub-alice", Email: "alice@example.com", EmailVerified: yes(), PreferredUsername: "Alice.Smith"})
	env := servertest.NewWith(t, engine, withOIDC(p, more...))
	env.Clock.Set(time.Now())
	p.AddClient(oidctest.Client{ID: oidcClientID, Secret: oidcClientSecret, RedirectURIs: []string{env.URL + server.OIDCCallbackPath},
		PostLogoutRedirectURIs: []string{env.URL + server.OIDCSignedOutPath}})
	return env, p
}

// signOut posts the sign-out form as the web UI's button does (same origin) and returns the page.
func (b *oidcBrowser) signOut(env *servertest.Env) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", env.URL+"/signout", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.read(resp)
}

// metaRefresh is the path a page's <meta http-equiv="refresh"> moves on to ("" for none).
func metaRefresh(body string) string {
	_, rest, ok := strings.Cut(body, `<meta http-equiv="refresh" content="0; url=`)
	if !ok {
		return ""
	}
	path, _, _ := strings.Cut(rest, `"`)
	return path
}

// TestOIDCSignOutEndsTheProviderSession: signing out of a session begun through the provider goes
// on to its end_session_endpoint (client_id, post_logout_redirect_uri, id_token_hint: the ID token
// of the sign-in, kept in an HttpOnly cookie sent to /oidc/logout only) and lands on the
// signed-out page; the next "Sign in with …" then needs the provider's login again. Without the
// sign-out at the provider the browser would come straight back signed in (checked first). A
// session begun with a token signs out of Hangar only; NoProviderLogout keeps every sign-out here.
func TestOIDCSignOutEndsTheProviderSession(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env, p := newOIDCLogoutEnv(t, engine)
			b := newOIDCBrowser(t)
			if _, body := b.signIn(env, p, "sub-alice", "/signin"); !strings.Contains(body, "signed in to Hangar as alice-smith") {
				t.Fatalf("first sign-in: %s", body)
			}
			// The ID token is kept for the sign-out: HttpOnly, for /oidc/logout only.
			logoutCookie := func() *http.Cookie {
				var kept *http.Cookie
				for _, c := range b.redirectFrom(server.OIDCCallbackPath).Cookies() {
					if c.Name == server.OIDCLogoutCookie {
						kept = c
					}
				}
				if kept == nil || !kept.HttpOnly || kept.Path != server.OIDCLogoutPath || kept.SameSite != http.SameSiteLaxMode || strings.Count(kept.Value, ".") != 2 {
					t.Fatalf("the logout cookie: %+v", kept)
				}
				return kept
			}
			logoutCookie()

			// The provider remembers the browser: a second sign-in (without signing out) comes
			// straight back, no login form.
			resp, body := b.get(env.URL + server.OIDCLoginPath + "?return_to=%2Fsignin")
			if resp.Request.URL.Path != "/signin" || !strings.Contains(body, "signed in to Hangar as alice-smith") {
				t.Fatalf("a sign-in with the provider's session: %s at %s: %s", resp.Status, resp.Request.URL, body)
			}
			if p.Sessions() != 1 {
				t.Fatalf("the provider keeps %d sessions", p.Sessions())
			}
			kept := logoutCookie() // this sign-in's ID token
			var session *http.Cookie
			for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
				if c.Name == server.SessionCookie {
					session = c
				}
			}

			// Sign out: Hangar's session ends, and the page moves on to /oidc/logout.
			resp, body = b.signOut(env)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<h1>Signed out</h1>") || metaRefresh(body) != server.OIDCLogoutPath ||
				!strings.Contains(body, `href="/oidc/logout"`) || strings.Contains(body, kept.Value) {
				t.Fatalf("the sign-out's page: %d %s", resp.StatusCode, body)
			}
			if status, body := cookieCall(t, env, session, "GET", "/api/v1/users/me", nil, nil); status != http.StatusUnauthorized {
				t.Fatalf("the session after the sign-out: %d %s", status, body)
			}
			// The browser follows the refresh: to the provider's end_session_endpoint, back to the
			// signed-out page.
			b.redirects = nil
			req, _ := http.NewRequest("GET", env.URL+metaRefresh(body), nil)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			r0, err := b.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp, body = b.read(r0)
			if resp.Request.URL.String() != env.URL+server.OIDCSignedOutPath || !strings.Contains(body, "You are signed out of Hangar and of Test IdP.") ||
				!strings.Contains(body, "Sign in with Test IdP") {
				t.Fatalf("after the provider's sign-out: %s at %s: %s", resp.Status, resp.Request.URL, body)
			}
			to := b.redirectFrom(server.OIDCLogoutPath)
			if to == nil || to.StatusCode != http.StatusSeeOther {
				t.Fatalf("/oidc/logout's answer: %+v", to)
			}
			loc, _ := to.Location()
			q := loc.Query()
			if !strings.HasPrefix(loc.String(), p.Issuer()+"/end_session?") || q.Get("client_id") != oidcClientID ||
				q.Get("post_logout_redirect_uri") != env.URL+server.OIDCSignedOutPath || q.Get("id_token_hint") != kept.Value {
				t.Fatalf("/oidc/logout redirects to %s", loc)
			}
			if tok, err := jwt.ParseSigned(q.Get("id_token_hint"), []jose.SignatureAlgorithm{jose.RS256}); err != nil || tok == nil {
				t.Fatalf("id_token_hint is not an ID token: %v", err)
			}
			ends := p.EndSessionRequests()
			if len(ends) != 1 || !ends[0].HadSession || ends[0].Subject != "sub-alice" || p.Sessions() != 0 {
				t.Fatalf("the provider saw %+v and keeps %d sessions", ends, p.Sessions())
			}
			// The logout cookie is cleared.
			for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL+server.OIDCLogoutPath)) {
				if c.Name == server.OIDCLogoutCookie {
					t.Fatalf("the logout cookie outlived the sign-out: %v", c)
				}
			}

			// Signing in again needs the provider's login form.
			if _, body := b.signIn(env, p, "sub-alice", "/signin"); !strings.Contains(body, "signed in to Hangar as alice-smith") {
				t.Fatalf("sign-in after the sign-out: %s", body)
			}

			// Another site's link to /oidc/logout does not sign the browser out of the provider.
			req, _ = http.NewRequest("GET", env.URL+server.OIDCLogoutPath, nil)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			if resp, body := b.read(mustDo(t, b.c, req)); resp.Request.URL.Path != server.OIDCLogoutPath || !strings.Contains(body, "You are signed out of Hangar.") {
				t.Fatalf("a cross-site /oidc/logout: %s at %s: %s", resp.Status, resp.Request.URL, body)
			}
			if len(p.EndSessionRequests()) != 1 || p.Sessions() != 1 {
				t.Fatalf("a cross-site /oidc/logout reached the provider: %+v", p.EndSessionRequests())
			}

			// A session begun with a token signs out of Hangar only.
			tb := newOIDCBrowser(t)
			tok := createUser(t, env, "bob")
			tb.c.Jar.SetCookies(mustURL(t, env.URL), []*http.Cookie{tokenSignIn(t, env, tok)})
			if resp, body := tb.signOut(env); resp.StatusCode != http.StatusOK || metaRefresh(body) != "" || !strings.Contains(body, "You are signed out of Hangar.") {
				t.Fatalf("a token session's sign-out: %d %s", resp.StatusCode, body)
			}
		})
	}
}

func mustDo(t testing.TB, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestOIDCSignOutWithoutProviderLogout: with NoProviderLogout, the sign-out of an OIDC session is
// Hangar's only, and no ID token is kept.
func TestOIDCSignOutWithoutProviderLogout(t *testing.T) {
	env, p := newOIDCLogoutEnv(t, "sqlite", func(o *server.OIDCOptions) { o.NoProviderLogout = true })
	b := newOIDCBrowser(t)
	b.signIn(env, p, "sub-alice", "/signin")
	for _, c := range b.redirectFrom(server.OIDCCallbackPath).Cookies() {
		if c.Name == server.OIDCLogoutCookie {
			t.Fatalf("a logout cookie without provider logout: %v", c)
		}
	}
	if resp, body := b.signOut(env); resp.StatusCode != http.StatusOK || metaRefresh(body) != "" {
		t.Fatalf("sign-out: %d %s", resp.StatusCode, body)
	}
	if len(p.EndSessionRequests()) != 0 || p.Sessions() != 1 {
		t.Fatalf("the provider saw %+v", p.EndSessionRequests())
	}
}

// TestTokenSignOutForgetsAnEarlierIDToken: a browser that signed in through the provider, then
// with a token (the session replaced), signs out of Hangar only (a token session) and keeps no ID
// token: the logout cookie is cleared too.
func TestTokenSignOutForgetsAnEarlierIDToken(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env, p := newOIDCLogoutEnv(t, engine)
			b := newOIDCBrowser(t)
			if _, body := b.signIn(env, p, "sub-alice", "/signin"); !strings.Contains(body, "signed in to Hangar as alice-smith") {
				t.Fatalf("sign-in: %s", body)
			}
			logoutCookie := func() *http.Cookie {
				for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL+server.OIDCLogoutPath)) {
					if c.Name == server.OIDCLogoutCookie {
						return c
					}
				}
				return nil
			}
			if logoutCookie() == nil {
				t.Fatal("no logout cookie after the sign-in through the provider")
			}
			tok := createUser(t, env, "bob")
			b.c.Jar.SetCookies(mustURL(t, env.URL), []*http.Cookie{tokenSignIn(t, env, tok)})
			if resp, body := b.signOut(env); resp.StatusCode != http.StatusOK || metaRefresh(body) != "" || !strings.Contains(body, "You are signed out of Hangar.") {
				t.Fatalf("the token session's sign-out: %d %s", resp.StatusCode, body)
			}
			if c := logoutCookie(); c != nil {
				t.Fatalf("the ID token outlived the sign-out: %v", c)
			}
		})
	}
}
