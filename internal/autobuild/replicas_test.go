package autobuild_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/autobuild"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
	"github.com/hangar-dev/hangar/internal/tfmodule"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestReplicasChangeOnce: two server replicas on one Postgres database tick at the same moment
// over the same due workspaces; each change is made once (one stop build per Terraform workspace,
// one change per Kubernetes workspace), the other replica finding it made on the locked row.
func TestReplicasChangeOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	clk := clock.NewFake(servertest.Start)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var srvs [2]*server.Server
	var blds [2]*tfbackend.Service
	for i := range srvs {
		st, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		blds[i] = tfbackend.New(tfbackend.Options{Store: st, Clock: clk, Logger: log})
		srvs[i] = server.New(server.Options{Store: st, Clock: clk, Logger: log, Builder: blds[i], ReplicaID: fmt.Sprintf("r%d", i)})
	}
	dir := t.TempDir()
	tokenFile, _, err := srvs[0].Bootstrap(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srvs[0].Handler())
	t.Cleanup(hs.Close)
	admin, err := sdk.New(hs.URL, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}

	// A Terraform template and an agent, both with a TTL of 1h.
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "main.tf"), []byte("variable \"start_count\" {\n  type = number\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := tfmodule.Pack(mod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PushTemplateVersion(ctx, "tf", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		t.Fatal(err)
	}
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
