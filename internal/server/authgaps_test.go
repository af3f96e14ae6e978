package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// cookieCall sends a request signed in by the session cookie, as the web UI does (with the CSRF
// header), and decodes a JSON answer into out when it is not nil.
func cookieCall(t testing.TB, env *servertest.Env, cookie *http.Cookie, method, path string, body, out any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, env.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(cookie)
	req.Header.Set(server.CSRFHeader, "1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, buf.Bytes())
		}
	}
	return resp.StatusCode, buf.Bytes()
}

// tokenSignIn begins a server session with token through the sign-in form and returns its cookie.
func tokenSignIn(t testing.TB, env *servertest.Env, token string) *http.Cookie {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(env.URL+"/signin", url.Values{"token": {token}, "return_to": {"/signin"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("sign-in: %d, cookie %v", resp.StatusCode, ck)
	}
	return ck
}

func sameTime(a *time.Time, b time.Time) bool { return a != nil && a.Equal(b) }

// TestTokensDoNotOutliveTheTokenThatMintsThem: a token minted with a token (or with a session
// begun from one) expires no later than it. The default lifetime is shortened to it; a lifetime
// named beyond it is refused, naming lifetime_seconds. A user's own rotate-token is bound the same
// way; an admin's reset of another user, and a token without expiry, are not. A session begun with
// a token expires with it.
func TestTokensDoNotOutliveTheTokenThatMintsThem(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			alice := createUser(t, env, "alice")
			t0 := env.Clock.Now()

			var short sdk.Token
			mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "short", LifetimeSeconds: 3600}, http.StatusCreated, &short)
			shortEnd := t0.Add(time.Hour)
			if !sameTime(short.ExpiresAt, shortEnd) {
				t.Fatalf("short expires at %v, want %v", short.ExpiresAt, shortEnd)
			}

			// The default (30 days) is shortened to the minting token's expiry.
			var child sdk.Token
			mustCall(t, env, short.Token, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "child"}, http.StatusCreated, &child)
			if !sameTime(child.ExpiresAt, shortEnd) {
				t.Fatalf("a token minted by a 1-hour token expires at %v, want %v (the minting token's expiry)", child.ExpiresAt, shortEnd)
			}
			// A lifetime named beyond it is refused, naming the field and the most it may be.
			status, body := call(t, env, short.Token, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "long", LifetimeSeconds: 7200})
			wantField(t, "a lifetime beyond the minting token's", status, body, "lifetime_seconds")
			if !strings.Contains(string(body), `must not outlive the token \"short\"`) || !strings.Contains(string(body), "at most 3600 seconds") {
				t.Fatalf("the refusal: %s", body)
			}
			if toks := listTokenNames(t, env, alice); strings.Contains(toks, "long") {
				t.Fatalf("a refused token was stored: %s", toks)
			}
			// Within it: as asked.
			var within sdk.Token
			mustCall(t, env, short.Token, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "within", LifetimeSeconds: 1800}, http.StatusCreated, &within)
			if !sameTime(within.ExpiresAt, t0.Add(30*time.Minute)) {
				t.Fatalf("within expires at %v", within.ExpiresAt)
			}
			// The 30-day token mints a 30-day token; the bootstrap admin's (no expiry) too.
			var long sdk.Token
			mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "long"}, http.StatusCreated, &long)
			if !sameTime(long.ExpiresAt, t0.Add(server.DefaultTokenLifetime)) {
				t.Fatalf("a token minted by a 30-day token expires at %v", long.ExpiresAt)
			}
			var adm sdk.Token
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "adm", LifetimeSeconds: int64(server.DefaultMaxTokenLifetime / time.Second)}, http.StatusCreated, &adm)
			if !sameTime(adm.ExpiresAt, t0.Add(server.DefaultMaxTokenLifetime)) {
				t.Fatalf("a token minted by a token without expiry expires at %v", adm.ExpiresAt)
			}

			// A session begun with the short token: it expires with it, and so do the tokens it mints.
			ck := tokenSignIn(t, env, short.Token)
			if ck.MaxAge != 3600 {
				t.Fatalf("the session cookie of a 1-hour token lives %d s", ck.MaxAge)
			}
			var fromSession sdk.Token
			if status, body := cookieCall(t, env, ck, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "from-session"}, &fromSession); status != http.StatusCreated {
				t.Fatalf("mint from a session: %d %s", status, body)
			}
			if !sameTime(fromSession.ExpiresAt, shortEnd) {
				t.Fatalf("a token minted by a session of a 1-hour token expires at %v, want %v", fromSession.ExpiresAt, shortEnd)
			}
			status, body = cookieCall(t, env, ck, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "from-session-long", LifetimeSeconds: 86400}, nil)
			wantField(t, "a session's token beyond its token", status, body, "lifetime_seconds")

			// A user's own reset with the short token: the new token expires with it.
			var reset sdk.User
			mustCall(t, env, short.Token, "POST", "/api/v1/users/me/token", nil, http.StatusOK, &reset)
			if !sameTime(reset.TokenExpiresAt, shortEnd) {
				t.Fatalf("a reset by a 1-hour token gives a token expiring at %v, want %v", reset.TokenExpiresAt, shortEnd)
			}
			// An admin's reset of alice is not bound by alice's old tokens, nor by the admin's.
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/alice/token", nil, http.StatusOK, &reset)
			if !sameTime(reset.TokenExpiresAt, t0.Add(server.DefaultTokenLifetime)) {
				t.Fatalf("an admin's reset gives a token expiring at %v", reset.TokenExpiresAt)
			}
		})
	}
}

func listTokenNames(t testing.TB, env *servertest.Env, token string) string {
	t.Helper()
	var list []sdk.Token
	mustCall(t, env, token, "GET", "/api/v1/tokens", nil, http.StatusOK, &list)
	var names []string
	for _, tk := range list {
		names = append(names, tk.Name)
	}
	return strings.Join(names, ",")
}

// TestRotateTokenEndsOIDCSessions: users rotate-token (a reset after a leak) ends every session of
// the user, those begun through the sign-in provider (without a token) too, at once: the live
// stream opened with one ends without waiting for a heartbeat (none fires here), and the cookie
// is refused. A session of the provider still mints tokens of the full default lifetime.
func TestRotateTokenEndsOIDCSessions(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			never := make(chan time.Time)
			p := newOIDCProvider(t)
			env := servertest.NewWith(t, engine, withOIDC(p), func(o *server.Options) {
				o.HeartbeatAfter = func(time.Duration) <-chan time.Time { return never }
			})
			env.Clock.Set(time.Now())
			registerOIDCClient(env, p)

			b := newOIDCBrowser(t)
			if resp, body := b.signIn(env, p, "sub-alice", "/signin"); !strings.Contains(body, "signed in to Hangar as alice-smith") {
				t.Fatalf("OIDC sign-in: %s %s", resp.Status, body)
			}
			var oidcCookie *http.Cookie
			for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
				if c.Name == server.SessionCookie {
					oidcCookie = c
				}
			}
			if oidcCookie == nil {
				t.Fatal("no session cookie after the OIDC sign-in")
			}
			// A session of the provider has no token: it mints one of the full default lifetime.
			var tok sdk.Token
			if status, body := cookieCall(t, env, oidcCookie, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "laptop"}, &tok); status != http.StatusCreated {
				t.Fatalf("mint from an OIDC session: %d %s", status, body)
			}
			if !sameTime(tok.ExpiresAt, env.Clock.Now().Add(server.DefaultTokenLifetime)) {
				t.Fatalf("a token minted by an OIDC session expires at %v", tok.ExpiresAt)
			}
			tokenCookie := tokenSignIn(t, env, tok.Token)

			oidcStream := openEvents(t, env, "", oidcCookie)
			tokenStream := openEvents(t, env, "", tokenCookie)
			for _, ch := range []<-chan sseEvent{oidcStream, tokenStream} {
				if ev := next(t, ch); ev.Event != "snapshot" {
					t.Fatalf("first event: %+v", ev)
				}
			}
			if status, body := cookieCall(t, env, oidcCookie, "GET", "/api/v1/users/me", nil, nil); status != http.StatusOK {
				t.Fatalf("the OIDC session before the reset: %d %s", status, body)
			}

			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/alice-smith/token", nil, http.StatusOK, nil)
			ended(t, oidcStream, "the OIDC session's stream after rotate-token")
			ended(t, tokenStream, "the token session's stream after rotate-token")
			for what, ck := range map[string]*http.Cookie{"OIDC": oidcCookie, "token": tokenCookie} {
				if status, body := cookieCall(t, env, ck, "GET", "/api/v1/users/me", nil, nil); status != http.StatusUnauthorized {
					t.Fatalf("the %s session after the reset: %d %s, want 401", what, status, body)
				}
			}
		})
	}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAgentWaitEndsWhenItsTokenIsRevoked: a wait already blocked ends at once with the 401 a new
// request would get when the agent's token is rotated or revoked; another agent's rotation does
// not end it.
func TestAgentWaitEndsWhenItsTokenIsRevoked(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			timers := newFakeTimers()
			env := servertest.NewWith(t, engine, timers.option)
			k1 := createAgent(t, env, "k1", nil)
			createAgent(t, env, "k2", nil)
			ctx := t.Context()

			// Another agent's token rotated: the wait goes on (a revocation wakes it, it reads its
			// token again and waits), and times out as usual.
			got := startWait(ctx, env.URL, k1, "?timeout_seconds=60")
			timers.blocked(t)
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/agents/k2/token", nil, http.StatusOK, nil)
			select {
			case r := <-got:
				t.Fatalf("another agent's rotation ended the wait: %d %s", r.status, r.body)
			case <-time.After(50 * time.Millisecond):
			}
			timers.expire(t)
			answered(t, got, false)

			for _, how := range []string{"POST", "DELETE"} {
				got := startWait(ctx, env.URL, k1, "?timeout_seconds=60")
				timers.blocked(t)
				var rotated sdk.Agent
				mustCall(t, env, env.AdminToken, how, "/api/v1/agents/k1/token", nil, http.StatusOK, &rotated)
				select {
				case r := <-got:
					if r.err != nil || r.status != http.StatusUnauthorized || !strings.Contains(r.body, "invalid agent token") {
						t.Fatalf("%s of the token: the wait answered %d %s (%v), want 401 invalid agent token", how, r.status, r.body, r.err)
					}
				case <-time.After(deadline):
					t.Fatalf("%s of the token: the blocked wait did not end", how)
				}
				// As a new request with the old token.
				if status, body := call(t, env, k1, "GET", protocol.WaitPath+"?timeout_seconds=1", nil); status != http.StatusUnauthorized {
					t.Fatalf("a new wait with the old token: %d %s", status, body)
				}
				if how == "POST" {
					k1 = rotated.Token
				}
			}
			if got := metricValue(t, env.URL, `hangar_agent_waits_total{result="revoked"}`); got != "2" {
				t.Errorf("revoked waits %q, want 2", got)
			}
		})
	}
}

// dialWorkspaceSSHCookie opens the user endpoint with a browser's session cookie (no bearer
// token) and an SSH client over it.
func dialWorkspaceSSHCookie(t *testing.T, env *servertest.Env, ck *http.Cookie, name string, hostKey ssh.PublicKey) (*ssh.Client, error) {
	t.Helper()
	return dialWorkspaceSSHWith(t, env, http.Header{"Cookie": {ck.Name + "=" + ck.Value}}, name, hostKey)
}

// TestWorkspaceSSHOpenedWithASessionCookie: an SSH WebSocket opened by a browser's session cookie
// keeps its shell through the periodic rechecks (each checks the session, not a bearer token it
// never had), and loses it at once when the session ends: signed out, or its user suspended.
func TestWorkspaceSSHOpenedWithASessionCookie(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			ae := newAgentEnv(t, engine)
			env := ae.Env
			h := startHelper(t, env.URL, ae.job.AgentToken)
			within(t, h.connected, "the helper's connection")
			waitRegistered(t, env, ae.dev, "tfw")
			ae.worker.finish(ae.job.ID, protocol.FinishRequest{WorkerID: "w1", State: agentState(ae.job.AgentToken)})

			ck := tokenSignIn(t, env, ae.dev)
			c, err := dialWorkspaceSSHCookie(t, env, ck, "tfw", h.hostKey)
			if err != nil {
				t.Fatal(err)
			}
			if out := run(t, c, "echo hello"); out != "hello" {
				t.Fatalf("ssh opened with a session cookie: %q", out)
			}
			// Two rechecks done (each records the workspace's activity at the clock's time before it
			// checks; the second is recorded only once the first check is over): the shell stays.
			recheckDone := func() {
				at := env.Clock.Now().Add(time.Minute)
				env.Clock.Set(at)
				eventually(t, "a recheck", func() bool {
					ae.rechecks.fire()
					ws := stored(t, env, "tfw")
					return ws.LastActivityAt != nil && ws.LastActivityAt.Equal(at)
				})
			}
			recheckDone()
			recheckDone()
			if out := run(t, c, "echo still"); out != "still" {
				t.Fatalf("after two rechecks: %q", out)
			}

			// Signed out: the connection ends at once (the revocation wakes it; no recheck fires).
			waitErr := make(chan error, 1)
			go func() { waitErr <- c.Wait() }()
			if status, body := cookieCall(t, env, ck, "POST", "/signout", nil, nil); status != http.StatusOK {
				t.Fatalf("sign-out: %d %s", status, body)
			}
			within(t, waitErr, "the signed-out session's connection to end")
			if _, err := dialWorkspaceSSHCookie(t, env, ck, "tfw", h.hostKey); err == nil || !strings.Contains(err.Error(), "401") {
				t.Fatalf("the signed-out cookie: %v, want a 401", err)
			}

			// Another session; its user suspended: the connection ends at once.
			ck = tokenSignIn(t, env, ae.dev)
			c, err = dialWorkspaceSSHCookie(t, env, ck, "tfw", h.hostKey)
			if err != nil {
				t.Fatal(err)
			}
			if out := run(t, c, "echo again"); out != "again" {
				t.Fatalf("a new session's ssh: %q", out)
			}
			go func() { waitErr <- c.Wait() }()
			yes := true
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/dev", sdk.UpdateUserRequest{Suspended: &yes}, http.StatusOK, nil)
			within(t, waitErr, "the suspended user's connection to end")
		})
	}
}
