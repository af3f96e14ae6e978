package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// auditPage reads GET /api/v1/audit?query as the admin.
func auditPage(t testing.TB, env *servertest.Env, query string) sdk.AuditPage {
	t.Helper()
	var p sdk.AuditPage
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?"+query, nil, http.StatusOK, &p)
	return p
}

// oneEntry returns the only entry query selects.
func oneEntry(t testing.TB, env *servertest.Env, query string) sdk.AuditEntry {
	t.Helper()
	p := auditPage(t, env, query)
	if len(p.Entries) != 1 {
		t.Fatalf("audit %s: %d entries, want 1: %+v", query, len(p.Entries), p.Entries)
	}
	return p.Entries[0]
}

func wantEntry(t testing.TB, e sdk.AuditEntry, actor, action, kind, target, outcome string) {
	t.Helper()
	if e.Actor != actor || e.Action != action || e.TargetKind != kind || e.TargetName != target || e.Outcome != outcome {
		t.Fatalf("entry %+v, want %s by %s on %s %s: %s", e, action, actor, kind, target, outcome)
	}
	if (outcome == "failure") != (e.Error != "") {
		t.Fatalf("entry %+v: outcome %s with error %q", e, outcome, e.Error)
	}
}

// TestAuditLog: the actions of users and admins through the API are recorded with their actor,
// target and outcome (a refused action as a failure with the refusal), a state never is, only
// admins read the log, and its filters and pages select what they say.
func TestAuditLog(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}

			// Admin actions of the setup: the template push, the provisioner, the user.
			e := oneEntry(t, env, "action=template.push")
			wantEntry(t, e, "admin", "template.push", "template", "tf", "success")
			if e.Details["kind"] != "terraform" || e.Details["template_version_id"] == "" {
				t.Errorf("template push details %v", e.Details)
			}
			wantEntry(t, oneEntry(t, env, "action=provisioner.create"), "admin", "provisioner.create", "provisioner", "p1", "success")
			e = oneEntry(t, env, "action=user.create")
			wantEntry(t, e, "admin", "user.create", "user", "alice", "success")
			if e.TargetID == "" || e.Details["admin"] != false || !e.Time.Equal(servertest.Start) {
				t.Errorf("user create entry %+v", e)
			}

			// Create, with the first build's transition and template version.
			var ws sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, &ws)
			e = oneEntry(t, env, "action=workspace.create")
			wantEntry(t, e, "alice", "workspace.create", "workspace", "alice/w", "success")
			if e.TargetID == "" || e.Details["transition"] != "start" || e.Details["build_number"] != float64(1) || e.Details["template_version_id"] == "" ||
				e.Details["template"] != "tf" {
				t.Errorf("create entry %+v", e)
			}
			p.run("w", 1, protocol.FinishRequest{State: tfState(3)})

			// A state push without a build: what identifies the state, never the state.
			env.Clock.Advance(time.Minute)
			status, _, body := send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", strings.NewReader(string(tfState(4))))
			if status != http.StatusNoContent {
				t.Fatalf("state push: %d %s", status, body)
			}
			e = oneEntry(t, env, "action=state.push")
			wantEntry(t, e, "alice", "state.push", "workspace", "alice/w", "success")
			if e.Details["with_build"] != false || e.Details["serial"] != float64(4) || e.Details["lineage"] != "hangar-test" {
				t.Errorf("state push details %v", e.Details)
			}
			// A push the rules refuse is a failure with the refusal.
			status, _, _ = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", strings.NewReader(string(tfState(2))))
			if status != http.StatusConflict {
				t.Fatalf("an older state: %d", status)
			}
			e = oneEntry(t, env, "action=state.push&outcome=failure")
			if !strings.Contains(e.Error, "state conflict") || !strings.Contains(e.Error, "serial") {
				t.Errorf("refused push's error %q", e.Error)
			}

			// A transition with its build; a cancel; a build the rules refuse.
			env.Clock.Advance(time.Minute)
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/w", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
			e = oneEntry(t, env, "action=workspace.transition")
			wantEntry(t, e, "alice", "workspace.transition", "workspace", "alice/w", "success")
			if e.Details["from"] != "Running" || e.Details["to"] != "Stopped" || e.Details["transition"] != "stop" || e.Details["build_number"] != float64(2) ||
				e.Details["template_version_id"] == "" || e.TargetID != oneEntry(t, env, "action=workspace.create").TargetID {
				t.Errorf("transition entry %+v", e)
			}
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "start"})
			if status != http.StatusConflict {
				t.Fatalf("a build while one is active: %d %s", status, body)
			}
			e = oneEntry(t, env, "action=build.create")
			wantEntry(t, e, "alice", "build.create", "workspace", "alice/w", "failure")
			if !strings.Contains(e.Error, "409 Conflict: build conflict") {
				t.Errorf("refused build's error %q", e.Error)
			}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/builds/latest/cancel", nil, http.StatusOK, nil)
			e = oneEntry(t, env, "action=build.cancel")
			wantEntry(t, e, "alice", "build.cancel", "workspace", "alice/w", "success")
			if e.Details["build_number"] != float64(2) {
				t.Errorf("cancel details %v", e.Details)
			}
			// A state push with a build, at the debug log level.
			b := newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "start", State: tfState(9), LogLevel: "debug"})
			if b.LogLevel != "debug" || b.StateSource != "explicit" {
				t.Fatalf("the pushed build %+v", b)
			}
			e = oneEntry(t, env, "action=state.push&outcome=success&limit=1")
			if e.Details["with_build"] != true || e.Details["build_number"] != float64(3) || e.Details["transition"] != "start" ||
				e.Details["state_source"] != "explicit" || e.Details["log_level"] != "debug" {
				t.Errorf("state push with a build: %+v", e)
			}
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", map[string]any{"transition": "start", "log_level": "trace"})
			wantField(t, "log_level trace", status, body, "log_level")

			// An illegal transition of a Kubernetes workspace, and the agent's creation.
			createAgent(t, env, "k", nil)
			wantEntry(t, oneEntry(t, env, "action=agent.create"), "admin", "agent.create", "agent", "k", "success")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "kw", "agent": "k"}, http.StatusCreated, nil)
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/kw", map[string]any{"desired_state": "Terminated"}, http.StatusOK, nil)
			mustCall(t, env, alice, "PATCH", "/api/v1/workspaces/kw", map[string]any{"desired_state": "Running"}, http.StatusConflict, nil)
			e = oneEntry(t, env, "action=workspace.transition&target=kw&outcome=failure")
			wantEntry(t, e, "alice", "workspace.transition", "workspace", "alice/kw", "failure")
			if !strings.Contains(e.Error, "illegal state change") || e.TargetID == "" || e.Details["to"] != "Running" {
				t.Errorf("illegal transition entry %+v", e)
			}
			e = oneEntry(t, env, "action=workspace.transition&target=alice/kw&outcome=success")
			if e.Details["to"] != "Terminated" || e.Details["from"] != "Running" {
				t.Errorf("kw's delete entry %+v", e)
			}
			// A workspace alice may not see is a failure that names no id.
			bob := createUser(t, env, "bob")
			mustCall(t, env, bob, "PATCH", "/api/v1/workspaces/"+url.PathEscape("alice/w"), map[string]any{"desired_state": "Stopped"}, http.StatusNotFound, nil)
			e = oneEntry(t, env, "actor=bob&action=workspace.transition")
			wantEntry(t, e, "bob", "workspace.transition", "workspace", "alice/w", "failure")

			// Schedules, tokens, template policies, SSH keys.
			mustCall(t, env, alice, "PUT", "/api/v1/workspaces/w/schedule", map[string]any{"autostart": "0 9 * * 1-5", "timezone": "Europe/Paris", "ttl": "8h"}, http.StatusOK, nil)
			e = oneEntry(t, env, "action=workspace.schedule")
			if e.Actor != "alice" || e.TargetID == "" || e.Details["autostart"] != "0 9 * * 1-5" || e.Details["ttl"] != "8h" {
				t.Errorf("schedule entry %+v", e)
			}
			var rotated sdk.User
			mustCall(t, env, alice, "POST", "/api/v1/users/me/token", nil, http.StatusOK, &rotated)
			alice = rotated.Token
			wantEntry(t, oneEntry(t, env, "action=user.token"), "alice", "user.token", "user", "alice", "success")
			mustCall(t, env, env.AdminToken, "PUT", "/api/v1/templates/tf/lifecycle", map[string]any{"default_ttl": "4h"}, http.StatusOK, nil)
			e = oneEntry(t, env, "action=template.lifecycle")
			if lc, _ := e.Details["lifecycle"].(map[string]any); e.Actor != "admin" || e.TargetName != "tf" || lc["default_ttl"] != "4h" {
				t.Errorf("template lifecycle entry %+v", e)
			}
			line, fp := newKey(t, "laptop")
			mustCall(t, env, alice, "POST", "/api/v1/users/me/ssh-keys", map[string]any{"public_key": line}, http.StatusCreated, nil)
			mustCall(t, env, alice, "DELETE", "/api/v1/users/me/ssh-keys/"+url.PathEscape(fp), nil, http.StatusNoContent, nil)
			mustCall(t, env, alice, "DELETE", "/api/v1/users/me/ssh-keys/"+url.PathEscape(fp), nil, http.StatusNotFound, nil)
			wantEntry(t, oneEntry(t, env, "action=ssh_key.add"), "alice", "ssh_key.add", "ssh_key", fp, "success")
			if es := auditPage(t, env, "action=ssh_key.remove").Entries; len(es) != 2 || es[0].Outcome != "failure" || es[1].Outcome != "success" {
				t.Errorf("ssh key removals %+v", es)
			}

			// Sign-ins: a bad token is a failure by nobody; a good one names its user.
			br := &browser{t: t, env: env}
			if resp := br.do("POST", "/signin", url.Values{"token": {"hgu_wrong"}}); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a bad sign-in: %d", resp.StatusCode)
			}
			e = oneEntry(t, env, "action=signin&outcome=failure")
			if e.Actor != "" || e.Error != "invalid token" || e.Details["remote"] == nil {
				t.Errorf("failed sign-in %+v", e)
			}
			br.signIn(alice)
			wantEntry(t, oneEntry(t, env, "action=signin&outcome=success"), "alice", "signin", "user", "alice", "success")

			// The state is never in the log.
			raw := auditRaw(t, env, "limit=1000")
			if strings.Contains(raw, "state-secret") || strings.Contains(raw, `"resources"`) {
				t.Fatalf("a Terraform state is in the audit log: %s", raw)
			}

			// Only admins read it.
			status, body = call(t, env, alice, "GET", "/api/v1/audit", nil)
			wantError(t, "alice reads the audit log", status, body, http.StatusForbidden, "only an admin may do this")
			if status, _ = call(t, env, "", "GET", "/api/v1/audit", nil); status != http.StatusUnauthorized {
				t.Errorf("no token: %d", status)
			}
			// A user's attempt at an admin's action is refused and recorded, with what was tried.
			status, body = call(t, env, alice, "POST", "/api/v1/users", map[string]any{"username": "mallory"})
			wantError(t, "alice creates a user", status, body, http.StatusForbidden, "only an admin may do this")
			e = oneEntry(t, env, "action=api.forbidden")
			if e.Actor != "alice" || e.Outcome != "failure" || e.TargetName != "POST /api/v1/users" || e.Details["route"] != "POST /api/v1/users" ||
				!strings.Contains(e.Error, "only an admin may do this") {
				t.Fatalf("forbidden attempt entry %+v", e)
			}

			// Filters and pages.
			all := auditPage(t, env, "limit=1000").Entries
			for i := 1; i < len(all); i++ {
				if all[i].ID >= all[i-1].ID {
					t.Fatalf("not newest first: %d then %d", all[i-1].ID, all[i].ID)
				}
			}
			var paged []sdk.AuditEntry
			q := "limit=3"
			for pages := 0; ; pages++ {
				pg := auditPage(t, env, q)
				paged = append(paged, pg.Entries...)
				if pg.NextBeforeID == 0 {
					break
				}
				if len(pg.Entries) != 3 || pages > len(all) {
					t.Fatalf("page %d: %d entries", pages, len(pg.Entries))
				}
				q = fmt.Sprintf("limit=3&before_id=%d", pg.NextBeforeID)
			}
			if len(paged) != len(all) || paged[len(paged)-1].ID != all[len(all)-1].ID {
				t.Fatalf("pages of 3 read %d entries, want %d", len(paged), len(all))
			}
			for _, e := range auditPage(t, env, "actor=alice&limit=1000").Entries {
				if e.Actor != "alice" {
					t.Fatalf("actor=alice listed %+v", e)
				}
			}
			for _, e := range auditPage(t, env, "target_kind=user&outcome=success").Entries {
				if e.TargetKind != "user" || e.Outcome != "success" {
					t.Fatalf("target_kind=user&outcome=success listed %+v", e)
				}
			}
			// Time: the setup's entries are at the start, the pushes without a build a minute later,
			// the push with a build two minutes later (now).
			if es := auditPage(t, env, "until="+servertest.Start.Add(time.Second).Format(time.RFC3339)+"&action=workspace.create").Entries; len(es) != 1 {
				t.Errorf("until: %+v", es)
			}
			if es := auditPage(t, env, "since=30s&action=state.push").Entries; len(es) != 1 || es[0].Details["with_build"] != true {
				t.Errorf("since 30s ago: %+v, want the push with a build", es)
			}
			if es := auditPage(t, env, "since="+servertest.Start.Add(time.Minute).Format(time.RFC3339)+"&action=state.push").Entries; len(es) != 3 {
				t.Errorf("since +1m: %d state pushes, want 3", len(es))
			}
			for _, bad := range []struct{ query, field string }{
				{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"before_id=-1", "before_id"},
				{"since=yesterday", "since"}, {"until=-5m", "until"}, {"outcome=maybe", "outcome"}, {"target_kind=pod", "target_kind"},
				{"action=Workspace%20Create", "action"}, {"actor=a%01b", "actor"}, {"colour=red", "colour"}, {"limit=1&limit=2", "limit"},
				{"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
			} {
				status, body := call(t, env, env.AdminToken, "GET", "/api/v1/audit?"+bad.query, nil)
				wantField(t, bad.query, status, body, bad.field)
			}
		})
	}
}

func auditRaw(t testing.TB, env *servertest.Env, query string) string {
	t.Helper()
	status, body := call(t, env, env.AdminToken, "GET", "/api/v1/audit?"+query, nil)
	if status != http.StatusOK {
		t.Fatalf("audit: %d %s", status, body)
	}
	return string(body)
}

// TestAuditRetention: entries older than the retention are pruned, the newer kept.
func TestAuditRetention(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine, func(o *server.Options) { o.AuditRetention = 48 * time.Hour })
			createUser(t, env, "old")
			env.Clock.Advance(47 * time.Hour)
			createUser(t, env, "young")
			ret := env.Server.AuditRetention()
			if n, err := ret.Prune(context.Background()); err != nil || n != 0 {
				t.Fatalf("at 47h: pruned %d, %v", n, err)
			}
			env.Clock.Advance(2 * time.Hour)
			if n, err := ret.Prune(context.Background()); err != nil || n != 1 {
				t.Fatalf("at 49h: pruned %d, %v; want the old user's creation", n, err)
			}
			es := auditPage(t, env, "").Entries
			if len(es) != 1 || es[0].TargetName != "young" {
				t.Fatalf("kept %+v, want young's creation", es)
			}
			forever := servertest.NewWith(t, engine)
			createUser(t, forever, "x")
			forever.Clock.Advance(100 * 365 * 24 * time.Hour)
			if n, err := forever.Server.AuditRetention().Prune(context.Background()); err != nil || n != 0 {
				t.Fatalf("retention 0 pruned %d, %v", n, err)
			}
		})
	}
}

// TestAuditAutomation: the lifecycle executor's changes are recorded as the automation's, with
// their reason; a tick with nothing due records nothing.
func TestAuditAutomation(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newLCEnv(t, engine, map[string]any{"lifecycle": map[string]any{"default_ttl": "2h"}})
			e.create("idle")
			e.report("idle", "Running")
			e.Clock.Advance(2 * time.Hour)
			if n := e.tick(); n != 1 {
				t.Fatalf("the tick made %d changes, want the autostop", n)
			}
			ent := oneEntry(t, e.Env, "actor=hangar-automation")
			wantEntry(t, ent, "hangar-automation", "workspace.transition", "workspace", "dev/idle", "success")
			reason, _ := ent.Details["reason"].(string)
			if ent.ActorID != "00000000-0000-4000-8000-00000000a070" || !strings.HasPrefix(reason, "autostop: ") || ent.Details["from"] != "Running" ||
				ent.Details["to"] != "Stopped" || !ent.Time.Equal(e.Clock.Now()) || ent.TargetID == "" {
				t.Fatalf("the automation's entry %+v", ent)
			}
			e.Clock.Advance(time.Minute)
			e.tick()
			if es := auditPage(t, e.Env, "actor=hangar-automation").Entries; len(es) != 1 {
				t.Fatalf("after a tick with nothing due: %+v", es)
			}
		})
	}
}
