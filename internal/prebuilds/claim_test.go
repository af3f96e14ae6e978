package prebuilds_test

import (
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestClaimCountsFromTheClaim: a prebuilt workspace that waited longer than the template's max
// active, TTL and dormancy threshold is claimed; the claim is its owner's create and start, so
// the API says it was claimed (claimed_at), its created_at is the claim's time, its builds keep
// the prebuild's, and every lifecycle timer counts from the claim: nothing is due at the claim,
// the autostop is the TTL after it, and max active stops it exactly max active after it (real
// terraform, both stores, the lifecycle executor on the fake clock).
func TestClaimCountsFromTheClaim(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			w := newWorld(t, engine)
			ctx := w.Ctx
			if _, err := w.Admin.SetTemplateLifecycle(ctx, "tf", sdk.Lifecycle{DefaultTTL: "2h", MaxActive: "8h", DormancyThreshold: "24h", FailureTTL: "1h"}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Admin.PutPreset(ctx, "tf", "small", sdk.PutPresetRequest{Instances: 1, Parameters: map[string]string{"flavor": "s"}}); err != nil {
				t.Fatal(err)
			}
			w.tick()
			w.WaitBuilds(1)
			prebuilt := w.Clock.Now()
			w.Clock.Advance(30 * time.Hour) // longer than every timer of the policy
			claim := w.Clock.Now()

			ws, err := w.Dev.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "mine", Template: "tf", Preset: "small"})
			if err != nil {
				t.Fatal(err)
			}
			if ws.ClaimedAt == nil || !ws.ClaimedAt.Equal(claim) || !ws.CreatedAt.Equal(claim) || ws.Preset != "small" {
				t.Fatalf("the claim's answer: claimed_at %v, created_at %v, preset %q; want both %v and small", ws.ClaimedAt, ws.CreatedAt, ws.Preset, claim)
			}
			w.WaitBuilds(1)
			bs, err := w.Dev.ListBuilds(ctx, "mine")
			if err != nil {
				t.Fatal(err)
			}
			first := bs[0]
			for _, b := range bs {
				if b.Number < first.Number {
					first = b
				}
			}
			if first.Number != 1 || !first.IsPrebuild || !first.CreatedAt.Equal(prebuilt) {
				t.Fatalf("the prebuild's build: %+v; want build 1, is_prebuild, at %v", first, prebuilt)
			}
			ws, err = w.Dev.Workspace(ctx, "mine")
			if err != nil {
				t.Fatal(err)
			}
			if ws.ActualState != "Running" || ws.Automation == nil || ws.Automation.AutostopAt == nil || !ws.Automation.AutostopAt.Equal(claim.Add(2*time.Hour)) {
				t.Fatalf("after the claim: %s, automation %+v; want Running, autostop at %v (the TTL after the claim)", ws.ActualState, ws.Automation, claim.Add(2*time.Hour))
			}
			lifecycleTick := func() int {
				t.Helper()
				res, err := w.Server.Lifecycle().Tick(ctx)
				if err != nil || res.Failed > 0 {
					t.Fatalf("lifecycle tick: %+v, %v", res, err)
				}
				return res.Done
			}
			if n := lifecycleTick(); n != 0 {
				t.Fatalf("at the claim, the lifecycle executor made %d changes; nothing is due yet", n)
			}
			// Autostop off for this workspace: max active alone applies.
			off := "0"
			if _, err := w.Dev.SetSchedule(ctx, "mine", sdk.WorkspaceSchedule{TTL: &off}); err != nil {
				t.Fatal(err)
			}
			w.Clock.Set(claim.Add(8*time.Hour - time.Minute))
			if n := lifecycleTick(); n != 0 {
				t.Fatalf("a minute before max active after the claim, %d changes", n)
			}
			w.Clock.Set(claim.Add(8 * time.Hour))
			if n := lifecycleTick(); n != 1 {
				t.Fatalf("max active after the claim, %d changes, want 1", n)
			}
			w.WaitBuilds(1)
			if b, err := w.Dev.Build(ctx, "mine", 0); err != nil || b.Transition != "stop" || b.Reason != "max_active" || b.Status != "succeeded" {
				t.Fatalf("the latest build: %+v, %v; want a stop for max_active", b, err)
			}
		})
	}
}
