package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// generated is a workspace's config as the server generates it (the default devfile, a namespace
// of its own: 9 objects), parsed as the agent parses config_to_apply.
func generated(t *testing.T, name, agentID string, desired workspace.State) []*unstructured.Unstructured {
	t.Helper()
	d, err := devfile.Parse(devfile.Default())
	if err != nil {
		t.Fatal(err)
	}
	cfg := workspace.AgentConfig{DNSZone: "workspaces.example.com"}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	config, err := devfile.Generate(d, devfile.Params{
		WorkspaceID: "6f1c2a3e-9b7d-4c1e-8f2a-0d5e4b3c2a19", WorkspaceName: name, Owner: "alice", AgentID: agentID,
		Namespace: "hangar-" + name, DesiredState: desired, Agent: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ParseConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// applier is an agent's view of the test cluster: its clients (every request counted by the
// RoundTripper NewKube puts in front of the API server) and a reconciler's caches.
type applier struct {
	kube  *Kube
	r     *reconciler
	close func() // stops the reconciler, as an agent that ends
}

func newApplier(t *testing.T, c *kubetest.Cluster, agentID string) *applier {
	t.Helper()
	kube, err := NewKube(rest.CopyConfig(c.Config))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := newReconciler(context.Background(), log, kube, agentID, make(chan struct{}, 1), 8, newStepLogs(context.Background(), log, kube.Clientset, func() {}))
	if err != nil {
		t.Fatal(err)
	}
	close := sync.OnceFunc(r.close)
	t.Cleanup(close)
	return &applier{kube: kube, r: r, close: close}
}

// apply applies objs as a config_to_apply and returns how many objects were applied and how many
// requests (watches aside) reached the API server meanwhile.
func (a *applier) apply(t *testing.T, objs []*unstructured.Unstructured) (applied int, requests int64) {
	t.Helper()
	before, _ := a.kube.Requests.Counts()
	applied, errs := a.kube.Apply(context.Background(), objs, a.r.live)
	if len(errs) > 0 {
		t.Fatalf("apply: %v", errs)
	}
	after, _ := a.kube.Requests.Counts()
	return applied, after - before
}

// waitInSync waits until the caches show the cluster holding objs (an informer sees an apply a
// moment after it returns; a user's next action comes later than that).
func (a *applier) waitInSync(t *testing.T, objs []*unstructured.Unstructured, want bool, what string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, what, func(context.Context) error {
		for _, o := range objs {
			h, err := ConfigHash(o)
			if err != nil {
				return err
			}
			if a.r.live.inSync(o, h) != want {
				return fmt.Errorf("%s: in sync %v", refOf(o), !want)
			}
		}
		return nil
	})
}

// unique is name with a random suffix: a namespace of an earlier run may still be terminating.
func unique(name string) string { return fmt.Sprintf("%s-%04x", name, rand.N(1<<16)) }

func deleteNamespaceAtEnd(t *testing.T, c *kubetest.Cluster, ns string) {
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
}

func deploymentReplicas(t *testing.T, c *kubetest.Cluster, ns, name string) int32 {
	t.Helper()
	d, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// A stop and a start are one request each (the Deployment's apply), on the real API server, also
// for an agent that restarted in between; a create applies the 9 objects and reads nothing.
func TestStopAndStartAreOneRequest(t *testing.T) {
	c := kubetest.Start(t)
	name, agentID := unique("onereq"), "apply-onereq"
	deleteNamespaceAtEnd(t, c, "hangar-"+name)
	running, stopped := generated(t, name, agentID, workspace.Running), generated(t, name, agentID, workspace.Stopped)

	a := newApplier(t, c, agentID)
	applied, requests := a.apply(t, running)
	if applied != 9 || requests != 9 {
		t.Fatalf("create: %d objects applied in %d requests, want 9 in 9", applied, requests)
	}
	a.waitInSync(t, running, true, "the caches to show the created workspace")

	for i, step := range []struct {
		objs     []*unstructured.Unstructured
		replicas int32
	}{{stopped, 0}, {running, 1}, {stopped, 0}, {running, 1}} {
		applied, requests := a.apply(t, step.objs)
		if applied != 1 || requests != 1 {
			t.Fatalf("step %d: %d objects applied in %d requests, want 1 in 1", i, applied, requests)
		}
		if got := deploymentReplicas(t, c, "hangar-"+name, name); got != step.replicas {
			t.Fatalf("step %d: Deployment has %d replicas, want %d", i, got, step.replicas)
		}
	}

	// A restarted agent: new clients, caches listed from the cluster, nothing in memory. It does not
	// re-apply what the cluster holds.
	a.close()
	b := newApplier(t, c, agentID)
	applied, requests = b.apply(t, stopped)
	if applied != 1 || requests != 1 {
		t.Fatalf("stop after a restart: %d objects applied in %d requests, want 1 in 1", applied, requests)
	}
	if got := deploymentReplicas(t, c, "hangar-"+name, name); got != 0 {
		t.Fatalf("after the stop the Deployment has %d replicas", got)
	}
	b.waitInSync(t, stopped, true, "the caches to show the stop")
	applied, requests = b.apply(t, stopped)
	if applied != 0 || requests != 0 {
		t.Fatalf("the same config again: %d applied, %d requests; want none", applied, requests)
	}
}

// Drift: objects deleted or scaled by hand are applied again when the config comes (the server's
// drift repair resends an unchanged config after a full reconcile), by an agent that restarted or
// not; what is still in sync is not.
func TestDriftIsRepaired(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	name, agentID := unique("drift"), "apply-drift"
	ns := "hangar-" + name
	deleteNamespaceAtEnd(t, c, ns)
	running := generated(t, name, agentID, workspace.Running)

	a := newApplier(t, c, agentID)
	a.apply(t, running)
	a.waitInSync(t, running, true, "the caches to show the created workspace")

	drift := func(a *applier) {
		t.Helper()
		if err := c.Client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.AppsV1().Deployments(ns).UpdateScale(ctx, name,
			&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 2}},
			metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var changed []*unstructured.Unstructured
		for _, o := range running {
			if o.GetKind() == "Service" || o.GetKind() == "Deployment" {
				changed = append(changed, o)
			}
		}
		a.waitInSync(t, changed, false, "the caches to see the Service deleted and the Deployment scaled")
	}
	check := func(what string, applied int, requests int64) {
		t.Helper()
		if applied != 2 || requests != 2 {
			t.Fatalf("%s: %d objects applied in %d requests, want the Service and the Deployment: 2 in 2", what, applied, requests)
		}
		if _, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: the Service is not back: %v", what, err)
		}
		if got := deploymentReplicas(t, c, ns, name); got != 1 {
			t.Fatalf("%s: the Deployment has %d replicas, want 1", what, got)
		}
	}

	drift(a)
	applied, requests := a.apply(t, running)
	check("repair", applied, requests)
	a.waitInSync(t, running, true, "the caches to show the repaired workspace")

	// Again, for an agent that starts while the cluster has drifted.
	a.close()
	b := newApplier(t, c, agentID)
	drift(b)
	applied, requests = b.apply(t, running)
	check("repair after a restart", applied, requests)
}

// An object whose last apply failed is applied again even where the cache shows the hash asked
// for: the failed apply may have landed after what the cache shows.
func TestFailedApplyIsNotTrusted(t *testing.T) {
	c := kubetest.Start(t)
	name, agentID := unique("failed"), "apply-failed"
	deleteNamespaceAtEnd(t, c, "hangar-"+name)
	running := generated(t, name, agentID, workspace.Running)
	a := newApplier(t, c, agentID)
	a.apply(t, running)
	a.waitInSync(t, running, true, "the caches to show the created workspace")

	// A stop whose apply fails (its context ends before the request is sent).
	stopped := generated(t, name, agentID, workspace.Stopped)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, errs := a.kube.Apply(ctx, stopped, a.r.live); len(errs) == 0 {
		t.Fatal("an apply with an ended context succeeded")
	}
	// The start that follows: the cache still shows the running Deployment, yet it is applied.
	applied, requests := a.apply(t, running)
	if applied != 1 || requests != 1 {
		t.Fatalf("after a failed apply: %d objects applied in %d requests, want the Deployment: 1 in 1", applied, requests)
	}
	if _, err := c.Client.AppsV1().Deployments("hangar-"+name).Get(context.Background(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the Deployment is gone")
	}
}

// An object the API server refuses holds back the Deployment (a workspace that half runs would
// hide the error), but not the other objects of its stage; the error names the object.
func TestRefusedObjectHoldsBackTheDeployment(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	name, agentID := unique("refused"), "apply-refused"
	ns := "hangar-" + name
	deleteNamespaceAtEnd(t, c, ns)
	objs := generated(t, name, agentID, workspace.Running)
	for _, o := range objs {
		if o.GetKind() == "Secret" && o.GetName() == name+"-env" {
			// A key the API server refuses.
			if err := unstructured.SetNestedField(o.Object, "x", "stringData", "not a key!"); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := newApplier(t, c, agentID)
	applied, errs := a.kube.Apply(ctx, objs, a.r.live)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "Secret/"+ns+"/"+name+"-env") {
		t.Fatalf("errors %v, want one naming the Secret", errs)
	}
	// The namespace, then the service account, inventory, the helper's Secret, claim, Service and
	// NetworkPolicy.
	if applied != 7 {
		t.Fatalf("%d objects applied, want 7 (all but the env Secret and the Deployment)", applied)
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Deployment was applied after its Secret was refused (get: %v)", err)
	}
	if _, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Service was held back too: %v", err)
	}
}

// A stop is not held back by a refused object: the Deployment at zero replicas is applied anyway,
// and the refusal is still reported.
func TestRefusedObjectDoesNotHoldBackAStop(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	name, agentID := unique("refusedstop"), "apply-refusedstop"
	ns := "hangar-" + name
	deleteNamespaceAtEnd(t, c, ns)
	a := newApplier(t, c, agentID)
	a.apply(t, generated(t, name, agentID, workspace.Running))
	if got := deploymentReplicas(t, c, ns, name); got != 1 {
		t.Fatalf("created with %d replicas", got)
	}
	stopped := generated(t, name, agentID, workspace.Stopped)
	for _, o := range stopped {
		if o.GetKind() == "Secret" && o.GetName() == name+"-env" {
			if err := unstructured.SetNestedField(o.Object, "x", "stringData", "not a key!"); err != nil {
				t.Fatal(err)
			}
		}
	}
	applied, errs := a.kube.Apply(ctx, stopped, a.r.live)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "Secret/"+ns+"/"+name+"-env") {
		t.Fatalf("errors %v, want one naming the Secret", errs)
	}
	if applied != 1 {
		t.Fatalf("%d objects applied, want the Deployment", applied)
	}
	if got := deploymentReplicas(t, c, ns, name); got != 0 {
		t.Fatalf("after the stop the Deployment has %d replicas, want 0", got)
	}
}
