package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestProfile: a user sets, reads and clears their own profile through the API, on both stores;
// each invalid field is named and nothing of the request is written; another user's profile is
// not changed.
func TestProfile(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			dev := createUser(t, env, "dev")
			var me sdk.User
			mustCall(t, env, dev, "GET", "/api/v1/users/me", nil, http.StatusOK, &me)
			if me.FullName != "" || me.Email != "" || me.DotfilesRepo != "" {
				t.Fatalf("a new user's profile = %+v, want empty", me)
			}
			mustCall(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{
				"full_name": "Dev Eloper", "email": "dev@example.com", "dotfiles_repo": "https://git.example.com/dev/dotfiles.git#v2",
			}, http.StatusOK, &me)
			if me.Username != "dev" || me.FullName != "Dev Eloper" || me.Email != "dev@example.com" || me.DotfilesRepo != "https://git.example.com/dev/dotfiles.git#v2" {
				t.Fatalf("PATCH answered %+v", me)
			}
			mustCall(t, env, dev, "GET", "/api/v1/users/me", nil, http.StatusOK, &me)
			if me.FullName != "Dev Eloper" || me.Email != "dev@example.com" || me.DotfilesRepo != "https://git.example.com/dev/dotfiles.git#v2" {
				t.Fatalf("GET after PATCH = %+v", me)
			}

			// Every wrong field named; the valid one in the same request is not written.
			status, body := call(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{
				"full_name": "Evil <x>", "email": "not-an-email", "dotfiles_repo": "file:///etc/passwd",
			})
			if status != http.StatusBadRequest {
				t.Fatalf("invalid PATCH: %d %s", status, body)
			}
			fields := map[string]string{}
			for _, v := range apiError(t, body).Validations {
				fields[v.Field] = v.Detail
			}
			if len(fields) != 3 || !strings.Contains(fields["dotfiles_repo"], "https://") || !strings.Contains(fields["full_name"], "'<'") || !strings.Contains(fields["email"], "@") {
				t.Fatalf("validations = %v, want full_name, email and dotfiles_repo explained", fields)
			}
			for _, bad := range []map[string]any{
				{"dotfiles_repo": "https://" + strings.Repeat("a", 1100) + ".example.com/x"},
				{"dotfiles_repo": "https://user:secret@git.example.com/x.git"},
				{"dotfiles_repo": "https://git.example.com/x.git#"},
				{"dotfiles_repo": "--upload-pack=sh"},
				{"full_name": "line\nbreak"},
				{"email": "ada@example.com", "full_name": strings.Repeat("x", 257)},
			} {
				status, body := call(t, env, dev, "PATCH", "/api/v1/users/me", bad)
				if status != http.StatusBadRequest || len(apiError(t, body).Validations) != 1 {
					t.Errorf("PATCH %v: %d %s, want 400 naming one field", bad, status, body)
				}
			}
			if status, body := call(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{}); status != http.StatusBadRequest || !strings.Contains(apiError(t, body).Message, "give at least one of full_name, email and dotfiles_repo") {
				t.Errorf("empty PATCH: %d %s", status, body)
			}
			me = sdk.User{}
			mustCall(t, env, dev, "GET", "/api/v1/users/me", nil, http.StatusOK, &me)
			if me.FullName != "Dev Eloper" || me.Email != "dev@example.com" || me.DotfilesRepo != "https://git.example.com/dev/dotfiles.git#v2" {
				t.Fatalf("refused PATCHes changed the profile: %+v", me)
			}

			// scp-like and ssh URLs are git URLs too; "" clears; absent fields stay.
			mustCall(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{"dotfiles_repo": "git@git.example.com:dev/dotfiles.git"}, http.StatusOK, &me)
			mustCall(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{"dotfiles_repo": "ssh://git@git.example.com:2222/dev/dotfiles.git"}, http.StatusOK, &me)
			me = sdk.User{} // the answer omits what is empty
			mustCall(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{"email": ""}, http.StatusOK, &me)
			if me.FullName != "Dev Eloper" || me.Email != "" || me.DotfilesRepo != "ssh://git@git.example.com:2222/dev/dotfiles.git" {
				t.Fatalf("after clearing the email: %+v", me)
			}

			// The admin's profile is its own.
			var admin sdk.User
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/users/me", nil, http.StatusOK, &admin)
			if admin.FullName != "" || admin.DotfilesRepo != "" {
				t.Fatalf("admin's profile changed: %+v", admin)
			}
			// The change is audited with the fields it changed.
			var log struct {
				Entries []struct {
					Outcome string
					Details map[string]any
				}
			}
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/audit?action=user.profile", nil, http.StatusOK, &log)
			var ok []any
			for _, e := range log.Entries {
				if e.Outcome == "success" {
					ok = append(ok, e.Details["fields"])
				}
			}
			if len(ok) != 4 || len(log.Entries) != 4+8 {
				t.Fatalf("user.profile audit entries = %+v, want the 4 accepted changes and the 8 refused", log.Entries)
			}
		})
	}
}

// TestProfileInWorkspaceConfig: the config the agent gets for a workspace carries its owner's git
// identity and dotfiles repository, as the owner set them before the start; without a profile the
// name is the username and there is no email nor dotfiles.
func TestProfileInWorkspaceConfig(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agentToken := createAgent(t, env, "k1", nil)
			dev, plain := createUser(t, env, "dev"), createUser(t, env, "plain")
			mustCall(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{
				"full_name": "Dev Eloper", "email": "dev@example.com", "dotfiles_repo": "https://git.example.com/dev/dotfiles.git#main",
			}, http.StatusOK, nil)
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "a", "agent": "k1"}, http.StatusCreated, nil)
			mustCall(t, env, plain, "POST", "/api/v1/workspaces", map[string]any{"name": "b", "agent": "k1"}, http.StatusCreated, nil)
			resp := reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
			configs := map[string]string{}
			for _, r := range resp.WorkspaceRailsInfos {
				configs[r.Name[:1]] = r.ConfigToApply
			}
			for _, want := range []string{
				"- name: GIT_AUTHOR_NAME\n          value: \"Dev Eloper\"", "- name: GIT_AUTHOR_EMAIL\n          value: dev@example.com",
				"- name: GIT_COMMITTER_NAME\n          value: \"Dev Eloper\"", "- name: GIT_COMMITTER_EMAIL\n          value: dev@example.com",
				"- name: HANGAR_HELPER_DOTFILES_REPO\n          value: \"https://git.example.com/dev/dotfiles.git#main\"",
			} {
				if !strings.Contains(configs["a"], want) {
					t.Errorf("dev's workspace config lacks %q", want)
				}
			}
			if !strings.Contains(configs["b"], "- name: GIT_AUTHOR_NAME\n          value: plain") || strings.Contains(configs["b"], "GIT_AUTHOR_EMAIL") ||
				strings.Contains(configs["b"], "HANGAR_HELPER_DOTFILES_REPO") {
				t.Errorf("plain's workspace config, without a profile:\n%s", configs["b"])
			}
		})
	}
}
