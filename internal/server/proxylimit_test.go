package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

const rateLimitedLog = "failed authentications rate-limited"

// proxyLimitEnv is a server with the default limit of failed authentications (20, one more every
// 6 s), its log kept, a Kubernetes agent k1 and alice's workspace dev on it.
type proxyLimitEnv struct {
	*servertest.Env
	logs          *syncBuffer
	agent, alice  string
	host          string
	aliceKey      ssh.Signer
	trustLoopback bool
}

func newProxyLimitEnv(t *testing.T, engine string, trustLoopback bool) *proxyLimitEnv {
	logs := &syncBuffer{}
	env := servertest.NewWith(t, engine, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if trustLoopback {
			o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		}
	})
	e := &proxyLimitEnv{Env: env, logs: logs, host: "8080-dev--alice.ws.example.com"}
	e.agent = createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
	e.alice = createUser(t, env, "alice")
	mustCall(t, env, e.alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
	e.aliceKey = signer(t)
	mustCall(t, env, e.alice, "POST", "/api/v1/users/me/ssh-keys", map[string]any{"public_key": string(ssh.MarshalAuthorizedKey(e.aliceKey.PublicKey()))},
		http.StatusCreated, nil)
	return e
}

// check asks POST /api/v1/proxy/check as the agent.
func (e *proxyLimitEnv) check(t *testing.T, req protocol.ProxyCheckRequest) protocol.ProxyCheckResponse {
	t.Helper()
	var out protocol.ProxyCheckResponse
	mustCall(t, e.Env, e.agent, "POST", protocol.ProxyCheckPath, req, http.StatusOK, &out)
	return out
}

// sshCheck asks POST /api/v1/proxy/ssh-check as the agent.
func (e *proxyLimitEnv) sshCheck(t *testing.T, req protocol.ProxySSHCheckRequest) protocol.ProxySSHCheckResponse {
	t.Helper()
	var out protocol.ProxySSHCheckResponse
	mustCall(t, e.Env, e.agent, "POST", protocol.ProxySSHCheckPath, req, http.StatusOK, &out)
	return out
}

func (e *proxyLimitEnv) logged(t *testing.T, want int, client string) {
	t.Helper()
	if n := strings.Count(e.logs.String(), rateLimitedLog); n != want || (want > 0 && !strings.Contains(e.logs.String(), "client="+client)) {
		t.Errorf("the limit logged %d times, want %d naming client=%s:\n%s", n, want, client, e.logs.String())
	}
}

// Tokens a proxy checks for its clients count against the clients' addresses, in the server's own
// limit of failed authentications: 20 wrong bearer tokens from one address through the check, and
// the next check of a token from it (a good one too) is answered rate_limited with retry_after;
// another address, a session, a public key and the proxy itself are unaffected; the address is
// limited on the server's own API too; time refills it. SSH passwords count the same way.
func TestProxyCheckRateLimit(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newProxyLimitEnv(t, engine, true)
			const a, b, c = "203.0.113.7", "198.51.100.9", "2001:db8:1:2::7"
			tok := func(token, from string) protocol.ProxyCheckRequest {
				return protocol.ProxyCheckRequest{Host: e.host, Token: token, ClientAddress: from}
			}

			// Successes take nothing; neither do wrong tokens a proxy sends without an address
			// (an older proxy), nor refused sessions.
			for range 25 {
				if d := e.check(t, tok(e.alice, a)); !d.Allowed {
					t.Fatalf("alice's token from %s: %+v", a, d)
				}
				if d := e.check(t, tok("hgu_wrong", "")); d.Reason != protocol.ProxyUnauthenticated {
					t.Fatalf("a wrong token with no address: %+v, want unauthenticated", d)
				}
				if d := e.check(t, protocol.ProxyCheckRequest{Host: e.host, Session: "hgw_wrong", ClientAddress: a}); d.Reason != protocol.ProxyUnauthenticated {
					t.Fatalf("a wrong session: %+v, want unauthenticated", d)
				}
			}
			e.logged(t, 0, "")

			// 20 wrong tokens from a: each refused as such.
			for i := range 20 {
				if d := e.check(t, tok("hgu_wrong"+string(rune('a'+i)), a)); d.Reason != protocol.ProxyUnauthenticated {
					t.Fatalf("wrong token %d from %s: %+v, want unauthenticated", i+1, a, d)
				}
			}
			// The next, and a good one, are refused before being looked up.
			for _, token := range []string{"hgu_wrongnext", e.alice} {
				if d := e.check(t, tok(token, a)); d.Allowed || d.Reason != protocol.ProxyRateLimited || d.RetryAfter != 6 || d.User != "" {
					t.Errorf("past the limit, %s: %+v, want rate_limited, retry after 6", token, d)
				}
			}
			// And so is an SSH password from a; alice's SSH key from a is not limited.
			if d := e.sshCheck(t, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: e.alice, ClientAddress: a}); d.Reason != protocol.ProxyRateLimited || d.RetryAfter != 6 {
				t.Errorf("an SSH password from %s: %+v, want rate_limited", a, d)
			}
			aliceKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(e.aliceKey.PublicKey())))
			if d := e.sshCheck(t, protocol.ProxySSHCheckRequest{Workspace: "dev", PublicKey: aliceKey, ClientAddress: a}); !d.Allowed {
				t.Errorf("alice's key from %s: %+v, want allowed", a, d)
			}
			// A session of a is no token: not limited (a wrong one is refused as such).
			if d := e.check(t, protocol.ProxyCheckRequest{Host: e.host, Session: "hgw_wrong", ClientAddress: a}); d.Reason != protocol.ProxyUnauthenticated {
				t.Errorf("a session from %s: %+v, want unauthenticated", a, d)
			}
			e.logged(t, 1, a)

			// Another address is unaffected.
			if d := e.check(t, tok(e.alice, b)); !d.Allowed {
				t.Errorf("alice's token from %s: %+v", b, d)
			}
			if d := e.check(t, tok("hgu_wrong", b)); d.Reason != protocol.ProxyUnauthenticated {
				t.Errorf("a wrong token from %s: %+v, want unauthenticated", b, d)
			}
			// The proxy's own address (the agent's, loopback) was never counted: its calls, and a
			// user's from it, go on.
			mustCall(t, e.Env, e.agent, "GET", protocol.InfoPath, nil, http.StatusOK, nil)
			mustCall(t, e.Env, e.alice, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)
			// The server's own API refuses a too (one limiter): here through a trusted proxy that
			// says the request is a's.
			resp, body := sendReq(t, http.DefaultClient, "GET", e.URL+"/api/v1/users/me",
				http.Header{"Authorization": {"Bearer " + e.alice}, "X-Forwarded-For": {a}}, nil)
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "6" {
				t.Errorf("the API from %s: %d %s, want 429", a, resp.StatusCode, body)
			}

			// SSH passwords count too: 20 wrong ones from c (an IPv6 address), then rate_limited.
			for i := range 20 {
				if d := e.sshCheck(t, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: "hgu_wrong" + string(rune('a'+i)), ClientAddress: c}); d.Reason != protocol.ProxyUnauthenticated {
					t.Fatalf("wrong SSH token %d from %s: %+v", i+1, c, d)
				}
			}
			// Another address of the same /64 is the same client.
			if d := e.sshCheck(t, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: e.alice, ClientAddress: "2001:db8:1:2::99"}); d.Reason != protocol.ProxyRateLimited || d.RetryAfter != 6 {
				t.Errorf("alice's SSH token from c's /64: %+v, want rate_limited", d)
			}
			if d := e.check(t, tok(e.alice, c)); d.Reason != protocol.ProxyRateLimited {
				t.Errorf("alice's bearer token from %s: %+v, want rate_limited", c, d)
			}
			e.logged(t, 2, c)

			// 6 s on, one more attempt each: a good token passes (and uses nothing), a wrong one
			// is refused as such, and uses it.
			e.Clock.Advance(6 * time.Second)
			for range 3 {
				if d := e.check(t, tok(e.alice, a)); !d.Allowed {
					t.Errorf("6 s later, alice's token from %s: %+v", a, d)
				}
			}
			if d := e.check(t, tok("hgu_wrong", a)); d.Reason != protocol.ProxyUnauthenticated {
				t.Errorf("6 s later, a wrong token from %s: %+v, want unauthenticated", a, d)
			}
			if d := e.check(t, tok(e.alice, a)); d.Reason != protocol.ProxyRateLimited {
				t.Errorf("and then: %+v, want rate_limited", d)
			}
			if d := e.sshCheck(t, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: e.alice, ClientAddress: c}); !d.Allowed {
				t.Errorf("6 s later, alice's SSH token from %s: %+v", c, d)
			}
			e.logged(t, 3, a)
		})
	}
}

// A client_address that is not an IP address is refused (400) naming the field.
func TestProxyCheckClientAddressValidated(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testProxyCheckClientAddressValidated(t, engine) })
	}
}

func testProxyCheckClientAddressValidated(t *testing.T, engine string) {
	e := newProxyLimitEnv(t, engine, false)
	for _, bad := range []string{"example.com", "203.0.113.7:80", "10.0.0.0/8", strings.Repeat("1", 100)} {
		for path, body := range map[string]any{
			protocol.ProxyCheckPath:    protocol.ProxyCheckRequest{Host: e.host, Token: "hgu_x", ClientAddress: bad},
			protocol.ProxySSHCheckPath: protocol.ProxySSHCheckRequest{Workspace: "dev", Token: "hgu_x", ClientAddress: bad},
		} {
			status, out := call(t, e.Env, e.agent, "POST", path, body)
			if status != http.StatusBadRequest || !strings.Contains(string(out), "client_address") {
				t.Errorf("%s with client_address %q: %d %s, want 400 naming client_address", path, bad, status, out)
			}
		}
	}
	// An IPv4-mapped IPv6 address is the IPv4 address.
	for i := range 21 {
		d := e.check(t, protocol.ProxyCheckRequest{Host: e.host, Token: "hgu_wrong", ClientAddress: "::ffff:192.0.2.5"})
		if want := map[bool]string{true: protocol.ProxyRateLimited, false: protocol.ProxyUnauthenticated}[i == 20]; d.Reason != want {
			t.Fatalf("try %d: %+v, want %s", i+1, d, want)
		}
	}
	if d := e.check(t, protocol.ProxyCheckRequest{Host: e.host, Token: e.alice, ClientAddress: "192.0.2.5"}); d.Reason != protocol.ProxyRateLimited {
		t.Errorf("the same address unmapped: %+v, want rate_limited", d)
	}
}

// The real proxy handler, asking the real server: 20 wrong bearer tokens from one client, each
// 401; the next request with a token from that client, a good one too, is 429 with the server's
// Retry-After and never reaches the workspace; another client gets in; 6 s on, the good token
// does too.
func TestProxyHandlerRateLimit(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newProxyLimitEnv(t, engine, false)
			var reached atomic.Int32
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1); io.WriteString(w, "hello") }))
			t.Cleanup(upstream.Close)
			client := &proxy.ServerClient{URL: e.URL, Token: e.agent, HTTP: &http.Client{Timeout: 10 * time.Second}}
			h := proxy.NewHandler(proxy.Options{Routes: oneRoute{proxy.Route{Known: true, Addr: upstream.Listener.Addr().String(), WorkspaceID: "ws"}},
				Auth: &proxy.Auth{Checker: client, Clock: e.Clock, DenyTTL: time.Second}, Exchanger: client, ServerURL: e.URL, Zone: "ws.example.com"})
			get := func(token, from string) *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", "http://"+e.host+"/", nil)
				req.RemoteAddr = from
				req.Header.Set("Authorization", "Bearer "+token)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			const a, b = "203.0.113.7:40000", "198.51.100.9:40000"
			if rec := get(e.alice, a); rec.Code != http.StatusOK || rec.Body.String() != "hello" {
				t.Fatalf("alice from a: %d %s", rec.Code, rec.Body)
			}
			for i := range 20 {
				if rec := get("hgu_wrong"+string(rune('a'+i)), a); rec.Code != http.StatusUnauthorized {
					t.Fatalf("wrong token %d: %d %s, want 401", i+1, rec.Code, rec.Body)
				}
			}
			before := reached.Load()
			for _, token := range []string{"hgu_wrongnext", e.alice} {
				rec := get(token, a)
				if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "6" || !strings.Contains(rec.Body.String(), "Too many wrong tokens") {
					t.Errorf("past the limit, %s: %d Retry-After %q %s, want 429 after 6", token, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
				}
			}
			if reached.Load() != before {
				t.Errorf("a limited request reached the workspace")
			}
			// The client's port is no part of who it is.
			if rec := get(e.alice, "203.0.113.7:50000"); rec.Code != http.StatusTooManyRequests {
				t.Errorf("a from another port: %d, want 429", rec.Code)
			}
			if rec := get(e.alice, b); rec.Code != http.StatusOK {
				t.Errorf("alice from b: %d %s", rec.Code, rec.Body)
			}
			e.logged(t, 1, "203.0.113.7")
			e.Clock.Advance(3 * time.Second)
			if rec := get(e.alice, a); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "3" {
				t.Errorf("3 s later: %d Retry-After %q, want 429 after 3", rec.Code, rec.Header().Get("Retry-After"))
			}
			e.Clock.Advance(3 * time.Second)
			if rec := get(e.alice, a); rec.Code != http.StatusOK || rec.Body.String() != "hello" {
				t.Errorf("6 s later, alice from a: %d %s", rec.Code, rec.Body)
			}
		})
	}
}

// The server's own apps zone (Terraform workspaces' apps, served in process, not behind the API's
// limit) counts wrong tokens against the client's address as --trusted-proxies says it.
func TestAppsZoneRateLimit(t *testing.T) {
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.Apps = server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test:7080"}
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
	const host = "8080-tfw--dev.apps.test"
	from := func(token, addr string) http.Header {
		h := bearer(token)
		h.Set("X-Forwarded-For", addr)
		return h
	}
	for i := range 20 {
		if resp, body := appGet(t, env, host, "/", from("hgu_wrong"+string(rune('a'+i)), "203.0.113.7")); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s, want 401", i+1, resp.StatusCode, body)
		}
	}
	resp, body := appGet(t, env, host, "/", from(env.AdminToken, "203.0.113.7"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "6" {
		t.Errorf("past the limit: %d Retry-After %q %s, want 429 after 6", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, body := appGet(t, env, host, "/", from("hgu_wrong", "198.51.100.9")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another client: %d %s, want 401", resp.StatusCode, body)
	}
}

// The proxy's SSH side, asking the real server: 20 wrong tokens given as the password from one
// client address, each refused as not valid; then that client's good token is refused with a
// banner that says to wait, while its registered key and another address's token get in; 6 s on,
// the token does too.
func TestProxySSHRateLimit(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newProxyLimitEnv(t, engine, false)
			client := &proxy.ServerClient{URL: e.URL, Token: e.agent, HTTP: &http.Client{Timeout: 10 * time.Second}}
			// No workspace pod: an authenticated client is told the workspace is not running,
			// which is enough to know that it got through.
			srv, err := proxy.NewSSHServer(proxy.SSHOptions{HostKeys: []ssh.Signer{signer(t)}, Checker: client, Routes: oneSSHRoute{""},
				UpstreamKey: signer(t), RecheckInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(srv.Close)
			// Each client its own loopback address (all of 127.0.0.0/8 is the loopback).
			dial := func(from string, auth ssh.AuthMethod) (string, error) {
				t.Helper()
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
				nc, err := d.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				var banner strings.Builder
				c, chans, reqs, err := ssh.NewClientConn(nc, ln.Addr().String(), &ssh.ClientConfig{User: "dev", Auth: []ssh.AuthMethod{auth},
					HostKeyCallback: ssh.InsecureIgnoreHostKey(), BannerCallback: func(m string) error { banner.WriteString(m); return nil }})
				if err != nil {
					nc.Close()
					return banner.String(), err
				}
				ssh.NewClient(c, chans, reqs).Close()
				return banner.String(), nil
			}
			const a, b = "127.0.0.2", "127.0.0.3"
			if banner, err := dial(a, ssh.Password(e.alice)); err != nil {
				t.Fatalf("alice's token from a: %v %s", err, banner)
			}
			for i := range 20 {
				if banner, err := dial(a, ssh.Password("hgu_wrong"+string(rune('a'+i)))); err == nil || !strings.Contains(banner, "that token is not valid") {
					t.Fatalf("wrong token %d: %v %q, want refused as not valid", i+1, err, banner)
				}
			}
			if banner, err := dial(a, ssh.Password(e.alice)); err == nil || !strings.Contains(banner, "too many wrong tokens were sent from your address lately; try again in 6 s") {
				t.Errorf("alice's token from a past the limit: %v %q, want refused with a wait", err, banner)
			}
			if banner, err := dial(a, ssh.PublicKeys(e.aliceKey)); err != nil {
				t.Errorf("alice's key from a: %v %s", err, banner)
			}
			if banner, err := dial(b, ssh.Password(e.alice)); err != nil {
				t.Errorf("alice's token from b: %v %s", err, banner)
			}
			e.logged(t, 1, a)
			// The proxy asked from 127.0.0.1, never counted.
			mustCall(t, e.Env, e.alice, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)
			e.Clock.Advance(6 * time.Second)
			if banner, err := dial(a, ssh.Password(e.alice)); err != nil {
				t.Errorf("6 s later, alice's token from a: %v %s", err, banner)
			}
		})
	}
}

// An old proxy's check (no client_address) and an old server's answer (no retry_after) read as
// before: the new fields are optional on the wire.
func TestProxyCheckWireCompatible(t *testing.T) {
	var req protocol.ProxyCheckRequest
	if err := json.Unmarshal([]byte(`{"host":"h","token":"t"}`), &req); err != nil || req.ClientAddress != "" {
		t.Fatalf("a version-5 request: %+v %v", req, err)
	}
	b, _ := json.Marshal(protocol.ProxyCheckResponse{Allowed: true, User: "alice"})
	if strings.Contains(string(b), "retry_after") {
		t.Errorf("an allowed answer carries retry_after: %s", b)
	}
	b, _ = json.Marshal(protocol.ProxySSHCheckRequest{Workspace: "dev", Token: "t"})
	if strings.Contains(string(b), "client_address") {
		t.Errorf("a recheck (no address) sends client_address: %s", b)
	}
}
