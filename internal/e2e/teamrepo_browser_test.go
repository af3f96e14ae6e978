package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// teamRepositoryInBrowser is issue 22's "done when" through the UI in Chromium, on the real node:
// carol does in the browser what alice did with the CLI. She links her forge account on the
// Forges page (the forge's consent as carol), fills her profile (name, email, a private dotfiles
// repository) on the Profile page, and creates a workspace from her private repository, described
// by a devcontainer.json, with the new-workspace form; the page shows it reach Running by itself.
// Then, in that workspace: the postCreateCommand ran, git's identity is her profile's, her dotfiles
// are installed, and git reaches her private repository as her (the forge saw carol, nobody else).
// It returns carol's CLI user, for the caller to delete the workspace.
func teamRepositoryInBrowser(t *testing.T, e *proxyEnv, forge *forgetest.Forge, ssh func(u cliUser, ws, script string) (string, string, int)) cliUser {
	t.Helper()
	forge.AddUser(forgetest.User{Login: "carol", FullName: "Carol Danvers", Email: "carol@forge.test"})
	carolToken, _ := e.user(t, "carol")
	cu := cliUser{url: e.srv.URL, token: carolToken, home: t.TempDir()}
	forge.CreateRepo("carol", "dotfiles", true, map[string]string{"bootstrap": "#!/bin/sh\necho \"bootstrapped by $(id -u)\" > \"$HOME/carol-dotfiles\"\n"})
	head := forge.CreateRepo("carol", "site", true, map[string]string{
		".devcontainer/devcontainer.json": `{
  // carol's team environment
  "image": "` + kubetest.WorkspaceGitImage + `",
  "remoteEnv": {"SITE_MODE": "preview"},
  "postCreateCommand": ["sh", "-c", "echo created-in-browser > /workspaces/site-created.txt"],
}
`,
		"index.html": "<h1>site</h1>\n"})
	siteURL := forge.InsideHTTPURL() + "/carol/site.git"

	b := browser.Start(t, browser.Options{Name: "carol", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"}).On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))

	// The Forges page: Link, the forge's consent as carol, back on Hangar's callback page.
	row := `//tr[@data-testid="forge-row" and @data-id="forge"]`
	b.Open(e.srv.URL+"/ui/forges", `//input[@name="token"]`)
	b.SignIn(carolToken, row+`//button[@data-testid="forge-link" and text()="Link"]`)
	b.Click(row+`//button[@data-testid="forge-link"]`, `//button[@id="grant-carol"]`)
	b.Click(`//button[@id="grant-carol"]`, `//*[contains(., "is linked to Forge as carol")]`)

	// The Profile page: her git identity and her private dotfiles repository.
	b.Open(e.srv.URL+"/ui/profile", `//input[@data-testid="profile-full_name"]`)
	b.Run("fill the profile",
		chromedp.SetValue(`//input[@data-testid="profile-full_name"]`, "Carol Danvers", chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="profile-email"]`, "carol@example.com", chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="profile-dotfiles_repo"]`, forge.InsideHTTPURL()+"/carol/dotfiles.git", chromedp.BySearch))
	b.Click(`//button[@data-testid="profile-submit"]`, `//*[@id="toast" and contains(., "Profile saved")]`)

	// The new-workspace form, from the repository; the page follows the workspace to Running.
	b.Click(`//a[@data-testid="nav-new"]`, `//*[@data-testid="create-form"]`)
	b.Run("fill the form",
		chromedp.WaitReady(`//select[@data-testid="create-agent"]/option[@value="`+e.agent+`"]`, chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="create-name"]`, "site", chromedp.BySearch),
		chromedp.Click(`//input[@data-testid="create-source-repository"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//input[@data-testid="create-repo-url"]`, chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="create-repo-url"]`, siteURL, chromedp.BySearch),
		chromedp.SetValue(`//input[@data-testid="create-repo-ref"]`, "main", chromedp.BySearch),
		chromedp.SetValue(`//select[@data-testid="create-agent"]`, e.agent, chromedp.BySearch))
	b.Click(`//button[@data-testid="create-submit"]`, `//dd[@data-testid="ws-definition" and text()="devcontainer.json"]`)
	if loc := b.Location(); !strings.HasSuffix(loc, "/ui/w/carol/site") {
		t.Errorf("after the creation the browser is at %s", loc)
	}
	b.RunWithin(4*time.Minute, "the page to show Running",
		chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Running"]`, chromedp.BySearch))

	// In the workspace: what she asked for, as her.
	var out, errOut string
	var code int
	kubetest.Eventually(t, 2*time.Minute, "carol's workspace to answer with her definition, identity and dotfiles", func(context.Context) error {
		out, errOut, code = ssh(cu, "site", `cat /workspaces/site-created.txt; echo "$SITE_MODE"; git -C /workspaces/site rev-parse HEAD;
git -C /workspaces/site config user.name; git -C /workspaces/site config user.email; cat "$HOME/carol-dotfiles"`)
		if code != 0 {
			return fmt.Errorf("exit %d: %q %q", code, out, errOut)
		}
		return nil
	})
	want := "created-in-browser\npreview\n" + head + "\nCarol Danvers\ncarol@example.com\nbootstrapped by 5001\n"
	if out != want {
		t.Fatalf("carol's workspace says %q, want %q (postCreate, remoteEnv, the clone's HEAD, git identity, dotfiles)", out, want)
	}
	if out, errOut, code := ssh(cu, "site", "git -C /workspaces/site ls-remote origin refs/heads/main"); code != 0 || !strings.Contains(out, head) {
		t.Fatalf("git ls-remote of her private repository: exit %d %q %q", code, out, errOut)
	}
	var carols []string
	for _, a := range forge.GitAccesses() {
		// git's first request of each exchange carries no credentials (a 401 asks for them).
		if (a.Repo == "carol/site" || a.Repo == "carol/dotfiles") && !(a.User == "" && a.Status == http.StatusUnauthorized) {
			carols = append(carols, fmt.Sprintf("%s %s %d", a.Repo, a.User, a.Status))
		}
	}
	if len(carols) == 0 || slices.ContainsFunc(carols, func(s string) bool { return len(strings.Fields(s)) != 3 || strings.Fields(s)[1] != "carol" }) ||
		!slices.Contains(carols, fmt.Sprintf("carol/site carol %d", http.StatusOK)) || !slices.Contains(carols, fmt.Sprintf("carol/dotfiles carol %d", http.StatusOK)) {
		t.Fatalf("the forge's accesses to carol's repositories: %q, want all as carol, her site and dotfiles served", carols)
	}
	return cu
}
