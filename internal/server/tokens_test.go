package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// wantRefused checks that token is refused with 401 and a message holding want.
func wantRefused(t *testing.T, env *servertest.Env, token, want string) {
	t.Helper()
	status, body := call(t, env, token, "GET", "/api/v1/users/me", nil)
	if status != http.StatusUnauthorized || !strings.Contains(apiError(t, body).Message, want) {
		t.Fatalf("GET /users/me: %d %s, want 401 saying %q", status, body, want)
	}
}

// Tokens per user: created with a name and a lifetime, listed without secrets, refused once expired
// or revoked with a message that says which, and reset by rotate-token.
func TestTokens(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			start := env.Clock.Now()

			// The bootstrap admin's token never expires; a created user's first token is "initial",
			// with the default lifetime.
			var me sdk.User
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users/me", nil, http.StatusOK, &me)
			if me.CurrentToken == nil || me.CurrentToken.Name != server.BootstrapTokenName || me.CurrentToken.ExpiresAt != nil {
				t.Fatalf("the bootstrap admin's token: %+v", me.CurrentToken)
			}
			var bob sdk.User
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users", map[string]any{"username": "bob"}, http.StatusCreated, &bob)
			if bob.TokenExpiresAt == nil || !bob.TokenExpiresAt.Equal(start.Add(server.DefaultTokenLifetime)) {
				t.Fatalf("bob's first token expires at %v, want %v", bob.TokenExpiresAt, start.Add(server.DefaultTokenLifetime))
			}
			mustCall(t, env, bob.Token, "GET", "/api/v1/users/me", nil, http.StatusOK, &me)
			if me.CurrentToken == nil || me.CurrentToken.Name != server.InitialTokenName || me.CurrentToken.Status != sdk.TokenActive {
				t.Fatalf("bob's current token: %+v", me.CurrentToken)
			}

			// Create: the secret once; the list never holds it.
			var ci sdk.Token
			mustCall(t, env, bob.Token, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "ci", LifetimeSeconds: 3600}, http.StatusCreated, &ci)
			if !strings.HasPrefix(ci.Token, "hgu_") || ci.User != "bob" || ci.ExpiresAt == nil || !ci.ExpiresAt.Equal(start.Add(time.Hour)) {
				t.Fatalf("created %+v", ci)
			}
			var def sdk.Token
			mustCall(t, env, bob.Token, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "laptop"}, http.StatusCreated, &def)
			if !def.ExpiresAt.Equal(start.Add(server.DefaultTokenLifetime)) {
				t.Errorf("a token without a lifetime expires at %v", def.ExpiresAt)
			}
			status, body := call(t, env, bob.Token, "GET", "/api/v1/tokens", nil)
			if status != http.StatusOK || strings.Contains(string(body), ci.Token) || strings.Contains(string(body), def.Token) ||
				strings.Count(string(body), `"name"`) != 3 {
				t.Fatalf("list: %d %s", status, body)
			}
			for _, c := range []struct {
				req   any
				field string
			}{
				{sdk.CreateTokenRequest{Name: "ci"}, ""},
				{sdk.CreateTokenRequest{Name: ""}, "name"},
				{sdk.CreateTokenRequest{Name: "-x"}, "name"},
				{sdk.CreateTokenRequest{Name: strings.Repeat("a", 65)}, "name"},
				{sdk.CreateTokenRequest{Name: "long", LifetimeSeconds: int64((server.DefaultMaxTokenLifetime + time.Second) / time.Second)}, "lifetime_seconds"},
				{sdk.CreateTokenRequest{Name: "short", LifetimeSeconds: 5}, "lifetime_seconds"},
				{map[string]any{"name": "x", "owner": "admin"}, "owner"},
			} {
				status, body := call(t, env, bob.Token, "POST", "/api/v1/tokens", c.req)
				e := apiError(t, body)
				switch {
				case c.field == "" && status != http.StatusConflict:
					t.Errorf("%+v: %d %s, want 409", c.req, status, body)
				case c.field != "" && (status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != c.field):
					t.Errorf("%+v: %d %s, want 400 naming %s", c.req, status, body, c.field)
				}
			}

			// Used: recorded. Expired: 401 saying so.
			mustCall(t, env, ci.Token, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)
			var list []sdk.Token
			mustCall(t, env, bob.Token, "GET", "/api/v1/tokens", nil, http.StatusOK, &list)
			for _, tk := range list {
				if tk.Name == "ci" && (tk.LastUsedAt == nil || !tk.LastUsedAt.Equal(start)) {
					t.Errorf("ci's last use: %v", tk.LastUsedAt)
				}
			}
			env.Clock.Advance(time.Hour)
			wantRefused(t, env, ci.Token, `token "ci" expired at`)

			// Revoked, by name: 401 saying so; the name is free again.
			var revoked sdk.Token
			mustCall(t, env, bob.Token, "DELETE", "/api/v1/tokens/laptop", nil, http.StatusOK, &revoked)
			if revoked.Status != sdk.TokenRevoked || revoked.RevokedAt == nil || revoked.Token != "" {
				t.Errorf("revoked %+v", revoked)
			}
			wantRefused(t, env, def.Token, `token "laptop" was revoked at`)
			mustCall(t, env, bob.Token, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "laptop"}, http.StatusCreated, nil)
			mustCall(t, env, bob.Token, "DELETE", "/api/v1/tokens/"+revoked.ID, nil, http.StatusOK, nil) // by id, again: no change
			mustCall(t, env, bob.Token, "DELETE", "/api/v1/tokens/nothing", nil, http.StatusNotFound, nil)

			// Admins see and revoke others' tokens; users do not.
			alice := createUser(t, env, "alice")
			mustCall(t, env, alice, "GET", "/api/v1/tokens?user=bob", nil, http.StatusForbidden, nil)
			mustCall(t, env, alice, "DELETE", "/api/v1/tokens/initial?user=bob", nil, http.StatusForbidden, nil)
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/tokens?user=bob", nil, http.StatusOK, &list)
			if len(list) != 4 {
				t.Errorf("admin lists %d of bob's tokens, want 4", len(list))
			}
			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/tokens/initial?user=bob", nil, http.StatusOK, nil)
			wantRefused(t, env, bob.Token, `token "initial" was revoked`)
			mustCall(t, env, alice, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)

			// rotate-token: every token of the user revoked, one new "initial".
			var reset sdk.User
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users/alice/token", nil, http.StatusOK, &reset)
			wantRefused(t, env, alice, "was revoked")
			mustCall(t, env, reset.Token, "GET", "/api/v1/tokens", nil, http.StatusOK, &list)
			live := 0
			for _, tk := range list {
				if tk.Status == sdk.TokenActive {
					live++
				}
			}
			if live != 1 {
				t.Errorf("%d live tokens after a reset, want 1", live)
			}

			// Audited.
			var page sdk.AuditPage
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action=token.revoke&outcome=success", nil, http.StatusOK, &page)
			if len(page.Entries) != 3 || page.Entries[len(page.Entries)-1].TargetName != "bob/laptop" || page.Entries[0].Actor != "admin" {
				t.Errorf("token.revoke entries: %+v", page.Entries)
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action=token.create&outcome=success", nil, http.StatusOK, &page)
			if len(page.Entries) != 3 || page.Entries[0].Details["expires_at"] == nil {
				t.Errorf("token.create entries: %+v", page.Entries)
			}
		})
	}
}

// Suspending a user stops its workspaces and refuses everything it holds: tokens, browser and
// workspace sessions, keys; reinstating gives it back. Deleting is refused while the user owns
// workspaces, and nobody suspends or deletes themselves.
func TestSuspendAndDeleteUsers(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			k1 := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com"})
			alice, carol := createUser(t, env, "alice"), createUser(t, env, "carol")
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": proxyDevfile}, http.StatusCreated, nil)
			host := "8080-dev--alice.ws.example.com"
			b := &browser{t: t, env: env}
			b.signIn(alice)
			code, _ := b.authorize(host)
			var ex protocol.ProxyExchangeResponse
			mustCall(t, env, k1, "POST", protocol.ProxyExchangePath, protocol.ProxyExchangeRequest{Code: code, Host: host, Nonce: testNonce}, http.StatusOK, &ex)
			key, _ := newKey(t, "alice@laptop")
			mustCall(t, env, alice, "POST", "/api/v1/users/me/ssh-keys", sdk.AddSSHKeyRequest{PublicKey: key}, http.StatusCreated, nil)

			checks := func() map[string]bool {
				out := map[string]bool{}
				for what, req := range map[string]protocol.ProxyCheckRequest{"token": {Host: host, Token: alice}, "session": {Host: host, Session: ex.Session}} {
					var got protocol.ProxyCheckResponse
					mustCall(t, env, k1, "POST", protocol.ProxyCheckPath, req, http.StatusOK, &got)
					out["proxy "+what] = got.Allowed
				}
				for what, req := range map[string]protocol.ProxySSHCheckRequest{"key": {Workspace: "dev", PublicKey: key}, "token": {Workspace: "dev", Token: alice}} {
					var got protocol.ProxySSHCheckResponse
					mustCall(t, env, k1, "POST", protocol.ProxySSHCheckPath, req, http.StatusOK, &got)
					out["ssh "+what] = got.Allowed
				}
				c, _ := b.authorize(host)
				out["browser"] = c != ""
				return out
			}
			for what, ok := range checks() {
				if !ok {
					t.Fatalf("before the suspension, %s is refused", what)
				}
			}

			var u sdk.User
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/alice", sdk.UpdateUserRequest{Suspended: ptr(true)}, http.StatusOK, &u)
			if !u.Suspended || u.SuspendedAt == nil || len(u.StoppedWorkspaces) != 1 || u.StoppedWorkspaces[0] != "alice/dev" {
				t.Fatalf("suspended: %+v", u)
			}
			if w := stored(t, env, "dev"); w.DesiredState != workspace.Stopped || !strings.HasPrefix(w.DesiredStateReason, "suspended:") {
				t.Errorf("alice's workspace after the suspension: desired %s (%q)", w.DesiredState, w.DesiredStateReason)
			}
			wantRefused(t, env, alice, "user alice is suspended")
			for what, ok := range checks() {
				if ok {
					t.Errorf("a suspended user's %s is let in", what)
				}
			}
			var users []sdk.User
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users", nil, http.StatusOK, &users)
			if len(users) != 3 || users[1].Username != "alice" || !users[1].Suspended || users[2].Suspended {
				t.Errorf("users: %+v", users)
			}

			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/alice", sdk.UpdateUserRequest{Suspended: ptr(false)}, http.StatusOK, &u)
			if u.Suspended {
				t.Errorf("reinstated: %+v", u)
			}
			mustCall(t, env, alice, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)
			if w := stored(t, env, "dev"); w.DesiredState != workspace.Stopped {
				t.Errorf("a reinstated user's workspace was started: %s", w.DesiredState)
			}

			// Deleting: refused while alice owns dev, naming it; carol goes.
			status, body := call(t, env, env.AdminToken, "DELETE", "/api/v1/users/alice", nil)
			if e := apiError(t, body); status != http.StatusConflict || !strings.Contains(e.Detail, "(dev)") {
				t.Errorf("deleting alice with a workspace: %d %s", status, body)
			}
			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/users/carol", nil, http.StatusNoContent, nil)
			wantRefused(t, env, carol, "invalid token")
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/users", map[string]any{"username": "carol"}, http.StatusConflict, nil)
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users", nil, http.StatusOK, &users)
			if len(users) != 2 {
				t.Errorf("users after carol's deletion: %+v", users)
			}

			// Nobody removes themselves; only admins remove anyone.
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/admin", sdk.UpdateUserRequest{Suspended: ptr(true)}, http.StatusConflict, nil)
			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/users/admin", nil, http.StatusConflict, nil)
			mustCall(t, env, alice, "PATCH", "/api/v1/users/admin", sdk.UpdateUserRequest{Suspended: ptr(true)}, http.StatusForbidden, nil)
			mustCall(t, env, alice, "DELETE", "/api/v1/users/admin", nil, http.StatusForbidden, nil)
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users/me", nil, http.StatusOK, nil)

			var page sdk.AuditPage
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action="+string(audit.UserSuspend), nil, http.StatusOK, &page)
			if len(page.Entries) < 2 || page.Entries[len(page.Entries)-1].Outcome != "success" || page.Entries[len(page.Entries)-1].TargetName != "alice" {
				t.Errorf("user.suspend entries: %+v", page.Entries)
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action="+string(audit.UserDelete), nil, http.StatusOK, &page)
			if len(page.Entries) != 3 { // alice refused, carol, admin refused
				t.Errorf("user.delete entries: %+v", page.Entries)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Agents' tokens are rotated and revoked (refused at once), and an agent's config is patched field
// by field, all or nothing, each bad field named.
func TestAgentTokensAndConfig(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			old := createAgent(t, env, "k1", map[string]any{"dns_zone": "ws.example.com", "workspaces_quota": 3})
			info := func(token string) int {
				status, _ := call(t, env, token, "GET", protocol.InfoPath, nil)
				return status
			}
			if info(old) != http.StatusOK {
				t.Fatal("the agent's token does not work")
			}
			var a sdk.Agent
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/agents/k1/token", nil, http.StatusOK, &a)
			if !strings.HasPrefix(a.Token, "hga_") || info(old) != http.StatusUnauthorized || info(a.Token) != http.StatusOK {
				t.Fatalf("rotation: new %q, old %d, new %d", a.Token, info(old), info(a.Token))
			}
			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/agents/k1/token", nil, http.StatusOK, nil)
			if info(a.Token) != http.StatusUnauthorized {
				t.Fatal("a revoked agent token still works")
			}

			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{"workspaces_quota": 10, "labels": map[string]string{"team": "x"}}}, http.StatusOK, &a)
			if !strings.Contains(string(a.Config), `"workspaces_quota":10`) || !strings.Contains(string(a.Config), `"team":"x"`) || !strings.Contains(string(a.Config), `"dns_zone":"ws.example.com"`) {
				t.Fatalf("patched config %s", a.Config)
			}
			// Bad fields: each named, nothing written.
			status, body := call(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{
				"workspaces_quota": 20, "dns_zone": "other.example.com", "proxy_url_scheme": "gopher", "nope": 1}})
			e := apiError(t, body)
			fields := map[string]bool{}
			for _, v := range e.Validations {
				fields[v.Field] = true
			}
			if status != http.StatusBadRequest || !fields["config.dns_zone"] || !fields["config.nope"] {
				t.Errorf("bad patch: %d %s", status, body)
			}
			status, body = call(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{"proxy_url_scheme": "gopher"}})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != "config.proxy_url_scheme" {
				t.Errorf("bad scheme: %d %s", status, body)
			}
			var agents []sdk.Agent
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/agents", nil, http.StatusOK, &agents)
			if !strings.Contains(string(agents[0].Config), `"workspaces_quota":10`) {
				t.Errorf("a refused patch wrote: %s", agents[0].Config)
			}
			// null: back to the default (no quota).
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{"workspaces_quota": nil}}, http.StatusOK, &a)
			if !strings.Contains(string(a.Config), `"workspaces_quota":-1`) {
				t.Errorf("reset quota: %s", a.Config)
			}
			mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": "x"}, http.StatusBadRequest, nil)

			// Provisioners.
			var p sdk.Provisioner
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/provisioners", map[string]any{"name": "p1"}, http.StatusCreated, &p)
			acquire := func(token string) int {
				status, _ := call(t, env, token, "POST", strings.Replace(protocol.ProvisionerHeartbeatPath, "{id}", "nope", 1), map[string]any{})
				return status
			}
			if acquire(p.Token) == http.StatusUnauthorized {
				t.Fatal("the provisioner's token does not work")
			}
			var p2 sdk.Provisioner
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/provisioners/p1/token", nil, http.StatusOK, &p2)
			if acquire(p.Token) != http.StatusUnauthorized || acquire(p2.Token) == http.StatusUnauthorized {
				t.Errorf("provisioner rotation: old %d new %d", acquire(p.Token), acquire(p2.Token))
			}
			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/provisioners/p1/token", nil, http.StatusOK, nil)
			if acquire(p2.Token) != http.StatusUnauthorized {
				t.Error("a revoked provisioner token still works")
			}

			var page sdk.AuditPage
			for action, n := range map[audit.Action]int{audit.AgentToken: 2, audit.AgentUpdate: 5, audit.ProvisionerToken: 2} {
				mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action="+string(action), nil, http.StatusOK, &page)
				if len(page.Entries) != n {
					t.Errorf("%s: %d entries, want %d: %+v", action, len(page.Entries), n, page.Entries)
				}
			}
		})
	}
}

// A suspended user's workspaces are not started by their schedule; once reinstated, they are.
func TestSuspendedUserIsNotAutostarted(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newLCEnv(t, engine, nil)
			e.create("w")
			e.report("w", "Running")
			mustCall(t, e.Env, e.dev, "PATCH", "/api/v1/workspaces/w", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
			e.report("w", "Stopped")
			mustCall(t, e.Env, e.dev, "PUT", "/api/v1/workspaces/w/schedule", map[string]any{"autostart": "0 9 * * *", "timezone": "UTC"}, http.StatusOK, nil)
			mustCall(t, e.Env, e.AdminToken, "PATCH", "/api/v1/users/dev", sdk.UpdateUserRequest{Suspended: ptr(true)}, http.StatusOK, nil)
			e.Clock.Advance(4*time.Hour + time.Minute) // 09:01
			if n := e.tick(); n != 0 {
				t.Fatalf("the executor made %d changes to a suspended user's workspaces", n)
			}
			if w := stored(t, e.Env, "w"); w.DesiredState != workspace.Stopped {
				t.Fatalf("a suspended user's workspace was autostarted: %s", w.DesiredState)
			}
			mustCall(t, e.Env, e.AdminToken, "PATCH", "/api/v1/users/dev", sdk.UpdateUserRequest{Suspended: ptr(false)}, http.StatusOK, nil)
			e.Clock.Advance(24 * time.Hour)
			if n := e.tick(); n != 1 {
				t.Fatalf("after reinstatement, %d changes, want the autostart", n)
			}
			e.wantDesired("w", "Running", "autostart: ")
		})
	}
}
