package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/wshelper"
)

// rechecks is the injected timer of the server's rechecks of open connections: fire wakes every
// loop waiting on it.
type rechecks struct {
	mu  sync.Mutex
	cur chan time.Time
}

func (r *rechecks) after(time.Duration) <-chan time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

func (r *rechecks) fire() {
	r.mu.Lock()
	old := r.cur
	r.cur = make(chan time.Time)
	r.mu.Unlock()
	close(old)
}

// fireUntil fires the rechecks until ch yields (a loop that was between two waits when one fire
// came is caught by the next), and returns what it yielded.
func fireUntil[T any](t *testing.T, r *rechecks, ch <-chan T, what string) T {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		r.fire()
		select {
		case v := <-ch:
			return v
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("timed out waiting for %s", what)
	var zero T
	return zero
}

// waitRegistered waits until the server has the workspace's helper: a plain GET of its ssh
// endpoint is then a 400 (not a WebSocket) instead of the 409 (not connected). The helper hears
// it is connected a moment before the server has registered it.
func waitRegistered(t testing.TB, env *servertest.Env, token, name string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		status, body := call(t, env, token, "GET", "/api/v1/workspaces/"+name+"/ssh", nil)
		if status == http.StatusBadRequest {
			return
		}
		if status != http.StatusConflict || time.Now().After(end) {
			t.Fatalf("waiting for the helper to be registered: %d %s", status, body)
		}
	}
}

// agentEnv is a Terraform server whose builder mints helper tokens, with a user dev owning the
// workspace tfw whose first build a worker claimed.
type agentEnv struct {
	*tfEnv
	rechecks *rechecks
	dev      string
	job      *protocol.ProvisionerJob
	worker   worker
}

func newAgentEnv(t testing.TB, engine string, more ...servertest.Option) *agentEnv {
	ae := &agentEnv{rechecks: &rechecks{cur: make(chan time.Time)}}
	var url string
	mint := func(o *server.Options) {
		o.Builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger, HelperURL: func() string { return url }})
		o.RecheckAfter = ae.rechecks.after
	}
	ae.tfEnv = newTFEnv(t, engine, append([]servertest.Option{mint}, more...)...)
	url = ae.URL
	ae.dev = createUser(t, ae.Env, "dev")
	mustCall(t, ae.Env, ae.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "tfw", "template": "tf"}, http.StatusCreated, nil)
	ae.worker = worker{t: t, env: ae.Env, token: ae.Prov, id: "w1"}
	ae.job = ae.worker.mustAcquire("tfw", 1)
	if !strings.HasPrefix(ae.job.AgentToken, protocol.WorkspaceAgentTokenPrefix) || ae.job.AgentURL != ae.URL {
		t.Fatalf("job's helper token %q and URL %q", ae.job.AgentToken, ae.job.AgentURL)
	}
	return ae
}

// agentState is a Terraform state whose hangar_agent holds token.
func agentState(token string) []byte {
	return fmt.Appendf(nil, `{"version":4,"serial":1,"lineage":"l","resources":[{"mode":"managed","type":"hangar_agent","name":"main","provider":"provider[\"hangar.dev/hangar/hangar\"]","instances":[{"attributes":{"id":"x","token":%q}}]}]}`, token)
}

// helper runs a workspace helper connecting out with token; connected receives a value each time
// it is connected, disconnected each time that ends. Its retries wait for ever (the test decides).
type helperProc struct {
	srv          *wshelper.Server
	hostKey      ssh.PublicKey
	connected    chan struct{}
	disconnected chan error
}

func startHelper(t testing.TB, url, token string) *helperProc {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "machine"), []byte("the module's machine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := wshelper.NewServer(wshelper.ServerOptions{HostKey: signer, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home, "SHELL=/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	h := &helperProc{srv: srv, hostKey: signer.PublicKey(), connected: make(chan struct{}, 8), disconnected: make(chan error, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wshelper.Connect(ctx, wshelper.ConnectOptions{URL: url, Token: token, Server: srv,
			After:        func(time.Duration) <-chan time.Time { return nil },
			Connected:    func() { h.connected <- struct{}{} },
			Disconnected: func(err error) { h.disconnected <- err }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), deadline)
		defer scancel()
		srv.Shutdown(sctx)
	})
	return h
}

func within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// dialWorkspaceSSH opens the user endpoint with a bearer token and an SSH client over it.
func dialWorkspaceSSH(t *testing.T, env *servertest.Env, token, name string, hostKey ssh.PublicKey) (*ssh.Client, error) {
	t.Helper()
	return dialWorkspaceSSHWith(t, env, http.Header{"Authorization": {"Bearer " + token}}, name, hostKey)
}

// dialWorkspaceSSHWith opens the user endpoint with header (the credential) and an SSH client
// over it.
func dialWorkspaceSSHWith(t *testing.T, env *servertest.Env, header http.Header, name string, hostKey ssh.PublicKey) (*ssh.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, env.URL+"/api/v1/workspaces/"+strings.ReplaceAll(name, "/", "%2F")+"/ssh", &websocket.DialOptions{
		HTTPHeader: header, Subprotocols: []string{protocol.WorkspaceSSHSubprotocol}})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil, err
	}
	nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
	sc, chans, reqs, err := ssh.NewClientConn(nc, "workspace", &ssh.ClientConfig{User: "dev", HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: deadline})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

func run(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestWorkspaceAgent: a Terraform workspace's helper connects out with the token its build was
// given; the owner (and an admin) reach it by SSH through the server, with no SSH credential;
// others get 404; activity is recorded. A token the latest build's state does not hold is refused,
// and the open helper connection closed at the next recheck, after which users hear the helper
// is not connected. A rotated user token ends that user's open connection.
func TestWorkspaceAgent(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testWorkspaceAgent(t, engine) })
	}
}

func testWorkspaceAgent(t *testing.T, engine string) {
	ae := newAgentEnv(t, engine)
	env := ae.Env

	// Before the helper connects: 409 with the reason.
	status, body := call(t, env, ae.dev, "GET", "/api/v1/workspaces/tfw/ssh", nil)
	if status != http.StatusConflict || !strings.Contains(apiError(t, body).Message, "helper is not connected (is the machine running?)") {
		t.Fatalf("ssh before the helper connects: %d %s", status, body)
	}
	// Bad helper tokens.
	for _, tok := range []string{"", "hgu_user", "hwa_unknown"} {
		if status, body := call(t, env, tok, "GET", protocol.WorkspaceAgentConnectPath, nil); status != http.StatusUnauthorized {
			t.Fatalf("helper token %q: %d %s, want 401", tok, status, body)
		}
	}

	h := startHelper(t, env.URL, ae.job.AgentToken)
	within(t, h.connected, "the helper's connection")
	waitRegistered(t, env, ae.dev, "tfw")

	// Another replica on the same store does not hold the helper's connection, and says where it is.
	other := server.New(server.Options{Store: env.Store, Clock: env.Clock, Logger: slog.New(slog.DiscardHandler), ReplicaID: "replica-b"})
	otherHS := httptest.NewServer(other.Handler())
	defer otherHS.Close()
	replicaB := *env
	replicaB.URL = otherHS.URL
	status, body = call(t, &replicaB, ae.dev, "GET", "/api/v1/workspaces/tfw/ssh", nil)
	if status != http.StatusServiceUnavailable || apiError(t, body).Message != "the workspace's helper is connected to another server replica" {
		t.Fatalf("ssh through another replica: %d %s", status, body)
	}

	// The owner, by name; an admin by owner/name.
	c, err := dialWorkspaceSSH(t, env, ae.dev, "tfw", h.hostKey)
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, c, "cat $HOME/machine"); out != "the module's machine" {
		t.Fatalf("ssh through the server: %q", out)
	}
	if ws := stored(t, env, "tfw"); ws.LastActivityAt == nil || !ws.LastActivityAt.Equal(env.Clock.Now()) {
		t.Fatalf("last activity %v, want %v", ws.LastActivityAt, env.Clock.Now())
	}
	admin, err := dialWorkspaceSSH(t, env, env.AdminToken, "dev/tfw", h.hostKey)
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	if out := run(t, admin, "echo admin"); out != "admin" {
		t.Fatalf("admin's ssh: %q", out)
	}
	admin.Close()

	// Others: 404 as for a workspace that does not exist; not a WebSocket: 400.
	eve := createUser(t, env, "eve")
	for _, name := range []string{"tfw", "dev%2Ftfw", "nope"} {
		if status, body := call(t, env, eve, "GET", "/api/v1/workspaces/"+name+"/ssh", nil); status != http.StatusNotFound {
			t.Fatalf("eve's ssh to %s: %d %s", name, status, body)
		}
	}
	if status, body := call(t, env, ae.dev, "GET", "/api/v1/workspaces/tfw/ssh", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "WebSocket") {
		t.Fatalf("a plain GET: %d %s", status, body)
	}

	// The build ends with the agent in its state: the token still works after a recheck.
	ae.worker.finish(ae.job.ID, protocol.FinishRequest{WorkerID: "w1", State: agentState(ae.job.AgentToken)})
	ae.rechecks.fire()
	if out := run(t, c, "echo still"); out != "still" {
		t.Fatalf("after the build: %q", out)
	}

	// dev's token is rotated: the open connection ends at the next recheck.
	var rotated struct {
		Token string `json:"token"`
	}
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/dev/token", nil, http.StatusOK, &rotated)
	waitErr := make(chan error, 1)
	go func() { waitErr <- c.Wait() }()
	fireUntil(t, ae.rechecks, waitErr, "the rotated user's connection to end")
	if _, err := dialWorkspaceSSH(t, env, ae.dev, "tfw", h.hostKey); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("the old token: %v, want a 401", err)
	}
	ae.dev = rotated.Token

	// A stop build whose state has no agent: the token is dropped, and the helper's connection
	// closed at the next recheck; then users hear it is not connected.
	mustCall(t, env, ae.dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "stop"}, http.StatusCreated, nil)
	stop := ae.worker.mustAcquire("tfw", 2)
	if stop.AgentToken == ae.job.AgentToken || !strings.HasPrefix(stop.AgentToken, protocol.WorkspaceAgentTokenPrefix) {
		t.Fatalf("the stop build's token %q", stop.AgentToken)
	}
	ae.worker.finish(stop.ID, protocol.FinishRequest{WorkerID: "w1", State: tfState(2)})
	if err := fireUntil(t, ae.rechecks, h.disconnected, "the helper's connection to be closed"); err == nil {
		t.Fatal("disconnected without a reason")
	}
	// The record of the connection is gone too (the server clears it a moment after the helper
	// hears the connection end).
	for _, e := range []*servertest.Env{env, &replicaB} {
		end := time.Now().Add(deadline)
		for {
			status, body = call(t, e, ae.dev, "GET", "/api/v1/workspaces/tfw/ssh", nil)
			if status != http.StatusServiceUnavailable || time.Now().After(end) {
				break
			}
		}
		if status != http.StatusConflict || !strings.Contains(string(body), "is Stopped") {
			t.Fatalf("ssh after stop (%s): %d %s", e.URL, status, body)
		}
	}
	for _, tok := range []string{ae.job.AgentToken, stop.AgentToken} {
		if status, body := call(t, env, tok, "GET", protocol.WorkspaceAgentConnectPath, nil); status != http.StatusUnauthorized {
			t.Fatalf("a token the state does not hold: %d %s, want 401", status, body)
		}
	}
}

// oaWorkspaceAgent checks the answers of the helper's and the user's WebSocket endpoints against
// the document; their upgrades (101) are made by a real helper and client.
func oaWorkspaceAgent(t *testing.T, c *oaChecker, dev string) {
	env := c.env
	var ws struct {
		ID string `json:"id"`
	}
	c.decode(c.do(dev, "POST", "/api/v1/workspaces", map[string]any{"name": "tfa", "template": "tf"}, 201, true), &ws)
	token := protocol.WorkspaceAgentTokenPrefix + "openapi-test"
	if err := env.Store.CreateWorkspaceAgentToken(context.Background(), store.WorkspaceAgentToken{Hash: tfbackend.HashAgentToken(token), WorkspaceID: ws.ID, BuildNumber: 1, CreatedAt: env.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	c.do(dev, "GET", "/api/v1/workspaces/tfa/ssh", nil, 409, true)
	c.do(dev, "GET", "/api/v1/workspaces/nope/ssh", nil, 404, true)
	if e := apiError(t, c.do(dev, "GET", "/api/v1/workspaces/my-ws/ssh", nil, 409, true)); !strings.Contains(e.Message, "runs on Kubernetes") {
		t.Errorf("ssh endpoint of a Kubernetes workspace: %+v", e)
	}
	c.do("", "GET", "/api/v1/workspaces/tfa/ssh", nil, 401, false)
	c.do("", "GET", protocol.WorkspaceAgentConnectPath, nil, 401, false)
	c.do("hwa_nope", "GET", protocol.WorkspaceAgentConnectPath, nil, 401, true)
	c.do(token, "GET", protocol.WorkspaceAgentConnectPath, nil, 400, true)
	h := startHelper(t, env.URL, token)
	within(t, h.connected, "the helper's connection")
	waitRegistered(t, env, dev, "tfa")
	c.answered["GET "+protocol.WorkspaceAgentConnectPath+" 101"] = true
	c.do(dev, "GET", "/api/v1/workspaces/tfa/ssh", nil, 400, true)
	client, err := dialWorkspaceSSH(t, env, dev, "tfa", h.hostKey)
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, client, "echo ok"); out != "ok" {
		t.Fatalf("ssh: %q", out)
	}
	client.Close()
	c.answered["GET /api/v1/workspaces/{name}/ssh 101"] = true
	c.do(dev, "GET", "/api/v1/workspaces/tfa/terminal", nil, 400, true)
	c.do(dev, "GET", "/api/v1/workspaces/tfa/terminal?cols=0", nil, 400, false)
	c.do("", "GET", "/api/v1/workspaces/tfa/terminal", nil, 401, false)
	tc, status := dialTerminal(t, env, bearerHeader(dev), "tfa", "cols=120&rows=40")
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("terminal: %d", status)
	}
	tc.send(t, "stty size\r")
	tc.waitOutput(t, "40 120")
	tc.c.Close(websocket.StatusNormalClosure, "")
	c.answered["GET /api/v1/workspaces/{name}/terminal 101"] = true
}

// TestHelperCannotOpenStreams: streams are the server's to open; one the helper opens is closed at
// once.
func TestHelperCannotOpenStreams(t *testing.T) {
	ae := newAgentEnv(t, "sqlite")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c, _, err := websocket.Dial(ctx, ae.URL+protocol.WorkspaceAgentConnectPath, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + ae.job.AgentToken}}, Subprotocols: []string{protocol.WorkspaceAgentSubprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := yamux.Server(websocket.NetConn(ctx, c, websocket.MessageBinary), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(deadline))
	if n, err := st.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("a stream the helper opened: read %d, %v; want EOF", n, err)
	}
}
