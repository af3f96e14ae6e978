package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/servertest"
)

// checkedModule has a required parameter with a validation block and a required number; v2 is
// the same module whose validation no longer accepts "s".
const (
	checkedModule = `variable "start_count" {
  type = number
}
variable "size" {
  type = string
  validation {
    condition     = contains(["s", "m"], var.size)
    error_message = "value must be one of s, m."
  }
}
variable "disk" {
  type = number
}
`
	checkedModuleV2 = `variable "start_count" {
  type = number
}
variable "size" {
  type = string
  validation {
    condition     = contains(["m", "l"], var.size)
    error_message = "value must be one of m, l."
  }
}
variable "disk" {
  type = number
}
`
)

// A preset is checked as a create from it would be (both stores): a missing required parameter or
// a value its type or validation refuses is refused at preset time, naming the field; a version
// that would make a preset following the active version invalid cannot become active (at push or
// at promotion), naming the preset and its parameter; a preset on a version of its own does not
// hold it back.
func TestPresetParametersAreChecked(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewTF(t, engine, 0)
			env.PushModule("vm", map[string]string{"main.tf": checkedModule})
			admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})

			for _, tc := range []struct {
				args []string
				want string
			}{
				{nil, "error: invalid request\n  parameters.disk: is required (number): give it with --parameter disk=VALUE\n" +
					"  parameters.size: is required (string): give it with --parameter size=VALUE\n"},
				{[]string{"--parameter", "size=xl", "--parameter", "disk=10"}, "error: invalid request\n  parameters.size: value must be one of s, m.\n"},
				{[]string{"--parameter", "size=s", "--parameter", "disk=ten"}, "error: invalid request\n  parameters.disk: must be a number\n"},
			} {
				args := append([]string{"templates", "preset", "vm", "small", "--instances", "0"}, tc.args...)
				if got := admin.fail(args...); got != tc.want {
					t.Errorf("templates preset %v:\n%q\nwant\n%q", tc.args, got, tc.want)
				}
			}
			if out := admin.ok("templates", "presets", "vm"); out != "No presets.\n" {
				t.Errorf("a refused preset was stored:\n%s", out)
			}
			admin.ok("templates", "preset", "vm", "small", "--instances", "0", "--parameter", "size=s", "--parameter", "disk=10")
			admin.ok("templates", "preset", "vm", "pinned", "--instances", "0", "--version", "1", "--parameter", "size=s", "--parameter", "disk=10")

			// v2 refuses small's size: it cannot become active while small follows the active version.
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(checkedModuleV2), 0o644); err != nil {
				t.Fatal(err)
			}
			const refusal = "error: invalid request\n  presets.small.parameters.size: value must be one of m, l.\n" +
				"  presets: %s cannot become the active version of template \"vm\": the presets above run the active version and would fail on it; " +
				"change them first (hangar templates preset vm PRESET --parameter K=V, or --version N to keep one on an older version), or push the version with --activate=false\n"
			if got, want := admin.fail("templates", "push", "vm", "--directory", dir), strings.Replace(refusal, "%s", "the version pushed", 1); got != want {
				t.Errorf("push of a version that breaks a preset:\n%q\nwant\n%q", got, want)
			}
			if out := admin.ok("templates", "versions", "vm"); strings.Contains(out, "\n2 ") || strings.Contains(out, " 2 ") {
				t.Errorf("the refused push stored a version:\n%s", out)
			}
			admin.ok("templates", "push", "vm", "--directory", dir, "--activate=false")
			if got, want := admin.fail("templates", "promote", "vm", "2"), strings.Replace(refusal, "%s", "version 2", 1); got != want {
				t.Errorf("promotion of a version that breaks a preset:\n%q\nwant\n%q", got, want)
			}
			// Once small is fixed, version 2 becomes active; pinned stays on version 1.
			admin.ok("templates", "preset", "vm", "small", "--instances", "0", "--parameter", "size=m", "--parameter", "disk=10")
			admin.ok("templates", "promote", "vm", "2")
			out := admin.ok("templates", "presets", "vm")
			if !strings.Contains(out, "pinned") || !strings.Contains(out, "size=m") {
				t.Errorf("templates presets after the promotion:\n%s", out)
			}
		})
	}
}

// failingModule's start always fails, as a template whose machines cannot be had would.
var failingModule = startRuns("machine", "echo no capacity left >&2; exit 3")

// A pool whose prebuild creates keep failing (real terraform, both stores) says so with its last
// error in hangar templates presets, in the API and in the hangar_prebuild_pool_failures gauge.
func TestFailingPoolShowsItsLastError(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewTF(t, engine, 1)
			env.PushModule("vm", map[string]string{"main.tf": failingModule})
			admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
			admin.ok("templates", "preset", "vm", "small", "--instances", "1")
			if out := admin.ok("templates", "presets", "vm"); strings.Contains(out, "failing") {
				t.Errorf("a pool that never failed is shown failing:\n%s", out)
			}
			if res, err := env.Server.Prebuilds().Tick(env.Ctx); err != nil || res.Created != 1 {
				t.Fatalf("tick: %+v, %v", res, err)
			}
			if bs := env.WaitBuilds(1); bs[0].Job.Error == "" {
				t.Fatalf("the prebuild's create did not fail: %+v", bs[0])
			}

			out := admin.ok("templates", "presets", "vm")
			for _, want := range []string{"Preset small is failing: 1 prebuild create(s) failed in a row, the last at 2026-", "terraform apply: exit status 1", "no capacity left"} {
				if !strings.Contains(out, want) {
					t.Errorf("templates presets lacks %q:\n%s", want, out)
				}
			}
			ps, err := env.Admin.ListPresets(env.Ctx, "vm")
			if err != nil || len(ps) != 1 || ps[0].Pool.Failures != 1 || ps[0].Pool.LastFailureAt == nil ||
				!strings.Contains(ps[0].Pool.LastError, "no capacity left") {
				t.Errorf("the API's preset: %+v, %v", ps, err)
			}
			metrics := httpGet(t, env.URL+"/metrics")
			if !strings.Contains(metrics, `hangar_prebuild_pool_failures{preset="small",template="vm"} 1`) {
				t.Errorf("no failing gauge in the metrics:\n%s", grepLines(metrics, "hangar_prebuild_pool_failures"))
			}
		})
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
