package prebuilds_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/prebuilds"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// module is a template that records what its builds saw: the preset's parameter flavor, the
// is_prebuild flag (its start fails while is_prebuild and the file failMarker names exists), and
// on a claim, the environment variable HANGAR_WORKSPACE_IS_PREBUILD_CLAIM (written by a local-exec
// to a file named after the new owner in seenDir). version is a comment: each push differs.
const module = `# version %d
variable "start_count" {
  type = number
}
variable "workspace_owner" {
  type = string
}
variable "is_prebuild" {
  type = string
}
variable "is_prebuild_claim" {
  type = string
}
variable "flavor" {
  type = string
}

resource "terraform_data" "home" {
  count = var.start_count
  input = var.flavor

  lifecycle {
    precondition {
      condition     = !(var.is_prebuild == "true" && fileexists(%q))
      error_message = "the test asked prebuilds to fail"
    }
  }
}

resource "terraform_data" "claim" {
  count = var.is_prebuild_claim == "true" ? 1 : 0
  input = var.workspace_owner

  provisioner "local-exec" {
    command = "printf %%s \"$HANGAR_WORKSPACE_IS_PREBUILD_CLAIM\" > %s/${var.workspace_owner}"
  }
}

output "home_id" {
  value = one(terraform_data.home[*].id)
}

output "flavor" {
  value = var.flavor
}

output "is_prebuild" {
  value = var.is_prebuild
}
`

type world struct {
	*servertest.TF
	marker, seen string
	version      int
}

func newWorld(t *testing.T, engine string) *world {
	w := &world{TF: servertest.NewTF(t, engine, 2), marker: filepath.Join(t.TempDir(), "fail"), seen: t.TempDir()}
	w.push()
	return w
}

func (w *world) push() {
	w.version++
	w.PushModule("tf", map[string]string{"main.tf": fmt.Sprintf(module, w.version, w.marker, w.seen)})
}

func (w *world) tick() prebuilds.Result {
	w.T.Helper()
	res, err := w.Server.Prebuilds().Tick(w.Ctx)
	if err != nil || res.Failed > 0 {
		w.T.Fatalf("tick: %+v, %v", res, err)
	}
	return res
}

func (w *world) preset(name string) sdk.Preset {
	w.T.Helper()
	ps, err := w.Dev.ListPresets(w.Ctx, "tf")
	if err != nil {
		w.T.Fatal(err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	w.T.Fatalf("no preset %q in %+v", name, ps)
	return sdk.Preset{}
}

func (w *world) wantPool(name string, desired, ready, building int) {
	w.T.Helper()
	if p := w.preset(name).Pool; p.Desired != desired || p.Ready != ready || p.Building != building {
		w.T.Fatalf("preset %s: pool %+v, want desired %d, ready %d, building %d", name, p, desired, ready, building)
	}
}

// prebuilt lists the unclaimed prebuilt workspaces, as an admin sees them.
func (w *world) prebuilt() []sdk.Workspace {
	w.T.Helper()
	ws, err := w.Admin.ListWorkspacesWith(w.Ctx, sdk.ListWorkspacesOptions{Prebuilds: true})
	if err != nil {
		w.T.Fatal(err)
	}
	var out []sdk.Workspace
	for _, x := range ws {
		if x.Owner == "hangar-prebuilds" {
			out = append(out, x)
		}
	}
	return out
}

// outputs reads the outputs of the workspace's latest state (ref: name or owner/name).
func (w *world) outputs(c *sdk.Client, ref string) map[string]string {
	w.T.Helper()
	state, _, err := c.PullState(w.Ctx, ref, 0)
	if err != nil {
		w.T.Fatalf("pull the state of %s: %v", ref, err)
	}
	var s struct {
		Outputs map[string]struct {
			Value any `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(state, &s); err != nil {
		w.T.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range s.Outputs {
		out[k] = fmt.Sprint(v.Value)
	}
	return out
}

func (w *world) latest(c *sdk.Client, ref string) sdk.Build {
	w.T.Helper()
	b, err := c.Build(w.Ctx, ref, 0)
	if err != nil {
		w.T.Fatal(err)
	}
	return b
}

func (w *world) metric(name string) string {
	w.T.Helper()
	resp, err := http.Get(w.URL + "/metrics")
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestPrebuildTable runs each row of the seed's "Prebuild Operations" table through the API, on
// the real terraform, with the reconciler on the fake clock: create prebuild (start with
// is_prebuild from empty state), claim prebuild (start with is_prebuild_claim from the prebuilt
// workspace's state, handed to the user), delete prebuild (destroy from the last build's state:
// outdated, failed, extra, a deleted preset's), cancel pending + orphan (a create no longer wanted
// before a provisioner took it: canceled, deleted without Terraform); and the pool refills, backs
// off after failures, and builds normally from the preset when nothing is ready.
func TestPrebuildTable(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			w := newWorld(t, engine)
			ctx := w.Ctx
			if _, err := w.Admin.PutPreset(ctx, "tf", "small", sdk.PutPresetRequest{Instances: 2, Parameters: map[string]string{"flavor": "s"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Admin.PutPreset(ctx, "tf", "large", sdk.PutPresetRequest{Instances: 0, Parameters: map[string]string{"flavor": "l"}}); err != nil {
				t.Fatal(err)
			}
			w.wantPool("small", 2, 0, 0)

			// Create prebuild: two start builds with is_prebuild, from empty state, by hangar-prebuilds.
			if res := w.tick(); res.Created != 2 || res.Presets != 2 {
				t.Fatalf("first tick: %+v, want 2 created", res)
			}
			w.wantPool("small", 2, 0, 2)
			w.WaitBuilds(2)
			w.wantPool("small", 2, 2, 0)
			pre := w.prebuilt()
			if len(pre) != 2 {
				t.Fatalf("prebuilt workspaces: %+v", pre)
			}
			homes := map[string]string{}
			for _, p := range pre {
				if p.Preset != "small" || p.ActualState != "Running" || !strings.HasPrefix(p.Name, "prebuild-") {
					t.Fatalf("prebuilt workspace %+v", p)
				}
				b := w.latest(w.Admin, p.Ref())
				if b.Number != 1 || b.Transition != "start" || !b.IsPrebuild || b.IsPrebuildClaim || b.Initiator != "hangar-prebuilds" ||
					b.Reason != "prebuild" || b.StateSource != "none" || b.Status != "succeeded" {
					t.Fatalf("%s: build %+v, want a successful start with is_prebuild from no state", p.Name, b)
				}
				out := w.outputs(w.Admin, p.Ref())
				if out["flavor"] != "s" || out["is_prebuild"] != "true" || out["home_id"] == "" {
					t.Fatalf("%s: outputs %v", p.Name, out)
				}
				homes[out["home_id"]] = p.Name
			}
			// The audit log names the admin's preset and the reconciler's creates, each with the
			// workspace it made.
			if page, err := w.Admin.ListAudit(ctx, sdk.AuditQuery{Action: "preset.put", Target: "tf/small"}); err != nil ||
				len(page.Entries) != 1 || page.Entries[0].Actor != "admin" || page.Entries[0].Outcome != "success" {
				t.Fatalf("preset.put entries %+v (%v)", page.Entries, err)
			}
			page, err := w.Admin.ListAudit(ctx, sdk.AuditQuery{Action: "prebuild.create"})
			if err != nil || len(page.Entries) != 2 {
				t.Fatalf("prebuild.create entries %+v (%v), want 2", page.Entries, err)
			}
			for _, e := range page.Entries {
				if e.Actor != "hangar-prebuilds" || e.Outcome != "success" || !strings.HasPrefix(e.TargetName, "hangar-prebuilds/prebuild-") ||
					e.Details["preset"] != "tf/small" || e.Details["transition"] != "start" {
					t.Fatalf("prebuild.create entry %+v", e)
				}
			}
			// Users do not see them.
			if ws, err := w.Dev.ListWorkspaces(ctx); err != nil || len(ws) != 0 {
				t.Fatalf("dev lists %+v (%v), want nothing", ws, err)
			}
			if ws, err := w.Admin.ListWorkspaces(ctx); err != nil || len(ws) != 0 {
				t.Fatalf("an admin's plain list shows %+v (%v), want no prebuilt workspace", ws, err)
			}
			if _, err := w.Dev.ListWorkspacesWith(ctx, sdk.ListWorkspacesOptions{Prebuilds: true}); err == nil {
				t.Fatal("a user listed the prebuilt workspaces")
			}

			// Claim prebuild: dev's create takes a ready one; its start has is_prebuild_claim and
			// the prebuilt workspace's state (the same terraform_data id).
			ws, err := w.Dev.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "mine", Template: "tf", Preset: "small"})
			if err != nil {
				t.Fatal(err)
			}
			if ws.Owner != "dev" || ws.Name != "mine" || ws.Preset != "small" {
				t.Fatalf("claimed workspace %+v", ws)
			}
			w.WaitBuilds(1)
			ws, err = w.Dev.Workspace(ctx, "mine")
			if err != nil || ws.ActualState != "Running" || ws.DesiredState != "Running" {
				t.Fatalf("mine: %+v, %v; want Running", ws, err)
			}
			b := w.latest(w.Dev, "mine")
			if b.Number != 2 || b.Transition != "start" || !b.IsPrebuildClaim || b.IsPrebuild || b.Initiator != "dev" ||
				b.StateSource != "previous" || b.Status != "succeeded" {
				t.Fatalf("the claim's build %+v", b)
			}
			out := w.outputs(w.Dev, "mine")
			if homes[out["home_id"]] == "" || out["flavor"] != "s" || out["is_prebuild"] != "false" {
				t.Fatalf("mine's outputs %v: want one of the prebuilt workspaces' homes %v", out, homes)
			}
			if seen, err := os.ReadFile(filepath.Join(w.seen, "dev")); err != nil || string(seen) != "true" {
				t.Fatalf("HANGAR_WORKSPACE_IS_PREBUILD_CLAIM at the claim: %q (%v)", seen, err)
			}
			if builds, err := w.Dev.ListBuilds(ctx, "mine"); err != nil || len(builds) != 2 || !builds[1].IsPrebuild {
				t.Fatalf("mine's builds %+v (%v): the prebuilt create, then the claim", builds, err)
			}
			// A name in use is refused, and nothing is claimed.
			if _, err := w.Dev.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "mine", Template: "tf", Preset: "small"}); err == nil ||
				!strings.Contains(err.Error(), "already exists") {
				t.Fatalf("a second mine: %v", err)
			}
			w.wantPool("small", 2, 1, 0)
			// The audit log has the claim as dev's create, with its claim build, and the refused
			// second one as a failure.
			page, err = w.Admin.ListAudit(ctx, sdk.AuditQuery{Action: "workspace.create", Target: "dev/mine"})
			if err != nil || len(page.Entries) != 2 || page.Entries[1].Outcome != "success" || page.Entries[1].Actor != "dev" ||
				page.Entries[1].Details["build_number"] != float64(2) || page.Entries[0].Outcome != "failure" {
				t.Fatalf("the claim's audit entries %+v (%v)", page.Entries, err)
			}
			if m := w.metric("hangar_prebuilds_claimed_total"); !strings.Contains(m, `hangar_prebuilds_claimed_total{preset="small",template="tf"} 1`) {
				t.Fatalf("claimed metric:\n%s", m)
			}

			// Nothing ready: the workspace is built from scratch with the preset's parameters.
			if _, err := w.Dev.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "cold", Template: "tf", Preset: "large"}); err != nil {
				t.Fatal(err)
			}
			// The pool refills at the next tick.
			if res := w.tick(); res.Created != 1 {
				t.Fatalf("after a claim: %+v, want 1 created", res)
			}
			w.WaitBuilds(2)
			if b := w.latest(w.Dev, "cold"); b.Number != 1 || b.IsPrebuildClaim || b.IsPrebuild || b.Status != "succeeded" {
				t.Fatalf("cold's build %+v", b)
			}
			if out := w.outputs(w.Dev, "cold"); out["flavor"] != "l" {
				t.Fatalf("cold's outputs %v", out)
			}
			w.wantPool("small", 2, 2, 0)

			// Delete prebuild (outdated): a new version replaces both; the old ones are destroyed
			// from their last state. The claimed workspace is not touched.
			w.push()
			if res := w.tick(); res.Created != 2 || res.Deleted != 2 || res.Orphaned != 0 {
				t.Fatalf("after a new version: %+v, want 2 deleted and 2 created", res)
			}
			w.WaitBuilds(4)
			for _, p := range pre {
				if strings.Contains(p.Name, "mine") {
					continue
				}
				b, err := w.Admin.Build(ctx, p.Ref(), 0)
				if err != nil {
					continue // the claimed one is dev's now
				}
				if b.Transition != "delete" || b.Reason != "prebuild" || b.StateSource != "previous" || b.Orphan || b.Status != "succeeded" {
					t.Fatalf("%s: delete build %+v", p.Name, b)
				}
			}
			w.wantPool("small", 2, 2, 0)
			if p := w.preset("small"); p.Pool.Version != 2 || p.Pool.Other != 0 {
				t.Fatalf("small after the new version: %+v", p.Pool)
			}
			if b := w.latest(w.Dev, "mine"); b.Number != 2 {
				t.Fatalf("the claimed workspace was changed: %+v", b)
			}

			// Backoff: the template fails while is_prebuild; a third instance fails, is deleted,
			// and the next create waits a minute, then two.
			if err := os.WriteFile(w.marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Admin.PutPreset(ctx, "tf", "small", sdk.PutPresetRequest{Instances: 3, Parameters: map[string]string{"flavor": "s"}}); err != nil {
				t.Fatal(err)
			}
			if res := w.tick(); res.Created != 1 {
				t.Fatalf("3 wanted: %+v", res)
			}
			if b := w.WaitBuilds(1)[0]; b.Job.Error == "" || !strings.Contains(b.Job.Error, "the test asked prebuilds to fail") {
				t.Fatalf("the failing create: %+v", b.Job)
			}
			if res := w.tick(); res.Deleted != 1 || res.Created != 0 {
				t.Fatalf("after a failure: %+v, want the failed one deleted and no create (backoff)", res)
			}
			w.WaitBuilds(1)
			w.Clock.Advance(time.Minute)
			if res := w.tick(); res.Created != 1 {
				t.Fatalf("a minute after the failure: %+v", res)
			}
			w.WaitBuilds(1)
			if res := w.tick(); res.Deleted != 1 || res.Created != 0 {
				t.Fatalf("after a second failure: %+v", res)
			}
			w.WaitBuilds(1)
			w.Clock.Advance(time.Minute)
			if res := w.tick(); res.Created != 0 {
				t.Fatalf("one minute into a two-minute backoff: %+v", res)
			}
			if err := os.Remove(w.marker); err != nil {
				t.Fatal(err)
			}
			w.Clock.Advance(time.Minute)
			if res := w.tick(); res.Created != 1 {
				t.Fatalf("after two minutes: %+v", res)
			}
			w.WaitBuilds(1)
			w.wantPool("small", 3, 3, 0)
			if m := w.metric("hangar_prebuilds_failed_total"); !strings.Contains(m, `hangar_prebuilds_failed_total{preset="small",template="tf"} 2`) {
				t.Fatalf("failed metric:\n%s", m)
			}
			if m := w.metric("hangar_prebuild_pool"); !strings.Contains(m, `hangar_prebuild_pool{preset="small",status="ready",template="tf"} 3`) {
				t.Fatalf("pool metric:\n%s", m)
			}

			// Cancel pending + orphan: with no provisioner, a fourth create stays pending; once no
			// longer wanted it is canceled and deleted without Terraform.
			w.StopProvisioners()
			if _, err := w.Admin.PutPreset(ctx, "tf", "small", sdk.PutPresetRequest{Instances: 4, Parameters: map[string]string{"flavor": "s"}}); err != nil {
				t.Fatal(err)
			}
			if res := w.tick(); res.Created != 1 {
				t.Fatalf("4 wanted: %+v", res)
			}
			w.wantPool("small", 4, 3, 1)
			var pending sdk.Workspace
			for _, p := range w.prebuilt() {
				if b := w.latest(w.Admin, p.Ref()); b.Status == "pending" {
					pending = p
				}
			}
			if pending.Name == "" {
				t.Fatal("no pending prebuilt workspace")
			}
			if _, err := w.Admin.PutPreset(ctx, "tf", "small", sdk.PutPresetRequest{Instances: 3, Parameters: map[string]string{"flavor": "s"}}); err != nil {
				t.Fatal(err)
			}
			if res := w.tick(); res.Deleted != 1 || res.Orphaned != 1 {
				t.Fatalf("3 wanted again: %+v, want the pending one orphaned", res)
			}
			// Both end at once, without a provisioner: the canceled create and the orphan delete.
			if ended := w.WaitBuilds(2); ended[0].Job.Status() != "canceled" || !ended[1].Orphan {
				t.Fatalf("ended: %+v", ended)
			}
			builds, err := w.Admin.ListBuilds(ctx, pending.Ref())
			if err != nil || len(builds) != 2 {
				t.Fatalf("%s's builds %+v (%v)", pending.Name, builds, err)
			}
			if c := builds[1]; c.Status != "canceled" || c.StartedAt != nil || !strings.Contains(c.Error, "before a provisioner picked it up") {
				t.Fatalf("the pending create: %+v, want canceled before it ran", c)
			}
			if d := builds[0]; d.Transition != "delete" || !d.Orphan || d.Status != "succeeded" || d.StateSource != "orphan" || d.StartedAt == nil {
				t.Fatalf("the orphan delete: %+v", d)
			}
			if slices.ContainsFunc(w.prebuilt(), func(x sdk.Workspace) bool { return x.Name == pending.Name }) {
				t.Fatalf("%s is still listed", pending.Name)
			}
			w.wantPool("small", 3, 3, 0)
			if res := w.tick(); res.Created+res.Deleted != 0 {
				t.Fatalf("a canceled create counted as a failure or was replaced: %+v", res)
			}

			// A deleted preset's instances are destroyed, then the preset is gone.
			w.StartProvisioner()
			if err := w.Admin.DeletePreset(ctx, "tf", "small"); err != nil {
				t.Fatal(err)
			}
			if res := w.tick(); res.Deleted != 3 {
				t.Fatalf("after the preset's delete: %+v", res)
			}
			w.WaitBuilds(3)
			if res := w.tick(); res.Purged != 1 {
				var states []string
				for _, p := range w.prebuilt() {
					b := w.latest(w.Admin, p.Ref())
					states = append(states, fmt.Sprintf("%s %s/%s %s:%s %s", p.Name, p.DesiredState, p.ActualState, b.Transition, b.Status, b.Error))
				}
				t.Fatalf("the deleted preset is not purged: %+v; left %v", res, states)
			}
			if ps, err := w.Dev.ListPresets(ctx, "tf"); err != nil || len(ps) != 1 || ps[0].Name != "large" {
				t.Fatalf("presets %+v (%v)", ps, err)
			}
			if len(w.prebuilt()) != 0 {
				t.Fatalf("prebuilt workspaces left: %+v", w.prebuilt())
			}
			if ws, err := w.Dev.Workspace(ctx, "mine"); err != nil || ws.ActualState != "Running" || ws.Preset != "" {
				t.Fatalf("mine after its preset's delete: %+v (%v)", ws, err)
			}
		})
	}
}
