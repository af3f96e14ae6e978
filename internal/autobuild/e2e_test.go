package autobuild_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// module is a template whose start fails while the file failMarker names exists: a failure the test
// turns on and off.
const module = `variable "start_count" {
  type = number
}

variable "workspace_name" {
  type = string
}

resource "terraform_data" "home" {
  count = var.start_count
  input = var.workspace_name

  lifecycle {
    precondition {
      condition     = var.workspace_name != "" && !fileexists(%q)
      error_message = "the test asked this start to fail"
    }
  }
}
`

// tfWorld is a server on the fake clock whose builds run real terraform in an in-process
// provisioner (servertest.TF), with the template "tf" pushed and the user "dev".
type tfWorld struct {
	*servertest.TF
	t      *testing.T
	ctx    context.Context
	admin  *sdk.Client
	dev    *sdk.Client
	marker string // while this file exists, starts fail
}

func newTFWorld(t *testing.T, engine string) *tfWorld {
	tf := servertest.NewTF(t, engine, 1)
	w := &tfWorld{TF: tf, t: t, ctx: tf.Ctx, admin: tf.Admin, dev: tf.Dev, marker: filepath.Join(t.TempDir(), "fail")}
	tf.PushModule("tf", map[string]string{"main.tf": fmt.Sprintf(module, w.marker)})
	return w
}

func (w *tfWorld) waitBuilds(n int) { w.WaitBuilds(n) }

func (w *tfWorld) tick() int {
	w.t.Helper()
	res, err := w.Server.Lifecycle().Tick(w.ctx)
	if err != nil || res.Failed > 0 {
		w.t.Fatalf("tick: %+v, %v", res, err)
	}
	return res.Done
}

// latest is the workspace's latest build, as the API shows it.
func (w *tfWorld) latest(name string) sdk.Build {
	w.t.Helper()
	b, err := w.dev.Build(w.ctx, name, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// wantBuild checks the latest build of the workspace: what the automation did, from which state.
func (w *tfWorld) wantBuild(name, transition, reason, status string) sdk.Build {
	w.t.Helper()
	b := w.latest(name)
	wantInitiator := "hangar-automation"
	if reason == "initiator" {
		wantInitiator = "dev"
	}
	if b.Transition != transition || b.Reason != reason || b.Status != status || b.Initiator != wantInitiator ||
		(b.Number > 1 && b.StateSource != "previous") {
		w.t.Fatalf("%s: latest build %+v, want %s by %s (%s), %s, from the previous build's state", name, b, transition, wantInitiator, reason, status)
	}
	return b
}

func (w *tfWorld) workspace(name string) sdk.Workspace {
	w.t.Helper()
	ws, err := w.dev.Workspace(w.ctx, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return ws
}

func (w *tfWorld) wantState(name, desired, actual, reasonPrefix string) sdk.Workspace {
	w.t.Helper()
	ws := w.workspace(name)
	if ws.DesiredState != desired || ws.ActualState != actual || !strings.HasPrefix(ws.DesiredStateReason, reasonPrefix) {
		w.t.Fatalf("%s: desired %s, actual %s, reason %q; want %s, %s, %q...", name, ws.DesiredState, ws.ActualState, ws.DesiredStateReason,
			desired, actual, reasonPrefix)
	}
	return ws
}

// TestAutobuildTable runs each trigger of the seed's "Autobuild Operations" table through the API,
// on the real terraform, with the executor on the fake clock: autostart (start), autostop (stop),
// failure TTL (stop), dormancy (stop), auto-delete (delete), each from the last build's state and
// recorded with its reason and the automation as initiator.
func TestAutobuildTable(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			w := newTFWorld(t, engine)
			ctx := w.ctx
			if _, err := w.admin.SetTemplateLifecycle(ctx, "tf", sdk.Lifecycle{DefaultTTL: "2h", FailureTTL: "1h",
				DormancyThreshold: "240h", DormancyAutoDelete: "48h"}); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"w1", "w2"} {
				if _, err := w.dev.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Template: "tf"}); err != nil {
					t.Fatal(err)
				}
			}
			// w2 turns autostop off: only dormancy stops it.
			off := "0"
			if _, err := w.dev.SetSchedule(ctx, "w2", sdk.WorkspaceSchedule{TTL: &off}); err != nil {
				t.Fatal(err)
			}
			w.waitBuilds(2)
			w.wantBuild("w1", "start", "initiator", "succeeded")
			w.wantState("w1", "Running", "Running", "")
			start := w.Clock.Now() // 2026-01-01 05:00 UTC

			// Autostop: w1's TTL of 2h after its start.
			w.Clock.Advance(2*time.Hour - time.Minute)
			if n := w.tick(); n != 0 {
				t.Fatalf("before the TTL, %d changes", n)
			}
			w.Clock.Advance(time.Minute)
			if n := w.tick(); n != 1 {
				t.Fatalf("at the TTL, %d changes, want 1", n)
			}
			w.waitBuilds(1)
			w.wantBuild("w1", "stop", "autostop", "succeeded")
			w.wantState("w1", "Stopped", "Stopped", "autostop: ")

			// Autostart: a schedule at 09:00 in Paris (08:00 UTC); the owner sets it at 07:00 UTC.
			if _, err := w.dev.SetSchedule(ctx, "w1", sdk.WorkspaceSchedule{Autostart: "0 9 * * *", Timezone: "Europe/Paris"}); err != nil {
				t.Fatal(err)
			}
			ws := w.workspace("w1")
			if ws.Automation == nil || ws.Automation.NextAutostartAt == nil || !ws.Automation.NextAutostartAt.Equal(start.Add(3*time.Hour)) {
				t.Fatalf("w1's next autostart: %+v", ws.Automation)
			}
			w.Clock.Set(start.Add(3 * time.Hour))
			if n := w.tick(); n != 1 {
				t.Fatalf("at the autostart time, %d changes, want 1", n)
			}
			w.waitBuilds(1)
			w.wantBuild("w1", "start", "autostart", "succeeded")
			w.wantState("w1", "Running", "Running", "autostart: ")

			// Failure TTL: the owner stops w1; the next autostart fails; an hour later it is stopped.
			if _, err := w.dev.UpdateWorkspace(ctx, "w1", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
				t.Fatal(err)
			}
			w.waitBuilds(1)
			w.wantBuild("w1", "stop", "initiator", "succeeded")
			if err := os.WriteFile(w.marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			w.Clock.Set(start.Add(27 * time.Hour)) // the next day's 09:00 in Paris
			if n := w.tick(); n != 1 {
				t.Fatalf("at the next autostart, %d changes, want 1", n)
			}
			w.waitBuilds(1)
			if b := w.wantBuild("w1", "start", "autostart", "failed"); !strings.Contains(b.Error, "the test asked this start to fail") {
				t.Fatalf("the failed start says %q", b.Error)
			}
			w.wantState("w1", "Running", "Failed", "autostart: ")
			w.Clock.Advance(time.Hour - time.Minute)
			if n := w.tick(); n != 0 {
				t.Fatalf("before the failure TTL, %d changes", n)
			}
			w.Clock.Advance(time.Minute)
			if n := w.tick(); n != 1 {
				t.Fatalf("at the failure TTL, %d changes, want 1", n)
			}
			w.waitBuilds(1)
			w.wantBuild("w1", "stop", "failure_ttl", "succeeded")
			w.wantState("w1", "Stopped", "Stopped", "failure_ttl: ")
			if err := os.Remove(w.marker); err != nil {
				t.Fatal(err)
			}

			// Dormancy: 240h with no use. w2 (running, no TTL) is stopped and marked dormant; w1
			// (stopped) is marked dormant, and its daily autostart no longer applies.
			w1, w2 := w.workspace("w1"), w.workspace("w2")
			lastUse := *w1.LastActivityAt
			if w2.LastActivityAt.After(lastUse) {
				lastUse = *w2.LastActivityAt
			}
			w.Clock.Set(lastUse.Add(240 * time.Hour))
			if n := w.tick(); n != 2 {
				t.Fatalf("at the dormancy threshold, %d changes, want 2", n)
			}
			w.waitBuilds(1)
			w.wantBuild("w2", "stop", "dormancy", "succeeded")
			if ws := w.wantState("w2", "Stopped", "Stopped", "dormancy: "); ws.DormantAt == nil {
				t.Fatal("w2 is not dormant")
			}
			if ws := w.workspace("w1"); ws.DormantAt == nil || ws.Automation.NextAutostartAt != nil {
				t.Fatalf("w1: dormant %v, next autostart %v", ws.DormantAt, ws.Automation.NextAutostartAt)
			}
			w.Clock.Advance(24 * time.Hour)
			if n := w.tick(); n != 0 {
				t.Fatalf("a dormant workspace was changed: %d changes (its autostart?)", n)
			}

			// Auto-delete: 48h dormant.
			w.Clock.Advance(24 * time.Hour)
			if n := w.tick(); n != 2 {
				t.Fatalf("at the auto-delete time, %d changes, want 2", n)
			}
			w.waitBuilds(2)
			for _, name := range []string{"w1", "w2"} {
				w.wantBuild(name, "delete", "autodelete", "succeeded")
				w.wantState(name, "Terminated", "Terminated", "autodelete: ")
			}
		})
	}
}
