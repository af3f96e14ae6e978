package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/servertest"
)

// presetModule is a terraform template whose start records the preset's parameter and whether it
// was a prebuild's create or claim.
const presetModule = `variable "start_count" {
  type = number
}
variable "size" {
  type = string
}
variable "is_prebuild_claim" {
  type = string
}
resource "terraform_data" "home" {
  count = var.start_count
  input = "${var.size}/${var.is_prebuild_claim}"
}
`

// TestPresetCommands: hangar templates preset sets, shows and deletes a preset against the real
// server (real terraform builds the prebuilt workspace), refusing bad input naming the field;
// hangar templates presets lists the pool; hangar list --prebuilds shows the prebuilt workspace to
// an admin; hangar create --preset claims it.
func TestPresetCommands(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1)
	env.PushModule("vm", map[string]string{"main.tf": presetModule})
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	u := admin.ok("users", "create", "ann", "-o", "json")
	token := u[strings.Index(u, `"token": "`)+len(`"token": "`):]
	token = token[:strings.Index(token, `"`)]
	ann := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": token})

	out := admin.ok("templates", "preset", "vm", "small", "--instances", "1", "--parameter", "size=s",
		"--schedule", "* 8-18 * * 1-5=2", "--timezone", "Europe/Paris")
	for _, want := range []string{"NAME", "small", "1 (active)", "size=s", `"* 8-18 * * 1-5"=2 (Europe/Paris), else 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("templates preset lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--instances", "101"}, "error: invalid request\n  instances: 101: want 0 to 100\n"},
		{[]string{"--instances", "1", "--parameter", "nope=x"}, "error: invalid request\n  parameters.nope: the module (version active) declares no variable \"nope\"\n"},
		{[]string{"--instances", "1", "--parameter", "is_prebuild_claim=true"}, "error: invalid request\n  parameters.is_prebuild_claim: is set by Hangar itself; a preset cannot set it\n"},
		{[]string{"--instances", "1", "--version", "7"}, "error: invalid request\n  version: template \"vm\" has no version 7\n"},
		{[]string{"--instances", "1", "--timezone", "Europe/Paris"}, "error: invalid request\n  timezone: applies to a schedule: give schedule rules too\n"},
	} {
		if got := admin.fail(append([]string{"templates", "preset", "vm", "small"}, tc.args...)...); got != tc.want {
			t.Errorf("templates preset %v:\n%q\nwant\n%q", tc.args, got, tc.want)
		}
	}
	if got := admin.run("templates", "preset", "vm", "small"); got.code != 1 || !strings.Contains(got.stderr, "give --instances N") {
		t.Errorf("no --instances: %+v", got)
	}
	if got := admin.run("templates", "preset", "vm", "small", "--instances", "1", "--schedule", "nonsense"); got.code != 1 || !strings.Contains(got.stderr, "want \"CRON=N\"") {
		t.Errorf("a bad --schedule: %+v", got)
	}
	if got := ann.fail("templates", "preset", "vm", "small", "--instances", "3"); !strings.Contains(got, "only an admin") {
		t.Errorf("a user set a preset: %q", got)
	}

	// The reconciler builds the pool (real terraform); the listing shows it ready.
	if res, err := env.Server.Prebuilds().Tick(env.Ctx); err != nil || res.Created != 1 {
		t.Fatalf("tick: %+v, %v", res, err)
	}
	env.WaitBuilds(1)
	out = ann.ok("templates", "presets", "vm")
	if !strings.Contains(out, "small  1 (active)  1        1      0") {
		t.Errorf("templates presets:\n%s", out)
	}
	if out := admin.ok("list"); strings.Contains(out, "hangar-prebuilds") {
		t.Errorf("list shows the prebuilt workspace:\n%s", out)
	}
	if out := admin.ok("list", "--prebuilds"); !strings.Contains(out, "hangar-prebuilds  prebuild-") {
		t.Errorf("list --prebuilds:\n%s", out)
	}
	if got := ann.fail("list", "--prebuilds"); !strings.Contains(got, "only an admin") {
		t.Errorf("a user's list --prebuilds: %q", got)
	}

	// ann claims it.
	go func() { env.WaitBuilds(1) }()
	r := ann.run("create", "mine", "--template", "vm", "--preset", "small", "--wait", "--timeout", "1m")
	if r.code != 0 || !strings.Contains(r.stdout, "Workspace mine is Running") ||
		!strings.Contains(r.stderr, "Claimed a prebuilt workspace of preset small (template vm)") {
		t.Errorf("create --preset --wait: %+v; want it to say it claimed a prebuilt workspace of preset small", r)
	}
	if out := ann.ok("show", "mine"); !strings.Contains(out, "(claimed: a prebuilt workspace of preset small;") {
		t.Errorf("show mine does not say it was claimed:\n%s", out)
	}
	out = ann.ok("builds", "mine", "-o", "json")
	if !strings.Contains(out, `"is_prebuild_claim": true`) || !strings.Contains(out, `"is_prebuild": true`) {
		t.Errorf("mine's builds:\n%s", out)
	}
	if got := ann.fail("create", "other", "--template", "vm", "--preset", "nope"); got != "error: invalid request\n  preset: template \"vm\" has no preset \"nope\"\n" {
		t.Errorf("an unknown preset: %q", got)
	}
	out = admin.ok("templates", "preset", "vm", "small", "--delete")
	if want := "Deleted preset small of template vm; its unclaimed prebuilt workspaces are being deleted.\n"; out != want {
		t.Errorf("--delete: %q", out)
	}
	if out := ann.ok("templates", "presets", "vm"); out != "No presets.\n" {
		t.Errorf("after the delete:\n%s", out)
	}
	if got := admin.fail("templates", "preset", "vm", "small", "--delete"); !strings.Contains(got, fmt.Sprintf("template %q has no preset %q", "vm", "small")) {
		t.Errorf("a second delete: %q", got)
	}
}
