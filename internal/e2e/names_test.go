package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestTwoOwnersSameName: on the real node, alice and bob each create a workspace named dev; both
// run, each in a namespace of its own with its own owner inside; alice deletes hers and creates dev
// again at once, which runs in a new namespace while bob's keeps running; an admin sees and stops
// bob's as bob/dev.
func TestTwoOwnersSameName(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	r := &realNode{cluster: kubetest.Start(t), srv: startServer(t), agent: "real", realTime: 90 * time.Second}
	token := r.srv.registerRealAgent(t, r.agent, "")
	startAgent(t, r.srv, r.cluster, r.agent, token, "hangar-agent-real")
	admin := r.srv.client(t, r.srv.AdminToken)
	users := map[string]*sdk.Client{}
	for _, name := range []string{"alice", "bob"} {
		u, err := admin.CreateUser(ctx, sdk.CreateUserRequest{Username: name})
		if err != nil {
			t.Fatal(err)
		}
		users[name] = r.srv.client(t, u.Token)
	}
	devfile := `schemaVersion: 2.2.0
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
`
	create := func(owner string) sdk.Workspace {
		t.Helper()
		w, err := users[owner].CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "dev", Agent: r.agent, Devfile: devfile})
		if err != nil {
			t.Fatalf("%s creates dev: %v", owner, err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				_ = r.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
			}
		})
		return w
	}
	// running waits for the owner's dev to run and checks, inside its pod, whose it is.
	running := func(owner string, w sdk.Workspace) {
		t.Helper()
		waitFor(t, users[owner], "dev", r.realTime, "Running", state("Running", "Running"))
		p := r.pod(t, w.Namespace, owner+"'s dev pod to be ready", ready)
		if got := r.exec(t, p, "dev", `echo "$HANGAR_WORKSPACE_OWNER/$HANGAR_WORKSPACE_NAME"`); got != owner+"/dev\n" {
			t.Errorf("%s's dev pod says it is %q", owner, got)
		}
	}

	a, b := create("alice"), create("bob")
	if a.Namespace == b.Namespace || a.KubeName == b.KubeName {
		t.Fatalf("alice's and bob's dev share an identity: %s %s / %s %s", a.Namespace, a.KubeName, b.Namespace, b.KubeName)
	}
	running("alice", a)
	running("bob", b)

	// Alice deletes hers and, as soon as it is Terminated, creates dev again.
	if _, err := users["alice"].UpdateWorkspace(ctx, "dev", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, users["alice"], "dev", r.realTime, "Terminated", state("Terminated", "Terminated"))
	again := create("alice")
	if again.Namespace == a.Namespace || again.ID == a.ID {
		t.Fatalf("alice's new dev reuses the old one's namespace %s", a.Namespace)
	}
	running("alice", again)
	kubetest.Eventually(t, r.realTime, "the first dev's namespace to be gone", func(ctx context.Context) error {
		if _, err := r.cluster.Client.CoreV1().Namespaces().Get(ctx, a.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (%v)", a.Namespace, err)
		}
		return nil
	})
	if list, err := users["alice"].ListWorkspaces(ctx); err != nil || len(list) != 1 || list[0].ID != again.ID {
		t.Errorf("alice lists %+v (%v), want her new dev only", list, err)
	}
	if list, err := users["alice"].ListWorkspacesWith(ctx, sdk.ListWorkspacesOptions{All: true}); err != nil || len(list) != 2 {
		t.Errorf("alice lists with all %d workspaces (%v), want 2", len(list), err)
	}
	if w, err := users["bob"].Workspace(ctx, "dev"); err != nil || w.ActualState != "Running" {
		t.Errorf("bob's dev after alice's delete: %+v (%v)", w, err)
	}

	// The admin stops bob's dev by owner/name; alice's keeps running.
	if _, err := admin.UpdateWorkspace(ctx, "bob/dev", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, admin, "bob/dev", r.realTime, "Stopped", state("Stopped", "Stopped"))
	if w, err := users["alice"].Workspace(ctx, "dev"); err != nil || w.ActualState != "Running" {
		t.Errorf("alice's dev after the admin stopped bob's: %+v (%v)", w, err)
	}

	// Both go; nothing is left.
	for owner, w := range map[string]sdk.Workspace{"alice": again, "bob": b} {
		if _, err := users[owner].UpdateWorkspace(ctx, "dev", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, users[owner], "dev", r.realTime, "Terminated", state("Terminated", "Terminated"))
		kubetest.Eventually(t, r.realTime, owner+"'s dev namespace to be gone", func(ctx context.Context) error {
			if _, err := r.cluster.Client.CoreV1().Namespaces().Get(ctx, w.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%v)", w.Namespace, err)
			}
			return nil
		})
	}
}
