package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// sizeModule is a terraform template with a mutable parameter size whose allowed values are
// sizes; its stop fails while the file stopFails names exists.
const sizeModule = `# allowed sizes: %[1]s
variable "start_count" {
  type = number
}

# hangar:mutable
variable "size" {
  type    = string
  default = "s"
  validation {
    condition     = contains([%[1]s], var.size)
    error_message = "size is not an allowed size."
  }
}

resource "terraform_data" "home" {
  count = var.start_count
  input = var.size
}

resource "terraform_data" "gate" {
  lifecycle {
    precondition {
      condition     = var.start_count == 1 || !fileexists(%[2]q)
      error_message = "the test asked this stop to fail"
    }
  }
}
`

// TestUpdateToAValueTheNewVersionAdds: hangar update --parameter size=xl, after the promote of a
// version that added xl, stops the workspace on its old version with its old value (which that
// version accepts), then starts it on the new version with xl (real terraform, both stores). A
// stop that fails changes no value: the workspace keeps the values its resources were made with.
func TestUpdateToAValueTheNewVersionAdds(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewTF(t, engine, 1)
			stopFails := filepath.Join(t.TempDir(), "stop-fails")
			env.PushModule("vm", map[string]string{"main.tf": fmt.Sprintf(sizeModule, `"s", "m"`, stopFails)})
			admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
			go func() {
				for range env.Ended { // builds end as terraform runs them; nobody waits on them here
				}
			}()

			admin.ok("create", "w", "--template", "vm", "--parameter", "size=m", "--wait", "--timeout", "1m")
			env.PushModule("vm", map[string]string{"main.tf": fmt.Sprintf(sizeModule, `"s", "m", "xl"`, stopFails)})

			out := admin.ok("update", "w", "--parameter", "size=xl", "--wait", "--timeout", "1m")
			if !strings.Contains(out, "Workspace w is Running") {
				t.Fatalf("update --parameter size=xl --wait:\n%s", out)
			}
			ws := showJSON(t, admin, "w")
			if ws.ActualState != "Running" || ws.TemplateVersion != 2 || value(ws, "size") != "xl" {
				t.Fatalf("after the update: %s on version %d with size %q; want Running on version 2 with xl", ws.ActualState, ws.TemplateVersion, value(ws, "size"))
			}
			builds := buildsJSON(t, admin, "w")
			if len(builds) != 3 || builds[1].Transition != "stop" || builds[1].TemplateVersion != 1 || builds[1].Status != "succeeded" ||
				builds[2].Transition != "start" || builds[2].TemplateVersion != 2 || builds[2].Status != "succeeded" {
				t.Fatalf("builds after the update: %+v; want a stop on version 1, then a start on version 2, both succeeded", builds)
			}

			// A stop that fails: the update's value is not taken, and no start follows.
			if err := os.WriteFile(stopFails, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			admin.fail("update", "w", "--parameter", "size=s", "--wait", "--timeout", "1m")
			ws = showJSON(t, admin, "w")
			if value(ws, "size") != "xl" {
				t.Fatalf("after a failed stop, size is %q; want xl, the value the resources were made with", value(ws, "size"))
			}
			builds = buildsJSON(t, admin, "w")
			if last := builds[len(builds)-1]; len(builds) != 4 || last.Transition != "stop" || last.Status != "failed" {
				t.Fatalf("builds after the failed stop: %+v", builds)
			}
			// Once the stop works, the same update goes through.
			if err := os.Remove(stopFails); err != nil {
				t.Fatal(err)
			}
			admin.ok("update", "w", "--parameter", "size=s", "--wait", "--timeout", "1m")
			if ws = showJSON(t, admin, "w"); ws.ActualState != "Running" || value(ws, "size") != "s" {
				t.Fatalf("after the second update: %s with size %q", ws.ActualState, value(ws, "size"))
			}
		})
	}
}

func showJSON(t *testing.T, c *cli, name string) sdk.Workspace {
	t.Helper()
	var ws sdk.Workspace
	if err := json.Unmarshal([]byte(c.ok("show", name, "-o", "json")), &ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

func buildsJSON(t *testing.T, c *cli, name string) []sdk.Build {
	t.Helper()
	var bs []sdk.Build
	if err := json.Unmarshal([]byte(c.ok("builds", name, "-o", "json")), &bs); err != nil {
		t.Fatal(err)
	}
	if len(bs) > 1 && bs[0].Number > bs[len(bs)-1].Number { // oldest first
		for i, j := 0, len(bs)-1; i < j; i, j = i+1, j-1 {
			bs[i], bs[j] = bs[j], bs[i]
		}
	}
	return bs
}

func value(ws sdk.Workspace, name string) string {
	for _, p := range ws.Parameters {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// TestTemplatesDelete: hangar templates delete asks (refusing without a terminal unless --yes), is
// refused while a workspace of the template is not deleted, naming it, and deletes the template
// once it is (real server and terraform).
func TestTemplatesDelete(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1)
	env.PushModule("vm", map[string]string{"main.tf": fmt.Sprintf(sizeModule, `"s"`, filepath.Join(t.TempDir(), "never"))})
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	go func() {
		for range env.Ended {
		}
	}()
	admin.ok("create", "w", "--template", "vm", "--wait", "--timeout", "1m")

	if got := admin.run("templates", "delete", "vm"); got.code != 1 || !strings.Contains(got.stderr, "pass --yes to confirm") {
		t.Errorf("templates delete without --yes nor a terminal: %+v", got)
	}
	if got := admin.fail("templates", "delete", "vm", "--yes"); !strings.Contains(got, "error: template in use") ||
		!strings.Contains(got, `template "vm" is used by 1 workspace that is not deleted (admin/w)`) {
		t.Errorf("templates delete while w exists: %q", got)
	}
	admin.terminal, admin.stdin = true, "n\n"
	if got := admin.fail("templates", "delete", "vm"); !strings.Contains(got, "Delete template vm? Its versions go with it (1)") || !strings.Contains(got, "template vm was not deleted") {
		t.Errorf("templates delete answered no: %q", got)
	}
	admin.terminal, admin.stdin = false, ""
	admin.ok("delete", "w", "--yes", "--wait", "--timeout", "1m")
	if out := admin.ok("templates", "delete", "vm", "--yes"); out != "Deleted template vm.\n" {
		t.Errorf("templates delete: %q", out)
	}
	if out := admin.ok("templates", "list"); out != "No templates.\n" {
		t.Errorf("templates list after the delete: %q", out)
	}
}
