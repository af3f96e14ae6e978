package web_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/testutil/helpertest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// cutter is a TCP relay in front of the server whose connections the test can cut, as a network
// that drops does: the browser reaches the server through it.
type cutter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns[in], c.conns[out] = struct{}{}, struct{}{}
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *cutter) URL() string { return "http://" + c.ln.Addr().String() }

// cut drops every open connection.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for nc := range c.conns {
		nc.Close()
		delete(c.conns, nc)
	}
}

func mustEd25519(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func sshSigner(t *testing.T) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromKey(mustEd25519(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kubeWorkspaceBehindProxy is a Running Kubernetes workspace dev of user whose helper (a real
// workspace helper, as in its pod) is reached through a real access proxy's SSH side asking env.
func kubeWorkspaceBehindProxy(t *testing.T, env *servertest.Env, userToken string) {
	t.Helper()
	var a sdk.Agent
	call(t, env, env.AdminToken, "POST", "/api/v1/agents", map[string]any{"name": "k1", "config": map[string]any{"dns_zone": "ws.example.com"}}, &a)
	call(t, env, userToken, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "agent": "k1", "devfile": devfile}, nil)
	setActual(t, env, "dev", workspace.Running)

	upstreamKey := sshSigner(t)
	helperAddr := helpertest.Start(t, upstreamKey.PublicKey())
	hostKey := sshSigner(t)
	sshSrv, err := proxy.NewSSHServer(proxy.SSHOptions{HostKeys: []ssh.Signer{hostKey}, UpstreamKey: upstreamKey,
		Checker: &proxy.ServerClient{URL: env.URL, Token: a.Token, HTTP: &http.Client{Timeout: 10 * time.Second}},
		Routes:  fixedSSHRoute(helperAddr), RecheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = sshSrv.Serve(pln) }()
	t.Cleanup(sshSrv.Close)
	call(t, env, env.AdminToken, "PATCH", "/api/v1/agents/k1", map[string]any{"config": map[string]any{
		"proxy_ssh_address": pln.Addr().String(), "proxy_ssh_host_key": string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(hostKey.PublicKey())))}}, nil)
}

type fixedSSHRoute string

func (r fixedSSHRoute) SSHAddr(string) string { return string(r) }

const termBox = `[data-testid="ws-terminal"]`

// TestBrowserTerminal: the workspace page's terminal in Chromium, on a Kubernetes workspace
// behind a real access proxy's SSH (in this process) and a real workspace helper: it runs a
// command; a resize of the window reaches the PTY (stty size); a dropped connection reopens a
// session and says so; revoking the token the browser signed in with ends the terminal with the
// reason on the page. A page of another origin cannot open a terminal with the user's cookie. The
// page asks nothing of any other address (xterm.js is served from the binary).
func TestBrowserTerminal(t *testing.T) {
	env := servertest.New(t)
	alice := createUser(t, env, "alice")
	var tk sdk.Token
	call(t, env, alice, "POST", "/api/v1/tokens", sdk.CreateTokenRequest{Name: "browser"}, &tk)
	kubeWorkspaceBehindProxy(t, env, alice)
	relay := newCutter(t, strings.TrimPrefix(env.URL, "http://"))

	c := browser.Start(t, browser.Options{Name: "alice", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))
	b.Open(relay.URL()+"/ui/w/alice/dev", `//input[@name="token"]`)
	b.SignIn(tk.Token, `//button[@data-testid="ws-terminal-open"]`)
	b.Click(`//button[@data-testid="ws-terminal-open"]`, `//*[@data-testid="ws-terminal-status" and text()="Connected."]`)
	b.WaitTerminalPrompt(termBox)
	b.TypeInTerminal(termBox, "echo $((6*7))")
	b.WaitTerminal(termBox, "\n42\n")
	// Drawn by the canvas renderer: the DOM one's inline styles are refused by the page's CSP (its
	// text came out near black on black).
	var canvases int
	b.Run("the renderer", chromedp.Evaluate(`document.querySelectorAll('[data-testid="ws-terminal"] .xterm-screen canvas').length`, &canvases))
	if canvases == 0 {
		t.Error("the terminal is not drawn on a canvas")
	}
	b.Run("to the terminal", chromedp.ScrollIntoView(termBox, chromedp.ByQuery))
	screenshot(t, b, "terminal")

	// A narrower window: the terminal fits it, and the shell's PTY has the new size.
	rows, cols := b.TerminalSize(termBox)
	b.Run("a narrower window", chromedp.EmulateViewport(800, 700))
	b.Run("the terminal fits it", chromedp.Poll(fmt.Sprintf(`document.querySelector('[data-testid="ws-terminal"]').terminal.cols < %d`, cols), nil, chromedp.WithPollingTimeout(browser.StepTimeout)))
	rows2, cols2 := b.TerminalSize(termBox)
	b.TypeInTerminal(termBox, "stty size")
	b.WaitTerminal(termBox, fmt.Sprintf("\n%d %d\n", rows2, cols2))
	if rows2 == rows && cols2 == cols {
		t.Errorf("the terminal stayed %dx%d in a narrower window", cols, rows)
	}

	// The network drops the socket: the page reconnects to a new session, and says so.
	relay.cut()
	b.WaitTerminal(termBox, "The connection was lost. Reconnecting")
	b.WaitTerminal(termBox, "reconnected: this is a new session")
	b.Run("the status", chromedp.WaitVisible(`//*[@data-testid="ws-terminal-status" and text()="Reconnected: a new session."]`, chromedp.BySearch))
	b.TypeInTerminal(termBox, "echo again-$((6*7))")
	b.WaitTerminal(termBox, "again-42\n")

	// A page of another origin (same site: another port of this host) with alice's cookie.
	pwned := filepath.Join(t.TempDir(), "pwned")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>evil</title><script>
const ws = new WebSocket(%q, 'hangar-terminal.v1');
ws.onopen = () => { ws.send(new TextEncoder().encode('touch %s\r')); document.title = 'opened'; };
ws.onclose = () => { if (document.title === 'evil') document.title = 'refused'; };
</script>`, strings.Replace(relay.URL(), "http://", "ws://", 1)+"/api/v1/workspaces/dev/terminal", pwned)
	}))
	t.Cleanup(evil.Close)
	var title string
	b.Run("another origin's page", chromedp.Navigate(evil.URL),
		chromedp.Poll(`document.title !== 'evil'`, nil, chromedp.WithPollingTimeout(browser.StepTimeout)), chromedp.Title(&title))
	if title != "refused" {
		t.Errorf("a page of another origin opened a terminal with alice's cookie (title %q)", title)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Errorf("a page of another origin ran a command in alice's workspace")
	}

	// Back on the page: revoking the token alice signed in with ends the terminal, with the reason.
	b.Open(relay.URL()+"/ui/w/alice/dev", `//button[@data-testid="ws-terminal-open"]`)
	b.Click(`//button[@data-testid="ws-terminal-open"]`, `//*[@data-testid="ws-terminal-status" and text()="Connected."]`)
	b.WaitTerminalPrompt(termBox)
	call(t, env, alice, "DELETE", "/api/v1/tokens/"+tk.ID, nil, nil)
	b.Run("the terminal ends with the reason", chromedp.WaitVisible(`//*[@data-testid="ws-terminal-status" and contains(., "Your access to this workspace ended") and contains(., "session has ended")]`, chromedp.BySearch))
	b.WaitTerminal(termBox, "Your access to this workspace ended")
	screenshot(t, b, "terminal-revoked")

	// Every resource came from the server (through the relay).
	var names []string
	b.Run("the page's resources", chromedp.Evaluate(`performance.getEntriesByType('resource').map(r => r.name)`, &names,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p }))
	for _, n := range names {
		if !strings.HasPrefix(n, relay.URL()+"/") {
			t.Errorf("the page asked %s of another address", n)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "/vendor/xterm/xterm.js") {
		t.Errorf("the page did not load the vendored xterm.js: %v", names)
	}
}
