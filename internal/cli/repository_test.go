package cli

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
)

// TestUpdateFromRepository: `hangar create --repo`, then `hangar show` says the repository, the
// ref and the commit the definition was read at; after a commit that changes the definition,
// `hangar update` makes the new one the workspace's and show says the new commit; a second update
// says there is nothing to do. A real server, and the test forge as a Gitea serving a public
// repository (read without a linked account).
func TestUpdateFromRepository(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice", Email: "alice@example.com"})
	first := forge.CreateRepo("alice", "app", false, map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v1"}`})
	providers, err := externalauth.Decode([]byte(fmt.Sprintf("providers:\n  - {id: forge, name: Forge, type: gitea, client_id: c, client_secret_env: S, base_url: %q, hosts: [%q]}\n",
		forge.HTTPURL(), forge.HTTPURL())), func(string) (string, bool) { return "secret", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := externalauth.ParseKeys([]byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="))
	if err != nil {
		t.Fatal(err)
	}
	var base string
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.ExternalAuth = externalauth.New(externalauth.Options{Providers: providers, Keys: keys, Store: o.Store, Clock: o.Clock,
			CallbackURL: func(id string) string { return server.ExternalAuthCallbackURL(base, id) }})
	})
	base = env.URL
	admin, err := sdk.New(env.URL, env.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateAgent(context.Background(), sdk.CreateAgentRequest{Name: "k1"}); err != nil {
		t.Fatal(err)
	}
	alice, err := admin.CreateUser(context.Background(), sdk.CreateUserRequest{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": alice.Token})
	repo := forge.CloneURL("alice", "app")
	c.ok("create", "app", "--agent", "k1", "--repo", repo+"#main")

	rows := func(out string) string {
		t.Helper()
		// The lines about the repository.
		m := regexp.MustCompile(`(?m)^Repository:.*\n.*\n.*\n`).FindString(out)
		if m == "" {
			t.Fatalf("show has no repository lines:\n%s", out)
		}
		return m
	}
	want := func(commit string) string {
		return "Repository:          " + repo + " at main\n" +
			"Definition:          .devcontainer.json at commit " + commit + "\n" +
			"                     read 2026-01-01 05:00:00 UTC; 'hangar update app' reads it again\n"
	}
	if got := rows(c.ok("show", "app")); got != want(first) {
		t.Fatalf("show after create:\n%s\nwant:\n%s", got, want(first))
	}

	second := forge.Commit("alice", "app", "v2", map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v2"}`})
	r := c.run("update", "app")
	if out := r.stderr; r.code != 0 || !strings.Contains(out, "Updating app: its definition is now the one of .devcontainer.json at commit "+second+"; the agent rolls it onto it.\n") {
		t.Fatalf("update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := rows(c.ok("show", "app")); got != want(second) {
		t.Fatalf("show after update:\n%s\nwant:\n%s", got, want(second))
	}
	if out := c.ok("update", "app"); out != "Workspace app is up to date: its definition is the one of .devcontainer.json at commit "+second+".\n" {
		t.Fatalf("update again:\n%s", out)
	}
	if out := c.fail("update", "nope"); !strings.Contains(out, `workspace "nope" not found`) {
		t.Fatalf("update of an unknown workspace:\n%s", out)
	}
}
