package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

const transition = 60 * time.Second

// TestLifecycle: create → Running; stop → Stopped; start → Running; restart → Running through
// RestartRequested; delete → Terminated with no object of the workspace left in the cluster.
func TestLifecycle(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "lifecycle", "") // default 10 s partial interval: the wait endpoint makes it fast
	startAgent(t, srv, cluster, "lifecycle", tokenFile, "hangar-agent-lifecycle")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()

	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "life", Agent: "lifecycle"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "life", transition, "Running", state("Running", "Running"))
	d, err := cluster.Client.AppsV1().Deployments(ws.Namespace).Get(ctx, ws.KubeName, metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 1 {
		t.Fatalf("deployment: %v %v", d, err)
	}

	for _, step := range []struct{ desired, want string }{{"Stopped", "Stopped"}, {"Running", "Running"}} {
		if _, err := c.UpdateWorkspace(ctx, "life", sdk.UpdateWorkspaceRequest{DesiredState: step.desired}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, "life", transition, step.want, state(step.desired, step.want))
		d, err := cluster.Client.AppsV1().Deployments(ws.Namespace).Get(ctx, ws.KubeName, metav1.GetOptions{})
		wantReplicas := int32(0)
		if step.desired == "Running" {
			wantReplicas = 1
		}
		if err != nil || *d.Spec.Replicas != wantReplicas {
			t.Fatalf("after %s: deployment replicas %v, %v", step.desired, d.Spec.Replicas, err)
		}
	}

	// Restart: RestartRequested until the agent reports Stopped, then Running again.
	before, _ := c.Workspace(ctx, "life")
	if _, err := c.UpdateWorkspace(ctx, "life", sdk.UpdateWorkspaceRequest{DesiredState: "RestartRequested"}); err != nil {
		t.Fatal(err)
	}
	after := waitFor(t, c, "life", transition, "Running after a restart", func(w sdk.Workspace) bool {
		return w.DesiredState == "Running" && w.ActualState == "Running" && w.DesiredStateUpdatedAt.After(*before.DesiredStateUpdatedAt)
	})
	if !after.ActualStateUpdatedAt.After(*before.ActualStateUpdatedAt) {
		t.Errorf("restart did not go through Stopped: actual state last changed %v, before the restart %v", after.ActualStateUpdatedAt, before.ActualStateUpdatedAt)
	}

	if _, err := c.UpdateWorkspace(ctx, "life", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "life", transition, "Terminated", state("Terminated", "Terminated"))
	// Nothing of the workspace is left: its namespace (and so everything in it) is gone.
	kubetest.Eventually(t, transition, "namespace "+ws.Namespace+" to be gone", func(ctx context.Context) error {
		_, err := cluster.Client.CoreV1().Namespaces().Get(ctx, ws.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("namespace still there (%v)", err)
	})
}

// TestApplyErrorIsShown: a configuration the API server refuses (here an admission policy denies
// the workspace's Deployment) turns the workspace to Error, and the user sees the API server's
// message, through the API and `hangar show`.
func TestApplyErrorIsShown(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	ctx := context.Background()
	denyDeploymentsOf(t, cluster, "refused", "image registry.example.com/forbidden is not allowed by policy")

	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "strict", `{"partial_reconciliation_interval_seconds":1}`)
	startAgent(t, srv, cluster, "strict", tokenFile, "hangar-agent-strict")
	c := srv.client(t, srv.AdminToken)
	if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "refused", Agent: "strict"}); err != nil {
		t.Fatal(err)
	}
	w := waitFor(t, c, "refused", transition, "Error", state("Running", "Error"))
	if w.Error == nil || w.Error.Type != "applier" || !strings.Contains(w.Error.Message, "is not allowed by policy") {
		t.Fatalf("error shown to the user: %+v", w.Error)
	}
	out, err := runCLI(srv, "show", "refused")
	if err != nil || !strings.Contains(out, "is not allowed by policy") {
		t.Fatalf("hangar show does not give the API server's message (%v):\n%s", err, out)
	}
	// The apply stopped at the refused Deployment, so no half-running workspace hides the error.
	if _, err := cluster.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.KubeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused Deployment exists (%v)", err)
	}
	// Deleting the failed workspace cleans up what was applied.
	if _, err := c.UpdateWorkspace(ctx, "refused", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "refused", transition, "Terminated", state("Terminated", "Terminated"))
}

// TestCrashLoopFailsFast: a workspace whose container crash-loops (kwok's crash-loop stage, chosen by
// a label the agent's config puts on every object) is Failed with the pod's reason within seconds,
// not after the Deployment's 10-minute progress deadline; stopping it then works.
func TestCrashLoopFailsFast(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "crashy", fmt.Sprintf(`{"labels":{%q:"true"}}`, kubetest.CrashLoopLabel))
	startAgent(t, srv, cluster, "crashy", tokenFile, "hangar-agent-crashy")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()
	start := time.Now()
	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "crashy", Agent: "crashy"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, ws.Namespace)
	w := waitFor(t, c, "crashy", transition, "Failed", state("Running", "Failed"))
	t.Logf("create → Failed in %v", time.Since(start))
	if w.Error == nil || w.Error.Type != "pod" || !strings.Contains(w.Error.Message, "CrashLoopBackOff") {
		t.Fatalf("the user is not told why: %+v", w.Error)
	}
	out, err := runCLI(srv, "show", "crashy")
	if err != nil || !strings.Contains(out, "CrashLoopBackOff") {
		t.Fatalf("hangar show (%v):\n%s", err, out)
	}
	if _, err := c.UpdateWorkspace(ctx, "crashy", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	w = waitFor(t, c, "crashy", transition, "Stopped", state("Stopped", "Stopped"))
	if w.Error != nil {
		t.Errorf("a stopped workspace still shows %+v", w.Error)
	}
}
