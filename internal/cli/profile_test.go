package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestProfileEndToEnd runs `hangar profile` and `profile set` against the real server: shown,
// set, cleared, refused with the server's words naming the field.
func TestProfileEndToEnd(t *testing.T) {
	env := servertest.New(t)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	var alice sdk.User
	if err := json.Unmarshal([]byte(admin.ok("users", "create", "alice", "-o", "json")), &alice); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": alice.Token})
	want := "User:      alice\nName:      - (commits use alice)\nEmail:     -\nDotfiles:  -\n"
	if got := c.ok("profile"); got != want {
		t.Fatalf("profile of a new user:\n%q\nwant\n%q", got, want)
	}
	got := c.ok("profile", "set", "--name", "Alice Liddell", "--email", "alice@example.com", "--dotfiles-repo", "git@git.example.com:alice/dots.git#main")
	want = "User:      alice\nName:      Alice Liddell\nEmail:     alice@example.com\nDotfiles:  git@git.example.com:alice/dots.git#main\n"
	if got != want {
		t.Fatalf("profile set:\n%q\nwant\n%q", got, want)
	}
	if got := c.ok("profile"); got != want {
		t.Fatalf("profile after set:\n%q", got)
	}
	// "" clears one field; the others stay.
	c.ok("profile", "set", "--dotfiles-repo", "")
	var me sdk.User
	if err := json.Unmarshal([]byte(c.ok("profile", "-o", "json")), &me); err != nil {
		t.Fatal(err)
	}
	if me.FullName != "Alice Liddell" || me.Email != "alice@example.com" || me.DotfilesRepo != "" {
		t.Fatalf("after clearing the dotfiles: %+v", me)
	}
	if msg := c.fail("profile", "set", "--dotfiles-repo", "ftp://x/y"); !strings.Contains(msg, "dotfiles_repo") || !strings.Contains(msg, "https://") {
		t.Fatalf("a bad URL: %q", msg)
	}
	if r := c.run("profile", "set"); r.code != 1 || !strings.Contains(r.stderr, "give at least one of --name, --email and --dotfiles-repo") {
		t.Fatalf("profile set without flags: exit %d %q", r.code, r.stderr)
	}
	// The admin's profile is untouched.
	if got := admin.ok("profile"); !strings.Contains(got, "Name:      - (commits use admin)") {
		t.Fatalf("admin's profile: %q", got)
	}
}
