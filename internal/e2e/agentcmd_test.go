package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestAgentLogsOnlyJSON: with --log-format json every line the agent writes is a JSON object, also
// what client-go logs (here its reflectors, whose lists an API server refuses: an agent without
// RBAC); before klog was routed through slog these were klog's plain-text lines.
func TestAgentLogsOnlyJSON(t *testing.T) {
	parallel(t)
	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "jsonlogs", "")
	refusing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
			`"message":"the agent's account may not list this"}`))
	}))
	t.Cleanup(refusing.Close)
	kubeconfig := writeKubeconfig(t, "refusing", refusing.URL)
	// No leader election: the agent goes straight to its informers, whose lists fail.
	agent := start(t, "agent jsonlogs", nil, "agent", "--server", srv.URL, "--token-file", tokenFile,
		"--kubeconfig", kubeconfig, "--lease-namespace", "", "--log-format", "json", "--log-level", "debug")
	kubetest.Eventually(t, 30*time.Second, "client-go to log a failed list", func(context.Context) error {
		if !strings.Contains(agent.output(), "Failed to watch") {
			return fmt.Errorf("nothing from client-go's reflectors yet")
		}
		return nil
	})
	agent.stop(syscall.SIGTERM)
	sc := bufio.NewScanner(strings.NewReader(agent.output()))
	n := 0
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d is not JSON (%v): %s", n+1, err, sc.Text())
		}
		if _, ok := rec["level"]; !ok {
			t.Fatalf("line %d has no level: %s", n+1, sc.Text())
		}
		n++
	}
	klogLine := lines(agent.output(), "Failed to watch")
	if !strings.Contains(klogLine, `"level":"ERROR"`) {
		t.Fatalf("client-go's error is not logged as an error: %s", klogLine)
	}
	t.Logf("%d JSON lines, client-go's among them: %s", n, strings.SplitN(klogLine, "\n", 2)[0])
}

// TestAgentFindsClusterLikeKubectl: an agent with no --kubeconfig finds the cluster in
// ~/.kube/config; another one, given KUBECONFIG with two files whose first's current context is a
// cluster that does not answer, uses the context of the second file named by --context. Both
// bring a workspace to Running.
func TestAgentFindsClusterLikeKubectl(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()

	real, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*real, filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	first := writeKubeconfig(t, "broken", "https://127.0.0.1:1") // nothing listens there

	for _, tc := range []struct {
		agent string
		env   []string
		args  []string
		from  string // in the agent's "kubernetes configuration" line
	}{
		{"kc-home", []string{"HOME=" + home, "KUBECONFIG="}, nil, filepath.Join(home, ".kube", "config")},
		{"kc-list", []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + first + string(os.PathListSeparator) + cluster.Kubeconfig},
			[]string{"--context", real.CurrentContext}, first},
	} {
		tok := srv.registerAgent(t, tc.agent, "")
		args := append([]string{"agent", "--server", srv.URL, "--token-file", tok, "--lease-namespace", "hangar-agent-" + tc.agent, "--identity", tc.agent}, tc.args...)
		agent := start(t, "agent "+tc.agent, append([]string{"HANGAR_LOG_LEVEL=debug"}, tc.env...), args...)
		ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: tc.agent + "-ws", Agent: tc.agent})
		if err != nil {
			t.Fatal(err)
		}
		deleteNamespaceAtEnd(t, cluster, ws.Namespace)
		waitFor(t, c, ws.Name, transition, "Running", state("Running", "Running"))
		line := lines(agent.output(), "kubernetes configuration")
		if !strings.Contains(line, tc.from) || !strings.Contains(line, "context "+real.CurrentContext) {
			t.Fatalf("agent %s: configuration line %q does not name %s and context %s", tc.agent, line, tc.from, real.CurrentContext)
		}
	}
}

// writeKubeconfig writes a kubeconfig whose one context, name (its current one), is server with a
// token that means nothing.
func writeKubeconfig(t *testing.T, name, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "nothing"}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

var appliedLine = regexp.MustCompile(`msg="applied workspace" .*workspace=(\S+) .*objects=(\d+) applied=(\d+)`)

// appliedCounts lists, for each "applied workspace" line of name in out, how many objects were
// applied.
func appliedCounts(out, name string) []string {
	var got []string
	for _, m := range appliedLine.FindAllStringSubmatch(out, -1) {
		if m[1] == name {
			got = append(got, m[3])
		}
	}
	return got
}

// TestDriftRepairAppliesWhatDrifted: someone deletes a workspace's Service and scales its
// Deployment to 0 by hand. A restarted agent's full reconcile gets the config back (the server's
// drift repair) and applies those two objects only, and the workspace is Running again with its
// Service; then a stop applies one object.
func TestDriftRepairAppliesWhatDrifted(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	tok := srv.registerAgent(t, "drift", "")
	agent := startAgent(t, srv, cluster, "drift", tok, "hangar-agent-drift")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()
	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "drift", Agent: "drift"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, ws.Namespace)
	waitFor(t, c, "drift", transition, "Running", state("Running", "Running"))
	if got := appliedCounts(agent.output(), ws.KubeName); len(got) != 1 || got[0] != "9" {
		t.Fatalf("create: applied %v objects, want one apply of 9", got)
	}

	if err := cluster.Client.CoreV1().Services(ws.Namespace).Delete(ctx, ws.KubeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ws.Namespace).UpdateScale(ctx, ws.KubeName,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: ws.KubeName, Namespace: ws.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "drift", transition, "Stopped by hand", state("Running", "Stopped"))

	agent.stop(syscall.SIGTERM)
	agent = startAgent(t, srv, cluster, "drift", tok, "hangar-agent-drift")
	waitFor(t, c, "drift", transition, "Running again", state("Running", "Running"))
	if _, err := cluster.Client.CoreV1().Services(ws.Namespace).Get(ctx, ws.KubeName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the Service was not restored")
	}
	if n := replicas(t, cluster, ws.Namespace, ws.KubeName); n != 1 {
		t.Fatalf("the Deployment has %d replicas", n)
	}
	if got := appliedCounts(agent.output(), ws.KubeName); len(got) != 1 || got[0] != "2" {
		t.Fatalf("repair: applied %v objects, want one apply of 2 (the Service and the Deployment)\n%s", got, lines(agent.output(), "applied"))
	}

	if _, err := c.UpdateWorkspace(ctx, "drift", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "drift", transition, "Stopped", state("Stopped", "Stopped"))
	if got := appliedCounts(agent.output(), ws.KubeName); len(got) != 2 || got[1] != "1" {
		t.Fatalf("stop: applied %v objects, want 2 then 1", got)
	}
}
