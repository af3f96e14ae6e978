package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// editorDevfile asks for the web editor as GitLab's devfiles do.
const editorDevfile = `schemaVersion: 2.2.0
components:
  - name: dev
    attributes:
      gl/inject-editor: true
    container:
      image: ` + kubetest.WorkspaceImage + `
`

// TestEditor: a workspace whose devfile asks for the web editor runs code-server (the bundle of the
// image scripts/build-editor-image builds, loaded into the real node, copied into the pod by an
// init container) inside its main container, a busybox image with no libc, run by the helper; its
// URL is the editor's, and through the proxy its owner gets code-server's page, with the
// workspace's sources open, while another user gets nothing. The editor's terminals are that
// container's: node-pty, from the bundle, runs the container's own shell there.
func TestEditor(t *testing.T) {
	parallel(t)
	e := setUpProxy(t)
	loadEditor(t, e.cluster)
	ctx := context.Background()
	aliceToken, alice := e.user(t, "alice")
	bobToken, _ := e.user(t, "bob")

	w, err := alice.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "code", Agent: e.agent, Devfile: editorDevfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	if w.URL != "https://60001-code--alice."+proxyZone+"/" {
		t.Fatalf("workspace URL %q, want the editor's port", w.URL)
	}
	// The editor's readiness probe holds Running until code-server answers.
	waitFor(t, alice, "code", 240*time.Second, "Running", state("Running", "Running"))

	c := &http.Client{Transport: e.transport(true), Timeout: 30 * time.Second}
	// code-server redirects / to ./?folder=<the folder it opened>, then serves the workbench, whose
	// configuration names it.
	page := func() (int, string, *url.URL) {
		req, _ := http.NewRequest("GET", w.URL, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", w.URL, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Request.URL
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body, final := page()
		if status == http.StatusOK {
			if !strings.Contains(body, "vscode-workbench-web-configuration") || !strings.Contains(body, "codeServerVersion&quot;:&quot;4.139.1") ||
				!strings.Contains(body, "nameShort&quot;:&quot;code-server") {
				t.Fatalf("the page at %s is not code-server 4.139.1's workbench:\n%s", final, body)
			}
			if final.Host != "60001-code--alice."+proxyZone || final.Query().Get("folder") != "/projects" {
				t.Errorf("the editor redirected to %s, want the workspace's host with folder=/projects (its PROJECT_SOURCE)", final)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the editor's page: %d %q", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := get(t, c, w.URL+"healthz", aliceToken); status != http.StatusOK || !strings.Contains(body, "alive") {
		t.Errorf("healthz through the proxy: %d %q", status, body)
	}

	// The editor runs inside the main container: no container of its own, its node among the
	// container's processes, and a terminal it opens (node-pty, as code-server's terminals do) runs
	// the container's own shell, with the container's files.
	pods, err := e.cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v %v", pods, err)
	}
	pod := pods.Items[0]
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == devfile.EditorContainerName {
			t.Errorf("the editor has a container of its own: %v", pod.Spec.Containers)
		}
	}
	ps, errOut, err := e.cluster.Exec(ctx, pod.Namespace, pod.Name, "dev", "/bin/sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
	if err != nil || !strings.Contains(ps, devfile.EditorDir+"/bin/node "+devfile.EditorDir+"/node_modules/code-server/out/node/entry.js") {
		t.Errorf("the main container's processes do not include the editor: %v %s\n%s", err, errOut, ps)
	}
	script := `const pty = require("` + devfile.EditorDir + `/node_modules/code-server/lib/vscode/node_modules/node-pty");
const p = pty.spawn("/bin/sh", ["-c", "echo terminal in $(cat /proc/1/comm), $(ls /projects/.hangar)"], {env: process.env});
p.onData(d => process.stdout.write(d)); p.onExit(e => process.exit(e.exitCode));`
	out, errOut, err := e.cluster.Exec(ctx, pod.Namespace, pod.Name, "dev", devfile.EditorDir+"/bin/node", "-e", script)
	if err != nil || !strings.Contains(out, "terminal in hangar") || !strings.Contains(out, "code-server") {
		t.Errorf("a terminal of the editor's node in the main container: %v %s\n%q", err, errOut, out)
	}
	// The editor's own password is off: the proxy is what keeps others out.
	if status, body, _ := get(t, c, w.URL, bobToken); status != http.StatusNotFound || strings.Contains(body, "code-server") {
		t.Errorf("another user: %d %q, want 404 and no editor", status, body)
	}
	if status, body, _ := get(t, c, w.URL, ""); status != http.StatusUnauthorized || strings.Contains(body, "code-server") {
		t.Errorf("no credentials: %d %q, want 401 and no editor", status, body)
	}
}

// loadEditor builds the editor's image (cached after the first build, see
// scripts/build-editor-image) and loads it into the real node, once per cluster.
func loadEditor(t testing.TB, c *kubetest.Cluster) {
	t.Helper()
	c.LoadBuiltImage(t, "build-editor-image", devfile.EditorImage)
}
