package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// TestBrowserProfile: the profile page (hangar profile set) in Chromium against a real server. A
// bad dotfiles URL gets the server's error next to its field, naming it, and nothing is stored;
// the name, email and dotfiles repository are saved and shown again; a field emptied is cleared.
func TestBrowserProfile(t *testing.T) {
	env := servertest.New(t)
	bob := createUser(t, env, "bob")
	me := func() sdk.User {
		t.Helper()
		var u sdk.User
		call(t, env, bob, "GET", "/api/v1/users/me", nil, &u)
		return u
	}
	c := browser.Start(t, browser.Options{Name: "bob", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 800))
	b.Open(env.URL+"/ui/", `//input[@name="token"]`)
	// The page is settled once its live stream is: the nav may be drawn again before.
	b.SignIn(bob, `//*[@data-testid="live" and text()="live"]`)
	b.Click(`//a[@data-testid="nav-profile"]`, `//input[@data-testid="profile-full_name"]`)

	b.Run("fill the form", chromedp.SendKeys(`//input[@data-testid="profile-full_name"]`, "Bob Builder", chromedp.BySearch),
		chromedp.SendKeys(`//input[@data-testid="profile-email"]`, "bob@example.com", chromedp.BySearch),
		chromedp.SendKeys(`//input[@data-testid="profile-dotfiles_repo"]`, "file:///etc/passwd", chromedp.BySearch))
	b.Click(`//button[@data-testid="profile-submit"]`, `//input[@data-testid="profile-dotfiles_repo"]/following::*[1][@data-testid="profile-dotfiles_repo-error"]`)
	if msg := b.Text(`[data-testid="profile-dotfiles_repo-error"]`); !strings.Contains(msg, "dotfiles_repo") || !strings.Contains(msg, "https://") {
		t.Errorf("the bad URL's error reads %q, want the server's, naming dotfiles_repo", msg)
	}
	if u := me(); u.FullName != "" || u.Email != "" || u.DotfilesRepo != "" {
		t.Fatalf("a refused save stored %+v", u)
	}

	b.Run("fix the URL", chromedp.SetValue(`//input[@data-testid="profile-dotfiles_repo"]`, "https://git.example.com/bob/dotfiles.git#main", chromedp.BySearch))
	b.Click(`//button[@data-testid="profile-submit"]`, `//*[@id="toast" and contains(., "Profile saved")]`)
	if u := me(); u.FullName != "Bob Builder" || u.Email != "bob@example.com" || u.DotfilesRepo != "https://git.example.com/bob/dotfiles.git#main" {
		t.Fatalf("saved %+v", u)
	}
	// The page shows what is stored, after a reload too.
	b.Run("reload", chromedp.Reload(), chromedp.WaitVisible(`//input[@data-testid="profile-full_name"]`, chromedp.BySearch))
	var name, dots string
	b.Run("read the fields", chromedp.Value(`//input[@data-testid="profile-full_name"]`, &name, chromedp.BySearch),
		chromedp.Value(`//input[@data-testid="profile-dotfiles_repo"]`, &dots, chromedp.BySearch))
	if name != "Bob Builder" || dots != "https://git.example.com/bob/dotfiles.git#main" {
		t.Fatalf("after a reload the page shows %q %q", name, dots)
	}

	// Emptied, the email is cleared; the rest stays.
	var ok bool
	b.Run("empty the email", chromedp.Evaluate(`(() => { const e = document.querySelector('[data-testid="profile-email"]'); e.value = ''; return e.value === ''; })()`, &ok))
	b.Click(`//button[@data-testid="profile-submit"]`, `//*[@id="toast" and contains(., "Profile saved")]`)
	if u := me(); u.FullName != "Bob Builder" || u.Email != "" || u.DotfilesRepo == "" {
		t.Fatalf("after emptying the email: %+v", u)
	}
	screenshot(t, b, "profile")
}
