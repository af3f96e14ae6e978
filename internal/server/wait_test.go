package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// waitCall starts a long-poll and returns a channel with its answer.
func waitCall(t *testing.T, url, token string) <-chan protocol.WaitResponse {
	t.Helper()
	out := make(chan protocol.WaitResponse, 1)
	go func() {
		req, _ := http.NewRequest("GET", url+protocol.WaitPath+"?timeout_seconds=60", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(out)
			return
		}
		defer resp.Body.Close()
		var w protocol.WaitResponse
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&w) != nil {
			t.Errorf("wait answered %d", resp.StatusCode)
		}
		out <- w
	}()
	return out
}

func TestWaitForChanges(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			timers := make(chan time.Time)
			fired := make(chan struct{}, 1)
			srv := server.New(server.Options{Store: env.Store, Clock: env.Clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				After: func(time.Duration) <-chan time.Time { fired <- struct{}{}; return timers }})
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			waitEnv := *env
			waitEnv.URL = hs.URL

			agent := createAgent(t, env, "k1", nil)
			other := createAgent(t, env, "k2", nil)
			user := createUser(t, env, "dev")
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "agent": "k1"}, 201, nil)

			// Never answered: pending at once.
			if w := <-waitCall(t, hs.URL, agent); !w.Pending {
				t.Fatal("a new workspace is not pending")
			}
			<-fired
			env.Clock.Advance(time.Minute)
			reconcileCall(t, &waitEnv, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})

			// Answered: the wait blocks until a stop through the API wakes it.
			got := waitCall(t, hs.URL, agent)
			<-fired // the handler has subscribed and found nothing pending
			// Another agent's change does not wake it.
			mustCall(t, env, user, "POST", "/api/v1/workspaces", map[string]any{"name": "x", "agent": "k2"}, 201, nil)
			select {
			case w := <-got:
				t.Fatalf("woken by another agent's workspace: %+v", w)
			default:
			}
			env.Clock.Advance(time.Minute)
			mustCall(t, env, user, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Stopped"}, 200, nil)
			if w := <-got; !w.Pending {
				t.Fatal("a stop did not wake the wait")
			}

			// Nothing pending and the timeout fires: pending false.
			env.Clock.Advance(time.Minute)
			reconcileCall(t, &waitEnv, agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			got = waitCall(t, hs.URL, agent)
			<-fired
			timers <- time.Now()
			if w := <-got; w.Pending {
				t.Fatal("timeout answered pending")
			}
			_ = other

			// Bad timeout and a user token.
			status, body := call(t, &waitEnv, agent, "GET", protocol.WaitPath+"?timeout_seconds=0", nil)
			if status != 400 || apiError(t, body).Validations[0].Field != "timeout_seconds" {
				t.Errorf("bad timeout: %d %s", status, body)
			}
			if status, _ := call(t, &waitEnv, user, "GET", protocol.WaitPath, nil); status != 401 {
				t.Errorf("user token: %d", status)
			}
		})
	}
}
