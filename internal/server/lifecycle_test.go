package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// lcEnv is a server with one Kubernetes agent and a user, for lifecycle tests.
type lcEnv struct {
	*servertest.Env
	t     *testing.T
	agent string // the agent's token
	dev   string // the user's token
	rv    int
	done  int // changes the ticks made
}

func newLCEnv(t *testing.T, engine string, config map[string]any) *lcEnv {
	env := servertest.NewWith(t, engine)
	e := &lcEnv{Env: env, t: t, agent: createAgent(t, env, "k", config), dev: createUser(t, env, "dev")}
	return e
}

func (e *lcEnv) create(name string) {
	e.t.Helper()
	mustCall(e.t, e.Env, e.dev, "POST", "/api/v1/workspaces", map[string]any{"name": name, "agent": "k"}, http.StatusCreated, nil)
}

// report has the agent report the workspace's Deployment in state st, and returns what the server
// answered about it (nil: nothing).
func (e *lcEnv) report(name, st string) *protocol.WorkspaceRailsInfo {
	e.t.Helper()
	e.rv++
	info := infoOf(e.t, e.Env, name)
	info.LatestK8sDeploymentInfo = deploymentIn(st, e.rv)
	resp := reconcileCall(e.t, e.Env, e.agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}})
	for i, ri := range resp.WorkspaceRailsInfos {
		if ri.Name == info.Name {
			return &resp.WorkspaceRailsInfos[i]
		}
	}
	return nil
}

func (e *lcEnv) get(name string) sdk.Workspace {
	e.t.Helper()
	var w sdk.Workspace
	mustCall(e.t, e.Env, e.dev, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &w)
	return w
}

// tick runs the lifecycle executor once at the fake clock's time and returns how many changes it
// made.
func (e *lcEnv) tick() int {
	e.t.Helper()
	res, err := e.Server.Lifecycle().Tick(context.Background())
	if err != nil || res.Failed > 0 {
		e.t.Fatalf("tick: %+v, %v", res, err)
	}
	e.done += res.Done
	return res.Done
}

// wantDesired checks the workspace's desired state and the reason it shows.
func (e *lcEnv) wantDesired(name, desired, reasonPrefix string) sdk.Workspace {
	e.t.Helper()
	w := e.get(name)
	if w.DesiredState != desired || !strings.HasPrefix(w.DesiredStateReason, reasonPrefix) || (reasonPrefix == "") != (w.DesiredStateReason == "") {
		e.t.Fatalf("%s: desired %s (reason %q), want %s (reason %q...)", name, w.DesiredState, w.DesiredStateReason, desired, reasonPrefix)
	}
	return w
}

// TestLifecycleKubernetes: an agent's policy stops idle workspaces (TTL pushed back by use), stops
// those running past max_active_hours_before_stop, marks unused ones dormant and deletes them, and
// deletes those stopped past max_stopped_hours_before_termination; the agent is told at its next
// reconcile, and the user sees why.
func TestLifecycleKubernetes(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newLCEnv(t, engine, map[string]any{
				"max_active_hours_before_stop": 5, "max_stopped_hours_before_termination": 100,
				"lifecycle": map[string]any{"default_ttl": "2h", "dormancy_threshold": "48h", "dormancy_auto_delete": "24h"},
			})
			start := e.Clock.Now()
			for _, n := range []string{"idle", "used", "long"} {
				e.create(n)
				e.report(n, "Running")
			}
			// "long" turns autostop off: only the agent's max active lifetime stops it.
			var long sdk.Workspace
			mustCall(t, e.Env, e.dev, "PUT", "/api/v1/workspaces/long/schedule", map[string]any{"autostart": "", "timezone": "", "ttl": "0"}, http.StatusOK, &long)
			if long.Automation == nil || long.Automation.TTL != "" || long.Automation.Policy.MaxActive != "5h0m0s" {
				t.Fatalf("long's automation: %+v", long.Automation)
			}
			idle := e.get("idle")
			if idle.Automation == nil || idle.Automation.AutostopAt == nil || !idle.Automation.AutostopAt.Equal(start.Add(2*time.Hour)) {
				t.Fatalf("idle's automation: %+v", idle.Automation)
			}

			e.Clock.Advance(90 * time.Minute)
			if err := e.Store.RecordWorkspaceActivity(context.Background(), stored(t, e.Env, "used").ID, e.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			if n := e.tick(); n != 0 {
				t.Fatalf("at +1h30 the executor made %d changes", n)
			}
			e.Clock.Advance(30 * time.Minute) // +2h: idle's TTL is up; used's runs from its use
			if n := e.tick(); n != 1 {
				t.Fatalf("at +2h the executor made %d changes, want 1", n)
			}
			e.wantDesired("idle", "Stopped", "autostop: ")
			e.wantDesired("used", "Running", "")
			if ri := e.report("idle", "Running"); ri == nil || ri.DesiredState != "Stopped" || !strings.Contains(ri.ConfigToApply, "replicas: 0") {
				t.Fatalf("the agent was told %+v, want the stop", ri)
			}
			e.report("idle", "Stopped")
			if n := e.tick(); n != 0 {
				t.Fatalf("a second tick made %d changes", n)
			}

			e.Clock.Advance(90 * time.Minute) // +3h30: used's TTL from its use is up
			if n := e.tick(); n != 1 {
				t.Fatalf("at +3h30 the executor made %d changes, want 1", n)
			}
			e.wantDesired("used", "Stopped", "autostop: ")
			e.report("used", "Stopped")

			e.Clock.Advance(90 * time.Minute) // +5h: long ran for the agent's max active lifetime
			if n := e.tick(); n != 1 {
				t.Fatalf("at +5h the executor made %d changes, want 1", n)
			}
			e.wantDesired("long", "Stopped", "max_active: ")
			e.report("long", "Stopped")

			// The owner starts long again (a user's change: use, no reason), then leaves everything.
			mustCall(t, e.Env, e.dev, "PATCH", "/api/v1/workspaces/long", map[string]any{"desired_state": "Running"}, http.StatusOK, nil)
			e.wantDesired("long", "Running", "")
			e.report("long", "Running")

			// +48h: idle had no use since its creation: dormant. long, started again at +5h, ran
			// for the max active lifetime again. used's use was at +1h30: not dormant yet.
			e.Clock.Set(start.Add(48 * time.Hour))
			if n := e.tick(); n != 2 {
				t.Fatalf("at +48h the executor made %d changes, want 2 (idle dormant, long stopped)", n)
			}
			if w := e.get("idle"); w.DormantAt == nil || w.DesiredState != "Stopped" {
				t.Fatalf("idle at +48h: dormant %v, desired %s", w.DormantAt, w.DesiredState)
			}
			e.wantDesired("long", "Stopped", "max_active: ")
			e.report("long", "Stopped")
			if w := e.get("used"); w.DormantAt != nil {
				t.Fatalf("used went dormant at %v, before its threshold", w.DormantAt)
			}
			// Its owner starts idle, which wakes it.
			mustCall(t, e.Env, e.dev, "PATCH", "/api/v1/workspaces/idle", map[string]any{"desired_state": "Running"}, http.StatusOK, nil)
			if w := e.get("idle"); w.DormantAt != nil {
				t.Fatalf("idle is still dormant after its owner started it: %v", w.DormantAt)
			}
			e.report("idle", "Running")

			// used goes dormant at +49h30, and is deleted 24h later.
			e.Clock.Set(start.Add(49*time.Hour + 30*time.Minute))
			e.tick()
			if w := e.get("used"); w.DormantAt == nil {
				t.Fatal("used is not dormant at +49h30")
			}
			e.Clock.Set(start.Add(73*time.Hour + 30*time.Minute))
			e.tick()
			e.wantDesired("used", "Terminated", "autodelete: ")
			if ri := e.report("used", "Stopped"); ri == nil || ri.DesiredState != "Terminated" {
				t.Fatalf("the agent was told %+v, want the delete", ri)
			}

			// An agent with GitLab's lifetimes only: a workspace stopped for
			// max_stopped_hours_before_termination is deleted.
			k2 := createAgent(t, e.Env, "k2", map[string]any{"max_stopped_hours_before_termination": 100})
			mustCall(t, e.Env, e.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "old", "agent": "k2"}, http.StatusCreated, nil)
			e.agent = k2
			e.report("old", "Running")
			mustCall(t, e.Env, e.dev, "PATCH", "/api/v1/workspaces/old", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
			e.report("old", "Stopped")
			stoppedAt := *e.get("old").DesiredStateUpdatedAt // a microsecond after the agent's last answer
			e.Clock.Set(stoppedAt.Add(100*time.Hour - time.Minute))
			e.tick()
			e.wantDesired("old", "Stopped", "")
			e.Clock.Set(stoppedAt.Add(100 * time.Hour))
			e.tick()
			e.wantDesired("old", "Terminated", "max_stopped: ")

			// The metrics count every change the ticks made, by reason.
			status, body := call(t, e.Env, "", "GET", "/metrics", nil)
			total := 0
			for _, reason := range []string{"autostop", "max_active", "dormancy", "autodelete", "max_stopped"} {
				var n int
				line := grepLines(string(body), `hangar_lifecycle_changes_total{reason="`+reason+`"}`)
				if _, err := fmt.Sscanf(line, `hangar_lifecycle_changes_total{reason="`+reason+`"} %d`, &n); status != 200 || err != nil || n == 0 {
					t.Errorf("metrics for %s: %q (%v)", reason, line, err)
				}
				total += n
			}
			if total != e.done {
				t.Errorf("metrics count %d changes, the ticks made %d:\n%s", total, e.done, grepLines(string(body), "hangar_lifecycle"))
			}
		})
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
