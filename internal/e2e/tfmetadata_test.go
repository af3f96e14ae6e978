package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestTerraformMetadataOnRealNode (issue 23 items 2 and 3, with a Terraform template): the
// Terraform starter, its hangar_agent given one more metadata block (`echo 42-from-template`),
// run as root in the default sandbox with its pod on the real node. The init script hands the
// blocks to the pod's helper, which runs the command and reports it: `hangar show` and the API's
// workspace JSON show its value, and the starter's own (its home's size), and the helper watches
// the home volume at the starter's threshold (80), not the default.
func TestTerraformMetadataOnRealNode(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs builds in the default sandbox, which needs root (CI runs as root)")
	}
	c := kubetest.Start(t)
	// The pod reaches the server through a relay in the cluster's namespace (TestTerraformStarter).
	relay, err := c.ListenInside(net.JoinHostPort(kubetest.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	srv := startServer(t, "--helper-url", "http://"+relay.Addr().String())
	go pipeTo(relay, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.listen)
	})
	u := cliUser{url: srv.URL, token: srv.AdminToken, home: t.TempDir()}
	must := func(args ...string) string { t.Helper(); return u.must(t, args...) }

	dir := filepath.Join(t.TempDir(), "pods")
	must("templates", "init", "terraform-kubernetes-pod", "--directory", dir)
	mainTF := filepath.Join(dir, "main.tf")
	b, err := os.ReadFile(mainTF)
	if err != nil {
		t.Fatal(err)
	}
	const agent = `resource "hangar_agent" "main" {` + "\n"
	const monitoring = "  resources_monitoring {\n"
	if !strings.Contains(string(b), agent) || !strings.Contains(string(b), `display_name = "Home size"`) || !strings.Contains(string(b), monitoring) {
		t.Fatalf("the starter's agent is not %q with its Home size metadata and %q:\n%s", agent, monitoring, b)
	}
	// One more command; and two more volumes: the container's /tmp at 1%, which any disk is over
	// (an alert without filling one), and / with its alert off.
	module := strings.Replace(string(b), agent, agent+`  metadata {
    key          = "answer"
    display_name = "The answer"
    script       = "echo 42-from-template"
    interval     = 1
  }
`, 1)
	module = strings.Replace(module, monitoring, monitoring+`    volume {
      path      = "/tmp"
      threshold = 1
    }
    volume {
      path    = "/"
      enabled = false
    }
`, 1)
	if err := os.WriteFile(mainTF, []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	must("templates", "push", "pods", "--directory", dir)
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t, "tfmeta")
	must("create", "dev", "--template", "pods", "--parameter", "kubeconfig="+string(kubeconfig), "--parameter", "namespace="+ns, "--wait")
	t.Cleanup(func() { _, _, _ = u.run(t, "delete", "dev", "--yes", "--wait") })

	// The helper reports once it runs, then every protocol.MetadataInterval. show prints the values
	// as "Metadata:   NAME: VALUE" and then "            NAME: VALUE" lines.
	inMetadata := func(line string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^Metadata: +(?:.*\n +)*?` + line + `$`)
	}
	shown, home := inMetadata(`The answer: 42-from-template`), inMetadata(`Home size: [0-9.]+[KMGT]?`)
	alert := regexp.MustCompile(`(?m)^Alerts: +ACTIVE since .* volume /tmp at \d+% of .* \(threshold 1%\)$`)
	var out string
	kubetest.Eventually(t, transition, "hangar show to show the template's metadata and the /tmp alert", func(context.Context) error {
		out = must("show", "dev")
		if !shown.MatchString(out) || !home.MatchString(out) || !alert.MatchString(out) {
			return fmt.Errorf("hangar show dev:\n%s", out)
		}
		return nil
	})
	t.Logf("hangar show dev:\n%s", out)

	// The API's workspace: the value, and the home volume watched at the template's threshold.
	var ws any
	kubetest.Eventually(t, transition, "the API to give the metadata and the volume's threshold", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/workspaces/dev", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/v1/workspaces/dev: %s %s", resp.Status, body)
		}
		if err := json.Unmarshal(body, &ws); err != nil {
			return err
		}
		if !hasObject(ws, map[string]any{"key": "answer", "display_name": "The answer", "value": "42-from-template"}) {
			return fmt.Errorf("the workspace JSON has no value 42-from-template for the key answer:\n%s", body)
		}
		if !hasObject(ws, map[string]any{"path": "/home/dev", "threshold": 80.0}) || !hasObject(ws, map[string]any{"path": "/", "threshold": nil}) {
			return fmt.Errorf("the workspace JSON has no volume /home/dev watched at 80%%, or / unwatched:\n%s", body)
		}
		if !hasObject(ws, map[string]any{"kind": "volume", "subject": "/tmp", "active": true}) {
			return fmt.Errorf("the workspace JSON has no active alert on /tmp:\n%s", body)
		}
		return nil
	})
	if hasObject(ws, map[string]any{"kind": "volume", "subject": "/"}) {
		t.Errorf("a volume whose alert is off (enabled = false) raised one:\n%v", ws)
	}
	must("delete", "dev", "--yes", "--wait")
}

// hasObject reports whether v (decoded JSON) holds, at any depth, an object with all of want's
// fields and values.
func hasObject(v any, want map[string]any) bool {
	switch v := v.(type) {
	case map[string]any:
		all := true
		for k, w := range want {
			all = all && v[k] == w
		}
		if all {
			return true
		}
		for _, x := range v {
			if hasObject(x, want) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasObject(x, want) {
				return true
			}
		}
	}
	return false
}
