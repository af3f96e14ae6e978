package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// The dotfiles status with the workspace: "not configured" without a dotfiles repository,
// "pending" with one until the helper reports, then what the helper reports with its token
// (installing, installed with the script, failed with the error and the log's last lines), in the
// workspace's detail only; a bad report is a 400 naming the field, another workspace's token
// writes only its own workspace's status.
func TestDotfilesStatusWithTheWorkspace(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine, withHelperTokens)
			agentToken := createAgent(t, env, "k1", nil)
			dev := createUser(t, env, "dev")
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1"}, http.StatusCreated, nil)
			mustCall(t, env, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "k1"}, http.StatusCreated, nil)
			dotfiles := func(name string) *sdk.WorkspaceDotfiles {
				t.Helper()
				var ws sdk.Workspace
				mustCall(t, env, dev, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &ws)
				return ws.Dotfiles
			}
			if d := dotfiles("app"); d == nil || d.Status != "not configured" {
				t.Fatalf("without a dotfiles repository: %+v", d)
			}
			repo := "https://git.example.com/dev/dots.git"
			mustCall(t, env, dev, "PATCH", "/api/v1/users/me", map[string]any{"dotfiles_repo": repo}, http.StatusOK, nil)
			if d := dotfiles("app"); d == nil || d.Status != "pending" || d.Repository != repo {
				t.Fatalf("with one, before the helper reports: %+v", d)
			}

			tokens := map[string]string{}
			for kubeName, token := range helperTokens(t, env, agentToken) {
				tokens[strings.SplitN(kubeName, "-", 2)[0]] = token
			}
			report := func(token string, st protocol.DotfilesStatus) (int, []byte) {
				return call(t, env, token, "PUT", protocol.DotfilesStatusPath, st)
			}
			if status, body := report(tokens["app"], protocol.DotfilesStatus{State: "installing", Repository: repo}); status != http.StatusNoContent {
				t.Fatalf("installing: %d %s", status, body)
			}
			if d := dotfiles("app"); d == nil || d.Status != "installing" || d.Repository != repo || d.UpdatedAt == nil {
				t.Fatalf("installing: %+v", d)
			}
			log := "dotfiles: running install.sh with /bin/sh -l\nmake: *** No rule to make target 'all'.\ndotfiles: failed: install.sh: exit status 2\n"
			if status, body := report(tokens["app"], protocol.DotfilesStatus{State: "failed", Repository: repo, Script: "install.sh", Error: "install.sh: exit status 2", Log: log}); status != http.StatusNoContent {
				t.Fatalf("failed: %d %s", status, body)
			}
			if d := dotfiles("app"); d == nil || d.Status != "failed" || d.Script != "install.sh" || d.Error != "install.sh: exit status 2" || d.Log != log {
				t.Fatalf("failed: %+v", d)
			}
			// The install is a startup step too.
			var withSteps sdk.Workspace
			mustCall(t, env, dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &withSteps)
			if st := withSteps.StartupSteps; len(st) != 1 || st[0].Name != "dotfiles" || st[0].State != "failed" || st[0].Detail != repo+" (install.sh)" ||
				st[0].Log != log+"install.sh: exit status 2\n" {
				t.Fatalf("the dotfiles step: %+v", st)
			}
			// The other workspace's token reports the other workspace.
			if status, body := report(tokens["other"], protocol.DotfilesStatus{State: "installed", Repository: repo, Script: "bootstrap"}); status != http.StatusNoContent {
				t.Fatalf("other: %d %s", status, body)
			}
			if d := dotfiles("app"); d.Status != "failed" {
				t.Fatalf("another workspace's report changed this one: %+v", d)
			}
			if d := dotfiles("other"); d.Status != "installed" || d.Script != "bootstrap" {
				t.Fatalf("other: %+v", d)
			}
			// Lists do not carry it.
			var list []sdk.Workspace
			mustCall(t, env, dev, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			for _, w := range list {
				if w.Dotfiles != nil {
					t.Fatalf("the list carries dotfiles: %+v", w.Dotfiles)
				}
			}
			for _, tc := range []struct {
				st    protocol.DotfilesStatus
				field string
			}{
				{protocol.DotfilesStatus{State: "done", Repository: repo}, "state"},
				{protocol.DotfilesStatus{State: "failed"}, "repository"},
				{protocol.DotfilesStatus{State: "failed", Repository: repo, Log: strings.Repeat("x", protocol.MaxDotfilesLogBytes+1)}, "log"},
				{protocol.DotfilesStatus{State: "failed", Repository: repo, Script: strings.Repeat("s", 257)}, "script"},
			} {
				status, body := report(tokens["app"], tc.st)
				if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) == 0 || e.Validations[0].Field != tc.field {
					t.Errorf("%+v: %d %s, want a 400 naming %s", tc.st, status, body, tc.field)
				}
			}
			if status, _ := report("", protocol.DotfilesStatus{State: "installed", Repository: repo}); status != http.StatusUnauthorized {
				t.Fatalf("no token: %d", status)
			}
			if status, _ := report(dev, protocol.DotfilesStatus{State: "installed", Repository: repo}); status != http.StatusUnauthorized {
				t.Fatalf("a user's token: %d", status)
			}
		})
	}
}

// oaDotfiles: the helper's dotfiles report, and the workspace's detail that shows it, against the
// OpenAPI document (the workspace tfssh and its helper token are oaGitSSH's).
func oaDotfiles(t *testing.T, c *oaChecker, dev string) {
	t.Helper()
	helper := protocol.WorkspaceAgentTokenPrefix + "openapi-gitssh"
	c.do(helper, "PUT", protocol.DotfilesStatusPath, map[string]any{"state": "failed", "repository": "https://git.example.com/dev/dots.git",
		"script": "install.sh", "error": "install.sh: exit status 1", "log": "oops\n"}, 204, true)
	c.do(helper, "PUT", protocol.DotfilesStatusPath, map[string]any{"state": "done", "repository": "r"}, 400, false)
	c.do(dev, "GET", "/api/v1/workspaces/tfssh", nil, 200, true)
}
