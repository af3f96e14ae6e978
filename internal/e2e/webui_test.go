package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

// crashDevfile's container exits at once (code 3): the workspace fails, and says why.
const crashDevfile = `schemaVersion: 2.1.0
metadata:
  name: crash
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
      command: ["/bin/sh", "-c", "echo giving up; exit 3"]
`

// TestWebUI is issue 11's "done when", in Chromium against the real thing: the server (the
// binary, on SQLite) signs users in through a real OIDC provider run here, its workspaces run on
// the cluster's real node, and `hangar proxy` lets them in. A new user signs in through the
// provider, creates a workspace on the page and watches it reach Running without a reload, opens
// its app through the proxy, stops it, reads why another one failed, and revokes a token on the
// page, after which the proxy refuses that token.
func TestWebUI(t *testing.T) {
	parallel(t)
	idp := oidctest.New(t, oidctest.Options{RememberSessions: true})
	verified := true
	idp.AddUser(oidctest.User{Subject: "carol", Email: "carol@example.test", EmailVerified: &verified, PreferredUsername: "carol"})
	secretFile := filepath.Join(t.TempDir(), "oidc-client-secret")
	if err := os.WriteFile(secretFile, []byte("web-ui-test-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := setUpProxy(t, "--oidc-issuer-url", idp.Issuer(), "--oidc-client-id", "hangar", "--oidc-client-secret-file", secretFile,
		"--oidc-name", "Test IdP")
	idp.AddClient(oidctest.Client{ID: "hangar", Secret: "web-ui-test-secret", RedirectURIs: []string{e.srv.URL + "/oidc/callback"},
		PostLogoutRedirectURIs: []string{e.srv.URL + "/oidc/signed-out"}})
	b := startBrowser(t, e, e.loopbackFront(t), "carol").On(t)
	proxied := &http.Client{Transport: e.transport(true), Timeout: 30 * time.Second}

	// Sign in: the page sends the browser to the sign-in, the provider's link, carol's button, and
	// back to the list, as a user the server has just created.
	b.Open(e.srv.URL+"/ui/", `//a[@id="oidc-signin"]`)
	if loc := b.Location(); !strings.HasPrefix(loc, e.srv.URL+"/signin?") {
		t.Errorf("signed out, /ui/ leads to %s", loc)
	}
	b.Click(`//a[@id="oidc-signin"]`, `//button[@id="user-carol"]`)
	if loc := b.Location(); !strings.HasPrefix(loc, idp.Issuer()) {
		t.Errorf("the provider's link leads to %s", loc)
	}
	b.Click(`//button[@id="user-carol"]`, `//*[@data-testid="live" and text()="live"]`)
	if who := b.Text(`[data-testid="whoami"]`); who != "carol" {
		t.Errorf("signed in through the provider, the page names %q", who)
	}
	if loc := b.Location(); loc != e.srv.URL+"/ui/" {
		t.Errorf("after the sign-in the browser is at %s", loc)
	}

	// Create a workspace from a devfile on the page; the list shows it reach Running by itself.
	create := func(name, devfile string) {
		t.Helper()
		b.Click(`//a[@data-testid="nav-new"]`, `//*[@data-testid="create-form"]`)
		b.Run("fill the form for "+name,
			chromedp.SendKeys(`//input[@data-testid="create-name"]`, name, chromedp.BySearch),
			chromedp.Click(`//input[@data-testid="create-source-devfile"]`, chromedp.BySearch),
			chromedp.WaitVisible(`//textarea[@data-testid="create-devfile"]`, chromedp.BySearch),
			chromedp.SetValue(`//textarea[@data-testid="create-devfile"]`, devfile, chromedp.BySearch),
			chromedp.SetValue(`//select[@data-testid="create-agent"]`, e.agent, chromedp.BySearch))
		b.Click(`//button[@data-testid="create-submit"]`, `//span[@data-testid="ws-detail-state"]`)
		// Deleted when the test ends (by the admin, who may: carol's tokens are the test's).
		t.Cleanup(func() {
			_, _ = e.admin.UpdateWorkspace(context.Background(), "carol/"+name, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"})
		})
		if loc := b.Location(); loc != e.srv.URL+"/ui/w/carol/"+name {
			t.Fatalf("after creating %s the browser is at %s", name, loc)
		}
	}
	create("web", webechoDevfile)
	created := time.Now()
	b.Click(`//a[@data-testid="nav-workspaces"]`, `//tr[@data-testid="ws-row" and @data-name="web"]`)
	var marked bool
	b.Run("mark the page", chromedp.Evaluate(`window.__sameDocument = true`, &marked))
	b.RunWithin(3*time.Minute, "see web Running in the list",
		chromedp.WaitVisible(`//tr[@data-testid="ws-row" and @data-name="web" and @data-actual="Running"]`, chromedp.BySearch))
	var same bool
	b.Run("check for a reload", chromedp.Evaluate(`window.__sameDocument === true`, &same))
	if !same {
		t.Error("the list showed Running only after the page was loaded again")
	}
	t.Logf("created on the page → Running in the list (real node, no reload): %v", time.Since(created).Round(time.Millisecond))

	// Its app, through the proxy: the link on its page, opened in the same browser, which the
	// proxy signs in through the server's (OIDC) session.
	b.Click(`//tr[@data-testid="ws-row" and @data-name="web"]//a`, `//a[@data-testid="ws-app-link"]`)
	var app string
	var found bool
	b.Run("read the app's link", chromedp.AttributeValue(`//a[@data-testid="ws-app-link"]`, "href", &app, &found, chromedp.BySearch))
	if !found || !strings.HasPrefix(app, "https://") {
		t.Fatalf("the app's link is %q", app)
	}
	waitServed(t, proxied, app, e.srv.AdminToken) // the EndpointSlice may trail Running a moment
	b.Open(app, `//h1[contains(., "webecho on port 8080")]`)
	if loc := b.Location(); loc != app {
		t.Errorf("the app opened at %s, want %s", loc, app)
	}

	// A token made on the tokens page enters the app through the proxy; revoked on the page, the
	// proxy refuses it at once.
	b.Open(e.srv.URL+"/ui/tokens", `//*[@data-testid="tokens-table"]`)
	b.Run("name a token", chromedp.SendKeys(`//input[@data-testid="token-new-name"]`, "script", chromedp.BySearch))
	b.Click(`//form[@data-testid="token-create"]//button[@type="submit"]`, `//tr[@data-testid="token-row" and @data-name="script"]`)
	secret := b.Text(`[data-testid="new-secret-value"]`)
	if status, body, _ := get(t, proxied, app, secret); status != http.StatusOK || !strings.Contains(body, "webecho on port 8080") {
		t.Fatalf("the app with the new token: %d %q", status, body)
	}
	b.Click(`//tr[@data-testid="token-row" and @data-name="script"]//button[@data-testid="token-revoke"]`, `//button[@data-testid="confirm-ok"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//tr[@data-testid="token-row" and @data-name="script" and @data-status="revoked"]`)
	if status, body, _ := get(t, proxied, app, secret); status != http.StatusUnauthorized {
		t.Errorf("the app with the revoked token: %d %q, want 401", status, body)
	}

	// Stop it on its page; the page follows the real pod's end.
	b.Open(e.srv.URL+"/ui/w/carol/web", `//button[@data-testid="ws-stop"]`)
	b.Click(`//button[@data-testid="ws-stop"]`, `//span[@data-testid="ws-detail-desired" and text()="Stopped"]`)
	b.RunWithin(2*time.Minute, "see web Stopped",
		chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Stopped"]`, chromedp.BySearch))

	// A workspace whose container exits: its page says why.
	create("crash", crashDevfile)
	b.RunWithin(2*time.Minute, "see crash fail with its reason",
		chromedp.WaitVisible(`//*[@data-testid="ws-detail-error" and contains(., "exited with code 3")]`, chromedp.BySearch))
	if state := b.Text(`[data-testid="ws-detail-state"]`); state != "Failed" {
		t.Errorf("the crashing workspace shows %q", state)
	}
	t.Logf("the failure reads %q", b.Text(`[data-testid="ws-detail-error"]`))

	// Sign out ends the provider's session too (RP-initiated logout): the browser passes through
	// the provider's end_session and lands on the signed-out page, and the next sign-in needs the
	// provider's login form again (while its session lived, the provider would have skipped it).
	if n := idp.Sessions(); n != 1 {
		t.Errorf("before the sign-out the provider keeps %d sessions of this browser, want 1", n)
	}
	b.Click(`//button[@data-testid="signout"]`, `//*[contains(., "You are signed out of Hangar and of Test IdP")]`)
	if loc := b.Location(); loc != e.srv.URL+"/oidc/signed-out" {
		t.Errorf("after the sign-out the browser is at %s", loc)
	}
	if n := idp.Sessions(); n != 0 {
		t.Errorf("after the sign-out the provider still keeps %d sessions", n)
	}
	b.Click(`//a[@id="oidc-signin"]`, `//button[@id="user-carol"]`)
	b.Open(e.srv.URL+"/ui/", `//a[@id="oidc-signin"]`)
}
