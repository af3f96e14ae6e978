package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/hangar-dev/hangar/internal/agent"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestKubernetesVisibility, on the real test cluster with the built binary, looks at Hangar as an
// operator would with kubectl and Prometheus:
//   - every object of a running workspace carries the recommended labels and is a member of the
//     workspace's ApplySet, whose parent (the inventory ConfigMap) kubectl recognises as Hangar's;
//   - a refused apply and a crash-looping pod show as Warning Events on the workspace's Deployment;
//   - the agent's /readyz and /metrics, and the server's /metrics, give the series one would graph.
func TestKubernetesVisibility(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	ctx := context.Background()
	denyDeploymentsOf(t, cluster, "visdenied", "image registry.example.com/forbidden is not allowed by policy")
	srv := startServer(t)
	c := srv.client(t, srv.AdminToken)
	tok := srv.registerAgent(t, "vis", `{"partial_reconciliation_interval_seconds":1}`)
	ag := startAgent(t, srv, cluster, "vis", tok, "hangar-agent-vis")
	crashTok := srv.registerAgent(t, "viscrash", fmt.Sprintf(`{"labels":{%q:"true"}}`, kubetest.CrashLoopLabel))
	startAgent(t, srv, cluster, "viscrash", crashTok, "hangar-agent-viscrash")

	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "vis", Agent: "vis"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, ws.Namespace)
	waitFor(t, c, "vis", transition, "Running", state("Running", "Running"))
	// A second replica of the same agent, started once the first leads (it ran the workspace): a
	// standby.
	standby := start(t, "agent vis standby", []string{"HANGAR_LOG_LEVEL=debug"}, "agent", "--server", srv.URL, "--token-file", tok,
		"--kubeconfig", cluster.Kubeconfig, "--lease-namespace", "hangar-agent-vis", "--identity", "vis-standby")

	// Labels: read every object the inventory lists, as it is in the cluster.
	inv, err := cluster.Client.CoreV1().ConfigMaps(ws.Namespace).Get(ctx, ws.KubeName+"-inventory", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := agent.ApplySetID("", "ConfigMap", ws.Namespace, inv.Name)
	if inv.Labels[agent.LabelApplySetID] != id || inv.Annotations[agent.AnnotationApplySetTooling] != "hangar/v1" {
		t.Fatalf("inventory is not the ApplySet parent: labels %v annotations %v", inv.Labels, inv.Annotations)
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	refs := agent.ParseInventory(inv.Data[protocol.InventoryKey])
	if len(refs) < 5 {
		t.Fatalf("inventory lists %d objects", len(refs))
	}
	for _, ref := range refs {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		res := map[string]string{"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "Secret": "secrets", "PersistentVolumeClaim": "persistentvolumeclaims",
			"Service": "services", "NetworkPolicy": "networkpolicies", "Deployment": "deployments", "ConfigMap": "configmaps", "ResourceQuota": "resourcequotas"}[ref.Kind]
		if res == "" {
			t.Fatalf("unexpected kind in the inventory: %s", ref)
		}
		var o *unstructured.Unstructured
		if ref.Namespace == "" {
			o, err = dyn.Resource(gv.WithResource(res)).Get(ctx, ref.Name, metav1.GetOptions{})
		} else {
			o, err = dyn.Resource(gv.WithResource(res)).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		l := o.GetLabels()
		if l["app.kubernetes.io/name"] != "hangar-workspace" || l["app.kubernetes.io/instance"] != ws.KubeName || l["app.kubernetes.io/managed-by"] != "hangar" ||
			l["app.kubernetes.io/part-of"] != "hangar" || l["app.kubernetes.io/component"] != "workspace" {
			t.Errorf("%s: recommended labels missing: %v", ref, l)
		}
		if l[agent.LabelApplySetPartOf] != id {
			t.Errorf("%s: not a member of the ApplySet %s: %v", ref, id, l)
		}
		kinds[strings.TrimSuffix(ref.Kind+"."+gv.Group, ".")] = true
	}
	var want []string
	for k := range kinds {
		want = append(want, k)
	}
	if got := strings.Split(inv.Annotations[agent.AnnotationApplySetGroupKinds], ","); len(got) != len(want) {
		t.Errorf("contains-group-kinds %v, the members are of %v", got, want)
	}
	// What kubectl sees: the members by the ApplySet label, and a parent it will not take over.
	out, err := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "get", "deployments,services,secrets,serviceaccounts,persistentvolumeclaims",
		"-n", ws.Namespace, "-l", agent.LabelApplySetPartOf+"="+id, "-o", "name").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deployment.apps/"+ws.KubeName) || !strings.Contains(string(out), "service/"+ws.KubeName) {
		t.Errorf("kubectl get -l %s=%s (%v):\n%s", agent.LabelApplySetPartOf, id, err, out)
	}
	manifest := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: intruder\ndata: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prune := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "apply", "-n", ws.Namespace, "--server-side", "--prune",
		"--applyset=configmap/"+inv.Name, "-f", manifest, "--dry-run=server")
	prune.Env = append(os.Environ(), "KUBECTL_APPLYSET=true")
	out, err = prune.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `managed by tooling "hangar"`) {
		t.Errorf("kubectl apply --prune --applyset on Hangar's set was not refused as another tool's (%v):\n%s", err, out)
	}
	t.Logf("kubectl refuses to prune Hangar's ApplySet: %s", strings.TrimSpace(string(out)))

	// Events: a refused apply, and a crash-looping pod.
	denied, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "visdenied", Agent: "vis"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, denied.Namespace)
	waitFor(t, c, "visdenied", transition, "Error", state("Running", "Error"))
	waitEvent(t, cluster, denied, agent.ReasonApplyFailed, "is not allowed by policy")
	crash, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "viscrash", Agent: "viscrash"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, crash.Namespace)
	waitFor(t, c, "viscrash", transition, "Failed", state("Running", "Failed"))
	ev := waitEvent(t, cluster, crash, agent.ReasonPodFailed, "CrashLoopBackOff")
	if ev.InvolvedObject.UID == "" {
		t.Errorf("the pod failure's Event does not name the Deployment's uid (kubectl describe finds Events by it): %+v", ev.InvolvedObject)
	}
	out, err = exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "describe", "deployment", "-n", crash.Namespace, crash.KubeName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), agent.ReasonPodFailed) {
		t.Errorf("kubectl describe deployment does not show the Event (%v):\n%s", err, out)
	}

	// The agent's operations endpoints, as a probe and Prometheus reach them.
	m := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`).FindStringSubmatch(ag.output())
	if m == nil {
		t.Fatalf("the agent does not say where it serves metrics:\n%s", lines(ag.output(), "metrics"))
	}
	base := "http://" + m[1]
	if code, body := httpGet(t, base+"/readyz"); code != 200 {
		t.Fatalf("agent /readyz: %d %s", code, body)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("agent /healthz: %d", code)
	}
	_, agentMetrics := httpGet(t, base+"/metrics")
	for sample, min := range map[string]float64{
		`hangar_agent_leader`: 1,
		`hangar_agent_reconcile_cycle_duration_seconds_count{result="ok",update_type="full"}`:    1,
		`hangar_agent_reconcile_cycle_duration_seconds_count{result="ok",update_type="partial"}`: 1,
		`hangar_agent_objects_applied_total{kind="Deployment"}`:                                  1,
		`hangar_agent_objects_applied_total{kind="Service"}`:                                     1,
		`hangar_agent_apply_errors_total{kind="Deployment"}`:                                     1,
		`hangar_agent_apply_duration_seconds_count{kind="Deployment"}`:                           2,
		`hangar_agent_kube_events_total{reason="ApplyFailed"}`:                                   1,
	} {
		if v := sampleValue(agentMetrics, sample); v < min {
			t.Errorf("agent %s = %v, want at least %v", sample, v, min)
		}
	}
	if !strings.Contains(agentMetrics, "hangar_agent_apply_queue_depth 0") {
		t.Errorf("agent queue depth not 0 when idle:\n%s", lines(agentMetrics, "queue_depth"))
	}
	// The standby: ready (a rolling update can go past it), not leading.
	m = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`).FindStringSubmatch(standby.output())
	if m == nil {
		t.Fatalf("the standby does not say where it serves metrics:\n%s", standby.output())
	}
	kubetest.Eventually(t, transition, "the standby to be ready", func(context.Context) error {
		if code, body := httpGet(t, "http://"+m[1]+"/readyz"); code != 200 {
			return fmt.Errorf("standby /readyz: %d %s", code, body)
		}
		return nil
	})
	if _, page := httpGet(t, "http://"+m[1]+"/metrics"); sampleValue(page, "hangar_agent_leader") != 0 {
		t.Errorf("standby hangar_agent_leader = %v, want 0", sampleValue(page, "hangar_agent_leader"))
	}
	// The server's: the start SLI and the HTTP series.
	_, serverMetrics := httpGet(t, srv.URL+"/metrics")
	for sample, min := range map[string]float64{
		`hangar_workspace_start_duration_seconds_count{backend="kubernetes"}`:                                   1,
		`hangar_http_requests_total{code="201",method="POST",route="/api/v1/workspaces"}`:                       3,
		`hangar_http_requests_total{code="200",method="POST",route="/api/v1/agent/reconcile"}`:                  1,
		`hangar_http_request_duration_seconds_count{code="200",method="GET",route="/api/v1/workspaces/{name}"}`: 1,
		`go_sql_open_connections{db_name="hangar"}`:                                                             1,
	} {
		if v := sampleValue(serverMetrics, sample); v < min {
			t.Errorf("server %s = %v, want at least %v", sample, v, min)
		}
	}
	if sampleValue(serverMetrics, `hangar_workspace_start_duration_seconds_sum{backend="kubernetes"}`) <= 0 {
		t.Errorf("start latency sum is 0")
	}
}

// waitEvent waits for a Warning Event with reason whose note contains text, about ws's Deployment,
// as core/v1 Events show it (kubectl get events, kubectl describe).
func waitEvent(t *testing.T, c *kubetest.Cluster, ws sdk.Workspace, reason, text string) corev1.Event {
	t.Helper()
	var found corev1.Event
	kubetest.Eventually(t, transition, reason+" Event on deployment "+ws.KubeName, func(ctx context.Context) error {
		list, err := c.Client.CoreV1().Events(ws.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=" + ws.KubeName})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text) && e.ReportingController == agent.EventsController {
				found = e
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s with %q", len(list.Items), reason, text)
	})
	return found
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sampleValue is the value of the sample (name and labels as exposed) in a Prometheus text page, or
// -1.
func sampleValue(page, sample string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
