package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

// TestBrowserForges: the Forges page in Chromium against a real server and a real OAuth2
// provider: a forge not linked offers Link, which goes to the forge and back to the callback's
// page ("linked as ..."); the page then shows the account and offers Unlink, behind a
// confirmation; unlinked, Link again.
func TestBrowserForges(t *testing.T) {
	forge := oidctest.New(t, oidctest.Options{})
	forge.AddUser(oidctest.User{Subject: "bob-forge", PreferredUsername: "bob-at-forge", Email: "bob@forge.test"})
	iss := forge.Issuer()
	providers, err := externalauth.Decode([]byte(fmt.Sprintf(`{"providers":[{"id":"forge","name":"Test Forge","type":"gitea","client_id":"c",
		"client_secret_env":"S","base_url":%q,"authorize_url":"%s/authorize","token_url":"%s/oauth/token","user_url":"%s/userinfo",
		"scopes":["openid","profile","email","offline_access"]}]}`, iss, iss, iss, iss)),
		func(string) (string, bool) { return "secret", true }, nil)
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
	forge.AddClient(oidctest.Client{ID: "c", Secret: "secret", RedirectURIs: []string{server.ExternalAuthCallbackURL(base, "forge")}})
	bob := createUser(t, env, "bob")
	forges := func() []sdk.ExternalAuth {
		t.Helper()
		var l sdk.ExternalAuthList
		call(t, env, bob, "GET", "/api/v1/external-auth", nil, &l)
		return l.Providers
	}

	c := browser.Start(t, browser.Options{Name: "bob", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 800))
	b.Open(env.URL+"/ui/forges", `//input[@name="token"]`)
	row := `//tr[@data-testid="forge-row" and @data-id="forge"]`
	b.SignIn(bob, row+`//button[@data-testid="forge-link" and text()="Link"]`)
	if s := b.Text(`[data-testid="forge-status"]`); s != "not linked" {
		t.Errorf("status before the link: %q", s)
	}
	// Link: to the forge's page, where bob authorizes, and back to the callback's page.
	b.Click(row+`//button[@data-testid="forge-link"]`, `//button[@id="user-bob-forge"]`)
	b.Click(`//button[@id="user-bob-forge"]`, `//*[contains(., "is linked to Test Forge as bob-at-forge")]`)
	if loc := b.Location(); !strings.HasPrefix(loc, env.URL+"/external-auth/forge/callback?") {
		t.Errorf("the link ended at %s", loc)
	}
	if f := forges(); !f[0].Linked || f[0].AccountLogin != "bob-at-forge" {
		t.Fatalf("after the link: %+v", f)
	}
	b.Run("back to the page", chromedp.Navigate(env.URL+"/ui/forges"),
		chromedp.WaitVisible(row+`//td[@data-testid="forge-account" and text()="bob-at-forge (bob@forge.test)"]`, chromedp.BySearch))
	if s := b.Text(`[data-testid="forge-status"]`); s != "linked" {
		t.Errorf("status after the link: %q", s)
	}
	screenshot(t, b, "forges")
	// Unlink asks first; dismissed, the link stays; confirmed, it goes.
	b.Click(row+`//button[@data-testid="forge-unlink"]`, `//dialog[@data-testid="confirm" and contains(., "Unlink Test Forge?")]//button[@data-testid="confirm-cancel"]`)
	b.Run("dismiss", chromedp.Click(`//button[@data-testid="confirm-cancel"]`, chromedp.BySearch), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	if f := forges(); !f[0].Linked {
		t.Fatal("a dismissed unlink unlinked")
	}
	b.Click(row+`//button[@data-testid="forge-unlink"]`, `//button[@data-testid="confirm-ok" and text()="Unlink"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, row+`//button[@data-testid="forge-link" and text()="Link"]`)
	if f := forges(); f[0].Linked {
		t.Fatalf("after the unlink: %+v", f)
	}
}
