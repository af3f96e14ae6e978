package autobuild_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/autobuild"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestReplicasChangeOnce: two server replicas on one Postgres database tick at the same moment
// over the same due workspaces; each change is made once (one stop build per Terraform workspace,
// one change per Kubernetes workspace), the other replica finding it made on the locked row.
func TestReplicasChangeOnce(t *testing.T) {
	ctx := context.Background()
	r := servertest.NewReplicas(t, 2)
	srvs, blds, clk, admin := r.Servers, r.Backends, r.Clock, r.Admin

	// A Terraform template and an agent, both with a TTL of 1h.
	r.PushStartCountModule(t, "tf")
	if _, err := admin.SetTemplateLifecycle(ctx, "tf", sdk.Lifecycle{DefaultTTL: "1h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "k", Config: []byte(`{"lifecycle": {"default_ttl": "1h"}}`)}); err != nil {
		t.Fatal(err)
	}
	const n = 15
	for i := 0; i < n; i++ {
		if _, err := admin.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: fmt.Sprintf("tf%d", i), Template: "tf"}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: fmt.Sprintf("k%d", i), Agent: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	// A provisioner (the test) runs the starts.
	for i := 0; i < n; i++ {
		job, err := blds[0].Acquire(ctx, "worker", 0)
		if err != nil || job == nil {
			t.Fatalf("acquire: %v, %v", job, err)
		}
		if err := blds[0].Finish(ctx, job.ID, "worker", build.Outcome{State: []byte(`{"version":4,"terraform_version":"1.11.0","serial":1,"lineage":"l","resources":[]}`)}); err != nil {
			t.Fatal(err)
		}
	}

	clk.Advance(time.Hour)
	var results [2]autobuild.Result
	var errs [2]error
	var wg sync.WaitGroup
	for i := range srvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = srvs[i].Lifecycle().Tick(ctx)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || results[0].Failed+results[1].Failed != 0 {
		t.Fatalf("ticks: %+v %v, %+v %v", results[0], errs[0], results[1], errs[1])
	}
	if done := results[0].Done + results[1].Done; done != 2*n {
		t.Fatalf("the replicas made %d changes (%+v, %+v), want %d: each once", done, results[0], results[1], 2*n)
	}
	t.Logf("replica 0: %+v; replica 1: %+v", results[0], results[1])
	ws, err := admin.ListWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.DesiredState != "Stopped" || w.DesiredStateReason == "" {
			t.Errorf("%s: desired %s (%q), want Stopped by autostop", w.Name, w.DesiredState, w.DesiredStateReason)
		}
		if w.Backend != workspace.KindTerraform {
			continue
		}
		bs, err := admin.ListBuilds(ctx, w.Ref())
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) != 2 || bs[0].Transition != "stop" || bs[0].Reason != "autostop" {
			t.Errorf("%s has builds %+v, want its start and one autostop", w.Name, bs)
		}
	}
}
