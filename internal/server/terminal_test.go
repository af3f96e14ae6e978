package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/helpertest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// termConn is a test's browser terminal: what the shell printed, and the server's last event.
type termConn struct {
	c       *websocket.Conn
	mu      sync.Mutex
	out     bytes.Buffer
	changed chan struct{} // a value after each output or event
	event   *protocol.TerminalEvent
	closed  error // how the socket ended
}

func terminalURL(env *servertest.Env, name, query string) string {
	u := env.URL + fmt.Sprintf(protocol.TerminalPath, strings.ReplaceAll(name, "/", "%2F"))
	if query != "" {
		u += "?" + query
	}
	return u
}

// dialTerminal opens the terminal with header (the credential, an Origin); a refused upgrade is
// its status.
func dialTerminal(t *testing.T, env *servertest.Env, header http.Header, name, query string) (*termConn, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, terminalURL(env, name, query), &websocket.DialOptions{HTTPHeader: header, Subprotocols: []string{protocol.TerminalSubprotocol}})
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode
		}
		t.Fatalf("dial the terminal: %v", err)
	}
	tc := &termConn{c: c, changed: make(chan struct{}, 1)}
	t.Cleanup(func() { c.CloseNow() })
	go func() {
		for {
			typ, b, err := c.Read(context.Background())
			tc.mu.Lock()
			switch {
			case err != nil:
				tc.closed = err
			case typ == websocket.MessageBinary:
				tc.out.Write(b)
			default:
				var ev protocol.TerminalEvent
				if jerr := json.Unmarshal(b, &ev); jerr != nil {
					tc.closed = fmt.Errorf("the server sent a text frame that is no event: %q", b)
				}
				tc.event = &ev
			}
			tc.mu.Unlock()
			select {
			case tc.changed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return tc, http.StatusSwitchingProtocols
}

func (tc *termConn) send(t *testing.T, s string) {
	t.Helper()
	if err := tc.c.Write(context.Background(), websocket.MessageBinary, []byte(s)); err != nil {
		t.Fatalf("type %q: %v", s, err)
	}
}

func (tc *termConn) control(t *testing.T, s string) {
	t.Helper()
	if err := tc.c.Write(context.Background(), websocket.MessageText, []byte(s)); err != nil {
		t.Fatalf("send %s: %v", s, err)
	}
}

// waitFor waits until cond holds of the output, the event and the socket's end.
func (tc *termConn) waitFor(t *testing.T, what string, cond func(out string, ev *protocol.TerminalEvent, closed error) bool) {
	t.Helper()
	end := time.After(deadline)
	for {
		tc.mu.Lock()
		out, ev, closed := tc.out.String(), tc.event, tc.closed
		tc.mu.Unlock()
		if cond(out, ev, closed) {
			return
		}
		select {
		case <-tc.changed:
		case <-end:
			t.Fatalf("timed out waiting for %s; the terminal shows %q, event %+v, socket %v", what, out, ev, closed)
		}
	}
}

func (tc *termConn) waitOutput(t *testing.T, s string) {
	t.Helper()
	tc.waitFor(t, "the terminal to show "+s, func(out string, _ *protocol.TerminalEvent, _ error) bool { return strings.Contains(out, s) })
}

func (tc *termConn) waitEvent(t *testing.T) protocol.TerminalEvent {
	t.Helper()
	var got protocol.TerminalEvent
	tc.waitFor(t, "the server's last event", func(_ string, ev *protocol.TerminalEvent, closed error) bool {
		if ev != nil && closed != nil {
			got = *ev
			return true
		}
		return false
	})
	return got
}

func (tc *termConn) waitClosed(t *testing.T) websocket.StatusCode {
	t.Helper()
	var code websocket.StatusCode
	tc.waitFor(t, "the socket to close", func(_ string, _ *protocol.TerminalEvent, closed error) bool {
		code = websocket.CloseStatus(closed)
		return closed != nil
	})
	return code
}

// useShell runs what a user would in the terminal: a command, and a resize seen by stty.
func useShell(t *testing.T, tc *termConn) {
	t.Helper()
	tc.send(t, "echo answer=$((6*7))\r")
	tc.waitOutput(t, "answer=42")
	tc.control(t, `{"type":"resize","cols":132,"rows":50}`)
	tc.send(t, "stty size\r")
	tc.waitOutput(t, "50 132")
}

func bearerHeader(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// cookieHeader is a browser's: its session cookie, from origin.
func cookieHeader(ck *http.Cookie, origin, site string) http.Header {
	h := http.Header{"Cookie": {ck.Name + "=" + ck.Value}}
	if origin != "" {
		h.Set("Origin", origin)
	}
	if site != "" {
		h.Set("Sec-Fetch-Site", site)
	}
	return h
}

func newUserToken(t *testing.T, env *servertest.Env, owner, name string) sdk.Token {
	var tk sdk.Token
	mustCall(t, env, owner, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: name}, http.StatusCreated, &tk)
	return tk
}

// terminalRefusals: what must not open a terminal, on any backend.
func terminalRefusals(t *testing.T, env *servertest.Env, owner, name string) {
	t.Helper()
	tk := newUserToken(t, env, owner, "refusals")
	ck := tokenSignIn(t, env, tk.Token)
	other := createUser(t, env, "eve")
	for _, tc := range []struct {
		what   string
		header http.Header
		query  string
		want   int
	}{
		{"a cross-site page with the user's cookie", cookieHeader(ck, "https://evil.example", "cross-site"), "", http.StatusForbidden},
		{"a cross-site page in a browser without Sec-Fetch-Site", cookieHeader(ck, "https://evil.example", ""), "", http.StatusForbidden},
		{"a workspace's app on a sibling host (same site)", cookieHeader(ck, strings.Replace(env.URL, "127.0.0.1", "8080-dev--alice.127.0.0.1", 1), "same-site"), "", http.StatusForbidden},
		{"the cookie without an Origin", cookieHeader(ck, "", ""), "", http.StatusForbidden},
		{"this server's origin over https while it is http", cookieHeader(ck, strings.Replace(env.URL, "http://", "https://", 1), ""), "", http.StatusForbidden},
		{"no credential", http.Header{"Origin": {env.URL}}, "", http.StatusUnauthorized},
		{"another user's token", bearerHeader(other), "", http.StatusNotFound},
		{"a width out of range", bearerHeader(owner), "cols=0&rows=24", http.StatusBadRequest},
		{"a height out of range", bearerHeader(owner), "cols=80&rows=1001", http.StatusBadRequest},
	} {
		if tcn, status := dialTerminal(t, env, tc.header, name, tc.query); status != tc.want {
			if tcn != nil {
				tcn.c.CloseNow()
			}
			t.Errorf("%s: %d, want %d", tc.what, status, tc.want)
		}
	}
	// Not a WebSocket: told so.
	if status, body := call(t, env, owner, "GET", fmt.Sprintf(protocol.TerminalPath, name), nil); status != http.StatusBadRequest || !strings.Contains(string(body), "takes a WebSocket") {
		t.Errorf("a plain GET: %d %s", status, body)
	}
}

// terminalSession: a signed-in browser's terminal (cookie, this server's Origin) runs commands,
// is resized, and is cut, with the reason, once the token it signed in with is revoked.
func terminalSession(t *testing.T, env *servertest.Env, owner, name string) {
	t.Helper()
	tk := newUserToken(t, env, owner, "browser")
	ck := tokenSignIn(t, env, tk.Token)
	tc, status := dialTerminal(t, env, cookieHeader(ck, env.URL, "same-origin"), name, "cols=100&rows=30")
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("the signed-in page's terminal: %d", status)
	}
	tc.send(t, "stty size\r")
	tc.waitOutput(t, "30 100")
	useShell(t, tc)
	mustCall(t, env, owner, "DELETE", "/api/v1/tokens/"+tk.ID, nil, http.StatusOK, nil)
	ev := tc.waitEvent(t)
	if ev.Type != protocol.TerminalEnded || !strings.Contains(ev.Message, "Your access to this workspace ended") || !strings.Contains(ev.Message, "session has ended") {
		t.Errorf("after the revocation the terminal's last event is %+v", ev)
	}
	// A new terminal with that cookie is refused.
	if tcn, status := dialTerminal(t, env, cookieHeader(ck, env.URL, "same-origin"), name, ""); status != http.StatusUnauthorized {
		if tcn != nil {
			tcn.c.CloseNow()
		}
		t.Errorf("a terminal with the revoked session's cookie: %d, want 401", status)
	}
}

// terminalFrames: a shell's exit is told with its status; a bad control frame and a frame over
// the bound end the connection.
func terminalFrames(t *testing.T, env *servertest.Env, owner, name string) {
	t.Helper()
	tc, _ := dialTerminal(t, env, bearerHeader(owner), name, "")
	tc.send(t, "exit 3\r")
	if ev := tc.waitEvent(t); ev.Type != protocol.TerminalExit || ev.Code != 3 {
		t.Errorf("after exit 3 the event is %+v", ev)
	}
	tc, _ = dialTerminal(t, env, bearerHeader(owner), name, "")
	tc.control(t, `{"type":"resize","cols":0,"rows":24}`)
	if code := tc.waitClosed(t); code != websocket.StatusInvalidFramePayloadData {
		t.Errorf("a resize to 0 columns closed the socket with %d, want %d", code, websocket.StatusInvalidFramePayloadData)
	}
	tc, _ = dialTerminal(t, env, bearerHeader(owner), name, "")
	_ = tc.c.Write(context.Background(), websocket.MessageBinary, bytes.Repeat([]byte("x"), protocol.MaxTerminalDataBytes+1))
	if code := tc.waitClosed(t); code != websocket.StatusMessageTooBig {
		t.Errorf("a frame over the bound closed the socket with %d, want %d", code, websocket.StatusMessageTooBig)
	}
}

// TestWorkspaceTerminalTerraform: the terminal of a Terraform workspace goes through its helper's
// connection to the server. Before the helper connects the page is told it cannot be reached;
// then a command runs, a resize reaches the PTY, the exit status is told, and revoking the token
// the browser signed in with cuts the terminal with the reason. Cross-origin upgrades with the
// cookie are refused.
func TestWorkspaceTerminalTerraform(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			ae := newAgentEnv(t, engine)
			env := ae.Env
			tc, status := dialTerminal(t, env, bearerHeader(ae.dev), "tfw", "")
			if status != http.StatusSwitchingProtocols {
				t.Fatalf("the terminal before the helper connects: %d", status)
			}
			if ev := tc.waitEvent(t); ev.Type != protocol.TerminalUnavailable || !strings.Contains(ev.Message, "helper is not connected") {
				t.Errorf("before the helper connects the terminal says %+v", ev)
			}
			h := startHelper(t, env.URL, ae.job.AgentToken)
			within(t, h.connected, "the helper's connection")
			waitRegistered(t, env, ae.dev, "tfw")

			terminalRefusals(t, env, ae.dev, "tfw")
			tc, _ = dialTerminal(t, env, bearerHeader(ae.dev), "tfw", "")
			useShell(t, tc)
			tc.c.Close(websocket.StatusNormalClosure, "")
			terminalFrames(t, env, ae.dev, "tfw")
			terminalSession(t, env, ae.dev, "tfw")
			// The admin may open the owner's.
			tc, _ = dialTerminal(t, env, bearerHeader(env.AdminToken), "dev/tfw", "")
			tc.send(t, "echo answer=$((6*7))\r")
			tc.waitOutput(t, "answer=42")
		})
	}
}

// TestWorkspaceTerminalKubernetes: the terminal of a Kubernetes workspace goes through the access
// proxy's SSH with the browser's own session: the proxy asks ssh-check (which takes the server
// session) and relays to the workspace's helper. Revoking the token the browser signed in with
// cuts it. An agent without the proxy's host key, or a stopped workspace, is told on the terminal.
func TestWorkspaceTerminalKubernetes(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1 := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			alice := createUser(t, env, "alice")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)

			// The workspace's helper, as in its pod, trusting the proxy's upstream key.
			upstreamKey := signer(t)
			helperAddr := helpertest.Start(t, upstreamKey.PublicKey())
			// The proxy's SSH side, asking this server.
			client := &proxy.ServerClient{URL: env.URL, Token: k1, HTTP: &http.Client{Timeout: 10 * time.Second}}
			hostKey := signer(t)
			sshSrv, err := proxy.NewSSHServer(proxy.SSHOptions{HostKeys: []ssh.Signer{hostKey}, Checker: client, Routes: oneSSHRoute{helperAddr},
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

			// Not running yet: told on the terminal.
			tc, _ := dialTerminal(t, env, bearerHeader(alice), "dev", "")
			if ev := tc.waitEvent(t); ev.Type != protocol.TerminalUnavailable || !strings.Contains(ev.Message, "start it to open a terminal") {
				t.Errorf("a workspace that is not running: %+v", ev)
			}
			setRunning(t, env, "dev")
			// The agent config has no proxy host key: the server will not connect to an unchecked proxy.
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{"proxy_ssh_address": pln.Addr().String()}}, http.StatusOK, nil)
			tc, _ = dialTerminal(t, env, bearerHeader(alice), "dev", "")
			if ev := tc.waitEvent(t); ev.Type != protocol.TerminalUnavailable || !strings.Contains(ev.Message, "has no proxy_ssh_host_key") {
				t.Errorf("an agent without the proxy's host key: %+v", ev)
			}
			// A wrong host key: refused.
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{"proxy_ssh_host_key": string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(signer(t).PublicKey())))}}, http.StatusOK, nil)
			tc, _ = dialTerminal(t, env, bearerHeader(alice), "dev", "")
			if ev := tc.waitEvent(t); ev.Type != protocol.TerminalUnavailable || !strings.Contains(ev.Message, "host key mismatch") {
				t.Errorf("a proxy showing another host key: %+v", ev)
			}
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{"proxy_ssh_host_key": string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(hostKey.PublicKey())))}}, http.StatusOK, nil)

			terminalRefusals(t, env, alice, "dev")
			tc, _ = dialTerminal(t, env, bearerHeader(alice), "dev", "")
			useShell(t, tc)
			tc.c.Close(websocket.StatusNormalClosure, "")
			terminalFrames(t, env, alice, "dev")
			terminalSession(t, env, alice, "dev")
			sshCheckTakesSessions(t, env, k1, alice)
		})
	}
}

// sshCheckTakesSessions: ssh-check takes a browser's server session as the password (the server's
// own login for the page's terminal) by the browser's rule: allowed while the session is, refused
// once the token it began with is revoked; a made-up one is refused.
func sshCheckTakesSessions(t *testing.T, env *servertest.Env, agent, owner string) {
	t.Helper()
	tk := newUserToken(t, env, owner, "ssh-check")
	ck := tokenSignIn(t, env, tk.Token)
	check := func(password string) protocol.ProxySSHCheckResponse {
		t.Helper()
		var d protocol.ProxySSHCheckResponse
		mustCall(t, env, agent, "POST", protocol.ProxySSHCheckPath, protocol.ProxySSHCheckRequest{Workspace: "dev", Token: password, ClientAddress: "127.0.0.1"}, http.StatusOK, &d)
		return d
	}
	if d := check(ck.Value); !d.Allowed || d.User != "alice" || d.Workspace != "alice/dev" {
		t.Errorf("ssh-check with the session: %+v, want alice allowed into alice/dev", d)
	}
	if d := check("hgs_madeup"); d.Allowed || d.Reason != protocol.ProxyUnauthenticated {
		t.Errorf("ssh-check with a made-up session: %+v", d)
	}
	mustCall(t, env, owner, "DELETE", "/api/v1/tokens/"+tk.ID, nil, http.StatusOK, nil)
	if d := check(ck.Value); d.Allowed || d.Reason != protocol.ProxyUnauthenticated {
		t.Errorf("ssh-check with the session of a revoked token: %+v, want refused", d)
	}
}

func setRunning(t *testing.T, env *servertest.Env, name string) {
	t.Helper()
	w := stored(t, env, name)
	w.ActualState = workspace.Running
	if err := env.Store.UpdateWorkspacesBatch(context.Background(), []workspace.Workspace{w}); err != nil {
		t.Fatal(err)
	}
}
