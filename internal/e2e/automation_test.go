package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestAutomationOnRealNode: the lifecycle executor's changes reach a workspace that really runs.
// The server runs in process on the fake clock (so an hour passes at once); the agent is the
// real binary, applying to the cluster's real node. An autostop after the TTL (idle stop) and
// GitLab's max_active_hours_before_stop each stop the running workspace: its pod goes away, its
// Deployment is scaled to zero, and the API and `show` say why.
func TestAutomationOnRealNode(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	env := servertest.New(t)
	srv := &server{URL: env.URL, AdminToken: env.AdminToken}
	token := srv.registerRealAgent(t, "auto", `{"max_active_hours_before_stop": 3}`)
	startAgent(t, srv, cluster, "auto", token, "hangar-agent-auto")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()
	const realTime = 90 * time.Second

	devfile := `schemaVersion: 2.2.0
metadata:
  name: auto
components:
  - name: main
    container:
      image: ` + kubetest.WorkspaceImage + `
      command: ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done"]
`
	w, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "auto", Agent: "auto", Devfile: devfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	running := func(what string) {
		t.Helper()
		waitFor(t, c, "auto", realTime, what, state("Running", "Running"))
		kubetest.Eventually(t, realTime, "a ready pod on the real node", func(ctx context.Context) error {
			pods, err := cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) != 1 {
				return fmt.Errorf("%d pods (%v)", len(pods.Items), err)
			}
			if p := pods.Items[0]; p.Spec.NodeName != kubetest.RealNode || !podReady(&p) {
				return fmt.Errorf("pod %s on %q, ready %v", p.Name, p.Spec.NodeName, podReady(&p))
			}
			return nil
		})
	}
	// stoppedBy ticks the executor and checks that the workspace ends Stopped, with no pod left and
	// its Deployment at zero, and the reason the API gives.
	stoppedBy := func(reason string) {
		t.Helper()
		res, err := env.Server.Lifecycle().Tick(ctx)
		if err != nil || res.Done != 1 {
			t.Fatalf("tick: %+v %v, want one change", res, err)
		}
		got := waitFor(t, c, "auto", realTime, "Stopped by "+reason, state("Stopped", "Stopped"))
		if !strings.HasPrefix(got.DesiredStateReason, reason+": ") {
			t.Errorf("desired_state_reason %q, want %s: ...", got.DesiredStateReason, reason)
		}
		kubetest.Eventually(t, realTime, "no pod left", func(ctx context.Context) error {
			pods, err := cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) != 0 {
				return fmt.Errorf("%d pods (%v)", len(pods.Items), err)
			}
			return nil
		})
		d, err := cluster.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.KubeName, metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			t.Fatalf("deployment after %s: %v (%v)", reason, d.Spec.Replicas, err)
		}
		out, err := runCLI(srv, "show", "auto")
		if err != nil || !strings.Contains(out, reason+":") {
			t.Errorf("hangar show does not give the reason %s: %v\n%s", reason, err, out)
		}
	}

	// Idle stop: a one-hour TTL after the start or the last use.
	running("Running")
	ttl := "1h"
	if _, err := c.SetSchedule(ctx, "auto", sdk.WorkspaceSchedule{TTL: &ttl}); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(59 * time.Minute)
	if res, err := env.Server.Lifecycle().Tick(ctx); err != nil || res.Due != 0 {
		t.Fatalf("tick before the TTL: %+v %v, want nothing due", res, err)
	}
	env.Clock.Advance(2 * time.Minute)
	stoppedBy("autostop")

	// GitLab's lifetime: with autostop off, the agent's max_active_hours_before_stop (3 h here)
	// stops the workspace whatever its use.
	off := "0"
	if _, err := c.SetSchedule(ctx, "auto", sdk.WorkspaceSchedule{TTL: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateWorkspace(ctx, "auto", sdk.UpdateWorkspaceRequest{DesiredState: "Running"}); err != nil {
		t.Fatal(err)
	}
	running("Running again")
	for range 2 {
		env.Clock.Advance(89 * time.Minute)
		if _, err := c.UpdateWorkspace(ctx, "auto", sdk.UpdateWorkspaceRequest{DesiredState: "Running"}); err != nil { // a use
			t.Fatal(err)
		}
		if res, err := env.Server.Lifecycle().Tick(ctx); err != nil || res.Due != 0 {
			t.Fatalf("tick within the lifetime: %+v %v, want nothing due", res, err)
		}
	}
	env.Clock.Advance(3 * time.Minute)
	stoppedBy("max_active")
}
