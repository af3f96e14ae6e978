package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestScheduleCommands: hangar schedule shows and sets a workspace's schedule against the real
// server, keeping what is not given, and refuses bad input naming the field; hangar templates
// lifecycle sets a template's policy, which the workspace then shows.
func TestScheduleCommands(t *testing.T) {
	env := servertest.New(t)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	cfg := filepath.Join(t.TempDir(), "agent.json")
	if err := os.WriteFile(cfg, []byte(`{"lifecycle": {"default_ttl": "4h", "max_ttl": "12h"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	admin.ok("agents", "create", "k", "--config", cfg)
	admin.ok("create", "dev", "--agent", "k")

	out := admin.ok("schedule", "dev")
	for _, want := range []string{"Autostart:     none\n", "Autostop TTL:  the policy's, in force: 4h0m0s\n",
		"Policy:        default TTL 4h0m0s, max TTL 12h0m0s, max active 36h0m0s, max stopped 744h0m0s\n", "Stops at:      2026-01-01 09:00:00 UTC unless used before\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("schedule dev lacks %q:\n%s", want, out)
		}
	}
	out = admin.ok("schedule", "dev", "--autostart", "0 9 * * 1-5", "--timezone", "Europe/Paris")
	if !strings.Contains(out, "Autostart:     \"0 9 * * 1-5\" (Europe/Paris)\n") {
		t.Errorf("after --autostart:\n%s", out)
	}
	out = admin.ok("schedule", "dev", "--ttl", "8h")
	if !strings.Contains(out, "Autostart:     \"0 9 * * 1-5\" (Europe/Paris)\n") || !strings.Contains(out, "Autostop TTL:  8h0m0s, in force: 8h0m0s\n") {
		t.Errorf("--ttl alone changed the autostart, or not the TTL:\n%s", out)
	}
	if got := admin.fail("schedule", "dev", "--ttl", "24h"); got != "error: invalid request\n  ttl: must not exceed the policy's max_ttl (12h0m0s), got 24h0m0s\n" {
		t.Errorf("a TTL over the max:\n%q", got)
	}
	if got := admin.fail("schedule", "dev", "--autostart", "0 9 * *"); !strings.HasPrefix(got, "error: invalid request\n  autostart: \"0 9 * *\": ") {
		t.Errorf("a bad cron expression:\n%q", got)
	}
	if got := admin.fail("schedule", "dev", "--timezone", "Mars/Olympus"); !strings.HasPrefix(got, "error: invalid request\n  timezone: unknown time zone") {
		t.Errorf("an unknown zone:\n%q", got)
	}
	out = admin.ok("schedule", "dev", "--autostart", "off", "--ttl", "default")
	if !strings.Contains(out, "Autostart:     none\n") || !strings.Contains(out, "Autostop TTL:  the policy's, in force: 4h0m0s\n") {
		t.Errorf("after off and default:\n%s", out)
	}
	if show := admin.ok("show", "dev"); !strings.Contains(show, "Autostart:") || !strings.Contains(show, "Policy:") {
		t.Errorf("show lacks the schedule:\n%s", show)
	}

	// A template's policy.
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "main.tf"), []byte("variable \"start_count\" {\n  type = number\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin.ok("templates", "push", "vm", "--directory", mod)
	out = admin.ok("templates", "lifecycle", "vm", "--default-ttl", "8h", "--failure-ttl", "1h", "--dormancy", "720h", "--dormancy-delete", "168h")
	if want := "Template:  vm\nPolicy:    default TTL 8h0m0s, failure TTL 1h0m0s, dormant after 720h0m0s, deleted when dormant for 168h0m0s\n"; out != want {
		t.Errorf("templates lifecycle:\n%q\nwant\n%q", out, want)
	}
	if got := admin.fail("templates", "lifecycle", "vm", "--clear", "--dormancy-delete", "24h"); got != "error: invalid request\n  dormancy_auto_delete: needs dormancy_threshold: only dormant workspaces are deleted\n" {
		t.Errorf("auto-delete without dormancy:\n%q", got)
	}

	// Without flags, the policy is shown, not erased (a user may look too); a flag changes its
	// rule and keeps the others; only --clear removes it.
	policy := "Template:  vm\nPolicy:    default TTL 8h0m0s, failure TTL 1h0m0s, dormant after 720h0m0s, deleted when dormant for 168h0m0s\n"
	for range 2 {
		if out := admin.ok("templates", "lifecycle", "vm"); out != policy {
			t.Fatalf("templates lifecycle vm (no flags):\n%q\nwant the policy unchanged\n%q", out, policy)
		}
	}
	u := admin.ok("users", "create", "ann", "-o", "json")
	token := u[strings.Index(u, `"token": "`)+len(`"token": "`):]
	ann := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": token[:strings.Index(token, `"`)]})
	if out := ann.ok("templates", "lifecycle", "vm"); out != policy {
		t.Errorf("a user's look at the policy:\n%q", out)
	}
	if got := ann.fail("templates", "lifecycle", "vm", "--clear"); !strings.Contains(got, "admin") {
		t.Errorf("a user's --clear: %q", got)
	}
	out = admin.ok("templates", "lifecycle", "vm", "--max-active", "36h", "--failure-ttl", "0")
	if want := "Template:  vm\nPolicy:    default TTL 8h0m0s, dormant after 720h0m0s, deleted when dormant for 168h0m0s, max active 36h0m0s\n"; out != want {
		t.Errorf("templates lifecycle --max-active --failure-ttl 0:\n%q\nwant\n%q", out, want)
	}
	if out := admin.ok("templates", "lifecycle", "vm", "--clear"); out != "Template:  vm\nPolicy:    none\n" {
		t.Errorf("templates lifecycle --clear:\n%q", out)
	}
	if out := admin.ok("templates", "lifecycle", "vm", "-o", "json"); !strings.Contains(out, `"lifecycle": {}`) {
		t.Errorf("the policy after --clear, as JSON:\n%s", out)
	}
}
