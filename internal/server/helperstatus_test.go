package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/wshelper"
)

// TestHelperStatus: a Terraform workspace's helper status, as show and list give it, on both
// stores: waiting while the start build runs; Running with no helper for two minutes (the fake
// clock), the problem with the likely cause; connected since the connection; disconnected, with
// why, when the connection is lost, and a problem two minutes later; off when stopped; and a
// workspace whose state holds no hangar_agent says so.
func TestHelperStatus(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testHelperStatus(t, engine) })
	}
}

func testHelperStatus(t *testing.T, engine string) {
	ae := newAgentEnv(t, engine)
	env := ae.Env
	show := func() sdk.WorkspaceHelper {
		t.Helper()
		w := getWorkspace(t, env, ae.dev, "tfw")
		var list []sdk.Workspace
		mustCall(t, env, ae.dev, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
		if len(list) != 1 || list[0].Helper.Status != w.Helper.Status || list[0].Helper.Problem != w.Helper.Problem {
			t.Fatalf("list's helper %+v, show's %+v", list, w.Helper)
		}
		return w.Helper
	}
	// until waits, with a deadline, for the server to have seen a change of the connection.
	until := func(status string) sdk.WorkspaceHelper {
		t.Helper()
		end := time.Now().Add(deadline)
		for {
			if h := getWorkspace(t, env, ae.dev, "tfw").Helper; h.Status == status {
				return show() // and the list says the same
			}
			if time.Now().After(end) {
				t.Fatalf("helper %+v, want %s", show(), status)
			}
		}
	}
	if h := show(); h.Status != "waiting" || h.Problem != "" {
		t.Fatalf("while the start build runs: %+v", h)
	}
	ae.worker.finish(ae.job.ID, protocol.FinishRequest{WorkerID: "w1", State: agentState(ae.job.AgentToken)})
	running := env.Clock.Now()
	env.Clock.Advance(time.Minute)
	if h := show(); h.Status != "waiting" || h.Since == nil || !h.Since.Equal(running) || h.Problem != "" {
		t.Fatalf("a minute after Running: %+v, want waiting since %v", h, running)
	}
	env.Clock.Advance(time.Minute + time.Second)
	if h := show(); h.Status != "waiting" || !strings.Contains(h.Problem, "the helper has not connected 2m1s after the workspace became Running: the machine may not run hangar_agent's init script") ||
		!strings.Contains(h.Problem, "--access-url") {
		t.Fatalf("two minutes after Running: %+v", h)
	}

	sess := rawHelper(t, env.URL, ae.job.AgentToken)
	connected := env.Clock.Now()
	if h := until("connected"); !h.Since.Equal(connected) || h.Problem != "" {
		t.Fatalf("connected: %+v, want since %v", h, connected)
	}
	env.Clock.Advance(time.Hour)
	sess.Close()
	lost := env.Clock.Now()
	if h := until("disconnected"); !h.Since.Equal(lost) || !strings.Contains(h.LastError, "the connection was lost") || h.Problem != "" {
		t.Fatalf("disconnected: %+v, want since %v with why", h, lost)
	}
	env.Clock.Advance(2 * time.Minute)
	if h := show(); h.Status != "disconnected" || !strings.Contains(h.Problem, "the helper's connection ended 2m0s ago and it has not connected again") {
		t.Fatalf("two minutes after the connection ended: %+v", h)
	}

	// Stopped: no helper is expected; the last error stays.
	mustCall(t, env, ae.dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "stop"}, http.StatusCreated, nil)
	ae.worker.run("tfw", 2, protocol.FinishRequest{State: tfState(2)})
	if h := show(); h.Status != "off" || h.Since != nil || h.Problem != "" || h.LastError == "" {
		t.Fatalf("stopped: %+v", h)
	}
	// Started by a build whose state holds no hangar_agent: the problem names it.
	mustCall(t, env, ae.dev, "POST", "/api/v1/workspaces/tfw/builds", map[string]any{"transition": "start"}, http.StatusCreated, nil)
	ae.worker.run("tfw", 3, protocol.FinishRequest{State: tfState(3)})
	env.Clock.Advance(3 * time.Minute)
	if h := show(); h.Status != "waiting" || !strings.Contains(h.Problem, "the workspace's Terraform state holds no hangar_agent") {
		t.Fatalf("Running without a hangar_agent: %+v", h)
	}
}

// TestHelperStatusKubernetes: a Kubernetes workspace's helper is waiting until the agent reports
// it Running (its readiness probe is the helper's SSH), with a problem two minutes after the start.
func TestHelperStatusKubernetes(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			createAgent(t, env, "c1", map[string]any{})
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "k", "agent": "c1"}, http.StatusCreated, nil)
			started := env.Clock.Now()
			if h := getWorkspace(t, env, env.AdminToken, "k").Helper; h.Status != "waiting" || !h.Since.Equal(started) || h.Problem != "" {
				t.Fatalf("just created: %+v", h)
			}
			env.Clock.Advance(2 * time.Minute)
			if h := getWorkspace(t, env, env.AdminToken, "k").Helper; !strings.Contains(h.Problem, "the workspace's pod is not ready 2m0s after the start") {
				t.Fatalf("two minutes after the start: %+v", h)
			}
		})
	}
}

// rawHelper connects to the server with a helper token, as a helper does, and returns the session
// (closing it is the connection being lost).
func rawHelper(t *testing.T, url, token string) *yamux.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url+protocol.WorkspaceAgentConnectPath, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{protocol.WorkspaceAgentSubprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := yamux.Server(websocket.NetConn(context.Background(), c, websocket.MessageBinary), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// TestHelperExitsWhenWorkspaceDeleted: the real helper of a workspace that is deleted has its
// connection closed at the next recheck, is refused (401) when it connects again, and stops
// retrying: Connect returns ErrRefused. Both stores.
func TestHelperExitsWhenWorkspaceDeleted(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			ae := newAgentEnv(t, engine)
			env := ae.Env
			ae.worker.finish(ae.job.ID, protocol.FinishRequest{WorkerID: "w1", State: agentState(ae.job.AgentToken)})
			_, priv, _ := ed25519.GenerateKey(rand.Reader)
			signer, err := ssh.NewSignerFromKey(priv)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := wshelper.NewServer(wshelper.ServerOptions{HostKey: signer, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			connected := make(chan struct{}, 4)
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			now := func(time.Duration) <-chan time.Time { c := make(chan time.Time, 1); c <- time.Time{}; return c }
			go func() {
				done <- wshelper.Connect(ctx, wshelper.ConnectOptions{URL: env.URL, Token: ae.job.AgentToken, Server: srv, After: now,
					Connected: func() { connected <- struct{}{} }})
			}()
			within(t, connected, "the helper's connection")
			mustCall(t, env, ae.dev, "PATCH", "/api/v1/workspaces/tfw", map[string]any{"desired_state": "Terminated"}, http.StatusOK, nil)
			err = fireUntil(t, ae.rechecks, done, "the helper to stop retrying")
			if !errors.Is(err, wshelper.ErrRefused) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "deleted") {
				t.Fatalf("Connect = %v, want ErrRefused saying the workspace is deleted", err)
			}
		})
	}
}
