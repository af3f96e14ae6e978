package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestStartupFailedOnRealNode (issue 23 item 1): a devfile's postStart commands run by the
// workspace's helper on the real node are reported to the server as the startup step
// "post-start". When one fails, the workspace still runs (the user can get in and see why) and
// says so: `hangar show` has "Running, startup failed (post-start)" with the failing command and
// the end of its output, and `hangar logs` the whole step.
func TestStartupFailedOnRealNode(t *testing.T) {
	parallel(t)
	// A server without forges: its helpers report with tokens under the key it keeps in its
	// database, and hand git no credentials of its (docs/decisions.md, "Helpers report without
	// forges"): the step is shown all the same.
	e := setUpProxyWith(t, func(_ *kubetest.Cluster, relayURL string) []string { return []string{"--helper-url", relayURL} })
	token, _ := e.user(t, "erin")
	u := cliUser{url: e.srv.URL, token: token, home: t.TempDir()}
	must := func(args ...string) string { t.Helper(); return u.must(t, args...) }
	devfile := filepath.Join(t.TempDir(), "devfile.yaml")
	if err := os.WriteFile(devfile, []byte(`schemaVersion: 2.2.0
components:
  - name: dev
    container:
      image: `+kubetest.WorkspaceImage+`
commands:
  - id: deps
    exec:
      component: dev
      commandLine: echo installing deps
  - id: setup
    exec:
      component: dev
      commandLine: echo about to fail; echo no such target >&2; exit 3
events:
  postStart: [deps, setup]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	must("create", "app", "--agent", e.agent, "--devfile", devfile, "--wait", "--timeout", "2m")
	t.Cleanup(func() {
		if t.Failed() {
			logPods(t, e.cluster, "app")
		}
	})
	var shown string
	kubetest.Eventually(t, 2*time.Minute, "the failed postStart to be shown", func(context.Context) error {
		shown = must("show", "app")
		for _, want := range []string{"Actual state:        Running, startup failed (post-start)", "post-start    failed in ", ": command 2/2: setup",
			"| no such target", `| postStart command "setup": exit status 3`} {
			if !strings.Contains(shown, want) {
				return fmt.Errorf("hangar show app lacks %q:\n%s", want, shown)
			}
		}
		return nil
	})
	if log := must("logs", "app"); !strings.Contains(log, "== post-start: failed (command 2/2: setup)\ninstalling deps\nabout to fail\nno such target\n") {
		t.Errorf("hangar logs app:\n%s", log)
	}
	t.Logf("a failed postStart, as `hangar show` says it:\n%s", shown)
	must("delete", "app", "--yes", "--wait")
}

// logPods logs what the containers of a workspace's pods wrote, for a failure's message.
func logPods(t *testing.T, c *kubetest.Cluster, workspace string) {
	ctx := context.Background()
	nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("namespaces: %v", err)
		return
	}
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.Name, "hangar-"+workspace+"-") {
			continue
		}
		pods, err := c.Client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("pods of %s: %v", ns.Name, err)
			continue
		}
		for _, p := range pods.Items {
			for _, cs := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				b, err := c.Client.CoreV1().Pods(ns.Name).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name}).DoRaw(ctx)
				t.Logf("--- log of %s/%s %s (%v):\n%s", ns.Name, p.Name, cs.Name, err, b)
			}
		}
	}
}
