package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// sendReq sends a request with headers and returns the answer, its body read.
func sendReq(t testing.TB, client *http.Client, method, url string, header http.Header, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// Every answer of the server's own carries the security headers, HSTS over TLS only; the sign-in
// page keeps its stricter policy, whose style hash matches its style; the apps zone's answers are
// the workspaces' and carry none of the server's policy.
func TestSecurityHeaders(t *testing.T) {
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.Apps = server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test"}
	})
	want := map[string]string{
		"Content-Security-Policy": server.ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
	}
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/healthz", ""},
		{"GET", "/api/v1/users/me", env.AdminToken},
		{"GET", "/api/v1/users/me", ""}, // 401
		{"GET", "/api/v1/nope", env.AdminToken},
		{"GET", "/nope", ""},
		{"GET", "/metrics", ""},
	} {
		h := http.Header{}
		if c.token != "" {
			h.Set("Authorization", "Bearer "+c.token)
		}
		resp, _ := sendReq(t, http.DefaultClient, c.method, env.URL+c.path, h, nil)
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s %s (%d): %s %q, want %q", c.method, c.path, resp.StatusCode, k, got, v)
			}
		}
		if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("%s %s over plain http: Strict-Transport-Security %q, want none", c.method, c.path, got)
		}
	}
	if !strings.Contains(server.ContentSecurityPolicy, "script-src 'self';") || !strings.Contains(server.ContentSecurityPolicy, "frame-ancestors 'none'") ||
		strings.Contains(server.ContentSecurityPolicy, "unsafe") {
		t.Errorf("the policy %q allows more than the server's own scripts, or framing", server.ContentSecurityPolicy)
	}

	// The sign-in page: its own policy, no inline style allowed but its own style element's hash.
	resp, page := sendReq(t, http.DefaultClient, "GET", env.URL+"/signin", nil, nil)
	csp := resp.Header.Get("Content-Security-Policy")
	style := regexp.MustCompile(`<style>([^<]*)</style>`).FindStringSubmatch(page)
	if style == nil {
		t.Fatalf("the sign-in page has no style element: %s", page)
	}
	sum := sha256.Sum256([]byte(style[1]))
	if !strings.Contains(csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") || strings.Contains(csp, "unsafe-inline") ||
		strings.Contains(page, "style=") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("sign-in page: CSP %q does not allow exactly its style %q, or the page has a style attribute", csp, style[1])
	}

	// The apps zone: a workspace's answer, none of the server's headers.
	resp, body := appGet(t, env, "8080-nope--dev.apps.test", "/", nil)
	if got := resp.Header.Get("Content-Security-Policy"); got == server.ContentSecurityPolicy || resp.Header.Get("Cross-Origin-Resource-Policy") != "" {
		t.Errorf("an apps host's answer (%d %s) carries the server's headers: %v", resp.StatusCode, body, resp.Header)
	}

	// Over TLS: HSTS.
	ts := httptest.NewTLSServer(env.Server.Handler())
	t.Cleanup(ts.Close)
	resp, _ = sendReq(t, ts.Client(), "GET", ts.URL+"/healthz", nil, nil)
	if got := resp.Header.Get("Strict-Transport-Security"); got != server.HSTS || resp.Header.Get("Content-Security-Policy") != server.ContentSecurityPolicy {
		t.Errorf("over TLS: Strict-Transport-Security %q, want %q", got, server.HSTS)
	}
}

// CORS is closed: preflights are refused and no answer allows another origin.
func TestCORSClosed(t *testing.T) {
	env := servertest.New(t)
	noAllow := func(what string, resp *http.Response) {
		t.Helper()
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-Allow-") {
				t.Errorf("%s: answer has %s: %v", what, k, resp.Header[k])
			}
		}
	}
	resp, body := sendReq(t, http.DefaultClient, "OPTIONS", env.URL+"/api/v1/workspaces", http.Header{
		"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization"}}, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "cross-origin requests are not allowed") {
		t.Errorf("preflight: %d %s, want 403", resp.StatusCode, body)
	}
	noAllow("preflight", resp)
	resp, _ = sendReq(t, http.DefaultClient, "GET", env.URL+"/api/v1/users/me", http.Header{
		"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + env.AdminToken}}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a cross-origin GET with a token (not a browser's): %d", resp.StatusCode)
	}
	noAllow("cross-origin GET", resp)
}

// Failed authentications are limited per client address: past the burst, 429 with Retry-After on
// every request carrying credentials, logged once per window with the address; one more attempt
// comes back every Every; successes take nothing; other addresses (behind a trusted proxy,
// X-Forwarded-For) are not affected.
func TestFailedAuthRateLimit(t *testing.T) {
	logs := &syncBuffer{}
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.AuthLimit = server.AuthLimit{Burst: 5, Every: 10 * time.Second}
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
	agent := createAgent(t, env, "k1", nil)
	from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }
	with := func(h http.Header, token string) http.Header {
		h = h.Clone()
		h.Set("Authorization", "Bearer "+token)
		return h
	}
	get := func(h http.Header, path string) (*http.Response, string) {
		t.Helper()
		return sendReq(t, http.DefaultClient, "GET", env.URL+path, h, nil)
	}
	signin := func(h http.Header, token string) (*http.Response, string) {
		t.Helper()
		h = h.Clone()
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		return sendReq(t, http.DefaultClient, "POST", env.URL+"/signin", h, strings.NewReader(url.Values{"token": {token}}.Encode()))
	}
	a, b := from("203.0.113.7"), from("198.51.100.9")

	// Successes take nothing.
	for range 20 {
		if resp, body := get(with(a, env.AdminToken), "/api/v1/users/me"); resp.StatusCode != http.StatusOK {
			t.Fatalf("a good token: %d %s", resp.StatusCode, body)
		}
	}
	// Five failures, of every kind of credential: refused as such (401).
	for i, try := range []func() (*http.Response, string){
		func() (*http.Response, string) { return get(with(a, "hgu_wrong"), "/api/v1/users/me") },
		func() (*http.Response, string) { return get(with(a, "hga_wrong"), protocol.WaitPath) },
		func() (*http.Response, string) {
			return sendReq(t, http.DefaultClient, "POST", env.URL+protocol.ProvisionerAcquirePath, with(a, "hgp_wrong"), strings.NewReader(`{}`))
		},
		func() (*http.Response, string) { return signin(a, "hgu_wrong") },
		func() (*http.Response, string) { return get(with(a, agent), "/api/v1/users/me") }, // an agent's token is no user's
	} {
		if resp, body := try(); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s, want 401", i+1, resp.StatusCode, body)
		}
	}
	// The sixth is refused before its token is looked at: even a good token, until one more
	// attempt comes back.
	for _, h := range []http.Header{with(a, "hgu_wrong"), with(a, env.AdminToken), with(a, agent)} {
		resp, body := get(h, "/api/v1/users/me")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" || !strings.Contains(body, "too many failed authentications") {
			t.Errorf("past the burst: %d Retry-After %q %s, want 429 after 10", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, body := signin(a, env.AdminToken); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the sign-in form past the burst: %d %s, want 429", resp.StatusCode, body)
	}
	// Requests without credentials are served; so is another address, even with a bad token.
	if resp, _ := get(a, "/healthz"); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz from a limited address: %d", resp.StatusCode)
	}
	if resp, _ := get(with(b, "hgu_wrong"), "/api/v1/users/me"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another address: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(with(b, env.AdminToken), "/api/v1/users/me"); resp.StatusCode != http.StatusOK {
		t.Errorf("another address, a good token: %d, want 200", resp.StatusCode)
	}
	// Logged once, with the address.
	if n := strings.Count(logs.String(), "failed authentications rate-limited"); n != 1 || !strings.Contains(logs.String(), "client=203.0.113.7") {
		t.Errorf("logged %d times, want once naming the client:\n%s", n, logs.String())
	}

	// 4 s later, 6 s to wait; 10 s later, one attempt: a good one passes, and does not use it.
	env.Clock.Advance(4 * time.Second)
	if resp, _ := get(with(a, env.AdminToken), "/api/v1/users/me"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "6" {
		t.Errorf("4 s later: %d Retry-After %q, want 429 after 6", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	env.Clock.Advance(6 * time.Second)
	for range 3 {
		if resp, _ := get(with(a, env.AdminToken), "/api/v1/users/me"); resp.StatusCode != http.StatusOK {
			t.Errorf("once one attempt came back, a good token: %d, want 200", resp.StatusCode)
		}
	}
	if resp, _ := get(with(a, "hgu_wrong"), "/api/v1/users/me"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the attempt that came back: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(with(a, "hgu_wrong"), "/api/v1/users/me"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("and then: %d, want 429", resp.StatusCode)
	}
	if n := strings.Count(logs.String(), "failed authentications rate-limited"); n != 2 {
		t.Errorf("logged %d times, want once more for the new window", n)
	}
}

// The agent's wait counts against the caps per client and per address: past them, 429 saying so;
// once a wait ends, its place is free again.
func TestStreamCaps(t *testing.T) {
	timers := newFakeTimers()
	env := servertest.NewWith(t, "sqlite", timers.option, func(o *server.Options) {
		o.StreamLimits = server.StreamLimits{PerClient: 2, PerAddress: 3}
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
	k1, k2, k3 := createAgent(t, env, "k1", nil), createAgent(t, env, "k2", nil), createAgent(t, env, "k3", nil)
	wait := func(ctx context.Context, token, from string) <-chan waitResult {
		out := make(chan waitResult, 1)
		go func() {
			var r waitResult
			defer func() { out <- r }()
			req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+protocol.WaitPath, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("X-Forwarded-For", from)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				r.err = err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			r.status, r.body = resp.StatusCode, string(b)
		}()
		return out
	}
	refused := func(got <-chan waitResult, want string) {
		t.Helper()
		select {
		case r := <-got:
			if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, want) || !strings.Contains(r.body, "limit_reached") {
				t.Errorf("past the cap: %d %s %v, want 429 saying %q", r.status, r.body, r.err, want)
			}
		case <-time.After(deadline):
			t.Fatal("a wait past the cap blocked")
		}
	}
	ctx := t.Context()
	const a, b = "203.0.113.7", "198.51.100.9"
	// No workspace: every wait blocks.
	first, endFirst := context.WithCancel(ctx)
	defer endFirst()
	wait(first, k1, a)
	timers.blocked(t)
	wait(ctx, k1, a)
	timers.blocked(t)
	refused(wait(ctx, k1, b), "with these credentials: 2")
	wait(ctx, k2, a)
	timers.blocked(t)
	refused(wait(ctx, k3, a), "from your address 203.0.113.7: 3")
	// Another address, another agent: served.
	wait(ctx, k3, b)
	timers.blocked(t)
	// The first wait's agent goes away: its place is free (once the server sees it gone).
	endFirst()
	eventually(t, "the ended wait's place to be free", func() bool {
		select {
		case r := <-wait(ctx, k3, a):
			if r.status != http.StatusTooManyRequests {
				t.Fatalf("while the place is not free: %d %s", r.status, r.body)
			}
			return false
		case <-timers.started: // it blocks: it got the place
			return true
		}
	})
}

// deadlineWriter records the deadlines a handler sets through http.ResponseController.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	set chan [2]time.Time // the read and the write deadline, once the write one is set
	rd  time.Time
}

func (w *deadlineWriter) SetReadDeadline(d time.Time) error { w.rd = d; return nil }
func (w *deadlineWriter) SetWriteDeadline(d time.Time) error {
	w.set <- [2]time.Time{w.rd, d}
	return nil
}

// Long-polls lift the server's read and write timeouts for their own request, to their own timeout
// and some; ordinary requests keep them.
func TestStreamsLiftTimeouts(t *testing.T) {
	timers := newFakeTimers()
	env := servertest.NewWith(t, "sqlite", timers.option)
	agent := createAgent(t, env, "k1", nil)
	prov := createProvisioner(t, env, "p1")
	for _, c := range []struct {
		name, method, path, token, body string
		want                            time.Duration // -1: none may be set
	}{
		{"an ordinary request", "GET", "/api/v1/users/me", env.AdminToken, "", -1},
		{"the agent's wait", "GET", protocol.WaitPath + "?timeout_seconds=5", agent, "", 35 * time.Second},
		{"a provisioner's acquire", "POST", protocol.ProvisionerAcquirePath, prov, `{"worker_id":"w","wait_seconds":20}`, 50 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, c.method, c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+c.token)
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder(), set: make(chan [2]time.Time, 1)}
			done := make(chan struct{})
			start := time.Now()
			go func() { env.Server.Handler().ServeHTTP(w, req); close(done) }()
			if c.want < 0 {
				<-done
				if len(w.set) != 0 {
					t.Errorf("an ordinary request lifted its deadlines: %v", <-w.set)
				}
				return
			}
			var got [2]time.Time
			select {
			case got = <-w.set:
			case <-done:
				t.Fatalf("answered %d %s without lifting its deadlines", w.Code, w.Body)
			case <-time.After(deadline):
				t.Fatal("no deadline set")
			}
			for i, d := range got {
				if d.Before(start.Add(c.want)) || d.After(time.Now().Add(c.want)) {
					t.Errorf("deadline %d: %v from the start, want %v", i, d.Sub(start), c.want)
				}
			}
			cancel()
			<-done
		})
	}
}
