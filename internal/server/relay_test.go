package server_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestRelayBetweenReplicas: a Terraform workspace's helper is connected to replica B, which gives
// a relay URL; a user who reaches replica A (with its SSH, and in the browser) is relayed to B
// with their own credentials, which B checks. A request already relayed is not relayed again.
func TestRelayBetweenReplicas(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testRelayBetweenReplicas(t, engine) })
	}
}

func testRelayBetweenReplicas(t *testing.T, engine string) {
	apps := server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test"}
	ae := newAgentEnv(t, engine, func(o *server.Options) { o.Apps = apps })
	a := ae.Env

	// Replica B on the same store, at a URL it records for the others.
	hs, bEnv := startReplicaB(t, a, apps)
	defer hs.Close()
	bURL := bEnv.URL

	h := startHelper(t, bURL, ae.job.AgentToken)
	within(t, h.connected, "the helper's connection")
	waitRegistered(t, bEnv, ae.dev, "tfw")

	// SSH through replica A reaches the helper on B.
	c, err := dialWorkspaceSSH(t, a, ae.dev, "tfw", h.hostKey)
	if err != nil {
		t.Fatalf("ssh through replica A: %v", err)
	}
	if got := run(t, c, "cat machine"); got != "the module's machine" {
		t.Fatalf("ssh through replica A: %q", got)
	}
	c.Close()
	// Relaying grants nothing: another user is refused (by A, and would be by B).
	eve := createUser(t, a, "eve")
	if _, err := dialWorkspaceSSH(t, a, eve, "tfw", h.hostKey); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("eve through replica A: %v, want HTTP 404", err)
	}

	// An app in the browser through replica A.
	port := machineApp(t)
	host := strconv.Itoa(port) + "-tfw--dev.apps.test"
	resp, body := appGet(t, a, host, "/relayed", bearer(ae.dev))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "hello from the machine; path /relayed") {
		t.Fatalf("app through replica A: %d %s", resp.StatusCode, body)
	}
	if resp, body = appGet(t, a, host, "/", bearer(eve)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("eve's app through replica A: %d %s", resp.StatusCode, body)
	}
	// Without a credential nothing is relayed: A sends the browser to sign in itself.
	resp, _ = appGet(t, a, host, "/", http.Header{"Accept": {"text/html"}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "http://hangar.test/proxy/authorize?") {
		t.Fatalf("a browser without a session through replica A: %d %q", resp.StatusCode, loc)
	}
	// A request marked as relayed already is not relayed again: A says where the helper is.
	hdr := bearer(ae.dev)
	hdr.Set(server.RelayHeader, "replica-x")
	if resp, body = appGet(t, a, host, "/", hdr); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "another Hangar server replica (replica-b") {
		t.Fatalf("a relayed request relayed again: %d %s", resp.StatusCode, body)
	}
}

// TestRelayToADeadReplica: the replica holding the helper cannot be reached; the owner's browser
// gets a page that names no replica nor address (the log has them), and nobody else learns that
// the workspace exists.
func TestRelayToADeadReplica(t *testing.T) {
	apps := server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test"}
	ae := newAgentEnv(t, "sqlite", func(o *server.Options) { o.Apps = apps })
	a := ae.Env
	hs, bEnv := startReplicaB(t, a, apps)
	bURL := bEnv.URL
	h := startHelper(t, bURL, ae.job.AgentToken)
	within(t, h.connected, "the helper's connection")
	waitRegistered(t, bEnv, ae.dev, "tfw")
	hs.CloseClientConnections()
	hs.Close() // replica B is gone; its record stays until the helper connects elsewhere

	host := "8080-tfw--dev.apps.test"
	resp, body := appGet(t, a, host, "/", bearer(ae.dev))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot be reached right now") || strings.Contains(body, "replica-b") || strings.Contains(body, strings.TrimPrefix(bURL, "http://")) {
		t.Fatalf("the owner through replica A to a dead B: %d %s", resp.StatusCode, body)
	}
	eve := createUser(t, a, "eve")
	if resp, body = appGet(t, a, host, "/", bearer(eve)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("eve through replica A to a dead B: %d %s", resp.StatusCode, body)
	}
}

// startReplicaB starts replica B of a's store, serving apps as apps says, at a URL it records as
// its relay URL; it returns its server and an Env that reaches it.
func startReplicaB(t *testing.T, a *servertest.Env, apps server.AppsOptions) (*httptest.Server, *servertest.Env) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	b := server.New(server.Options{Store: a.Store, Clock: a.Clock, Logger: slog.New(slog.DiscardHandler), ReplicaID: "replica-b", RelayURL: url, Apps: apps})
	hs := httptest.NewUnstartedServer(b.Handler())
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	env := *a
	env.URL = url
	return hs, &env
}

// TestRelayKeepsHTTPSBehindAProxy: replicas behind a proxy that ends TLS (X-Forwarded-Proto:
// https) give browsers __Host- session cookies; an SSH WebSocket opened with one through replica A
// is relayed to replica B, which must still read the request as https (the cookie's name depends
// on it), or the browser's session is not found there (401).
func TestRelayKeepsHTTPSBehindAProxy(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			ae := newAgentEnv(t, engine)
			a := ae.Env
			hs, bEnv := startReplicaB(t, a, server.AppsOptions{})
			defer hs.Close()
			h := startHelper(t, bEnv.URL, ae.job.AgentToken)
			within(t, h.connected, "the helper's connection")
			waitRegistered(t, bEnv, ae.dev, "tfw")

			req, _ := http.NewRequest("POST", a.URL+"/signin", strings.NewReader(url.Values{"token": {ae.dev}, "return_to": {"/signin"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-Proto", "https")
			resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ck := sessionCookie(resp)
			if resp.StatusCode != http.StatusSeeOther || ck == nil || ck.Name != "__Host-"+server.SessionCookie {
				t.Fatalf("sign-in over https: %d, cookie %v", resp.StatusCode, ck)
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			c, resp, err := websocket.Dial(ctx, a.URL+"/api/v1/workspaces/tfw/ssh", &websocket.DialOptions{
				HTTPHeader:   http.Header{"Cookie": {ck.Name + "=" + ck.Value}, "X-Forwarded-Proto": {"https"}},
				Subprotocols: []string{protocol.WorkspaceSSHSubprotocol}})
			if err != nil {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Fatalf("ssh through replica A with the browser's __Host- cookie: HTTP %d, %v", status, err)
			}
			nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
			sc, chans, reqs, err := ssh.NewClientConn(nc, "workspace", &ssh.ClientConfig{User: "dev", HostKeyCallback: ssh.FixedHostKey(h.hostKey), Timeout: deadline})
			if err != nil {
				nc.Close()
				t.Fatal(err)
			}
			cl := ssh.NewClient(sc, chans, reqs)
			defer cl.Close()
			if got := run(t, cl, "cat machine"); got != "the module's machine" {
				t.Fatalf("ssh through replica A: %q", got)
			}
		})
	}
}
