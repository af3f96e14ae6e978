package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	helmcharts "github.com/hangar-dev/hangar/deploy/helm"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestHelmCharts installs Hangar the way a platform team would: the image built by
// scripts/build-image (OCI index, non-root) is loaded into the real node, and the charts of
// deploy/helm are installed with the pinned helm: the server (SQLite on a claim of the default
// StorageClass), the agent (two replicas, leader election, the chart's service account and RBAC,
// in-cluster configuration through the `kubernetes` Service) and the proxy. The test reaches the
// server only through its Service's cluster IP (kube-proxy, from inside the cluster's network
// namespace), the agent reaches it the same way, and a workspace goes to Running on the real node
// with its app answering on its pod IP. It ends with helm uninstall, and the namespace gone.
func TestHelmCharts(t *testing.T) {
	parallel(t)
	started := time.Now()
	c := kubetest.Start(t)
	ctx := context.Background()
	helm, err := helmcharts.Binary()
	if err != nil {
		t.Fatal(err)
	}
	root := helmcharts.Root()

	// The image: built and loaded as a user would.
	const repo, tag = "hangar.local/hangar", "chart-e2e"
	imgDir := t.TempDir()
	build := exec.Command(filepath.Join(root, "scripts", "build-image"), imgDir)
	build.Env = append(os.Environ(), "IMAGE_REF="+repo+":"+tag)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-image: %v\n%s", err, out)
	}
	if out, err := exec.Command(filepath.Join(root, "scripts", "kube-load-image"), c.Dir, filepath.Join(imgDir, "hangar-oci.tar")).CombinedOutput(); err != nil {
		t.Fatalf("scripts/kube-load-image: %v\n%s", err, out)
	}
	t.Logf("image built and loaded in %v", time.Since(started).Round(time.Second))

	// The release's namespace; the test deletes it itself at the end and waits for it to go.
	ns := "charts-" + token()[:8]
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, append(args, "--kubeconfig", c.Kubeconfig, "--namespace", ns)...)
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, out, describePods(c, ns))
		}
		return string(out)
	}
	image := []string{"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never"}
	srvRel, agentRel, proxyRel := ns+"-server", ns+"-agent", ns+"-proxy" // ClusterRoles are named after releases
	released := map[string]bool{}
	t.Cleanup(func() {
		for _, r := range []string{proxyRel, agentRel, srvRel} {
			if released[r] {
				_ = exec.Command(helm, "uninstall", r, "--kubeconfig", c.Kubeconfig, "--namespace", ns).Run()
			}
		}
	})

	// The server, on SQLite; --wait returns once it is ready (its /readyz through the kubelet's probe).
	run(append([]string{"install", srvRel, helmcharts.ChartDir("hangar-server"), "--wait", "--timeout", "90s"}, image...)...)
	released[srvRel] = true
	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, srvRel+"-hangar-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serverURL := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "7080") // no DNS in the test cluster
	adminToken := readAdminToken(t, c, ns, srvRel+"-hangar-server")
	api, err := sdk.New(serverURL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	api.HTTP = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return c.DialInside(ctx, addr) // through kube-proxy's rules for the Service
	}}}
	// kube-proxy writes the new Service's rule a moment after the pod is ready; a connection made
	// before it is tracked without its translation and times out, so each try is short and new.
	kubetest.Eventually(t, 60*time.Second, "GET /me through the Service "+serverURL, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		me, err := api.Me(ctx)
		if err != nil {
			return err
		}
		if !me.Admin {
			return fmt.Errorf("GET /me: %+v, want the admin", me)
		}
		return nil
	})

	// The agent: registered through the API, its token in a Secret the chart refers to.
	agent, err := api.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "charts"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-token"},
		StringData: map[string]string{"token": agent.Token},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agentValues := append([]string{"--set", "serverUrl=" + serverURL, "--set", "tokenSecret.name=agent-token"}, image...)
	run(append([]string{"install", agentRel, helmcharts.ChartDir("hangar-agent"), "--wait", "--timeout", "90s"}, agentValues...)...)
	released[agentRel] = true
	run(append([]string{"install", proxyRel, helmcharts.ChartDir("hangar-proxy"), "--wait", "--timeout", "90s",
		"--set", "serverUrl=" + serverURL, "--set", "tokenSecret.name=agent-token"}, image...)...)
	released[proxyRel] = true
	t.Logf("charts installed after %v", time.Since(started).Round(time.Second))

	// The agent runs in the cluster: its pods hold the Lease, and the server sees it connected.
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=hangar-agent"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("agent pods: %d (%v)", len(pods.Items), err)
	}
	var agentPods []string
	for _, p := range pods.Items {
		agentPods = append(agentPods, p.Name)
		if p.Spec.ServiceAccountName != agentRel+"-hangar-agent" || p.Spec.NodeName != kubetest.RealNode {
			t.Errorf("agent pod %s: service account %q on node %q", p.Name, p.Spec.ServiceAccountName, p.Spec.NodeName)
		}
	}
	kubetest.Eventually(t, 60*time.Second, "an agent pod to hold the leader-election Lease", func(ctx context.Context) error {
		l, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, "hangar-agent-"+agent.ID, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || !slices.Contains(agentPods, *l.Spec.HolderIdentity) {
			return fmt.Errorf("holder %v, want one of %v", l.Spec.HolderIdentity, agentPods)
		}
		return nil
	})
	kubetest.Eventually(t, 60*time.Second, "the server to see the agent connected", func(ctx context.Context) error {
		as, err := api.ListAgents(ctx)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.Name == "charts" && a.Connected != nil && *a.Connected {
				return nil
			}
		}
		return fmt.Errorf("agents %+v", as)
	})

	// A workspace, through them, to Running on the real node; its app answers on the pod IP.
	page := "hello-from-charts-" + token()
	devfile := `schemaVersion: 2.3.0
metadata:
  name: web
components:
  - name: web
    container:
      image: ` + kubetest.WorkspaceImage + `
      command: ["/bin/sh", "-c"]
      args: ["trap 'exit 0' TERM INT; mkdir -p /tmp/www && echo ` + page + ` > /tmp/www/index.html && httpd -f -p 8080 -h /tmp/www & wait"]
      endpoints:
        - name: http
          targetPort: 8080
          exposure: public
`
	w, err := api.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "web", Agent: "charts", Devfile: devfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
	})
	waitFor(t, api, "web", 90*time.Second, "Running", state("Running", "Running"))
	wpods, err := c.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(wpods.Items) != 1 {
		t.Fatalf("workspace pods: %d (%v)", len(wpods.Items), err)
	}
	wp := wpods.Items[0]
	if wp.Spec.NodeName != kubetest.RealNode {
		t.Errorf("workspace pod on node %q, want %s", wp.Spec.NodeName, kubetest.RealNode)
	}
	body := getInside(t, c, "http://"+net.JoinHostPort(wp.Status.PodIP, "8080")+"/index.html")
	if strings.TrimSpace(body) != page {
		t.Fatalf("the workspace's app answered %q, want %q", body, page)
	}
	ds, err := c.Client.AppsV1().Deployments(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(ds.Items) != 1 || !appliedByAgent(&ds.Items[0]) {
		t.Fatalf("the workspace's Deployment was not applied by the agent (%d Deployments, %v)", len(ds.Items), err)
	}
	t.Logf("workspace Running, app answering, after %v", time.Since(started).Round(time.Second))

	// Terminated through the in-cluster agent: its namespace goes (the chart's delete verbs).
	if _, err := api.UpdateWorkspace(ctx, "web", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, api, "web", 90*time.Second, "Terminated", state("Terminated", "Terminated"))
	kubetest.Eventually(t, 60*time.Second, "the workspace's namespace to go", func(ctx context.Context) error {
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, w.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (%v)", w.Namespace, err)
		}
		return nil
	})

	// helm uninstall, then the namespace: nothing of the release is left.
	for _, r := range []string{proxyRel, agentRel, srvRel} {
		run("uninstall", r, "--wait", "--timeout", "60s")
		released[r] = false
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Get(ctx, agentRel+"-hangar-agent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the agent's ClusterRole is left after helm uninstall (%v)", err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "namespace "+ns+" to go", func(ctx context.Context) error {
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	t.Logf("TestHelmCharts took %v", time.Since(started).Round(time.Second))
}

// readAdminToken reads the admin token the server wrote to its data volume at its first start: the
// claim's folder on the node (the local-path provisioner's hostPath), as an operator with access to
// the node's disk would.
func readAdminToken(t *testing.T, c *kubetest.Cluster, ns, claim string) string {
	t.Helper()
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(context.Background(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil {
		t.Fatalf("volume %s is not a hostPath", pv.Name)
	}
	b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "admin-token"))
	if err != nil {
		t.Fatalf("the server's admin token on its volume: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// getInside fetches a URL from inside the cluster's network namespace.
func getInside(t *testing.T, c *kubetest.Cluster, url string) string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return c.DialInside(ctx, addr)
	}}}
	var body string
	kubetest.Eventually(t, 30*time.Second, "GET "+url, func(ctx context.Context) error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("%s: %v", resp.Status, err)
		}
		body = string(b)
		return nil
	})
	return body
}

// binaryHasFlag reports whether `hangar CMD --help` lists flag.
// appliedByAgent reports whether the agent's field manager owns fields of d (server-side apply).
func appliedByAgent(d *appsv1.Deployment) bool {
	for _, m := range d.ManagedFields {
		if m.Manager == "hangar-agent" && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// describePods says what the pods of a namespace are doing, with the tail of their logs, for
// failure messages.
func describePods(c *kubetest.Cluster, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "pods: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s on %q\n", p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s ready=%v restarts=%d state=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State)
			tail := int64(15)
			logs, err := c.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: &tail}).DoRaw(ctx)
			if err == nil {
				fmt.Fprintf(&b, "  log:\n%s\n", logs)
			}
		}
	}
	return b.String()
}
