package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestTwoAgentsSeeOnlyTheirOwn: two agents (two registrations, two processes, two lease
// namespaces) on one cluster, one workspace each. Each agent's Deployments carry its own agent id;
// neither agent reports the other's workspace (no orphan, even across full reconciles); stopping
// and deleting one workspace leaves the other Running and its Deployment untouched.
func TestTwoAgentsSeeOnlyTheirOwn(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()

	// Partial reconciles every second, so that "several cycles" is a few seconds.
	const cfg = `{"partial_reconciliation_interval_seconds":1}`
	type side struct {
		agent, workspace string
		tokenFile        string
		agentID          string
		proc             *proc
	}
	sides := []*side{{agent: "two-a", workspace: "two-a-ws"}, {agent: "two-b", workspace: "two-b-ws"}}
	agents := map[string]string{} // name → id
	for _, s := range sides {
		s.tokenFile = srv.registerAgent(t, s.agent, cfg)
	}
	list, err := c.ListAgents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		agents[a.Name] = a.ID
	}
	for _, s := range sides {
		s.agentID = agents[s.agent]
		if s.agentID == "" {
			t.Fatalf("agent %s is not listed: %+v", s.agent, list)
		}
		s.proc = startAgent(t, srv, cluster, s.agent, s.tokenFile, "hangar-agent-"+s.agent)
	}
	if sides[0].agentID == sides[1].agentID {
		t.Fatalf("both agents have id %s", sides[0].agentID)
	}

	created := time.Now()
	ns, kube := map[string]string{}, map[string]string{} // namespace and cluster name of each workspace
	for _, s := range sides {
		w, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: s.workspace, Agent: s.agent})
		if err != nil {
			t.Fatal(err)
		}
		ns[s.workspace], kube[s.workspace] = w.Namespace, w.KubeName
		deleteNamespaceAtEnd(t, cluster, w.Namespace)
	}
	for _, s := range sides {
		waitFor(t, c, s.workspace, transition, "Running", state("Running", "Running"))
		t.Logf("timing: %s create→Running within %v (both created at once)", s.workspace, time.Since(created).Round(time.Millisecond))
	}

	// Each agent's Deployments carry its own agent id, and only its workspace's.
	for _, s := range sides {
		ds, err := cluster.Client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: protocol.LabelAgentID + "=" + s.agentID})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds.Items) != 1 || ds.Items[0].Name != kube[s.workspace] || ds.Items[0].Namespace != ns[s.workspace] {
			t.Fatalf("Deployments labelled with agent %s's id %s: %v, want only %s/%s", s.agent, s.agentID, deploymentNames(ds.Items), ns[s.workspace], s.workspace)
		}
		if got := ds.Items[0].Labels[protocol.LabelWorkspaceName]; got != kube[s.workspace] {
			t.Fatalf("Deployment %s has workspace-name label %q", s.workspace, got)
		}
	}
	a, b := sides[0], sides[1]
	deployment := func(s *side) *appsv1.Deployment {
		t.Helper()
		d, err := cluster.Client.AppsV1().Deployments(ns[s.workspace]).Get(ctx, kube[s.workspace], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	bBefore := deployment(b)
	bWs, err := c.Workspace(ctx, b.workspace)
	if err != nil {
		t.Fatal(err)
	}
	// untouched checks that b is Running, that neither its desired nor its actual state moved, and
	// that its Deployment's spec was not changed (same generation, 1 replica).
	untouched := func(when string) {
		t.Helper()
		w, err := c.Workspace(ctx, b.workspace)
		if err != nil {
			t.Fatal(err)
		}
		if w.DesiredState != "Running" || w.ActualState != "Running" ||
			!w.DesiredStateUpdatedAt.Equal(*bWs.DesiredStateUpdatedAt) || !w.ActualStateUpdatedAt.Equal(*bWs.ActualStateUpdatedAt) {
			t.Fatalf("%s: workspace %s is %s/%s (desired since %v, actual since %v); before: Running/Running since %v, %v",
				when, b.workspace, w.DesiredState, w.ActualState, w.DesiredStateUpdatedAt, w.ActualStateUpdatedAt, bWs.DesiredStateUpdatedAt, bWs.ActualStateUpdatedAt)
		}
		d := deployment(b)
		if d.Generation != bBefore.Generation || d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Status.AvailableReplicas != 1 {
			t.Fatalf("%s: Deployment %s changed: generation %d (was %d), replicas %v, available %d",
				when, b.workspace, d.Generation, bBefore.Generation, d.Spec.Replicas, d.Status.AvailableReplicas)
		}
	}

	// A full reconcile of each agent while both workspaces exist: the agent does one at start, so
	// restart both processes (SIGTERM releases the Lease; the new process takes it at once). Then
	// let each do a few more cycles and check that nobody was answered an orphan.
	for _, s := range sides {
		fullsBefore := len(serverReconciles(srv, s.agent, "full"))
		s.proc.stop(syscall.SIGTERM)
		s.proc = startAgent(t, srv, cluster, s.agent, s.tokenFile, "hangar-agent-"+s.agent)
		kubetest.Eventually(t, transition, "a full reconcile of the restarted agent "+s.agent, func(context.Context) error {
			fulls := serverReconciles(srv, s.agent, "full")
			if len(fulls) <= fullsBefore {
				return fmt.Errorf("%d full reconciles so far", len(fulls))
			}
			return nil
		})
		fulls := serverReconciles(srv, s.agent, "full")
		if last := fulls[len(fulls)-1]; last.reported != 1 || last.orphans != 0 {
			t.Fatalf("full reconcile of %s reported %d workspaces (want 1, its own) with %d orphans: %s", s.agent, last.reported, last.orphans, last.line)
		}
	}
	for _, s := range sides {
		n := len(serverReconciles(srv, s.agent, ""))
		kubetest.Eventually(t, 30*time.Second, "three more cycles of "+s.agent, func(context.Context) error {
			if got := len(serverReconciles(srv, s.agent, "")); got < n+3 {
				return fmt.Errorf("%d cycles since", got-n)
			}
			return nil
		})
	}
	for _, s := range sides {
		for _, r := range serverReconciles(srv, s.agent, "") {
			if r.orphans != 0 || r.reported > 1 {
				t.Fatalf("agent %s reported more than its own workspace: %s", s.agent, r.line)
			}
		}
	}
	if n := metricValue(t, srv, "hangar_reconcile_orphans_total"); n != 0 {
		t.Fatalf("hangar_reconcile_orphans_total = %v after full reconciles of both agents, want 0; server log:\n%s", n, lines(srv.output(), "does not know"))
	}
	for _, s := range sides {
		if w, err := c.Workspace(ctx, s.workspace); err != nil || w.DesiredState != "Running" || w.ActualState != "Running" {
			t.Fatalf("after the agents' restarts, %s is %s/%s (%v)", s.workspace, w.DesiredState, w.ActualState, err)
		}
	}
	untouched("after both agents restarted")

	// Stopping a's workspace does not touch b's.
	stopAt := time.Now()
	if _, err := c.UpdateWorkspace(ctx, a.workspace, sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, a.workspace, transition, "Stopped", state("Stopped", "Stopped"))
	t.Logf("timing: %s stop→Stopped %v", a.workspace, time.Since(stopAt).Round(time.Millisecond))
	if d := deployment(a); d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		t.Fatalf("stopped %s has replicas %v", a.workspace, d.Spec.Replicas)
	}
	untouched("after " + a.workspace + " stopped")

	// Deleting a's workspace leaves b's Running.
	delAt := time.Now()
	if _, err := c.UpdateWorkspace(ctx, a.workspace, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, a.workspace, transition, "Terminated", state("Terminated", "Terminated"))
	t.Logf("timing: %s delete→Terminated %v", a.workspace, time.Since(delAt).Round(time.Millisecond))
	ds, err := cluster.Client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: protocol.LabelAgentID + "=" + a.agentID})
	if err != nil || len(ds.Items) != 0 {
		t.Fatalf("Deployments of agent %s after its workspace was deleted: %v (%v)", a.agent, deploymentNames(ds.Items), err)
	}
	// A few more cycles of both agents, then b is still Running and untouched.
	n := len(serverReconciles(srv, b.agent, ""))
	kubetest.Eventually(t, 30*time.Second, "three more cycles of "+b.agent, func(context.Context) error {
		if got := len(serverReconciles(srv, b.agent, "")); got < n+3 {
			return fmt.Errorf("%d cycles since", got-n)
		}
		return nil
	})
	untouched("after " + a.workspace + " was deleted")
	if n := metricValue(t, srv, "hangar_reconcile_orphans_total"); n != 0 {
		t.Fatalf("hangar_reconcile_orphans_total = %v at the end, want 0; server log:\n%s", n, lines(srv.output(), "does not know"))
	}
}

func deploymentNames(ds []appsv1.Deployment) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Namespace + "/" + d.Name
	}
	return out
}

// serverReconcile is one reconcile the server logged (at debug level).
type serverReconcile struct {
	updateType        string
	reported, orphans int
	line              string
}

var serverReconciledLine = regexp.MustCompile(`msg=reconciled agent=(\S+) update_type=(\S+) reported=(\d+) answered=(\d+) orphans=(\d+)`)

// serverReconciles lists the reconciles of an agent in the server's log, of one update type ("" for
// all), oldest first.
func serverReconciles(s *server, agent, updateType string) []serverReconcile {
	var out []serverReconcile
	for _, l := range strings.Split(s.output(), "\n") {
		m := serverReconciledLine.FindStringSubmatch(l)
		if m == nil || m[1] != agent || (updateType != "" && m[2] != updateType) {
			continue
		}
		reported, _ := strconv.Atoi(m[3])
		orphans, _ := strconv.Atoi(m[5])
		out = append(out, serverReconcile{updateType: m[2], reported: reported, orphans: orphans, line: l})
	}
	return out
}

// metricValue reads an unlabelled metric from the server's /metrics.
func metricValue(t testing.TB, s *server, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in /metrics:\n%s", name, body)
	return 0
}

// deleteNamespaceAtEnd deletes a workspace's namespace when the test ends (without waiting), so that
// a later test on the same cluster can use the same workspace name.
func deleteNamespaceAtEnd(t testing.TB, cluster *kubetest.Cluster, namespace string) {
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	})
}
