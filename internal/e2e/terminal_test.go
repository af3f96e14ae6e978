package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

const terminalBox = `[data-testid="ws-terminal"]`

// useBrowserTerminal signs in to the server's page of workspace ref with a new token of owner,
// opens its terminal and runs what a user would: a command (echo $((6*7)) shows 42), a narrower
// window (stty size shows the terminal's new size); then it revokes the token and waits for the
// page to say that the terminal ended, and why.
func useBrowserTerminal(t *testing.T, serverURL string, owner *sdk.Client, ref string) {
	ctx := context.Background()
	tk, err := owner.CreateToken(ctx, sdk.CreateTokenRequest{Name: "browser-terminal"})
	if err != nil {
		t.Fatal(err)
	}
	c := browser.Start(t, browser.Options{Name: "owner", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))
	b.Open(serverURL+"/ui/w/"+ref, `//input[@name="token"]`)
	b.SignIn(tk.Token, `//button[@data-testid="ws-terminal-open"]`)
	b.Click(`//button[@data-testid="ws-terminal-open"]`, `//*[@data-testid="ws-terminal-status" and text()="Connected."]`)
	b.WaitTerminalPrompt(terminalBox)
	b.TypeInTerminal(terminalBox, "echo $((6*7))")
	b.WaitTerminal(terminalBox, "\n42\n")

	rows, cols := b.TerminalSize(terminalBox)
	b.Run("a narrower window", chromedp.EmulateViewport(800, 700))
	b.Run("the terminal fits it", chromedp.Poll(fmt.Sprintf(`document.querySelector(%q).terminal.cols < %d`, terminalBox, cols), nil,
		chromedp.WithPollingTimeout(browser.StepTimeout)))
	rows2, cols2 := b.TerminalSize(terminalBox)
	b.TypeInTerminal(terminalBox, "stty size")
	b.WaitTerminal(terminalBox, fmt.Sprintf("\n%d %d\n", rows2, cols2))
	t.Logf("the terminal went from %dx%d to %dx%d; stty size agrees", cols, rows, cols2, rows2)

	if _, err := owner.RevokeToken(ctx, "", tk.ID); err != nil {
		t.Fatal(err)
	}
	b.Run("the terminal ends with the reason",
		chromedp.WaitVisible(`//*[@data-testid="ws-terminal-status" and contains(., "Your access to this workspace ended") and contains(., "session has ended")]`, chromedp.BySearch))
	b.WaitTerminal(terminalBox, "Your access to this workspace ended")
	if screen := b.TerminalText(terminalBox); strings.Contains(screen, "Reconnecting") {
		t.Errorf("after the revocation the terminal tries again:\n%s", screen)
	}
}

// TestBrowserTerminalOnRealNode: the workspace page's terminal in Chromium reaches a Kubernetes
// workspace's pod on the real node through the access proxy's SSH (the server connects there
// with the browser's session, checking the proxy's host key from the agent config): a command
// runs, a resize reaches the pod's PTY, and revoking the token the browser signed in with ends the
// terminal with the reason on the page.
func TestBrowserTerminalOnRealNode(t *testing.T) {
	parallel(t)
	e := setUpProxy(t)
	aliceToken, alice := e.user(t, "alice")
	w, err := alice.CreateWorkspace(context.Background(), sdk.CreateWorkspaceRequest{Name: "dev", Agent: e.agent, Devfile: sshDevfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = alice.UpdateWorkspace(context.Background(), "dev", sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"})
		if t.Failed() {
			_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	waitFor(t, alice, "dev", 120*time.Second, "Running", func(w sdk.Workspace) bool { return w.ActualState == "Running" })
	// Running may be seen a moment before the proxy routes the pod's helper.
	kubetest.Eventually(t, transition, "the proxy to route the workspace's SSH", func(context.Context) error {
		c, err := e.dialSSH("dev", ssh.Password(aliceToken))
		if err != nil {
			return err
		}
		return c.Close()
	})
	useBrowserTerminal(t, e.srv.URL, alice, "alice/dev")
}

// TestBrowserTerminalTerraform: the same for a Terraform workspace with hangar_agent (the
// Terraform starter, its machine a pod on the real node whose helper connects out to the server):
// the terminal goes through the helper's connection.
func TestBrowserTerminalTerraform(t *testing.T) {
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
	srv := startServer(t, "--helper-url", "http://"+relay.Addr().String())
	go pipeTo(relay, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.listen)
	})
	admin := cliUser{url: srv.URL, token: srv.AdminToken, home: t.TempDir()}
	must := func(u cliUser, args ...string) string { t.Helper(); return u.must(t, args...) }
	tmpl := filepath.Join(t.TempDir(), "pods")
	must(admin, "templates", "init", "terraform-kubernetes-pod", "--directory", tmpl)
	must(admin, "templates", "push", "pods", "--directory", tmpl)
	u, err := srv.client(t, srv.AdminToken).CreateUser(context.Background(), sdk.CreateUserRequest{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	au := cliUser{url: srv.URL, token: u.Token, home: t.TempDir()}
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t, "tfterm")
	must(au, "create", "dev", "--template", "pods", "--parameter", "kubeconfig="+string(kubeconfig), "--parameter", "namespace="+ns, "--wait")
	t.Cleanup(func() { _, _, _ = au.run(t, "delete", "dev", "--yes", "--wait") })
	// The helper connects once the pod's process runs.
	kubetest.Eventually(t, transition, "the helper to connect", func(context.Context) error {
		if out, errOut, code := au.run(t, "ssh", "dev", "--", "true"); code != 0 {
			return fmt.Errorf("hangar ssh dev -- true: exit %d, %q %q", code, out, errOut)
		}
		return nil
	})
	useBrowserTerminal(t, srv.URL, srv.client(t, u.Token), "alice/dev")
}
