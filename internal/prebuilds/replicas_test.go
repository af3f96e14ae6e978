package prebuilds_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/prebuilds"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestReplicasOnePostgres: two server replicas on one Postgres database. Ticking at the same
// moment, they create a preset's pool once (one replica holds the preset's lease); users claiming
// at once through both replicas never get the same prebuilt workspace, and those left without
// one get a workspace built from scratch; the refill after the claims is made once too.
func TestReplicasOnePostgres(t *testing.T) {
	ctx := context.Background()
	r := servertest.NewReplicas(t, 2)
	srvs, blds, admin := r.Servers, r.Backends, r.Admin
	urls := r.URLs
	r.PushStartCountModule(t, "tf")
	const n = 10
	if _, err := admin.PutPreset(ctx, "tf", "p", sdk.PutPresetRequest{Instances: n}); err != nil {
		t.Fatal(err)
	}

	tickBoth := func() [2]prebuilds.Result {
		var res [2]prebuilds.Result
		var errs [2]error
		var wg sync.WaitGroup
		for i := range srvs {
			wg.Add(1)
			go func() { defer wg.Done(); res[i], errs[i] = srvs[i].Prebuilds().Tick(ctx) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || res[0].Failed+res[1].Failed > 0 {
			t.Fatalf("ticks: %+v %v, %+v %v", res[0], errs[0], res[1], errs[1])
		}
		return res
	}
	// runJobs plays a provisioner: every queued job succeeds.
	runJobs := func(want int) {
		for i := 0; i < want; i++ {
			job, err := blds[i%2].Acquire(ctx, "worker", 0)
			if err != nil || job == nil {
				t.Fatalf("acquire job %d of %d: %v, %v", i+1, want, job, err)
			}
			if err := blds[i%2].Finish(ctx, job.ID, "worker", build.Outcome{State: []byte(`{"version":4,"terraform_version":"1.11.0","serial":1,"lineage":"l","resources":[]}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}

	res := tickBoth()
	if created := res[0].Created + res[1].Created; created != n {
		t.Fatalf("the replicas created %d prebuilt workspaces (%+v, %+v), want %d: the pool once", created, res[0], res[1], n)
	}
	runJobs(n)
	if res := tickBoth(); res[0].Created+res[1].Created+res[0].Deleted+res[1].Deleted != 0 {
		t.Fatalf("a full pool changed: %+v", res)
	}

	// n+2 users claim at once, half through each replica.
	const users = n + 2
	clients := make([]*sdk.Client, users)
	for i := range clients {
		u, err := admin.CreateUser(ctx, sdk.CreateUserRequest{Username: fmt.Sprintf("u%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if clients[i], err = sdk.New(urls[i%2], u.Token); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	created := make([]sdk.Workspace, users)
	errs := make([]error, users)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[i], errs[i] = clients[i].CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "ws", Template: "tf", Preset: "p"})
		}()
	}
	wg.Wait()
	claimed := map[string]string{}
	cold := 0
	for i, ws := range created {
		if errs[i] != nil {
			t.Fatalf("u%d: %v", i, errs[i])
		}
		b, err := clients[i].Build(ctx, "ws", 0)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case b.IsPrebuildClaim && b.Number == 2:
			if other, ok := claimed[ws.ID]; ok {
				t.Fatalf("u%d and %s claimed the same prebuilt workspace %s", i, other, ws.ID)
			}
			claimed[ws.ID] = fmt.Sprintf("u%d", i)
		case b.Number == 1 && !b.IsPrebuildClaim:
			cold++
		default:
			t.Fatalf("u%d's build %+v", i, b)
		}
	}
	if len(claimed) != n || cold != users-n {
		t.Fatalf("%d claimed, %d built from scratch; want %d and %d", len(claimed), cold, n, users-n)
	}
	// The refill is made once as well.
	res = tickBoth()
	if created := res[0].Created + res[1].Created; created != n {
		t.Fatalf("the refill created %d (%+v, %+v), want %d", created, res[0], res[1], n)
	}
}
