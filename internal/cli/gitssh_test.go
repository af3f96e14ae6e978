package cli

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/gitssh"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestGitSSHCommands: `hangar gitssh` prints the user's key (the same each time) and says where
// it goes; `hangar gitssh rotate` prints a new one; a server without a key file says why not.
func TestGitSSHCommands(t *testing.T) {
	keys, err := externalauth.ParseKeys([]byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="))
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) { o.GitSSH = &gitssh.Service{Keys: keys, Store: o.Store, Clock: o.Clock} })
	admin, err := sdk.New(env.URL, env.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := admin.CreateUser(context.Background(), sdk.CreateUserRequest{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": alice.Token})
	key := func(out string) ssh.PublicKey {
		t.Helper()
		line, _, _ := strings.Cut(out, "\n")
		pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil || comment != "hangar:alice" || !strings.Contains(out, "("+ssh.FingerprintSHA256(pub)+")") || !strings.Contains(out, "Add it to your forge") {
			t.Fatalf("output:\n%s\n(%v)", out, err)
		}
		return pub
	}
	first := c.ok("gitssh")
	k1 := key(first)
	if again := c.ok("gitssh"); again != first {
		t.Fatalf("a second read changed the key:\n%s\nthen\n%s", first, again)
	}
	rotated := c.ok("gitssh", "rotate")
	if k2 := key(rotated); string(k2.Marshal()) == string(k1.Marshal()) || !strings.Contains(rotated, "Your new git SSH key; the old one signs no more") {
		t.Fatalf("rotate:\n%s", rotated)
	}
	if out := c.fail("gitssh", "nope"); !strings.Contains(out, "nope") {
		t.Fatalf("gitssh nope:\n%s", out)
	}

	plain := servertest.NewWith(t, "sqlite")
	pc := newCLI(t, map[string]string{"HANGAR_URL": plain.URL, "HANGAR_TOKEN": plain.AdminToken})
	if out := pc.fail("gitssh"); !strings.Contains(out, "git SSH keys are not configured") || !strings.Contains(out, "--external-auth-key-file") {
		t.Fatalf("gitssh without a key file:\n%s", out)
	}
}
