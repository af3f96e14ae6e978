package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubernetesStarter: the Kubernetes starter of `hangar templates init`, on the real node, as a
// user drives it through the CLI: written and pushed, a workspace created from it that opens the
// web editor, entered with `hangar ssh` (a command's output and exit status; the workspace user
// writes its HOME), stopped, started (the file in /projects kept) and deleted.
func TestKubernetesStarter(t *testing.T) {
	parallel(t)
	e := setUpProxy(t)
	loadEditor(t, e.cluster)
	aliceToken, alice := e.user(t, "alice")
	admin := cliUser{url: e.srv.URL, token: e.srv.AdminToken, home: t.TempDir()}
	au := cliUser{url: e.srv.URL, token: aliceToken, home: t.TempDir()}
	must := func(u cliUser, args ...string) string { t.Helper(); return u.must(t, args...) }

	dir := filepath.Join(t.TempDir(), "starter")
	must(admin, "templates", "init", "kubernetes", "--directory", dir)
	if out := must(admin, "templates", "push", "kubernetes", "--devfile", filepath.Join(dir, "devfile.yaml")); !strings.HasPrefix(out, "Pushed kubernetes template kubernetes version 1") {
		t.Fatalf("templates push: %s", out)
	}
	must(au, "create", "mine", "--template", "kubernetes", "--agent", e.agent, "--wait")
	w, err := alice.Workspace(context.Background(), "mine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	if !strings.HasPrefix(w.URL, "https://60001-mine--alice.") {
		t.Errorf("the starter's workspace URL %q, want the web editor's", w.URL)
	}

	// ssh: as soon as the pod is ready behind the proxy (Running may come a moment before).
	ssh := func(script string) (string, string, int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, errOut, code := au.run(t, "ssh", "mine", "--", script)
			if code != 255 || time.Now().After(deadline) {
				return out, errOut, code
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if out, errOut, code := ssh(`echo "uid=$(id -u) home=$HOME"; touch ~/x && echo kept > /projects/kept && echo touched`); code != 0 || out != "uid=5001 home=/home/user\ntouched\n" {
		t.Fatalf("hangar ssh mine: exit %d stdout %q stderr %q; want the workspace user, its HOME written", code, out, errOut)
	}
	if _, _, code := ssh("exit 3"); code != 3 {
		t.Errorf("hangar ssh mine -- exit 3: exit %d", code)
	}

	must(au, "stop", "mine", "--wait")
	waitFor(t, alice, "mine", 60*time.Second, "Stopped", state("Stopped", "Stopped"))
	must(au, "start", "mine", "--wait")
	if out, errOut, code := ssh("cat /projects/kept"); code != 0 || out != "kept\n" {
		t.Errorf("after stop and start: exit %d stdout %q stderr %q, want the file in /projects", code, out, errOut)
	}
	must(au, "delete", "mine", "--yes", "--wait")
	if _, err := alice.Workspace(context.Background(), "mine"); err == nil {
		ws, _ := alice.ListWorkspaces(context.Background())
		for _, x := range ws {
			if x.Name == "mine" && x.ActualState != "Terminated" {
				t.Errorf("after delete --wait: %s is %s", x.Name, x.ActualState)
			}
		}
	}
}
