package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/registrytest"
)

// gitHangarImage is WorkspaceGitImage with this test's hangar binary at /usr/bin/hangar: the
// machine of a Terraform workspace runs hangar_agent's init script (the helper) and git.
const gitHangarImage = "hangar.local/workspace-git-hangar:dev"

// loadGitHangarImage builds gitHangarImage (the workspace-git archive and one more layer) and
// loads it into the real node.
func loadGitHangarImage(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	out, err := exec.Command("../../scripts/build-workspace-git-image").Output()
	if err != nil {
		t.Fatalf("scripts/build-workspace-git-image: %v", err)
	}
	base, err := tarball.ImageFromPath(strings.TrimSpace(string(out)), nil)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := registrytest.AppendFiles(t, base, registrytest.File{Name: "usr/bin/hangar", Mode: 0o755, Data: bin})
	tag, err := name.NewTag(gitHangarImage)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	if load, err := exec.Command("../../scripts/kube-load-image", c.Dir, archive).CombinedOutput(); err != nil || !strings.Contains(string(load), gitHangarImage) {
		t.Fatalf("scripts/kube-load-image: %v\n%s", err, load)
	}
}

// TestTerraformTeamRepository: issue 22's git credentials in a Terraform workspace, on the real
// node: the Terraform starter (hangar_agent, its machine a pod whose helper connects out) with an
// image holding git; alice, who linked the test forge, clones her private repository there over
// HTTP (the helper's credential helper, her token asked of the server with the helper's hwa_
// token) and over SSH (her git SSH key through the helper's agent, the forge's host key from the
// forge's ssh_known_hosts); after `hangar external-auth unlink`, git there is refused within
// seconds, with the server's words.
func TestTerraformTeamRepository(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs builds in the default sandbox, which needs root (CI runs as root)")
	}
	c := kubetest.Start(t)
	relay, err := c.ListenInside(net.JoinHostPort(kubetest.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	forge := forgetest.New(t, forgetest.Options{ListenInside: c.ListenInside, InsideHost: kubetest.NodeIP})
	forgeArgs := forgeServerArgs(t, forge)
	srv := startServer(t, append(forgeArgs, "--helper-url", "http://"+relay.Addr().String())...)
	go pipeTo(relay, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.listen)
	})
	loadGitHangarImage(t, c)
	forge.AddClient("hangar", "forge-secret", []string{srv.URL + "/external-auth/forge/callback"})
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	forge.CreateRepo("alice", "app", true, map[string]string{"README.md": "alice's app\n"})

	admin := cliUser{url: srv.URL, token: srv.AdminToken, home: t.TempDir()}
	must := func(u cliUser, args ...string) string { t.Helper(); return u.must(t, args...) }
	tmpl := filepath.Join(t.TempDir(), "pods")
	must(admin, "templates", "init", "terraform-kubernetes-pod", "--directory", tmpl)
	must(admin, "templates", "push", "pods", "--directory", tmpl)
	aliceUser, err := srv.client(t, srv.AdminToken).CreateUser(context.Background(), sdk.CreateUserRequest{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	au := cliUser{url: srv.URL, token: aliceUser.Token, home: t.TempDir()}
	link(t, srv.URL, forge, au, aliceUser.Token, "alice")
	keyLine, _, _ := strings.Cut(must(au, "gitssh"), "\n")
	forge.AddSSHKey("alice", keyLine)

	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t, "tfteam")
	must(au, "create", "dev", "--template", "pods", "--parameter", "kubeconfig="+string(kubeconfig), "--parameter", "namespace="+ns,
		"--parameter", "image="+gitHangarImage, "--wait")
	t.Cleanup(func() { _, _, _ = au.run(t, "delete", "dev", "--yes", "--wait") })
	ssh := func(script string) (string, string, int) {
		return au.run(t, "ssh", "dev", "--", script)
	}
	// The helper connects once the pod's process runs.
	kubetest.Eventually(t, transition, "the helper to connect", func(context.Context) error {
		if out, errOut, code := ssh("id -u"); code != 0 {
			return fmt.Errorf("hangar ssh dev -- id -u: exit %d, %q %q", code, out, errOut)
		}
		return nil
	})
	httpURL := forge.InsideHTTPURL() + "/alice/app.git"
	sshURL := "ssh://git@" + forge.InsideSSHAddr() + "/alice/app.git"
	accesses := func(transport string) int {
		n := 0
		for _, a := range forge.GitAccesses() {
			if a.Transport == transport && a.User == "alice" && a.Repo == "alice/app" && a.Status == http.StatusOK {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct{ transport, url string }{{"http", httpURL}, {"ssh", sshURL}} {
		out, errOut, code := ssh("cd /tmp && rm -rf app-" + tc.transport + " && git clone -q " + tc.url + " app-" + tc.transport + " && cat app-" + tc.transport + "/README.md")
		if code != 0 || out != "alice's app\n" {
			t.Fatalf("git clone over %s in the Terraform workspace: exit %d, stdout %q, stderr %q", tc.transport, code, out, errOut)
		}
		if accesses(tc.transport) == 0 {
			t.Fatalf("the forge never served alice/app to alice over %s: %+v", tc.transport, forge.GitAccesses())
		}
	}

	// alice unlinks: git over HTTP in her running Terraform workspace is refused within seconds.
	must(au, "external-auth", "unlink", "forge")
	unlinked := time.Now()
	kubetest.Eventually(t, 10*time.Second, "git to be refused after the unlink", func(context.Context) error {
		out, errOut, code := ssh("git ls-remote " + httpURL)
		if code == 0 {
			return fmt.Errorf("git ls-remote still works: %q", out)
		}
		if !strings.Contains(errOut, "hangar external-auth link forge") {
			return fmt.Errorf("git ls-remote: exit %d, stderr %q lacks the server's message", code, errOut)
		}
		return nil
	})
	t.Logf("git refused %v after the unlink", time.Since(unlinked).Round(time.Millisecond))
	if !slices.ContainsFunc(forge.GitAccesses(), func(a forgetest.GitAccess) bool { return a.User == "alice" && a.Transport == "http" }) {
		t.Fatal("no HTTP access as alice")
	}
}
