package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// TestTerraformStarter follows the Terraform starter as a user would, as root, so that builds run
// in the default sandbox: `templates init` writes it, it is pushed, a workspace is created with
// the local cluster's kubeconfig; its machine is a pod on the real node whose helper connects out
// to the server; `hangar ssh` runs commands there with their output and exit status; stop removes
// the pod, start makes a new one whose helper connects again, and delete leaves nothing.
func TestTerraformStarter(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs builds in the default sandbox, which needs root (CI runs as root)")
	}
	c := kubetest.Start(t)
	// The pods reach the server through a relay on the node's address inside the cluster's
	// namespace (nothing in the namespace reaches the host): that is the URL for helpers, while
	// users keep the server's loopback one (as hangar quickstart has it, with hangar relay).
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
	ok := func(args ...string) string {
		t.Helper()
		out, errOut, code := u.run(t, args...)
		if code != 0 {
			t.Fatalf("hangar %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out + errOut
	}

	dir := filepath.Join(t.TempDir(), "pods")
	if out := ok("templates", "init"); !strings.Contains(out, "terraform-kubernetes-pod") {
		t.Fatalf("templates init does not list the starter:\n%s", out)
	}
	if out := ok("templates", "init", "terraform-kubernetes-pod", "--directory", dir); !strings.Contains(out, "hangar templates push terraform-kubernetes-pod --directory "+dir) {
		t.Fatalf("templates init says no next step:\n%s", out)
	}
	ok("templates", "push", "pods", "--directory", dir)
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t, "tfstarter")
	ok("create", "dev", "--template", "pods", "--parameter", "kubeconfig="+string(kubeconfig), "--parameter", "namespace="+ns, "--wait")

	pods := func(ctx context.Context) ([]string, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name+"@"+p.Spec.NodeName+"="+string(p.Status.Phase))
			}
		}
		return names, nil
	}
	enter := func(what string) {
		t.Helper()
		// The helper connects once the pod's process starts: ssh works once it has.
		kubetest.Eventually(t, transition, what, func(context.Context) error {
			out, errOut, code := u.run(t, "ssh", "dev", "--", "id", "-u")
			if code != 0 || out != "5001\n" {
				return fmt.Errorf("hangar ssh dev -- id -u: exit %d, %q %q", code, out, errOut)
			}
			return nil
		})
		out, errOut, code := u.run(t, "ssh", "dev", "--", "echo", "out-$HOME", ";", "echo", "to-stderr", ">&2;", "exit", "7")
		if code != 7 || out != "out-/home/dev\n" || errOut != "to-stderr\n" {
			t.Fatalf("hangar ssh with an exit status: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	got, err := pods(context.Background())
	if err != nil || len(got) != 1 || !strings.HasSuffix(got[0], "@"+kubetest.RealNode+"=Running") {
		t.Fatalf("after create, the namespace's pods are %v (%v), want one running on %s", got, err, kubetest.RealNode)
	}
	enter("the helper to connect after create")

	ok("stop", "dev", "--wait")
	if got, err := pods(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("after stop, pods %v (%v), want none", got, err)
	}
	if _, errOut, code := u.run(t, "ssh", "dev", "--", "true"); code == 0 {
		t.Fatalf("hangar ssh into a stopped workspace succeeded: %s", errOut)
	}
	ok("start", "dev", "--wait")
	enter("the helper of the new pod to connect after start")

	// The machine's helper is not the build's: no build of this template is warned about one.
	for _, n := range []string{"1", "2", "3"} {
		if log := ok("logs", "dev", "--build", n); strings.Contains(log, "started a workspace helper") {
			t.Errorf("build %s of the starter warns about a helper in the build:\n%s", n, log)
		}
	}

	ok("delete", "dev", "--yes", "--wait")
	if got, err := pods(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("after delete, pods %v (%v), want none", got, err)
	}
	secrets, err := c.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=hangar-terraform"})
	if err != nil || len(secrets.Items) != 0 {
		t.Fatalf("after delete, the init script's secrets: %v (%v)", secrets, err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the namespace itself was deleted")
	}
}

// TestTerraformHelperInBuildWarns: a template that runs hangar_agent's init script in the build (a
// local-exec that starts the helper in the background, the README's old advice) gets a warning in
// its build log that says what to do instead, since the helper is stopped with the build.
func TestTerraformHelperInBuildWarns(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs builds in the default sandbox, which needs root (CI runs as root)")
	}
	srv := startServer(t)
	u := cliUser{url: srv.URL, token: srv.AdminToken, home: t.TempDir()}
	// Inside the sandbox, the hangar binary is at the provider mirror's path (not on PATH).
	helperBin := filepath.Join(sandbox.PluginDir, tfprovider.Address, tfprovider.Version, runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-hangar_v"+tfprovider.Version)
	dir := t.TempDir()
	module := `terraform {
  required_providers {
    hangar = { source = "hangar.dev/hangar/hangar" }
  }
}
resource "hangar_agent" "main" {
  hangar_binary = "` + helperBin + `"
}
resource "terraform_data" "helper" {
  provisioner "local-exec" {
    # Starts the helper in the background, and waits until it runs.
    command     = "nohup sh -c \"$INIT\" >/dev/null 2>&1 & pid=$!; i=0; while [ $i -lt 200 ] && ! grep -q workspace-helper /proc/$pid/cmdline; do sleep 0.05; i=$((i+1)); done"
    environment = { INIT = hangar_agent.main.init_script }
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"templates", "push", "inbuild", "--directory", dir}, {"create", "vm", "--template", "inbuild", "--wait"}} {
		if out, errOut, code := u.run(t, args...); code != 0 {
			t.Fatalf("hangar %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	out, errOut, code := u.run(t, "logs", "vm")
	if code != 0 {
		t.Fatalf("hangar logs: exit %d %s", code, errOut)
	}
	for _, want := range []string{"This build started a workspace helper (pid ", " workspace-helper) and it was stopped with the build",
		"init_script must run ON the machine the template creates", "hangar templates init terraform-kubernetes-pod"} {
		if !strings.Contains(out, want) {
			t.Errorf("the build log lacks %q:\n%s", want, out)
		}
	}
}
