package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// freePort is a port of this host's loopback that nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitLog waits until the process's output says want.
func waitLog(t testing.TB, p *proc, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.output(), want) {
		select {
		case <-p.done:
			t.Fatalf("%s exited before saying %q:\n%s", p.name, want, p.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not say %q:\n%s", p.name, want, p.output())
		}
	}
}

// The local cluster as the README runs it: `hangar proxy` on the host, next to the server, with
// --pod-netns /run/netns/$(cat DIR/netns), and the agent's proxy_url_port set to its port. The
// workspace's URL, as printed, carries that port, and opens the workspace; SSH reaches its helper.
// The same proxy without --pod-netns says, at start and in its 502 page, that it cannot reach the
// pod network and what to do (the host's unreachable routes make that answer immediate).
func TestProxyOnTheHost(t *testing.T) {
	parallel(t)
	c := kubetest.Start(t)
	srv := startServer(t)
	admin := srv.client(t, srv.AdminToken)
	loadWebecho(t, c)
	netnsPath, err := c.NetnsPath()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hostKeyFile, clientKeyFile := filepath.Join(dir, "ssh_host_key"), filepath.Join(dir, "ssh_client_key")
	writeSSHKey(t, hostKeyFile)
	clientPub := writeSSHKey(t, clientKeyFile)
	port, sshPort := freePort(t), freePort(t)
	sshAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sshPort))
	cfg, _ := json.Marshal(map[string]any{"dns_zone": proxyZone, "proxy_url_scheme": "http", "proxy_url_port": port,
		"proxy_ssh_public_keys": []string{clientPub}, "proxy_ssh_address": sshAddr})
	tokenFile := srv.registerRealAgent(t, "local", string(cfg))
	startAgent(t, srv, c, "local", tokenFile, "hangar-agent-local")

	w, err := admin.CreateWorkspace(context.Background(), sdk.CreateWorkspaceRequest{Name: "web", Agent: "local", Devfile: webechoDevfile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(context.Background(), sdk.CreateWorkspaceRequest{Name: "dev", Agent: "local", Devfile: sshDevfile}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{"web", "dev"} {
			_, _ = admin.UpdateWorkspace(context.Background(), name, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"})
		}
	})
	w = waitFor(t, admin, "web", 120*time.Second, "Running", func(w sdk.Workspace) bool { return w.ActualState == "Running" })
	want := "http://8080-web--" + w.Owner + "." + proxyZone + ":" + strconv.Itoa(port) + "/"
	if w.URL != want {
		t.Fatalf("the workspace's URL is %q, want %q (with the proxy's port)", w.URL, want)
	}
	if out, err := runCLI(srv, "show", "web"); err != nil || !strings.Contains(out, want) {
		t.Errorf("hangar show web does not print %s (%v):\n%s", want, err, out)
	}

	proxyArgs := func(listen int, extra ...string) []string {
		return append([]string{"proxy", "--server", srv.URL, "--token-file", tokenFile, "--kubeconfig", c.Kubeconfig,
			"--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(listen)), "--metrics-listen", "", "--log-format", "json"}, extra...)
	}
	// Every workspace host at the proxy's address on this host's loopback, as a wildcard DNS record
	// for the zone would send it.
	client := func(listen int) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, _ := net.SplitHostPort(addr)
				if strings.HasSuffix(host, "."+proxyZone) {
					addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(listen))
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}}
	}

	t.Run("WithPodNetns", func(t *testing.T) {
		p := start(t, "proxy on the host", nil, proxyArgs(port, "--pod-netns", netnsPath,
			"--ssh-listen", sshAddr, "--ssh-host-key-file", hostKeyFile, "--ssh-client-key-file", clientKeyFile)...)
		waitLog(t, p, `"msg":"proxy listening"`)
		// The URL exactly as printed.
		if body, _ := waitServed(t, client(port), w.URL, srv.AdminToken); !strings.Contains(body, "webecho on port 8080") {
			t.Errorf("%s through the proxy on the host: %q", w.URL, body)
		}
		if out := p.output(); !strings.Contains(out, "pod network is reachable") && !strings.Contains(out, "no workspace runs yet") {
			t.Errorf("the proxy did not say at start whether it reaches the pod network:\n%s", out)
		}
		// `hangar ssh` connects to the agent's proxy_ssh_address: the proxy on the host, which
		// reaches the workspace's helper in the cluster's namespace.
		waitFor(t, admin, "dev", 120*time.Second, "Running", func(w sdk.Workspace) bool { return w.ActualState == "Running" })
		u := cliUser{url: srv.URL, token: srv.AdminToken, home: t.TempDir()}
		if out, errOut, code := u.run(t, "ssh", "dev", "--", "echo", "in-the-pod"); code != 0 || out != "in-the-pod\n" {
			t.Errorf("hangar ssh through the proxy on the host: exit %d, %q %q", code, out, errOut)
		}
	})

	t.Run("WithoutPodNetns", func(t *testing.T) {
		bare := freePort(t)
		p := start(t, "proxy on the host without --pod-netns", nil, proxyArgs(bare)...)
		waitLog(t, p, `"msg":"proxy listening"`)
		// At start: the running workspace was dialed, and the cause named.
		if out := p.output(); !strings.Contains(out, "cannot reach the cluster's pod network") || !strings.Contains(out, "--pod-netns") {
			t.Errorf("the proxy did not say at start that it cannot reach the pod network:\n%s", out)
		}
		started := time.Now()
		status, body, _ := get(t, client(bare), w.URL, srv.AdminToken)
		if took := time.Since(started); took > 5*time.Second {
			t.Errorf("the 502 took %v: the dial should fail at once", took)
		}
		if status != http.StatusBadGateway || !strings.Contains(body, "Pod network not reachable") || !strings.Contains(body, "--pod-netns") ||
			!strings.Contains(body, ":8080") {
			t.Errorf("without --pod-netns: %d %q, want a 502 page naming the pod network, the address and --pod-netns", status, body)
		}
	})
}
