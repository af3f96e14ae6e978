package prebuilds_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// slowModule is a template whose machine takes 2 s to set up (a local-exec that sleeps), done once
// when the resource is created: at a plain create, or at a prebuild's create, whose claim then
// finds it in the state and only records its user.
const slowModule = `variable "start_count" {
  type = number
}
variable "workspace_owner" {
  type = string
}
resource "terraform_data" "machine" {
  count = var.start_count

  provisioner "local-exec" {
    command = "sleep 2"
  }
}
resource "terraform_data" "user" {
  count = var.start_count
  input = var.workspace_owner
}
`

// BenchmarkTimeToRunning measures the time from a user's create request to the workspace Running
// (its start build succeeded, with the real terraform), claiming a ready prebuilt workspace against
// building one from scratch; it reports both and their ratio. The pool's refill after each claim is
// not timed.
//
//	go test -run XXX -bench TimeToRunning -benchtime 5x ./internal/prebuilds/
func BenchmarkTimeToRunning(b *testing.B) {
	w := servertest.NewTF(b, "sqlite", 1)
	w.PushModule("vm", map[string]string{"main.tf": slowModule})
	if _, err := w.Admin.PutPreset(w.Ctx, "vm", "p", sdk.PutPresetRequest{Instances: 1}); err != nil {
		b.Fatal(err)
	}
	refill := func() {
		if res, err := w.Server.Prebuilds().Tick(w.Ctx); err != nil || res.Created != 1 {
			b.Fatalf("refill: %+v, %v", res, err)
		}
		w.WaitBuilds(1)
	}
	// untilRunning creates a workspace and waits for its first start to end.
	untilRunning := func(name, preset string) time.Duration {
		start := time.Now()
		if _, err := w.Dev.CreateWorkspace(w.Ctx, sdk.CreateWorkspaceRequest{Name: name, Template: "vm", Preset: preset}); err != nil {
			b.Fatal(err)
		}
		end := w.WaitBuilds(1)[0]
		took := time.Since(start)
		if end.Job.Error != "" {
			b.Fatalf("%s: %s", name, end.Job.Error)
		}
		if got, err := w.Dev.Workspace(w.Ctx, name); err != nil || got.ActualState != "Running" {
			b.Fatalf("%s: %+v, %v", name, got, err)
		}
		return took
	}
	refill()
	var create, claim time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		create += untilRunning(fmt.Sprintf("c%d", i), "")
		claim += untilRunning(fmt.Sprintf("p%d", i), "p")
		if bs, err := w.Dev.ListBuilds(w.Ctx, fmt.Sprintf("p%d", i)); err != nil || !bs[0].IsPrebuildClaim {
			b.Fatalf("p%d was not claimed: %+v, %v", i, bs, err)
		}
		b.StopTimer()
		refill()
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(create.Milliseconds())/n, "create-ms")
	b.ReportMetric(float64(claim.Milliseconds())/n, "claim-ms")
	b.ReportMetric(float64(claim)/float64(create), "claim/create")
}
