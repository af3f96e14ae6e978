package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// BenchmarkCreateToRunningRealNode: a new workspace on the real node (kubelet, containerd, runc,
// the local-path provisioner), from POST /api/v1/workspaces returning to the API showing it
// Running: namespace and objects applied, the claim provisioned, the pod scheduled, its sandbox
// and container started from the preloaded image, the pod ready, the Deployment available, the
// agent's report. One workspace at a time, each terminated (and gone) before the next, untimed; a
// first one, not counted, warms the agent up. Reports p50, p95, mean and max over benchRuns runs
// per iteration.
func BenchmarkCreateToRunningRealNode(b *testing.B) {
	cluster := kubetest.Start(b)
	srv := startServer(b)
	tok := srv.registerRealAgent(b, "bench-real", "")
	startAgent(b, srv, cluster, "bench-real", tok, "hangar-agent-bench-real")
	c := srv.client(b, srv.AdminToken)
	ctx := context.Background()
	devfile := `schemaVersion: 2.2.0
metadata:
  name: bench
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
`
	const timeout = 120 * time.Second
	create := func(name string) time.Duration {
		if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: "bench-real", Devfile: devfile}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		benchWaitFast(b, c, name, timeout, "Running", state("Running", "Running"))
		took := time.Since(start)
		if _, err := c.UpdateWorkspace(ctx, name, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
			b.Fatal(err)
		}
		waitFor(b, c, name, timeout, "Terminated", state("Terminated", "Terminated"))
		return took
	}
	b.Logf("warm-up create → Running: %v", create("rn-warm").Round(time.Millisecond))
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < benchRuns; j++ {
			benchPause()
			samples = append(samples, create(fmt.Sprintf("rn-%d-%02d", i, j)))
		}
	}
	benchReport(b, "", samples)
}
