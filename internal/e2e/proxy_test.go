package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/testca"
)

// webechoImage is the image of internal/e2e/testdata/webecho, built and loaded by the tests.
const webechoImage = "hangar.local/webecho:e2e"

const proxyZone = "ws.hangar.test"

// webechoDevfile serves webecho on a public, an internal and a none endpoint.
const webechoDevfile = `schemaVersion: 2.3.0
metadata:
  name: webecho
components:
  - name: web
    container:
      image: ` + webechoImage + `
      command: ["/webecho", "8080", "9090", "5858"]
      endpoints:
        - name: http
          targetPort: 8080
          exposure: public
        - name: metrics
          targetPort: 9090
          exposure: internal
        - name: debug
          targetPort: 5858
          exposure: none
`

// proxyEnv is a server, a real-node agent and `hangar proxy` in the cluster's network namespace,
// with TLS from a test CA; clients reach the proxy's workspace hosts through DialInside.
type proxyEnv struct {
	cluster     *kubetest.Cluster
	srv         *server
	proxy       *proc
	proxyAddr   string // inside the cluster's network namespace
	metricsAddr string
	ca          *testca.CA
	certPEM     []byte // the proxy's certificate (a wildcard for the zone, from ca)
	admin       *sdk.Client
	agent       string
	// sshAddr is the proxy's SSH inside the namespace; sshPublic relays to it from this host's
	// loopback, and is the agent config's proxy_ssh_address (what `hangar ssh` connects to).
	sshAddr, sshPublic string
	sshHostKey         ssh.PublicKey
}

var (
	proxyListening   = regexp.MustCompile(`"msg":"proxy listening","addr":"([^"]+)"`)
	sshListening     = regexp.MustCompile(`"msg":"ssh listening","addr":"([^"]+)"`)
	metricsListening = regexp.MustCompile(`"msg":"metrics listening","addr":"([^"]+)"`)
)

// setUpProxy starts the cluster, a server (with more options serverArgs), a real-node agent and the
// proxy.
func setUpProxy(t testing.TB, serverArgs ...string) *proxyEnv {
	t.Helper()
	return setUpProxyWith(t, func(*kubetest.Cluster, string) []string { return serverArgs })
}

// setUpProxyWith is setUpProxy with the server's options made from the cluster and the relay's
// URL inside the cluster's namespace (where pods reach the server: a --helper-url).
func setUpProxyWith(t testing.TB, serverArgs func(c *kubetest.Cluster, relayURL string) []string) *proxyEnv {
	t.Helper()
	e := &proxyEnv{cluster: kubetest.Start(t), ca: testca.New(t), agent: "proxied"}
	// The proxy (and helpers, with --helper-url) reach the server (on this host's loopback)
	// through a relay inside the namespace.
	relay, err := e.cluster.ListenInside(net.JoinHostPort(kubetest.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	e.srv = startServer(t, serverArgs(e.cluster, "http://"+relay.Addr().String())...)
	go pipeTo(relay, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", e.srv.listen)
	})
	e.admin = e.srv.client(t, e.srv.AdminToken)
	loadWebecho(t, e.cluster)
	// The proxy's SSH: its host key, its key for the workspaces' helpers (in the agent config), and
	// a relay from this host's loopback to where it listens inside the namespace.
	dir := t.TempDir()
	var sshRelay net.Listener
	hostKeyFile, clientKeyFile := filepath.Join(dir, "ssh_host_key"), filepath.Join(dir, "ssh_client_key")
	hostPub := writeSSHKey(t, hostKeyFile)
	if e.sshHostKey, _, _, _, err = ssh.ParseAuthorizedKey([]byte(hostPub)); err != nil {
		t.Fatal(err)
	}
	clientPub := writeSSHKey(t, clientKeyFile)
	sshRelay, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sshRelay.Close() })
	e.sshPublic = sshRelay.Addr().String()
	// proxy_ssh_host_key: the server checks it when it connects for the page's terminal.
	cfg, _ := json.Marshal(map[string]any{"dns_zone": proxyZone, "proxy_ssh_public_keys": []string{clientPub}, "proxy_ssh_address": e.sshPublic,
		"proxy_ssh_host_key": hostPub})
	tokenFile := e.srv.registerRealAgent(t, e.agent, string(cfg))
	startAgent(t, e.srv, e.cluster, e.agent, tokenFile, "hangar-agent-proxied")

	cert, key := e.ca.Issue(t, "*."+proxyZone)
	e.certPEM = cert
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	e.proxy = startInside(t, e.cluster, "proxy", nil, "proxy", "--server", "http://"+relay.Addr().String(), "--server-public-url", e.srv.URL,
		"--token-file", tokenFile, "--kubeconfig", e.cluster.Kubeconfig, "--listen", net.JoinHostPort(kubetest.NodeIP, "0"),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--metrics-listen", net.JoinHostPort(kubetest.NodeIP, "0"),
		"--ssh-listen", net.JoinHostPort(kubetest.NodeIP, "0"), "--ssh-host-key-file", hostKeyFile, "--ssh-client-key-file", clientKeyFile,
		"--ssh-recheck-interval", "1s", "--activity-interval", "200ms",
		"--log-format", "json", "--log-level", "debug")
	deadline := time.Now().Add(60 * time.Second)
	for e.proxyAddr == "" || e.sshAddr == "" {
		if m := proxyListening.FindStringSubmatch(e.proxy.output()); m != nil {
			e.proxyAddr = m[1]
		}
		if m := sshListening.FindStringSubmatch(e.proxy.output()); m != nil {
			e.sshAddr = m[1]
		}
		if m := metricsListening.FindStringSubmatch(e.proxy.output()); m != nil {
			e.metricsAddr = m[1]
		}
		select {
		case <-e.proxy.done:
			t.Fatalf("proxy exited:\n%s", e.proxy.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not start listening:\n%s", e.proxy.output())
		}
	}
	go pipeTo(sshRelay, func(ctx context.Context) (net.Conn, error) { return e.cluster.DialInside(ctx, e.sshAddr) })
	return e
}

// writeSSHKey writes a new ed25519 private key in OpenSSH's format and returns its public key as
// an authorized_keys line.
func writeSSHKey(t testing.TB, file string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "hangar-e2e")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	if err := os.WriteFile(file+".pub", []byte(pub+" hangar-e2e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return pub
}

// pipeTo relays every connection l accepts to a connection that dial opens.
func pipeTo(l net.Listener, dial func(context.Context) (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s, err := dial(ctx)
			cancel()
			if err != nil {
				return
			}
			defer s.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
			<-done
		}()
	}
}

// startInside is start for a process in the cluster's network namespace.
func startInside(t testing.TB, c *kubetest.Cluster, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(append(os.Environ(), agentMetricsAnyPort), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := c.StartInside(p.cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.output())
		}
	})
	return p
}

// loadWebecho builds webecho, packs it alone into an image (a docker-archive written here) and
// loads it into the real node.
func loadWebecho(t testing.TB, c *kubetest.Cluster) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "webecho")
	build := exec.Command("go", "build", "-o", bin, "./testdata/webecho")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build webecho: %v\n%s", err, out)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "webecho.tar")
	if err := os.WriteFile(archive, dockerArchive(t, webechoImage, "/webecho", body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("../../scripts/kube-load-image", c.Dir, archive).CombinedOutput()
	if err != nil {
		t.Fatalf("kube-load-image: %v\n%s", err, out)
	}
}

// dockerArchive is a one-layer image holding one executable, as `docker save` writes it.
func dockerArchive(t testing.TB, tag, path string, exe []byte) []byte {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path, "/"), Mode: 0o755, Size: int64(len(exe)), ModTime: epoch},
	} {
		if err := lw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := lw.Write(exe); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{path}, "User": "65532", "Env": []string{"PATH=/"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + sum(layer.Bytes())}},
	})
	cfgName, layerName := sum(cfg)+".json", sum(layer.Bytes())+".tar"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{tag}, "Layers": []string{layerName}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		body []byte
	}{{cfgName, cfg}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: epoch}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// transport reaches workspace hosts at the proxy (from inside the cluster's network namespace)
// and anything else (the server) directly; h2 false speaks HTTP/1.1 only.
func (e *proxyEnv) transport(h2 bool) *http.Transport {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			if strings.HasSuffix(host, "."+proxyZone) {
				return e.cluster.DialInside(ctx, e.proxyAddr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: e.ca.Pool()},
		ForceAttemptHTTP2:   h2,
		MaxIdleConnsPerHost: 100,
	}
	if !h2 {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return tr
}

// get fetches url with a bearer token (if any) and returns the status, the body and the protocol.
func get(t testing.TB, c *http.Client, url, token string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Proto
}

func (e *proxyEnv) user(t testing.TB, name string) (string, *sdk.Client) {
	t.Helper()
	u, err := e.admin.CreateUser(context.Background(), sdk.CreateUserRequest{Username: name})
	if err != nil {
		t.Fatal(err)
	}
	return u.Token, e.srv.client(t, u.Token)
}

// webWorkspace creates the owner's webecho workspace name on the proxied agent and returns it once
// it runs. It is deleted when the test ends (if the test did not), and its namespace at once if
// the test failed.
func (e *proxyEnv) webWorkspace(t testing.TB, owner *sdk.Client, name string) sdk.Workspace {
	t.Helper()
	w, err := owner.CreateWorkspace(context.Background(), sdk.CreateWorkspaceRequest{Name: name, Agent: e.agent, Devfile: webechoDevfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = owner.UpdateWorkspace(context.Background(), name, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"})
		if t.Failed() {
			_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	return waitFor(t, owner, name, 120*time.Second, "Running", func(w sdk.Workspace) bool { return w.ActualState == "Running" })
}

// waitServed fetches url with token until the proxy serves the workspace's page (Running may be
// seen a moment before the EndpointSlice says the pod is ready) and returns the body and protocol.
func waitServed(t testing.TB, c *http.Client, url, token string) (string, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body, proto := get(t, c, url, token)
		if status == http.StatusOK {
			return body, proto
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page %s: %d %q", url, status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProxy: what users see through `hangar proxy` on the real node.
//
// It runs alone (no t.Parallel): a stopped workspace's route must be gone within a second of the
// API showing Stopped, and the route goes with the EndpointSlice, which the controller manager
// updated later than that while other tests loaded the cluster (a parallel run: 502s, then a
// request hanging on the gone pod's address).
func TestProxy(t *testing.T) {
	e := setUpProxy(t)
	ctx := context.Background()
	aliceToken, alice := e.user(t, "alice")
	bobToken, _ := e.user(t, "bob")

	page := e.webWorkspace(t, alice, "web").URL
	if page != "https://8080-web--alice."+proxyZone+"/" {
		t.Fatalf("workspace URL %q", page)
	}
	h1 := &http.Client{Transport: e.transport(false), Timeout: 30 * time.Second}
	h2 := &http.Client{Transport: e.transport(true), Timeout: 30 * time.Second}

	t.Run("OwnerGetsThePage", func(t *testing.T) {
		if body, proto := waitServed(t, h2, page, aliceToken); !strings.Contains(body, "webecho on port 8080") || proto != "HTTP/2.0" {
			t.Fatalf("HTTP/2: %s %q", proto, body)
		}
		status, body, proto := get(t, h1, page, aliceToken)
		if status != http.StatusOK || !strings.Contains(body, "webecho on port 8080") || proto != "HTTP/1.1" {
			t.Fatalf("HTTP/1.1: %d %s %q", status, proto, body)
		}
		// What the workspace receives: its host, forwarded headers, none of Hangar's credentials.
		_, body, _ = get(t, h1, page+"headers", aliceToken)
		var seen struct {
			Host   string              `json:"host"`
			Header map[string][]string `json:"header"`
		}
		if err := json.Unmarshal([]byte(body), &seen); err != nil {
			t.Fatalf("headers: %v %q", err, body)
		}
		if seen.Host != "8080-web--alice."+proxyZone || seen.Header["Authorization"] != nil || seen.Header["X-Forwarded-Proto"][0] != "https" {
			t.Errorf("the workspace saw %+v", seen)
		}
	})

	t.Run("WebSocketEcho", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, strings.Replace(page, "https://", "wss://", 1)+"ws", &websocket.DialOptions{
			HTTPClient: h1, HTTPHeader: http.Header{"Authorization": {"Bearer " + aliceToken}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(1 << 20)
		for _, msg := range []string{"hello", strings.Repeat("z", 200<<10)} {
			if err := ws.Write(ctx, websocket.MessageBinary, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := ws.Read(ctx)
			if err != nil || string(got) != msg {
				t.Fatalf("echo of %d bytes: %d, %v", len(msg), len(got), err)
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")
	})

	t.Run("OthersAndOtherPortsGetNothing", func(t *testing.T) {
		if status, body, _ := get(t, h2, page, bobToken); status != http.StatusNotFound || strings.Contains(body, "webecho") {
			t.Errorf("bob: %d %q", status, body)
		}
		if status, body, _ := get(t, h2, page, ""); status != http.StatusUnauthorized || strings.Contains(body, "webecho") {
			t.Errorf("no token: %d %q", status, body)
		}
		for _, port := range []string{"9090", "5858"} {
			u := "https://" + port + "-web--alice." + proxyZone + "/"
			if status, body, _ := get(t, h2, u, aliceToken); status != http.StatusNotFound || strings.Contains(body, "webecho") {
				t.Errorf("the owner asking for port %s: %d %q", port, status, body)
			}
			if status, body, _ := get(t, h2, u, e.srv.AdminToken); status != http.StatusNotFound || strings.Contains(body, "webecho") {
				t.Errorf("an admin asking for port %s: %d %q", port, status, body)
			}
		}
		if status, _, _ := get(t, h2, "https://8080-nope--alice."+proxyZone+"/", aliceToken); status != http.StatusNotFound {
			t.Errorf("an unknown workspace: %d", status)
		}
	})

	var browser *http.Client // signed in by BrowserSignsIn
	t.Run("BrowserSignsIn", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		var hops []*http.Response
		b := &http.Client{Transport: e.transport(true), Jar: jar, Timeout: 30 * time.Second,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				hops = append(hops, req.Response)
				return nil
			}}
		req, _ := http.NewRequest("GET", page+"some/path?x=1", nil)
		req.Header.Set("Accept", "text/html")
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/signin" || !strings.Contains(string(body), `name="token"`) {
			t.Fatalf("a browser without a session lands on %d %s: %q", resp.StatusCode, resp.Request.URL, body)
		}
		returnTo := resp.Request.URL.Query().Get("return_to")
		hops = nil
		form := url.Values{"token": {aliceToken}, "return_to": {returnTo}}
		req, _ = http.NewRequest("POST", e.srv.URL+"/signin", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", e.srv.URL)
		req.Header.Set("Accept", "text/html")
		resp, err = b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "webecho on port 8080") || resp.Request.URL.String() != page+"some/path?x=1" {
			t.Fatalf("after sign-in: %d at %s: %q", resp.StatusCode, resp.Request.URL, body)
		}
		// The workspace cookie: set by the callback, for that host only.
		var setCookie string
		for _, h := range hops {
			if h != nil && h.Request.URL.Path == "/.hangar/callback" {
				setCookie = h.Header.Get("Set-Cookie")
			}
		}
		for _, want := range []string{proxy.SessionCookieName(true) + "=hgw_", "Path=/", "HttpOnly", "Secure", "SameSite=Lax"} {
			if !strings.Contains(setCookie, want) {
				t.Errorf("the workspace cookie %q lacks %s", setCookie, want)
			}
		}
		if strings.Contains(strings.ToLower(setCookie), "domain=") {
			t.Errorf("the workspace cookie names a domain: %q", setCookie)
		}
		wsURL, _ := url.Parse(page)
		if len(jar.Cookies(wsURL)) != 1 {
			t.Errorf("cookies for the workspace host: %v", jar.Cookies(wsURL))
		}
		other, _ := url.Parse("https://8080-other--alice." + proxyZone + "/")
		if cs := jar.Cookies(other); len(cs) != 0 {
			t.Errorf("another workspace host gets the cookie: %v", cs)
		}
		srvURL, _ := url.Parse(e.srv.URL)
		if cs := jar.Cookies(srvURL); len(cs) != 1 || cs[0].Name != "hangar_session" {
			t.Errorf("server cookies: %v", cs)
		}
		// The cookie alone (no redirect) now gets the page.
		req, _ = http.NewRequest("GET", page, nil)
		req.Header.Set("Accept", "text/html")
		resp, err = b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != page {
			t.Errorf("with the cookie: %d at %s", resp.StatusCode, resp.Request.URL)
		}
		browser = b
	})

	t.Run("AccessLogAndMetrics", func(t *testing.T) {
		found := false
		for _, line := range strings.Split(e.proxy.output(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "request" {
				continue
			}
			if rec["user"] == "alice" && rec["workspace"] == "alice/web" && rec["status"] == float64(200) && rec["host"] == "8080-web--alice."+proxyZone {
				found = true
			}
		}
		if !found {
			t.Error("no JSON access log line for alice's request")
		}
		mc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return e.cluster.DialInside(ctx, e.metricsAddr)
		}}}
		for path, want := range map[string]string{"/metrics": "hangar_proxy_requests_total", "/healthz": "ok", "/readyz": "ok"} {
			status, body, _ := get(t, mc, "http://"+e.metricsAddr+path, "")
			if status != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("%s: %d %q", path, status, body)
			}
		}
	})

	t.Run("RevokedTokenRefusedWithinTheCache", func(t *testing.T) {
		if browser == nil {
			t.Fatal("needs the signed-in browser of BrowserSignsIn, which failed")
		}
		// A new token for alice: her old one, and the browser session begun with it, are refused
		// once the proxy's cached decision (5 s) runs out.
		rotated, err := e.admin.RotateUserToken(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		for {
			status, _, _ := get(t, h2, page, aliceToken)
			if status == http.StatusUnauthorized {
				t.Logf("the old token was refused %v after the new one was made", time.Since(revoked).Round(time.Millisecond))
				break
			}
			if status != http.StatusOK || time.Since(revoked) > 6*time.Second {
				t.Fatalf("the old token %v after it was replaced: %d", time.Since(revoked).Round(time.Millisecond), status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for {
			req, _ := http.NewRequest("GET", page, nil)
			req.Header.Set("Accept", "text/html")
			resp, err := browser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.Request.URL.Path == "/signin" {
				break // sent to sign in again
			}
			if !strings.Contains(string(body), "webecho") || time.Since(revoked) > 6*time.Second {
				t.Fatalf("the browser session %v after the token was replaced: %d at %s", time.Since(revoked).Round(time.Millisecond), resp.StatusCode, resp.Request.URL)
			}
			time.Sleep(50 * time.Millisecond)
		}
		aliceToken, alice = rotated.Token, e.srv.client(t, rotated.Token)
		if status, _, _ := get(t, h2, page, aliceToken); status != http.StatusOK {
			t.Fatalf("the new token: %d", status)
		}
	})

	t.Run("StoppedRouteGoneWithinASecond", func(t *testing.T) {
		gone := make(chan time.Time, 1)
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			for pctx.Err() == nil {
				req, _ := http.NewRequestWithContext(pctx, "GET", page, nil)
				req.Header.Set("Authorization", "Bearer "+aliceToken)
				if resp, err := h2.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusServiceUnavailable {
						gone <- time.Now()
						return
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		if _, err := alice.UpdateWorkspace(ctx, "web", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, alice, "web", 60*time.Second, "Stopped", func(w sdk.Workspace) bool { return w.ActualState == "Stopped" })
		stopped := time.Now()
		select {
		case at := <-gone:
			if d := at.Sub(stopped); d > time.Second {
				t.Errorf("the route went %v after the workspace showed Stopped", d)
			} else {
				t.Logf("the route went %v after the workspace showed Stopped (negative: before)", d.Round(time.Millisecond))
			}
		case <-time.After(time.Second):
			t.Fatal("the route is still there a second after the workspace showed Stopped")
		}
		if status, body, _ := get(t, h2, page, aliceToken); status != http.StatusServiceUnavailable || !strings.Contains(body, "not running") {
			t.Errorf("stopped: %d %q", status, body)
		}
		if status, _, _ := get(t, h2, page, bobToken); status != http.StatusNotFound {
			t.Errorf("bob, stopped: %d", status)
		}
	})

	t.Run("DeletedIsNotFound", func(t *testing.T) {
		if _, err := alice.UpdateWorkspace(ctx, "web", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, alice, "web", 120*time.Second, "Terminated", func(w sdk.Workspace) bool { return w.ActualState == "Terminated" })
		// Refusals are cached for a second at most; then the deleted workspace is unknown.
		deadline := time.Now().Add(5 * time.Second)
		for {
			status, _, _ := get(t, h2, page, aliceToken)
			if status == http.StatusNotFound {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("deleted: %d", status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
