package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestLeaderElection: two replicas of one agent; only the Lease holder reconciles. When it stops,
// the other takes the Lease, starts with a full sync, and the workspace still follows the user.
func TestLeaderElection(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "ha", "")
	const leaseNS = "hangar-agent-ha"
	replicas := map[string]*proc{
		"ha-1": startAgent(t, srv, cluster, "ha-1", tokenFile, leaseNS),
		"ha-2": startAgent(t, srv, cluster, "ha-2", tokenFile, leaseNS),
	}
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "ha", Agent: "ha"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "ha", transition, "Running", state("Running", "Running"))

	holder := func(ctx context.Context) (string, error) {
		leases, err := cluster.Client.CoordinationV1().Leases(leaseNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		if len(leases.Items) != 1 || leases.Items[0].Spec.HolderIdentity == nil {
			return "", fmt.Errorf("leases: %d", len(leases.Items))
		}
		return *leases.Items[0].Spec.HolderIdentity, nil
	}
	leader, err := holder(ctx)
	if err != nil || replicas[leader] == nil {
		t.Fatalf("lease holder %q (%v)", leader, err)
	}
	var follower string
	for name := range replicas {
		if name != leader {
			follower = name
		}
	}
	if n := len(lines(replicas[follower].output(), "leading: starting reconciliation")); n != 0 {
		t.Fatalf("the follower %s also reconciles:\n%s", follower, replicas[follower].output())
	}

	replicas[leader].stop(syscall.SIGTERM) // releases the Lease on the way out
	kubetest.Eventually(t, transition, "the follower to take the Lease", func(ctx context.Context) error {
		h, err := holder(ctx)
		if err != nil {
			return err
		}
		if h != follower {
			return fmt.Errorf("holder is %q", h)
		}
		return nil
	})
	if _, err := c.UpdateWorkspace(ctx, "ha", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "ha", transition, "Stopped under the new leader", state("Stopped", "Stopped"))
}
