package web_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
)

// TestBrowserWorkspaceFromRepository: "New workspace from a repository" in Chromium against a real
// server and the test forge (a Gitea, with its OAuth2 consent page and its API): a private
// repository before the link shows the server's message with a link to the Forges page; the user
// links the forge there, creates the workspace from the repository's devcontainer.json through
// the form, sees the definition and the translation's warnings on its page and the workspace in
// the list; a repository with two definitions offers them as a choice, and the one picked is used;
// a bad URL gets its error under its field. A devcontainer.json pasted in the form (no repository)
// has what is refused named, and defines the workspace.
func TestBrowserWorkspaceFromRepository(t *testing.T) {
	f := forgetest.New(t, forgetest.Options{})
	f.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	head := f.CreateRepo("alice", "app", true, map[string]string{".devcontainer/devcontainer.json": `{
  // a comment, as real files have
  "image": "hangar.local/workspace:dev",
  "forwardPorts": [8000],
  "shutdownAction": "none",
}`})
	f.CreateRepo("alice", "two", true, map[string]string{
		".devcontainer/go/devcontainer.json": `{"image": "hangar.local/go:dev"}`,
		".devcontainer/py/devcontainer.json": `{"image": "hangar.local/py:dev"}`,
	})
	cfg := fmt.Sprintf("providers:\n  - {id: forge, name: Test Forge, type: gitea, client_id: hangar, client_secret_env: FORGE_SECRET, base_url: %q, hosts: [%q]}\n", f.HTTPURL(), f.HTTPURL())
	providers, err := externalauth.Decode([]byte(cfg), func(k string) (string, bool) { return "forge-secret", k == "FORGE_SECRET" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := externalauth.ParseKeys([]byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="))
	if err != nil {
		t.Fatal(err)
	}
	var base string
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.ExternalAuth = externalauth.New(externalauth.Options{Providers: providers, Keys: keys, Store: o.Store, Clock: o.Clock, Log: o.Logger,
			CallbackURL: func(id string) string { return server.ExternalAuthCallbackURL(base, id) }})
	})
	base = env.URL
	f.AddClient("hangar", "forge-secret", []string{server.ExternalAuthCallbackURL(base, "forge")})
	createAgent(t, env, "k1")
	dev := createUser(t, env, "dev")

	c := browser.Start(t, browser.Options{Name: "dev", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))
	b.Open(env.URL+"/ui/new", `//input[@name="token"]`)
	b.SignIn(dev, `//*[@data-testid="create-form"]`)
	fillForm := func(name, url, ref string) {
		t.Helper()
		b.Run("fill the form for "+name,
			chromedp.WaitReady(`//select[@data-testid="create-agent"]/option[@value="k1"]`, chromedp.BySearch),
			chromedp.SetValue(`//input[@data-testid="create-name"]`, name, chromedp.BySearch),
			chromedp.Click(`//input[@data-testid="create-source-repository"]`, chromedp.BySearch),
			chromedp.WaitVisible(`//input[@data-testid="create-repo-url"]`, chromedp.BySearch),
			chromedp.SetValue(`//input[@data-testid="create-repo-url"]`, url, chromedp.BySearch),
			chromedp.SetValue(`//select[@data-testid="create-agent"]`, "k1", chromedp.BySearch))
		if ref != "" {
			b.Run("the ref", chromedp.SetValue(`//input[@data-testid="create-repo-ref"]`, ref, chromedp.BySearch))
		}
	}
	newForm := func() {
		t.Helper()
		b.Click(`//a[@data-testid="nav-new"]`, `//*[@data-testid="create-form"]`)
	}

	// An SSH remote (scp-like, which the browser does not take for a URL: the form sends it) of a
	// host no forge serves over SSH: the server's error under the URL field.
	fillForm("app", "git@127.0.0.1:alice/app.git", "")
	b.Click(`//button[@data-testid="create-submit"]`, `//p[@data-testid="create-repo-url-error" and contains(., "repository.url")]`)
	if got := b.Text(`[data-testid="create-repo-url-error"]`); !strings.Contains(got, "no forge configured in Hangar serves the SSH host 127.0.0.1") {
		t.Errorf("the URL's error reads %q", got)
	}

	// Private, not linked yet: the server's 409, with the way to the Forges page.
	b.Run("the private repository", chromedp.SetValue(`//input[@data-testid="create-repo-url"]`, f.CloneURL("alice", "app"), chromedp.BySearch))
	b.Click(`//button[@data-testid="create-submit"]`, `//*[@data-testid="create-error"]//a[@data-testid="create-link-forge"]`)
	if got := b.Text(`[data-testid="create-error"]`); !strings.Contains(got, "Test Forge cannot read alice/app without your account there: link it with `hangar external-auth link forge`") {
		t.Errorf("the error reads %q", got)
	}
	if got := b.Text(`[data-testid="create-repo-url-error"]`); got != "" {
		t.Errorf("the URL's earlier error is still shown: %q", got)
	}
	screenshot(t, b, "create-repository-not-linked")

	// The link goes to the Forges page; Link there, grant at the forge, back at the callback's page.
	row := `//tr[@data-testid="forge-row" and @data-id="forge"]`
	b.Click(`//a[@data-testid="create-link-forge"]`, row+`//button[@data-testid="forge-link"]`)
	b.Click(row+`//button[@data-testid="forge-link"]`, `//button[@id="grant-alice"]`)
	b.Click(`//button[@id="grant-alice"]`, `//*[contains(., "is linked to Test Forge as alice")]`)

	// Linked: the workspace is created from the repository's devcontainer.json at main.
	b.Run("back to the form", chromedp.Navigate(env.URL+"/ui/new"), chromedp.WaitVisible(`//*[@data-testid="create-form"]`, chromedp.BySearch))
	fillForm("app", f.CloneURL("alice", "app"), "main")
	screenshot(t, b, "create-repository")
	b.Click(`//button[@data-testid="create-submit"]`, `//dd[@data-testid="ws-definition" and text()="devcontainer.json"]`)
	if loc := b.Location(); !strings.HasSuffix(loc, "/ui/w/dev/app") {
		t.Errorf("after the creation the browser is at %s", loc)
	}
	b.Run("the warnings", chromedp.WaitVisible(`//li[@data-testid="ws-warning"]`, chromedp.BySearch))
	if got := b.Text(`[data-testid="ws-warnings"]`); !strings.Contains(got, "shutdownAction is ignored") {
		t.Errorf("the warnings read %q", got)
	}
	screenshot(t, b, "workspace-from-repository")
	b.Click(`//a[@data-testid="nav-workspaces"]`, `//tr[@data-testid="ws-row" and @data-name="app"]`)
	// Its own page, opened afresh, still names the definition.
	b.Click(`//tr[@data-testid="ws-row" and @data-name="app"]//a`, `//dd[@data-testid="ws-definition" and text()="devcontainer.json"]`)
	if devfile := storedDevfile(t, env, "app"); !strings.Contains(devfile, "hangar.local/workspace:dev") || !strings.Contains(devfile, f.CloneURL("alice", "app")) {
		t.Errorf("the workspace's devfile is not the repository's definition:\n%s", devfile)
	}
	// The page says where the definition comes from, and the dotfiles (none set).
	if got := b.Text(`[data-testid="ws-repository"]`); !strings.Contains(got, f.CloneURL("alice", "app")+" at main") ||
		!strings.Contains(got, ".devcontainer/devcontainer.json at commit "+head[:12]) {
		t.Errorf("the repository reads %q", got)
	}
	if got := b.Text(`[data-testid="ws-dotfiles-status"]`); got != "not configured" {
		t.Errorf("the dotfiles read %q", got)
	}
	// Update from the repository: the new commit's definition.
	second := f.Commit("alice", "app", "v2", map[string]string{".devcontainer/devcontainer.json": `{"image": "hangar.local/workspace:v2"}`})
	b.Click(`//button[@data-testid="ws-update-definition"]`, `//*[@data-testid="ws-repository-commit" and contains(., "at commit `+second[:12]+`")]`)
	if devfile := storedDevfile(t, env, "app"); !strings.Contains(devfile, "hangar.local/workspace:v2") {
		t.Errorf("the update did not store the new definition:\n%s", devfile)
	}
	screenshot(t, b, "workspace-updated-from-repository")

	// Two definitions: the form offers them; the one picked is used.
	newForm()
	fillForm("two", f.CloneURL("alice", "two"), "")
	choice := func(p string) string {
		return `//fieldset[@data-testid="create-repo-choices"]//input[@data-testid="create-repo-choice" and @data-path="` + p + `"]`
	}
	b.Click(`//button[@data-testid="create-submit"]`, choice(".devcontainer/py/devcontainer.json"))
	if got := b.Text(`[data-testid="create-repo-choices"]`); !strings.Contains(got, ".devcontainer/go/devcontainer.json") {
		t.Errorf("the choices read %q", got)
	}
	if got := b.Text(`[data-testid="create-repo-devcontainer-error"]`); !strings.Contains(got, "the repository has 2 devcontainer definitions") {
		t.Errorf("the path's error reads %q", got)
	}
	screenshot(t, b, "create-repository-choice")
	b.Run("pick py", chromedp.Click(choice(".devcontainer/py/devcontainer.json"), chromedp.BySearch))
	var path string
	b.Run("the path", chromedp.Value(`//input[@data-testid="create-repo-devcontainer"]`, &path, chromedp.BySearch))
	if path != ".devcontainer/py/devcontainer.json" {
		t.Errorf("picking a choice set the path to %q", path)
	}
	b.Click(`//button[@data-testid="create-submit"]`, `//dd[@data-testid="ws-definition" and text()="devcontainer.json"]`)
	if devfile := storedDevfile(t, env, "two"); !strings.Contains(devfile, "hangar.local/py:dev") {
		t.Errorf("the picked definition is not used:\n%s", devfile)
	}

	// A devcontainer.json pasted, without a repository: what is refused is named, then it works.
	newForm()
	b.Run("a pasted devcontainer.json",
		chromedp.WaitReady(`//select[@data-testid="create-agent"]/option[@value="k1"]`, chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="create-name"]`, "pasted", chromedp.BySearch),
		// A URL the browser refuses, left in the repository's part when another source is
		// chosen, must not block the form.
		chromedp.Click(`//input[@data-testid="create-source-repository"]`, chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="create-repo-url"]`, "not a url", chromedp.BySearch),
		chromedp.Click(`//input[@data-testid="create-source-devcontainer"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//textarea[@data-testid="create-devcontainer"]`, chromedp.BySearch),
		chromedp.SetValue(`//textarea[@data-testid="create-devcontainer"]`, `{"image": "hangar.local/workspace:dev", "privileged": true}`, chromedp.BySearch),
		chromedp.SetValue(`//select[@data-testid="create-agent"]`, "k1", chromedp.BySearch))
	b.Click(`//button[@data-testid="create-submit"]`, `//*[@data-testid="create-error" and contains(., "privileged")]`)
	b.Run("without privileged", chromedp.SetValue(`//textarea[@data-testid="create-devcontainer"]`, `{"image": "hangar.local/workspace:dev", "containerEnv": {"MODE": "pasted"}}`, chromedp.BySearch))
	b.Click(`//button[@data-testid="create-submit"]`, `//dd[@data-testid="ws-definition" and text()="devcontainer.json"]`)
	if devfile := storedDevfile(t, env, "pasted"); !strings.Contains(devfile, "pasted") {
		t.Errorf("the pasted definition is not used:\n%s", devfile)
	}
}

func storedDevfile(t *testing.T, env *servertest.Env, name string) string {
	t.Helper()
	d, err := env.Store.WorkspaceDevfile(context.Background(), stored(t, env, name).ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
