package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

// TestExternalAuthCommands: list, link (which prints the forge's page and waits until the
// browser completed the link there) and unlink, against a real server and a real OAuth2 provider.
func TestExternalAuthCommands(t *testing.T) {
	forge := oidctest.New(t, oidctest.Options{})
	forge.AddUser(oidctest.User{Subject: "s-alice", PreferredUsername: "alice-at-forge", Email: "alice@forge.test"})
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
	admin, err := sdk.New(env.URL, env.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := admin.CreateUser(context.Background(), sdk.CreateUserRequest{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": alice.Token})

	if out := c.ok("external-auth", "list"); out != "NAME   TYPE   ACCOUNT  LINKED  STATUS\nforge  gitea  -        -       not linked: hangar external-auth link forge\n" {
		t.Fatalf("list before the link:\n%s", out)
	}
	if out := c.fail("external-auth", "link", "nope"); !strings.Contains(out, `no forge "nope": see hangar external-auth list`) {
		t.Fatalf("link of an unknown forge:\n%s", out)
	}

	s := c.start("external-auth", "link", "forge", "--timeout", "1m")
	var authorize string
	for line := range s.lines {
		if u, ok := strings.CutPrefix(line, "  "); ok && strings.HasPrefix(u, iss+"/authorize?") {
			authorize = u
		}
		if strings.HasPrefix(line, "Waiting for the link") {
			break
		}
	}
	if authorize == "" {
		t.Fatal("link printed no authorize URL")
	}
	// The user opens it in a browser signed in to Hangar.
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar}
	resp, err := b.PostForm(env.URL+"/signin", url.Values{"token": {alice.Token}, "return_to": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page, err := b.Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	done, err := forge.LogIn(b, page, "s-alice")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(done.Body)
	done.Body.Close()
	if done.StatusCode != http.StatusOK || !strings.Contains(string(body), "as alice-at-forge") {
		t.Fatalf("callback: %s %s", done.Status, body)
	}
	s.expectEnd(t, "Linked Test Forge as alice-at-forge.", "")

	if out := c.ok("external-auth", "list"); !strings.Contains(out, "forge  gitea  alice-at-forge  2026-01-01 05:00") || !strings.HasSuffix(out, "  ok\n") {
		t.Fatalf("list after the link:\n%s", out)
	}
	if out := c.ok("external-auth", "unlink", "forge"); out != "Unlinked forge.\n" {
		t.Fatalf("unlink:\n%s", out)
	}
	if out := c.fail("external-auth", "unlink", "forge"); !strings.Contains(out, "error: no link: alice has no link to Test Forge") {
		t.Fatalf("second unlink:\n%s", out)
	}
	// Nobody links: the wait ends at --timeout, saying what to do.
	if out := c.fail("external-auth", "link", "forge", "--timeout", "50ms"); !strings.Contains(out, "timed out after 50ms waiting for the link to Test Forge: run hangar external-auth link forge again") {
		t.Fatalf("link that times out:\n%s", out)
	}
}
