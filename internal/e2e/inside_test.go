package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestInsideTheWorkspaceOnRealNode (issue 23, items 2 and 3): on the real node, the helper of a
// workspace reports what happens inside it, to a server without forges: its memory and volumes
// from the node's cgroups and filesystems, and the value of a custom metadata command its devfile
// declares, all in `hangar show`. A loop filling a watched volume (the container's /dev/shm, a
// 64 MiB tmpfs, at a 50 % threshold) raises the volume alert; a memory hog over the container's
// limit is killed by the kernel and the workspace says so.
func TestInsideTheWorkspaceOnRealNode(t *testing.T) {
	parallel(t)
	e := setUpProxyWith(t, func(_ *kubetest.Cluster, relayURL string) []string { return []string{"--helper-url", relayURL} })
	token, _ := e.user(t, "ines")
	u := cliUser{url: e.srv.URL, token: token, home: t.TempDir()}
	must := func(args ...string) string { t.Helper(); return u.must(t, args...) }
	devfile := filepath.Join(t.TempDir(), "devfile.yaml")
	if err := os.WriteFile(devfile, []byte(`schemaVersion: 2.2.0
components:
  - name: dev
    attributes:
      hangar.dev/metadata:
        - {key: answer, display_name: Answer, script: "echo 42-from-the-devfile", interval: 5}
      hangar.dev/resources-monitoring: {volumes: [{path: /dev/shm, threshold: 50}]}
    container:
      image: `+kubetest.WorkspaceImage+`
      memoryLimit: 192Mi
`), 0o644); err != nil {
		t.Fatal(err)
	}
	must("create", "inside", "--agent", e.agent, "--devfile", devfile, "--wait", "--timeout", "2m")
	t.Cleanup(func() {
		if t.Failed() {
			logPods(t, e.cluster, "inside")
		}
	})
	var shown string
	kubetest.Eventually(t, 2*time.Minute, "the helper's figures and the metadata value", func(context.Context) error {
		shown = must("show", "inside")
		for _, want := range []string{"Metadata:            Answer: 42-from-the-devfile\n", "Resources:           ", "memory ", " of 192.0 MiB (", "/dev/shm "} {
			if !strings.Contains(shown, want) {
				return fmt.Errorf("hangar show lacks %q:\n%s", want, shown)
			}
		}
		return nil
	})
	t.Logf("inside the workspace, as `hangar show` says it:\n%s", shown)

	var ws sdk.Workspace
	if err := json.Unmarshal([]byte(must("show", "inside", "-o", "json")), &ws); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods, err := e.cluster.Client.CoreV1().Pods(ws.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v %v", pods, err)
	}
	pod := pods.Items[0]
	exec := func(script string) {
		t.Helper()
		out, errOut, err := e.cluster.Exec(ctx, pod.Namespace, pod.Name, "dev", "/bin/sh", "-c", script)
		t.Logf("%s: %v\n%s%s", script, err, out, errOut)
	}
	// A loop fills the watched volume past its threshold.
	exec("for i in 1 2 3 4 5 6 7 8 9 10; do head -c 4194304 /dev/zero > /dev/shm/fill-$i; done")
	kubetest.Eventually(t, time.Minute, "the volume alert", func(context.Context) error {
		shown = must("show", "inside")
		if !strings.Contains(shown, "Alerts:              ACTIVE since ") || !strings.Contains(shown, "volume /dev/shm at ") {
			return fmt.Errorf("hangar show has no active volume alert:\n%s", shown)
		}
		return nil
	})
	exec("rm -f /dev/shm/fill-*")
	// A memory hog over the limit: the kernel kills it.
	exec("tail /dev/zero")
	kubetest.Eventually(t, time.Minute, "the OOM kill", func(context.Context) error {
		shown = must("show", "inside")
		if !strings.Contains(shown, "killed for lack of memory") {
			return fmt.Errorf("hangar show says nothing of the kill:\n%s", shown)
		}
		return nil
	})
	t.Logf("after the hog, `hangar show` says:\n%s", shown)
	must("delete", "inside", "--yes", "--wait")
}

// TestIdleByWorkOnRealNode (issue 23 item 4): under an agent policy that counts work, not
// connections, with a 1-minute TTL, on the real node: a workspace where a detached process keeps
// working (a busy loop started with setsid, as a build in a detached tmux would) runs past its TTL,
// its last work saying why; the same workspace without it, idle, is stopped, the reason saying
// that no work was seen inside.
func TestIdleByWorkOnRealNode(t *testing.T) {
	parallel(t)
	e := setUpProxyWith(t, func(_ *kubetest.Cluster, relayURL string) []string {
		return []string{"--helper-url", relayURL, "--lifecycle-interval", "5s"}
	})
	ctx := context.Background()
	if _, err := e.admin.UpdateAgent(ctx, e.agent, sdk.UpdateAgentRequest{Config: map[string]any{
		"lifecycle": map[string]any{"default_ttl": "1m", "activity": "work", "activity_cpu": 0.05}}}); err != nil {
		t.Fatal(err)
	}
	token, _ := e.user(t, "wendy")
	u := cliUser{url: e.srv.URL, token: token, home: t.TempDir()}
	must := func(args ...string) string { t.Helper(); return u.must(t, args...) }
	devfile := filepath.Join(t.TempDir(), "devfile.yaml")
	if err := os.WriteFile(devfile, []byte("schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    container:\n      image: "+kubetest.WorkspaceImage+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"busy", "idle"} {
		must("create", name, "--agent", e.agent, "--devfile", devfile, "--wait", "--timeout", "2m")
	}
	show := func(name string) sdk.Workspace {
		t.Helper()
		var ws sdk.Workspace
		if err := json.Unmarshal([]byte(must("show", name, "-o", "json")), &ws); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	busy := show("busy")
	pods, err := e.cluster.Client.CoreV1().Pods(busy.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v %v", pods, err)
	}
	// A detached loop: the exec ends, the loop goes on.
	if out, errOut, err := e.cluster.Exec(ctx, busy.Namespace, pods.Items[0].Name, "dev", "/bin/sh", "-c",
		"setsid /bin/sh -c 'while :; do :; done' >/dev/null 2>&1 < /dev/null & echo started"); err != nil || !strings.Contains(out, "started") {
		t.Fatalf("start the loop: %v\n%s%s", err, out, errOut)
	}
	kubetest.Eventually(t, 4*time.Minute, "the idle workspace to be stopped", func(context.Context) error {
		if w := show("idle"); w.DesiredState != "Stopped" {
			return fmt.Errorf("idle is %s/%s (%s)", w.DesiredState, w.ActualState, w.DesiredStateReason)
		}
		return nil
	})
	idle, now := show("idle"), time.Now()
	if !strings.Contains(idle.DesiredStateReason, "autostop") || !strings.Contains(idle.DesiredStateReason, "no work seen inside") {
		t.Errorf("the idle workspace's reason: %q", idle.DesiredStateReason)
	}
	busy = show("busy")
	if busy.DesiredState != "Running" || busy.LastWorkAt == nil || now.Sub(*busy.LastWorkAt) > time.Minute || !strings.Contains(busy.LastWorkReason, "CPU: ") {
		t.Fatalf("the busy workspace past the idle one's stop: %s, work %v %q", busy.DesiredState, busy.LastWorkAt, busy.LastWorkReason)
	}
	if now.Sub(*busy.DesiredStateUpdatedAt) < time.Minute {
		t.Fatalf("the busy workspace has not run a TTL yet (started %v)", busy.DesiredStateUpdatedAt)
	}
	t.Logf("busy: last work %v (%s); idle stopped: %s", busy.LastWorkAt, busy.LastWorkReason, idle.DesiredStateReason)
	if shown := must("show", "busy"); !strings.Contains(shown, "work seen inside") {
		t.Errorf("hangar show busy does not say the work:\n%s", shown)
	}
}
