package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// slowStart's start runs a command that says it started, then sleeps 60 s (the test cancels it:
// terraform interrupts the command); its stop has nothing to run.
var slowStart = startRuns("slow", "echo slow-started; exec sleep 60")

// startRuns is a module whose start runs command in a local-exec of resource terraform_data.name
// (once per start: count = start_count) and whose stop has nothing to run.
func startRuns(name, command string) string {
	return `variable "start_count" {
  type = number
}
resource "terraform_data" "` + name + `" {
  count = var.start_count
  provisioner "local-exec" {
    command = "` + command + `"
  }
}
`
}

// A build canceled during a long apply (real terraform, both stores): the follower marks the
// interrupted stage canceled, with no passed Applying and no failing stage after it; the
// workspace then reads Canceled in show, list and the API, with what to do next, and a stop
// goes on from there.
func TestCanceledApplyShowsCanceled(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewTF(t, engine, 1)
			env.PushModule("slow", map[string]string{"main.tf": slowStart})
			c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
			s := c.start("create", "w", "--template", "slow", "--wait", "--timeout", "2m")

			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var out []string
			for line := range s.lines { // the workspace exists once its build is followed
				out = append(out, line)
				if strings.HasPrefix(line, "Build #1 (start) ") {
					break
				}
			}
			errStarted := errors.New("started")
			err := env.Admin.BuildLogs(ctx, "w", 1, 0, true, func(l sdk.BuildLog) error {
				if strings.Contains(l.Output, "slow-started") {
					return errStarted
				}
				return nil
			})
			if !errors.Is(err, errStarted) {
				t.Fatalf("the slow command never started: %v", err)
			}
			if _, err := env.Admin.CancelBuild(ctx, "w", 1); err != nil {
				t.Fatal(err)
			}

			for line := range s.lines {
				out = append(out, line)
			}
			r := <-s.done
			got := strings.Join(out, "\n")
			if !strings.Contains(got, "  ⊘ Applying canceled (") || !strings.Contains(got, "Build #1 canceled in ") {
				t.Errorf("progress does not show the apply canceled:\n%s", got)
			}
			for _, wrong := range []string{"✔ Applying", "Reading state", "✘", "==> Canceling"} {
				if strings.Contains(got, wrong) {
					t.Errorf("progress shows %q:\n%s", wrong, got)
				}
			}
			if r.code != 1 || !strings.Contains(r.stderr, "workspace w is Canceled: ") || !strings.Contains(r.stderr, "start, stop or delete the workspace") {
				t.Errorf("exit %d, stderr %q", r.code, r.stderr)
			}

			ws, err := env.Admin.Workspace(ctx, "w")
			if err != nil || ws.ActualState != "Canceled" || ws.Error == nil || ws.Error.Type != "canceled" ||
				!strings.Contains(ws.Error.Message, "build #1 (start) was canceled by admin") {
				t.Errorf("the API's workspace after the cancel: %+v %+v %v", ws, ws.Error, err)
			}
			if show := c.ok("show", "w"); !strings.Contains(show, "Canceled") || strings.Contains(show, "Failed") {
				t.Errorf("show after the cancel:\n%s", show)
			}
			if list := c.ok("list"); !strings.Contains(list, "Canceled") {
				t.Errorf("list after the cancel:\n%s", list)
			}
			// What the user may do next: stop it (and start or delete it).
			if out := c.ok("stop", "w", "--wait", "--timeout", "2m"); !strings.Contains(out, "Stopped") {
				t.Errorf("stop after the cancel:\n%s", out)
			}
		})
	}
}
