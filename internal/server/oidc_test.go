package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

const (
	oidcClientID     = "hangar"
	oidcClientSecret = "hangar-client-secret"
)

// withOIDC configures the server to sign users in through p (the redirect URL is filled in by
// servertest); admins are the group hangar-admins and the email listed@example.com.
func withOIDC(p *oidctest.Provider, more ...func(*server.OIDCOptions)) servertest.Option {
	return func(o *server.Options) {
		o.OIDC = &server.OIDCOptions{IssuerURL: p.Issuer(), ClientID: oidcClientID, ClientSecret: oidcClientSecret, Name: "Test IdP",
			Scopes: []string{"openid", "email", "profile", "groups"}, AdminGroup: "hangar-admins", AdminEmails: []string{"Listed@Example.com"}}
		for _, f := range more {
			f(o.OIDC)
		}
	}
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// newOIDCEnv starts a provider with a few users and a server signing in through it. The fake
// clock is set to the real time: the provider (zitadel) dates its tokens by the real clock.
func newOIDCEnv(t *testing.T, engine string, more ...func(*server.OIDCOptions)) (*servertest.Env, *oidctest.Provider) {
	t.Helper()
	p := newOIDCProvider(t)
	env := servertest.NewWith(t, engine, withOIDC(p, more...))
	env.Clock.Set(time.Now())
	registerOIDCClient(env, p)
	return env, p
}

// newOIDCProvider starts a provider with a few users.
func newOIDCProvider(t *testing.T) *oidctest.Provider {
	p := oidctest.New(t, oidctest.Options{})
	p.AddUser(oidctest.User{Subject: "sub-alice", Email: "alice@example.com", EmailVerified: yes(), PreferredUsername: "Alice.Smith", Name: "Alice Smith", Groups: []string{"devs"}})
	p.AddUser(oidctest.User{Subject: "sub-boss", Email: "boss@example.com", PreferredUsername: "boss", Groups: []string{"devs", "hangar-admins"}})
	p.AddUser(oidctest.User{Subject: "sub-listed", Email: "listed@example.com", EmailVerified: yes()})
	p.AddUser(oidctest.User{Subject: "sub-unverified", Email: "mallory@example.com", EmailVerified: no(), PreferredUsername: "mallory"})
	p.AddUser(oidctest.User{Subject: "sub-other", Email: "someone@elsewhere.example", EmailVerified: yes()})
	return p
}

// registerOIDCClient registers the server at the provider, with its redirect URI.
func registerOIDCClient(env *servertest.Env, p *oidctest.Provider) {
	p.AddClient(oidctest.Client{ID: oidcClientID, Secret: oidcClientSecret, RedirectURIs: []string{env.URL + server.OIDCCallbackPath}})
}

// oaOIDC goes through the OIDC sign-in with the document's checker on the server's side.
func oaOIDC(t *testing.T, c *oaChecker, p *oidctest.Provider) {
	t.Helper()
	c.do("", "GET", server.OIDCLoginPath+"?return_to="+url.QueryEscape("//evil.example.com/"), nil, 400, true)
	c.do("", "GET", server.OIDCLoginPath+"?return_to="+url.QueryEscape("/signin"), nil, 302, true)
	var login string
	for _, sc := range c.lastHeader.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(sc, server.OIDCLoginCookie+"="); ok {
			login, _, _ = strings.Cut(v, ";")
		}
	}
	// The provider's part, in a browser of its own; stopped before the callback.
	b := newOIDCBrowser(t)
	b.stopAt = server.OIDCCallbackPath
	page, _ := b.get(c.lastHeader.Get("Location"))
	resp, err := p.LogIn(b.c, page, "sub-alice")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, err := resp.Location()
	if login == "" || err != nil || cb.Path != server.OIDCCallbackPath {
		t.Fatalf("login cookie %q, callback %v (%v)", login, cb, err)
	}
	c.do("", "GET", cb.RequestURI(), nil, 400, true) // without the sign-in cookie
	saved := c.cookie
	defer func() { c.cookie = saved }()
	c.cookie = server.OIDCLoginCookie + "=" + login
	c.do("", "GET", cb.RequestURI(), nil, 303, true)
	if c.lastHeader.Get("Location") != "/signin" {
		t.Errorf("the callback redirects to %q", c.lastHeader.Get("Location"))
	}
	c.do("", "GET", server.OIDCCallbackPath+"?error=access_denied&state=x", nil, 401, true)
	// The sign-out at the provider: without this browser's logout cookie, the signed-out page.
	c.do("", "GET", server.OIDCLogoutPath, nil, 200, true)
	c.do("", "GET", server.OIDCSignedOutPath, nil, 200, true)
}

// oidcBrowser is a browser with its own cookie jar that follows redirects and remembers the
// answers that redirected it.
type oidcBrowser struct {
	t         *testing.T
	c         *http.Client
	redirects []*http.Response
	// stopAt, when set, stops following redirects at a request whose path it is.
	stopAt string
}

func newOIDCBrowser(t *testing.T) *oidcBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &oidcBrowser{t: t}
	b.c = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		b.redirects = append(b.redirects, req.Response)
		if b.stopAt != "" && req.URL.Path == b.stopAt {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

func (b *oidcBrowser) get(u string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.read(resp)
}

func (b *oidcBrowser) read(resp *http.Response) (*http.Response, string) {
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(data)
}

// signIn goes from /oidc/login?return_to=... through the provider's login page as subject, and
// returns the last answer and its body.
func (b *oidcBrowser) signIn(env *servertest.Env, p *oidctest.Provider, subject, returnTo string) (*http.Response, string) {
	b.t.Helper()
	login := env.URL + server.OIDCLoginPath
	if returnTo != "" {
		login += "?" + url.Values{"return_to": {returnTo}}.Encode()
	}
	page, body := b.get(login)
	if page.StatusCode != http.StatusOK || !strings.Contains(body, "Sign in to the test provider") {
		b.t.Fatalf("GET %s led to %s %s: %s", login, page.Status, page.Request.URL, body)
	}
	resp, err := p.LogIn(b.c, page, subject)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.read(resp)
}

// redirectFrom returns the redirecting answer of path that the browser followed last.
func (b *oidcBrowser) redirectFrom(path string) *http.Response {
	for i := len(b.redirects) - 1; i >= 0; i-- {
		if r := b.redirects[i]; r.Request.URL.Path == path {
			return r
		}
	}
	return nil
}

func userNamed(t *testing.T, st store.Store, name string) workspace.User {
	t.Helper()
	u, err := st.UserByUsername(context.Background(), name)
	if err != nil {
		t.Fatalf("user %s: %v", name, err)
	}
	return u
}

func auditEntries(t *testing.T, st store.Store, f audit.Filter) []audit.Entry {
	t.Helper()
	es, err := st.ListAudit(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestOIDCSignIn(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			env, p := newOIDCEnv(t, engine)
			users0, _ := env.Store.CountUsers(ctx)

			// The sign-in page offers the provider beside the token form.
			b := newOIDCBrowser(t)
			_, body := b.get(env.URL + "/signin?return_to=" + url.QueryEscape("/proxy/authorize?host=x"))
			if !strings.Contains(body, "Sign in with Test IdP") || !strings.Contains(body, `href="/oidc/login?return_to=%2Fproxy%2Fauthorize%3Fhost%3Dx"`) ||
				!strings.Contains(body, `name="token"`) {
				t.Fatalf("sign-in page: %s", body)
			}
			if strings.Contains(body, " style=") {
				t.Errorf("the sign-in page has a style attribute, which its CSP (no 'unsafe-inline') blocks: %s", body)
			}

			// A first sign-in creates the user, named after preferred_username, and signs the
			// browser in; back to return_to.
			resp, body := b.signIn(env, p, "sub-alice", "/signin")
			if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/signin" || !strings.Contains(body, "You are signed in to Hangar as alice-smith.") {
				t.Fatalf("after the sign-in: %s at %s: %s", resp.Status, resp.Request.URL, body)
			}
			alice := userNamed(t, env.Store, "alice-smith")
			if alice.Admin {
				t.Fatal("alice is an admin")
			}
			// Her profile is the claims' (name, and the verified email).
			if alice.FullName != "Alice Smith" || alice.Email != "alice@example.com" || alice.FullNameSet || alice.EmailSet {
				t.Fatalf("alice's profile after the first sign-in: %q %q (set %v %v)", alice.FullName, alice.Email, alice.FullNameSet, alice.EmailSet)
			}
			// The session cookie is the server's (HttpOnly, SameSite=Lax), the login cookie is cleared.
			cb := b.redirectFrom(server.OIDCCallbackPath)
			if cb == nil || cb.StatusCode != http.StatusSeeOther {
				t.Fatalf("the callback's answer: %+v", cb)
			}
			var session, loginCleared bool
			for _, c := range cb.Cookies() {
				switch c.Name {
				case server.SessionCookie:
					session = c.HttpOnly && c.SameSite == http.SameSiteLaxMode && c.Path == "/" && c.MaxAge == int(server.SessionLifetime/time.Second)
				case server.OIDCLoginCookie:
					loginCleared = c.MaxAge < 0
				}
			}
			if !session || !loginCleared {
				t.Fatalf("the callback's cookies: %v", cb.Header.Values("Set-Cookie"))
			}

			// The provider saw PKCE (S256) and the verifier that matches it, a nonce and the state.
			ars, trs := p.AuthRequests(), p.TokenRequests()
			if len(ars) != 1 || len(trs) == 0 {
				t.Fatalf("the provider saw %d authorization and %d token requests", len(ars), len(trs))
			}
			sum := sha256.Sum256([]byte(trs[len(trs)-1].CodeVerifier))
			if ar := ars[0]; ar.CodeChallengeMethod != "S256" || ar.CodeChallenge != base64.RawURLEncoding.EncodeToString(sum[:]) ||
				ar.Nonce == "" || ar.State == "" || ar.ClientID != oidcClientID || ar.RedirectURI != env.URL+server.OIDCCallbackPath {
				t.Fatalf("authorization request %+v, token requests %+v", ar, trs)
			}

			// The audit log: the user's creation and the sign-in, method oidc.
			creates := auditEntries(t, env.Store, audit.Filter{Action: audit.UserCreate, TargetName: "alice-smith"})
			signins := auditEntries(t, env.Store, audit.Filter{Action: audit.SignIn, ActorName: "alice-smith"})
			if len(creates) != 1 || creates[0].Details["method"] != "oidc" || len(signins) != 1 || signins[0].Details["method"] != "oidc" ||
				signins[0].Outcome != audit.Success || signins[0].Details["created"] != true {
				t.Fatalf("audit: creates %+v, signins %+v", creates, signins)
			}

			// A second sign-in, in another browser, finds the same user.
			b2 := newOIDCBrowser(t)
			// No return_to: the sign-in lands on the web UI.
			if resp, _ := b2.signIn(env, p, "sub-alice", ""); resp.Request.URL.Path != server.DefaultReturnTo {
				t.Fatalf("second sign-in without return_to lands on %s, want %s", resp.Request.URL, server.DefaultReturnTo)
			}
			if _, body := b2.get(env.URL + "/signin"); !strings.Contains(body, "signed in to Hangar as alice-smith.") {
				t.Fatalf("second sign-in: %s", body)
			}
			if n, _ := env.Store.CountUsers(ctx); n != users0+1 {
				t.Fatalf("%d users after two sign-ins of one person, want %d", n, users0+1)
			}
			if es := auditEntries(t, env.Store, audit.Filter{Action: audit.SignIn, ActorName: "alice-smith"}); len(es) != 2 || es[0].Details["created"] != false {
				t.Fatalf("signins after the second: %+v", es)
			}

			// Admins: by the group claim, and by the allow-list (any case); others not.
			newOIDCBrowser(t).signIn(env, p, "sub-boss", "")
			if !userNamed(t, env.Store, "boss").Admin {
				t.Fatal("boss (group hangar-admins) is not an admin")
			}
			newOIDCBrowser(t).signIn(env, p, "sub-listed", "")
			if !userNamed(t, env.Store, "listed").Admin {
				t.Fatal("listed@example.com (on the allow-list) is not an admin")
			}
			// The allow-list counts only an email the provider says is verified: without the
			// claim, the same address signs in but is no admin.
			p.AddUser(oidctest.User{Subject: "sub-listed-unclaimed", Email: "listed@example.com", PreferredUsername: "listed-unclaimed"})
			newOIDCBrowser(t).signIn(env, p, "sub-listed-unclaimed", "")
			if userNamed(t, env.Store, "listed-unclaimed").Admin {
				t.Fatal("an allow-listed email without email_verified made an admin")
			}
			// Re-evaluated at every sign-in: out of the group, no more an admin.
			p.AddUser(oidctest.User{Subject: "sub-boss", Email: "boss@example.com", PreferredUsername: "boss", Groups: []string{"devs"}})
			newOIDCBrowser(t).signIn(env, p, "sub-boss", "")
			if userNamed(t, env.Store, "boss").Admin {
				t.Fatal("boss left the admin group and is still an admin")
			}

			// An email the provider says is not verified: refused, nobody created.
			resp, body = newOIDCBrowser(t).signIn(env, p, "sub-unverified", "")
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "mallory@example.com is not verified") {
				t.Fatalf("unverified email: %s %s", resp.Status, body)
			}
			if _, err := env.Store.UserByUsername(ctx, "mallory"); err == nil {
				t.Fatal("a user was created for an unverified email")
			}

			// The OIDC session is a server session like the token form's: sign-out ends it.
			resp, err := b.c.PostForm(env.URL+"/signout", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if _, body := b.get(env.URL + "/signin"); !strings.Contains(body, `name="token"`) {
				t.Fatalf("after sign-out: %s", body)
			}
		})
	}
}

func TestOIDCSignInRefusals(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			env, p := newOIDCEnv(t, engine, func(o *server.OIDCOptions) { o.AllowedDomains = []string{"example.com"} })
			users0, _ := env.Store.CountUsers(ctx)

			// begin goes through the provider and stops before the callback: the browser and the
			// callback URL it was sent to.
			begin := func() (*oidcBrowser, *url.URL) {
				t.Helper()
				b := newOIDCBrowser(t)
				b.stopAt = server.OIDCCallbackPath
				resp, _ := b.signIn(env, p, "sub-alice", "/signin")
				loc, err := resp.Location()
				if err != nil || loc.Path != server.OIDCCallbackPath {
					t.Fatalf("did not stop at the callback: %s %v", resp.Status, loc)
				}
				return b, loc
			}
			refused := func(name string, b *oidcBrowser, u string, status int, msg string) {
				t.Helper()
				b.stopAt = ""
				resp, body := b.get(u)
				if resp.StatusCode != status || !strings.Contains(body, msg) {
					t.Errorf("%s: %s, want %d with %q: %s", name, resp.Status, status, msg, body)
				}
				if _, body := b.get(env.URL + "/signin"); strings.Contains(body, "You are signed in") {
					t.Errorf("%s: the browser is signed in", name)
				}
			}

			// A state that is not the browser's.
			b, cb := begin()
			q := cb.Query()
			q.Set("state", q.Get("state")+"x")
			bad := *cb
			bad.RawQuery = q.Encode()
			refused("wrong state", b, bad.String(), http.StatusBadRequest, "not for the sign-in this browser began")
			// The callback in another browser (login CSRF: someone else's code).
			_, cb = begin()
			refused("another browser", newOIDCBrowser(t), cb.String(), http.StatusBadRequest, "not begun in this browser")
			// Too slow: the sign-in cookie's 10 minutes are over.
			b, cb = begin()
			env.Clock.Advance(server.OIDCLoginLifetime + time.Second)
			refused("too late", b, cb.String(), http.StatusBadRequest, "longer than 10 minutes")
			env.Clock.Set(time.Now())
			// The provider says no.
			b, cb = begin()
			q = cb.Query()
			q.Del("code")
			q.Set("error", "access_denied")
			bad = *cb
			bad.RawQuery = q.Encode()
			refused("provider error", b, bad.String(), http.StatusUnauthorized, "The sign-in provider refused: access_denied")

			// ID tokens that the provider signs but that are not for this sign-in or server.
			for _, c := range []struct {
				name   string
				tamper func(map[string]any)
				msg    string
			}{
				{"wrong nonce", func(c map[string]any) { c["nonce"] = "someone-elses" }, "not for the sign-in this browser began"},
				{"wrong audience", func(c map[string]any) { c["aud"] = "another-client" }, "not valid for this server"},
				{"wrong issuer", func(c map[string]any) { c["iss"] = "https://idp.example.com" }, "not valid for this server"},
				{"expired", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }, "not valid for this server"},
				{"groups not strings", func(c map[string]any) { c["groups"] = []any{1, 2} }, "claim groups: want an array of strings"},
			} {
				b, cb := begin()
				p.Tamper(c.tamper)
				refused(c.name, b, cb.String(), http.StatusUnauthorized, c.msg)
				p.Tamper(nil)
			}

			// An email outside the allowed domains.
			b = newOIDCBrowser(t)
			if resp, body := b.signIn(env, p, "sub-other", ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Only users with an email address in example.com") {
				t.Errorf("outside the allowed domains: %s %s", resp.Status, body)
			}

			// No open redirects: return_to must be a path here, checked before the provider.
			for _, rt := range []string{"//evil.example.com/", "https://evil.example.com/", `/\evil.example.com`, "evil"} {
				b := newOIDCBrowser(t)
				b.stopAt = "/authorize"
				resp, body := b.get(env.URL + server.OIDCLoginPath + "?" + url.Values{"return_to": {rt}}.Encode())
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "return_to must be a path on this server") || len(b.redirects) != 0 {
					t.Errorf("return_to %q: %s, %d redirects: %s", rt, resp.Status, len(b.redirects), body)
				}
			}

			if n, _ := env.Store.CountUsers(ctx); n != users0 {
				t.Errorf("%d users after refused sign-ins, want %d", n, users0)
			}
			// Each refusal is in the audit log, method oidc, naming nobody.
			fails := auditEntries(t, env.Store, audit.Filter{Action: audit.SignIn, Outcome: audit.Failure})
			if len(fails) != 10 || fails[0].Details["method"] != "oidc" || fails[0].Actor.Name != "" || fails[0].Error == "" {
				t.Errorf("failed sign-ins in the audit log: %d %+v", len(fails), fails)
			}
		})
	}
}

func TestOIDCNotConfigured(t *testing.T) {
	env := servertest.New(t)
	b := newOIDCBrowser(t)
	if _, body := b.get(env.URL + "/signin"); strings.Contains(body, "Sign in with") || !strings.Contains(body, `name="token"`) {
		t.Fatalf("sign-in page without OIDC: %s", body)
	}
	for _, path := range []string{server.OIDCLoginPath, server.OIDCCallbackPath + "?code=x&state=y"} {
		if resp, body := b.get(env.URL + path); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no OIDC provider configured") {
			t.Errorf("GET %s without OIDC: %s %s", path, resp.Status, body)
		}
	}
}
