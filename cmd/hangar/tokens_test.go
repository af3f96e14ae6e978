package main_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestTokensAndUsersWithTheBinary drives tokens, users, whoami, logout and version through the
// built binary against a real `hangar server`.
func TestTokensAndUsersWithTheBinary(t *testing.T) {
	h := startLoggedIn(t)
	hangar, must := h.hangar, h.must
	token := regexp.MustCompile(`hgu_[A-Za-z0-9_-]+`)

	// whoami: the bootstrap admin's token, which never expires.
	if out := must("whoami"); !strings.Contains(out, "User:    admin") || !strings.Contains(out, "Role:    admin") ||
		!strings.Contains(out, "Token:   admin-token (never expires)") {
		t.Errorf("whoami:\n%s", out)
	}

	// A token with a lifetime; listed without its secret; used; revoked: refused, saying so.
	out := must("tokens", "create", "ci", "--lifetime", "2d")
	ci := token.FindString(out)
	if ci == "" || !strings.HasPrefix(out, "Created token ci, expires ") {
		t.Fatalf("tokens create:\n%s", out)
	}
	as := func(tok string, args ...string) (string, error) {
		return hangar(append(args, "--url", h.url, "--token", tok)...)
	}
	if out, err := as(ci, "whoami"); err != nil || !strings.Contains(out, "Token:   ci (expires ") {
		t.Errorf("whoami with ci: %v\n%s", err, out)
	}
	list := must("tokens", "list")
	if strings.Contains(list, ci) || !strings.Contains(list, "ci ") || !strings.Contains(list, "admin-token") || !strings.Contains(list, "active") {
		t.Errorf("tokens list:\n%s", list)
	}
	if out := must("tokens", "revoke", "ci"); out != "Revoked token ci of admin.\n" {
		t.Errorf("tokens revoke: %q", out)
	}
	if out, err := as(ci, "whoami"); err == nil || !strings.Contains(out, `token "ci" was revoked at`) {
		t.Errorf("a revoked token: %v\n%s", err, out)
	}
	if out, err := hangar("tokens", "create", "x", "--lifetime", "soon"); err == nil || !strings.Contains(out, `--lifetime "soon"`) {
		t.Errorf("a bad lifetime: %v\n%s", err, out)
	}

	// Users: list, suspend (refused everywhere, saying so), unsuspend, delete.
	bob := token.FindString(must("users", "create", "bob"))
	if out := must("users", "list"); !regexp.MustCompile(`(?m)^bob\s+user\s+active`).MatchString(out) || !regexp.MustCompile(`(?m)^admin\s+admin\s+active`).MatchString(out) {
		t.Errorf("users list:\n%s", out)
	}
	if out := must("users", "suspend", "bob"); !strings.HasPrefix(out, "Suspended bob") {
		t.Errorf("users suspend: %q", out)
	}
	if out, err := as(bob, "list"); err == nil || !strings.Contains(out, "user bob is suspended") {
		t.Errorf("a suspended user's command: %v\n%s", err, out)
	}
	if out := must("users", "list"); !regexp.MustCompile(`(?m)^bob\s+user\s+suspended since`).MatchString(out) {
		t.Errorf("users list with bob suspended:\n%s", out)
	}
	if out, err := hangar("users", "suspend", "admin"); err == nil || !strings.Contains(out, "you cannot suspend yourself") {
		t.Errorf("suspending oneself: %v\n%s", err, out)
	}
	must("users", "unsuspend", "bob")
	if _, err := as(bob, "list"); err != nil {
		t.Errorf("bob after unsuspend: %v", err)
	}
	if out := must("users", "delete", "bob"); out != "Deleted user bob.\n" {
		t.Errorf("users delete: %q", out)
	}
	if out, err := as(bob, "list"); err == nil || !strings.Contains(out, "invalid token") {
		t.Errorf("a deleted user's token: %v\n%s", err, out)
	}

	// Agents: a config change (all or nothing, fields named), token rotation and revocation.
	agentTok := regexp.MustCompile(`hga_[A-Za-z0-9_-]+`)
	must("agents", "create", "k1")
	if out := must("agents", "update", "k1", "--set", "workspaces_quota=3"); out != "Updated agent k1.\n" {
		t.Errorf("agents update: %q", out)
	}
	if out, err := hangar("agents", "update", "k1", "--set", "workspaces_quota=3", "--set", "dns_zone=x.example.com"); err == nil || !strings.Contains(out, "config.dns_zone: cannot be changed") {
		t.Errorf("agents update of dns_zone: %v\n%s", err, out)
	}
	if out := must("agents", "rotate-token", "k1"); agentTok.FindString(out) == "" {
		t.Errorf("agents rotate-token:\n%s", out)
	}
	if out := must("agents", "revoke-token", "k1"); !strings.HasPrefix(out, "Revoked the token of agent k1") {
		t.Errorf("agents revoke-token: %q", out)
	}

	// logout --revoke: the saved token is revoked, the login file gone.
	laptop := token.FindString(must("tokens", "create", "laptop"))
	must("login", "--url", h.url, "--token", laptop)
	if out := must("logout", "--revoke"); !strings.HasPrefix(out, "Revoked token laptop of admin.\nLogged out of "+h.url) {
		t.Errorf("logout --revoke:\n%s", out)
	}
	if out, err := as(laptop, "whoami"); err == nil || !strings.Contains(out, "was revoked") {
		t.Errorf("the token after logout --revoke: %v\n%s", err, out)
	}
	if out := must("logout"); out != "Not logged in.\n" {
		t.Errorf("logout again: %q", out)
	}

	// version: offline, no server, no login.
	cmd := exec.Command(h.bin, "version")
	cmd.Env = append(os.Environ(), "HANGAR_URL=http://127.0.0.1:1", "HOME="+t.TempDir())
	vout, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`^hangar \S+\ncommit: +\S.*\nbuilt: +\S.*\ngo: +go1\.\S+\nplatform: +[a-z0-9]+/[a-z0-9]+\n$`).Match(vout) {
		t.Errorf("hangar version: %v\n%s", err, vout)
	}
}
