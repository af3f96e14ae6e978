package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/helpertest"
)

type oneRoute struct{ route proxy.Route }

func (o oneRoute) Lookup(string) proxy.Route { return o.route }

type oneSSHRoute struct{ addr string }

func (o oneSSHRoute) SSHAddr(string) string { return o.addr }

func signer(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Revoking a token, or suspending a user, ends access through the real proxy handler from the next
// request on (the default: allowed decisions are not cached), and through a caching handler as
// soon as the server's revocation push empties its cache; an open SSH connection through the
// proxy's SSH side is closed by the push, long before its recheck interval (an hour here).
func TestRevocationEndsAccessAtOnce(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1 := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			alice := createUser(t, env, "alice")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
			const host = "8080-dev--alice.ws.example.com"
			newToken := func(name string) string {
				var tk sdk.Token
				mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: name}, http.StatusCreated, &tk)
				return tk.Token
			}

			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
			t.Cleanup(upstream.Close)
			client := &proxy.ServerClient{URL: env.URL, Token: k1, HTTP: &http.Client{Timeout: 10 * time.Second}}
			route := oneRoute{proxy.Route{Known: true, Addr: upstream.Listener.Addr().String(), WorkspaceID: "ws"}}
			newHandler := func(auth *proxy.Auth) http.Handler {
				return proxy.NewHandler(proxy.Options{Routes: route, Auth: auth, Exchanger: client, ServerURL: env.URL, Zone: "ws.example.com"})
			}
			noCache := newHandler(&proxy.Auth{Checker: client, Clock: clock.Real{}, DenyTTL: time.Second})
			cachingAuth := &proxy.Auth{Checker: client, Clock: clock.Real{}, AllowTTL: time.Hour, DenyTTL: time.Second}
			caching := newHandler(cachingAuth)
			get := func(h http.Handler, token string) int {
				req := httptest.NewRequest("GET", "http://"+host+"/", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec.Code
			}

			// The proxy's SSH side in front of a real workspace helper.
			upstreamKey := signer(t)
			helperAddr := helpertest.Start(t, upstreamKey.PublicKey())
			sshSrv, err := proxy.NewSSHServer(proxy.SSHOptions{HostKeys: []ssh.Signer{signer(t)}, Checker: client, Routes: oneSSHRoute{helperAddr},
				UpstreamKey: upstreamKey, RecheckInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			pln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = sshSrv.Serve(pln) }()
			t.Cleanup(sshSrv.Close)

			revoked := make(chan struct{}, 16)
			watcher := &proxy.RevocationWatcher{Client: &proxy.ServerClient{URL: env.URL, Token: k1, HTTP: &http.Client{Timeout: time.Minute}},
				PollSeconds: 60, OnRevoke: func() {
					cachingAuth.Flush()
					sshSrv.RecheckNow()
					revoked <- struct{}{}
				}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); watcher.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			waitRevoked := func(what string) {
				t.Helper()
				select {
				case <-revoked:
				case <-time.After(10 * time.Second):
					t.Fatalf("no revocation pushed to the proxy after %s", what)
				}
			}
			waitRevoked("the watch began") // its first answer rechecks whatever is open
			openSSH := func(token string) *ssh.Client {
				t.Helper()
				c, err := ssh.Dial("tcp", pln.Addr().String(), &ssh.ClientConfig{User: "dev", Auth: []ssh.AuthMethod{ssh.Password(token)},
					HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
				if err != nil {
					t.Fatalf("ssh with a live token: %v", err)
				}
				s, err := c.NewSession()
				if err != nil {
					t.Fatal(err)
				}
				if out, err := s.Output("echo in"); err != nil || string(out) != "in\n" {
					t.Fatalf("ssh command with token %.8s: %q %v", token, out, err)
				}
				return c
			}
			// closedSoon waits for the connection to end, and logs how long after since (the
			// revoking request's start) it did.
			closedSoon := func(c *ssh.Client, what string, since time.Time) {
				t.Helper()
				ended := make(chan struct{})
				go func() { _ = c.Wait(); close(ended) }()
				select {
				case <-ended:
					t.Logf("the open SSH connection ended %s after the request of %s began", time.Since(since).Round(time.Millisecond), what)
				case <-time.After(10 * time.Second):
					t.Fatalf("the open SSH connection outlived %s", what)
				}
			}

			// A token revoked: refused at once without a cache, after the push with one; its open
			// SSH connection closed.
			ci := newToken("ci")
			if get(noCache, ci) != http.StatusOK || get(caching, ci) != http.StatusOK {
				t.Fatal("a live token is refused")
			}
			conn := openSSH(ci)
			began := time.Now()
			mustCall(t, env, alice, "DELETE", "/api/v1/tokens/ci", nil, http.StatusOK, nil)
			if code := get(noCache, ci); code != http.StatusUnauthorized {
				t.Errorf("the request right after the revocation: %d, want 401", code)
			}
			waitRevoked("a token revoked")
			if code := get(caching, ci); code != http.StatusUnauthorized {
				t.Errorf("the caching proxy after the push: %d, want 401", code)
			}
			closedSoon(conn, "its token's revocation", began)

			// A user suspended: the same for every token of theirs.
			laptop := newToken("laptop")
			if get(noCache, laptop) != http.StatusOK || get(caching, laptop) != http.StatusOK {
				t.Fatal("a live token is refused")
			}
			conn = openSSH(laptop)
			began = time.Now()
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/alice", sdk.UpdateUserRequest{Suspended: ptr(true)}, http.StatusOK, nil)
			if code := get(noCache, laptop); code != http.StatusUnauthorized {
				t.Errorf("the request right after the suspension: %d, want 401", code)
			}
			waitRevoked("a user suspended")
			if code := get(caching, laptop); code != http.StatusUnauthorized {
				t.Errorf("the caching proxy after the suspension's push: %d, want 401", code)
			}
			closedSoon(conn, "its user's suspension", began)
			if _, err := ssh.Dial("tcp", pln.Addr().String(), &ssh.ClientConfig{User: "dev", Auth: []ssh.AuthMethod{ssh.Password(laptop)},
				HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}); err == nil {
				t.Error("a suspended user opened an SSH connection")
			}
		})
	}
}

// lockedBuffer is a log destination read while the watcher writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A proxy that starts watching revocations does not log that access was revoked (a new user saw
// "access was revoked on the server" at every start, when nothing was), even on a server where
// revocations happened before; a revocation after the start is logged.
func TestRevocationWatchStartsWithoutClaimingARevocation(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1 := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			alice := createUser(t, env, "alice")
			for _, name := range []string{"old", "ci"} {
				mustCall(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: name}, http.StatusCreated, nil)
			}
			mustCall(t, env, alice, "DELETE", "/api/v1/tokens/old", nil, http.StatusOK, nil) // before the proxy starts

			var logs lockedBuffer
			calls := make(chan struct{}, 16)
			watcher := &proxy.RevocationWatcher{Client: &proxy.ServerClient{URL: env.URL, Token: k1, HTTP: &http.Client{Timeout: time.Minute}},
				PollSeconds: 60, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
				OnRevoke: func() { calls <- struct{}{} }}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); watcher.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			wait := func(what string) {
				t.Helper()
				select {
				case <-calls:
				case <-time.After(10 * time.Second):
					t.Fatalf("no call of OnRevoke after %s", what)
				}
			}
			wait("the watch began") // the first answer rechecks whatever is open
			if strings.Contains(logs.String(), "revoked") {
				t.Errorf("the proxy's log at the start of the watch says a revocation happened:\n%s", logs.String())
			}
			mustCall(t, env, alice, "DELETE", "/api/v1/tokens/ci", nil, http.StatusOK, nil)
			wait("a token revoked")
			if !strings.Contains(logs.String(), "access was revoked on the server") {
				t.Errorf("a revocation after the start is not logged:\n%s", logs.String())
			}
		})
	}
}
