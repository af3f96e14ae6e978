package forgetest_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
)

// TestConsentPageInChromium: a person in Chromium authorizes the application on the forge's
// consent page and lands on the application's callback with a code that exchanges (PKCE) for a
// token of theirs; Cancel lands there with access_denied.
func TestConsentPageInChromium(t *testing.T) {
	f := forgetest.New(t, forgetest.Options{Clock: clock.NewFake(time.Now())})
	f.AddUser(forgetest.User{Login: "alice", FullName: "Alice Liddell", Email: "alice@example.com"})
	f.AddUser(forgetest.User{Login: "bob"})
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><p id="code">` + html.EscapeString(q.Get("code")) + `</p><p id="error">` +
			html.EscapeString(q.Get("error")) + `</p><p id="state">` + html.EscapeString(q.Get("state")) + `</p>`))
	}))
	t.Cleanup(cb.Close)
	f.AddClient("app", "app-secret", []string{cb.URL + "/callback"})
	cfg := oauth2.Config{ClientID: "app", ClientSecret: "app-secret", RedirectURL: cb.URL + "/callback",
		Endpoint: oauth2.Endpoint{AuthURL: f.HTTPURL() + "/login/oauth/authorize", TokenURL: f.HTTPURL() + "/login/oauth/access_token"}}

	c := browser.Start(t, browser.Options{Name: "alice", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	tab := c.On(t)
	verifier := oauth2.GenerateVerifier()
	tab.Open(cfg.AuthCodeURL("st1", oauth2.S256ChallengeOption(verifier)), `//button[@id="grant-alice"]`)
	tab.Click(`//button[@id="grant-alice"]`, `//p[@id="state" and text()="st1"]`)
	code := tab.Text("#code")
	tok, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange of the code the browser brought: %v", err)
	}
	if status, u := apiUser(t, f, "token "+tok.AccessToken); status != 200 || u["login"] != "alice" {
		t.Fatalf("user API: %d %v", status, u)
	}

	tab.Open(cfg.AuthCodeURL("st2", oauth2.S256ChallengeOption(verifier)), `//button[@id="deny"]`)
	tab.Click(`//button[@id="deny"]`, `//p[@id="state" and text()="st2"]`)
	if got, code := tab.Text("#error"), tab.Text("#code"); got != "access_denied" || code != "" {
		t.Fatalf("after Cancel: error %q, code %q", got, code)
	}
}
