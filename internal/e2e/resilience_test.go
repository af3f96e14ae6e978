package e2e

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestAgentRestartMidApplyConverges: the server answers the agent's reconcile with the config of a
// stop, and the agent dies (SIGKILL) before it applies it. The server has recorded the answer
// (responded_to_agent_at is past the stop), so by the seed's rule it would never send that config
// again; a new agent process converges anyway, through the drift repair of its first, full,
// reconcile (docs/decisions.md, "Full reconcile repairs drift").
//
// To be sure the kill lands between the answer and the apply, the first agent reaches the cluster
// through a proxy that the test pauses just before the stop: the agent gets its answer from the
// server but its apply cannot reach the API server.
func TestAgentRestartMidApplyConverges(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "midapply", "") // default intervals: the wait endpoint wakes the agent
	proxy, viaProxy := startKubeProxy(t, cluster)
	first := startAgent(t, srv, viaProxy, "midapply", tokenFile, "hangar-agent-midapply")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()

	createdAt := time.Now()
	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "midapply", Agent: "midapply"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, ws.Namespace)
	waitFor(t, c, "midapply", transition, "Running", state("Running", "Running"))
	t.Logf("timing: create→Running %v", time.Since(createdAt).Round(time.Millisecond))

	appliesBefore := strings.Count(first.output(), "applied workspace")
	proxy.pause()
	stopAt := time.Now()
	stopped, err := c.UpdateWorkspace(ctx, "midapply", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the agent as soon as the server has answered it about the stop.
	deadline := time.Now().Add(transition)
	var answered sdk.Workspace
	for {
		w, err := c.Workspace(ctx, "midapply")
		if err == nil && w.RespondedToAgentAt != nil && w.RespondedToAgentAt.After(*stopped.DesiredStateUpdatedAt) {
			answered = w
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not answer the agent within %v of the stop: %+v (%v)", transition, w, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	first.stop(syscall.SIGKILL)
	killedAt := time.Now()
	t.Logf("timing: the server answered the agent %v after the stop (responded_to_agent_at - desired_state_updated_at); agent killed %v after the stop",
		answered.RespondedToAgentAt.Sub(*stopped.DesiredStateUpdatedAt).Round(time.Microsecond), killedAt.Sub(stopAt).Round(time.Millisecond))
	if n := strings.Count(first.output(), "applied workspace"); n != appliesBefore {
		t.Fatalf("the agent applied something after the proxy was paused:\n%s", lines(first.output(), "applied workspace"))
	}
	proxy.close()

	// The stop was answered but never applied: the cluster still runs the workspace, and the user
	// sees that.
	if n := replicas(t, cluster, ws.Namespace, ws.KubeName); n != 1 {
		t.Fatalf("after the kill the Deployment has %d replicas, want still 1", n)
	}
	if w, _ := c.Workspace(ctx, "midapply"); w.DesiredState != "Stopped" || w.ActualState != "Running" {
		t.Fatalf("after the kill the workspace is %s/%s, want Stopped/Running", w.DesiredState, w.ActualState)
	}

	// A new agent process (as a restarted pod would be) converges the workspace to Stopped. It has
	// the same identity, so it takes the Lease the killed one could not release at once.
	fullsBefore := len(serverReconciles(srv, "midapply", "full"))
	restartAt := time.Now()
	second := startAgent(t, srv, cluster, "midapply", tokenFile, "hangar-agent-midapply")
	waitFor(t, c, "midapply", transition, "Stopped after the agent's restart", state("Stopped", "Stopped"))
	t.Logf("timing: new agent process→Stopped %v; stop→Stopped %v in all", time.Since(restartAt).Round(time.Millisecond), time.Since(stopAt).Round(time.Millisecond))
	if n := replicas(t, cluster, ws.Namespace, ws.KubeName); n != 0 {
		t.Fatalf("the Stopped workspace's Deployment has %d replicas", n)
	}
	// The config came with the new agent's first, full, reconcile.
	if fulls := serverReconciles(srv, "midapply", "full"); len(fulls) <= fullsBefore || fulls[fullsBefore].reported != 1 {
		t.Fatalf("no full reconcile reporting the workspace after the restart: %+v", fulls)
	}
	if !strings.Contains(second.output(), "applied workspace") {
		t.Fatalf("the new agent did not apply the workspace:\n%s", second.output())
	}
}

// replicas reads the spec.replicas of a Deployment in the cluster.
func replicas(t testing.TB, cluster *kubetest.Cluster, namespace, name string) int32 {
	t.Helper()
	d, err := cluster.Client.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil {
		t.Fatalf("Deployment %s/%s has no replicas", namespace, name)
	}
	return *d.Spec.Replicas
}

// TestServerDownConverges: with a workspace Running, the server goes away for 30 s while the
// cluster drifts (the Deployment scaled to 2 by hand); the server comes back on the same address
// and data, the user stops the workspace, and it reaches Stopped. The agent said it could not reach
// the server and recovered, in the same process.
func TestServerDownConverges(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	srv := startServer(t)
	tokenFile := srv.registerAgent(t, "srvdown", "") // default intervals
	agentProc := startAgent(t, srv, cluster, "srvdown", tokenFile, "hangar-agent-srvdown")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()

	createdAt := time.Now()
	ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "srvdown", Agent: "srvdown"})
	if err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, cluster, ws.Namespace)
	waitFor(t, c, "srvdown", transition, "Running", state("Running", "Running"))
	t.Logf("timing: create→Running %v", time.Since(createdAt).Round(time.Millisecond))

	srv.stop(syscall.SIGTERM)
	downAt := time.Now()
	scale, err := cluster.Client.AppsV1().Deployments(ws.Namespace).GetScale(ctx, ws.KubeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ws.Namespace).UpdateScale(ctx, ws.KubeName,
		&autoscalingv1.Scale{ObjectMeta: scale.ObjectMeta, Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const down = 30 * time.Second
	time.Sleep(time.Until(downAt.Add(down)))
	select {
	case <-agentProc.done:
		t.Fatalf("the agent exited while the server was down:\n%s", agentProc.output())
	default:
	}
	failedLines := lines(agentProc.output(), "reconcile failed; retrying")
	if !strings.Contains(failedLines, "connection refused") {
		t.Fatalf("the agent did not log that it could not reach the server:\n%s", agentProc.output())
	}
	outBefore := len(agentProc.output())

	oldURL := srv.URL
	srv.launch(t)
	upAt := time.Now()
	if srv.URL != oldURL {
		t.Fatalf("the server came back on %s, not %s", srv.URL, oldURL)
	}
	c = srv.client(t, srv.AdminToken)
	if _, err := c.UpdateWorkspace(ctx, "srvdown", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "srvdown", 2*transition, "Stopped after the server came back", state("Stopped", "Stopped"))
	t.Logf("timing: server down %v; server up→Stopped %v (stop asked at once; includes what was left of the agent's retry backoff)", upAt.Sub(downAt).Round(time.Millisecond), time.Since(upAt).Round(time.Millisecond))
	if n := replicas(t, cluster, ws.Namespace, ws.KubeName); n != 0 {
		t.Fatalf("the Stopped workspace's Deployment has %d replicas", n)
	}

	// And it follows the user again: start → Running with the one replica its config says.
	startAt := time.Now()
	if _, err := c.UpdateWorkspace(ctx, "srvdown", sdk.UpdateWorkspaceRequest{DesiredState: "Running"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "srvdown", transition, "Running again", state("Running", "Running"))
	t.Logf("timing: start→Running %v", time.Since(startAt).Round(time.Millisecond))
	if n := replicas(t, cluster, ws.Namespace, ws.KubeName); n != 1 {
		t.Fatalf("the Running workspace's Deployment has %d replicas", n)
	}

	// Same agent process all along, which logged its recovery.
	select {
	case <-agentProc.done:
		t.Fatalf("the agent exited:\n%s", agentProc.output())
	default:
	}
	out := agentProc.output()
	for _, once := range []string{"agent starting", "leading: starting reconciliation"} {
		if n := strings.Count(out, once); n != 1 {
			t.Fatalf("the agent logged %q %d times:\n%s", once, n, out)
		}
	}
	if !strings.Contains(out[outBefore:], "msg=reconciled") {
		t.Fatalf("the agent logged no successful reconcile after the server came back:\n%s", out[outBefore:])
	}
	failed := strings.Split(lines(out, "reconcile failed; retrying"), "\n")
	t.Logf("the agent logged %d failed reconciles while the server was down, the last: %s", len(failed), failed[len(failed)-1])
}

// kubeProxy forwards TCP connections to the cluster's API server, and can hold all traffic.
type kubeProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	gate   chan struct{} // closed while traffic flows
	done   chan struct{}
	closed bool
	conns  []net.Conn
}

// startKubeProxy starts a proxy in front of the cluster's API server and returns it with a copy of
// the cluster whose Kubeconfig goes through the proxy.
func startKubeProxy(t *testing.T, cluster *kubetest.Cluster) (*kubeProxy, *kubetest.Cluster) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := cfg.Contexts[cfg.CurrentContext]
	if kc == nil || cfg.Clusters[kc.Cluster] == nil {
		t.Fatalf("kubeconfig %s has no current cluster", cluster.Kubeconfig)
	}
	cl := cfg.Clusters[kc.Cluster]
	u, err := url.Parse(cl.Server)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &kubeProxy{ln: ln, target: u.Host, gate: make(chan struct{}), done: make(chan struct{})}
	close(p.gate)
	go p.serve()
	t.Cleanup(p.close)
	if cl.TLSServerName == "" && !cl.InsecureSkipTLSVerify {
		cl.TLSServerName = u.Hostname()
	}
	u.Host = ln.Addr().String()
	cl.Server = u.String()
	path := filepath.Join(t.TempDir(), "kubeconfig-via-proxy")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	via := *cluster
	via.Kubeconfig = path
	return p, &via
}

func (p *kubeProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, holding each chunk while the proxy is paused.
func (p *kubeProxy) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			select {
			case <-gate:
			case <-p.done:
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pause holds all traffic (both ways, every connection, new ones too) until close.
func (p *kubeProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

// close stops the proxy and drops its connections.
func (p *kubeProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	close(p.done)
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}
