package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// machineApp is an app on the "machine" of a Terraform workspace (this host, where the helper
// runs): a page, and a WebSocket echo at /echo.
func machineApp(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
					return
				}
			}
		}
		if r.URL.Path == "/big" {
			n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			block := make([]byte, 64<<10)
			for n > 0 {
				k := min(n, len(block))
				if _, err := w.Write(block[:k]); err != nil {
					return
				}
				n -= k
			}
			return
		}
		fmt.Fprintf(w, "hello from the machine; path %s; cookies %q; authorization %q", r.URL.Path, r.Header.Get("Cookie"), r.Header.Get("Authorization"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// appGet sends a request to the server for the apps host.
func appGet(t testing.TB, env *servertest.Env, host, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// TestTerraformApps: the server serves a Terraform workspace's ports on the apps zone's hosts,
// through the helper's connection, to the owner only.
func TestTerraformApps(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testTerraformApps(t, engine) })
	}
}

func testTerraformApps(t *testing.T, engine string) {
	ae := newAgentEnv(t, engine, func(o *server.Options) {
		o.Apps = server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test:7080"}
	})
	env := ae.Env
	port := machineApp(t)
	host := strconv.Itoa(port) + "-tfw--dev.apps.test"

	// The workspace shows where its apps are.
	var ws sdk.Workspace
	mustCall(t, env, ae.dev, "GET", "/api/v1/workspaces/tfw", nil, http.StatusOK, &ws)
	if ws.AppsURL != "http://{port}-tfw--dev.apps.test/" {
		t.Fatalf("apps_url %q", ws.AppsURL)
	}

	// Before the helper connects: the page says so.
	resp, body := appGet(t, env, host, "/", bearer(ae.dev))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "not running") {
		t.Fatalf("before the helper connects: %d %s", resp.StatusCode, body)
	}

	h := startHelper(t, env.URL, ae.job.AgentToken)
	within(t, h.connected, "the helper's connection")
	waitRegistered(t, env, ae.dev, "tfw")

	// The owner, with a token: the machine's page, without the token.
	resp, body = appGet(t, env, host, "/some/page", bearer(ae.dev))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "hello from the machine; path /some/page") || !strings.Contains(body, `authorization ""`) {
		t.Fatalf("owner: %d %s", resp.StatusCode, body)
	}
	// The API's paths on an apps host are the app's, never the server's.
	if _, body = appGet(t, env, host, "/api/v1/users/me", bearer(ae.dev)); !strings.Contains(body, "hello from the machine; path /api/v1/users/me") {
		t.Fatalf("the API on an apps host: %s", body)
	}
	// Any port: another app on the same machine.
	port2 := machineApp(t)
	if resp, body = appGet(t, env, strconv.Itoa(port2)+"-tfw--dev.apps.test", "/", bearer(ae.dev)); resp.StatusCode != http.StatusOK {
		t.Fatalf("another port: %d %s", resp.StatusCode, body)
	}
	// A port nothing listens on: the workspace does not answer there.
	if resp, body = appGet(t, env, "1-tfw--dev.apps.test", "/", bearer(ae.dev)); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "did not answer") {
		t.Fatalf("a closed port: %d %s", resp.StatusCode, body)
	}

	// A WebSocket, with the token.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	wsc, _, err := websocket.Dial(ctx, env.URL+"/echo", &websocket.DialOptions{Host: host, HTTPHeader: bearer(ae.dev)})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	if err := wsc.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := wsc.Read(ctx); err != nil || string(msg) != "echo: ping" {
		t.Fatalf("websocket echo: %q %v", msg, err)
	}
	wsc.Close(websocket.StatusNormalClosure, "")

	// A browser without a session goes to the server's sign-in, with a nonce cookie.
	resp, _ = appGet(t, env, host, "/page?x=1", http.Header{"Accept": {"text/html"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "http://hangar.test:7080/proxy/authorize?") || !strings.Contains(loc, "host="+host) {
		t.Fatalf("a browser without a session: %d, Location %q", resp.StatusCode, loc)
	}
	if c := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(c, "hangar_ws_nonce=") {
		t.Fatalf("no nonce cookie: %q", c)
	}
	// A sign-in link with a code the server never issued: refused as a link, not as a failure.
	resp, body = appGet(t, env, host, "/.hangar/callback?code=bogus&path=/", http.Header{"Cookie": {"hangar_ws_nonce=" + strings.Repeat("n", 20)}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Sign-in link expired") {
		t.Fatalf("a bogus code: %d %s", resp.StatusCode, body)
	}
	// The zone itself and names under it that are no workspace's are never the server's API.
	for _, h := range []string{"apps.test", "www.apps.test", "a." + host} {
		if resp, body = appGet(t, env, h, "/api/v1/users/me", bearer(ae.dev)); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "No such workspace") {
			t.Fatalf("%s/api/v1/users/me: %d %s", h, resp.StatusCode, body)
		}
	}
	// An API client without a token: 401.
	if resp, _ = appGet(t, env, host, "/", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d", resp.StatusCode)
	}
	// Another user: no such workspace.
	eve := createUser(t, env, "eve")
	if resp, body = appGet(t, env, host, "/", bearer(eve)); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "hello") {
		t.Fatalf("eve: %d %s", resp.StatusCode, body)
	}
	// An admin may.
	if resp, body = appGet(t, env, host, "/", bearer(env.AdminToken)); resp.StatusCode != http.StatusOK {
		t.Fatalf("admin: %d %s", resp.StatusCode, body)
	}
	// The sign-in accepts the apps host as a workspace's, and its page lets the form lead there.
	self := strings.TrimPrefix(env.URL, "http://")
	resp, _ = appGet(t, env, self, "/proxy/authorize?host="+host+"&path=/&nonce="+strings.Repeat("a", 64), nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/signin?return_to=") {
		t.Fatalf("authorize for an apps host: %d, Location %q", resp.StatusCode, loc)
	}
	resp, body = appGet(t, env, self, resp.Header.Get("Location"), nil)
	if csp := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != http.StatusOK || !strings.Contains(csp, "http://"+host) {
		t.Fatalf("the sign-in page for an apps host: %d, CSP %q\n%s", resp.StatusCode, csp, body)
	}

	// Activity is recorded.
	mustCall(t, env, ae.dev, "GET", "/api/v1/workspaces/tfw", nil, http.StatusOK, &ws)
	deadlineAt := time.Now().Add(deadline)
	for ws.LastActivityAt == nil && time.Now().Before(deadlineAt) {
		mustCall(t, env, ae.dev, "GET", "/api/v1/workspaces/tfw", nil, http.StatusOK, &ws)
	}
	if ws.LastActivityAt == nil {
		t.Fatal("no activity recorded")
	}

	// The owner's token is rotated: refused once the decision cached for it expires.
	var rotated sdk.User
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/dev/token", nil, http.StatusOK, &rotated)
	env.Clock.Advance(server.AppsAuthCacheTTL + time.Second)
	if resp, _ = appGet(t, env, host, "/", bearer(ae.dev)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the rotated-out token: %d", resp.StatusCode)
	}
	if resp, body = appGet(t, env, host, "/", bearer(rotated.Token)); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new token: %d %s", resp.StatusCode, body)
	}
}
