package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// TestBrowser is the "done when": a user who created a workspace opens its URL in a real
// browser (headless Chromium), signs in on the server's page, and gets the workspace's page and a
// WebSocket from it; another user, signed in, gets the "No such workspace" page; signed out, the
// owner is sent back to sign in. It asserts what a user sees: page text and the address bar.
func TestBrowser(t *testing.T) {
	e := setUpProxy(t)
	aliceToken, alice := e.user(t, "alice")
	bobToken, _ := e.user(t, "bob")
	page := e.webWorkspace(t, alice, "web").URL
	// The browser's first look comes after the proxy routes the workspace.
	waitServed(t, &http.Client{Transport: e.transport(true), Timeout: 30 * time.Second}, page, aliceToken)
	front := e.loopbackFront(t)
	owner := startBrowser(t, e, front, "alice")

	signedIn := false
	t.Run("OwnerSignsInAndGetsThePage", func(t *testing.T) {
		b := owner.on(t)
		// No session: the proxy sends the browser to the server's sign-in.
		b.open(page+"some/path?x=1", `//input[@name="token"]`)
		if h1 := b.text("h1"); h1 != "Sign in to Hangar" {
			t.Errorf("the sign-in page says %q", h1)
		}
		if loc := b.location(); !strings.HasPrefix(loc, e.srv.URL+"/signin?") {
			t.Errorf("the sign-in page is at %s", loc)
		}
		// The token, and back to the workspace: the page the app serves, at the address asked for.
		b.signIn(aliceToken, `//h1[contains(., "webecho on port 8080")]`)
		if loc := b.location(); loc != page+"some/path?x=1" {
			t.Errorf("after sign-in the browser is at %s, want %s", loc, page+"some/path?x=1")
		}
		if body := b.text("body"); !strings.Contains(body, "/some/path") {
			t.Errorf("the workspace's page: %q", body)
		}
		// Signed in, the address opens at once.
		b.open(page, `//h1[contains(., "webecho on port 8080")]`)
		if loc := b.location(); loc != page {
			t.Errorf("the workspace's address opens %s", loc)
		}
		signedIn = true
	})

	t.Run("WebSocketFromThePage", func(t *testing.T) {
		if !signedIn {
			t.Fatal("needs the owner signed in by OwnerSignsInAndGetsThePage, which failed")
		}
		b := owner.on(t)
		b.open(page+"ws-echo?msg="+url.QueryEscape("hello from Chromium"), `//p[@id="status"][starts-with(., "echo: ") or . = "error"]`)
		if got := b.text("#status"); got != "echo: hello from Chromium" {
			t.Errorf("the page's WebSocket: %q", got)
		}
	})

	t.Run("AnotherUserGetsNotFound", func(t *testing.T) {
		b := startBrowser(t, e, front, "bob").on(t)
		b.open(page, `//input[@name="token"]`)
		b.signIn(bobToken, `//h1[contains(., "No such workspace")]`)
		if body := b.text("body"); strings.Contains(body, "webecho") || !strings.Contains(body, "no running workspace of yours") {
			t.Errorf("bob sees %q", body)
		}
		if loc := b.location(); !strings.HasPrefix(loc, e.srv.URL+"/") {
			t.Errorf("bob's browser is at %s", loc)
		}
		// Signed in as bob, the address is still nobody's workspace for him.
		b.open(page, `//h1[contains(., "No such workspace")]`)
		if body := b.text("body"); strings.Contains(body, "webecho") {
			t.Errorf("bob sees %q", body)
		}
	})

	t.Run("SignOutSendsTheOwnerBackToSignIn", func(t *testing.T) {
		if !signedIn {
			t.Fatal("needs the owner signed in by OwnerSignsInAndGetsThePage, which failed")
		}
		b := owner.on(t)
		b.open(e.srv.URL+"/signin", `//h1[. = "Signed in"]`)
		if body := b.text("body"); !strings.Contains(body, "signed in to Hangar as alice") {
			t.Errorf("the server's page: %q", body)
		}
		b.click(`//button[. = "Sign out"]`, `//h1[. = "Signed out"]`)
		signedOut := time.Now()
		// The proxy may answer from its cached decision (5 s) a little longer; then it refuses the
		// workspace session that the sign-out ended, and the browser has to sign in again.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			b.open(page, `//h1`)
			if b.text("h1") == "Sign in to Hangar" && strings.HasPrefix(b.location(), e.srv.URL+"/signin?") {
				t.Logf("sent to sign in %v after signing out", time.Since(signedOut).Round(time.Millisecond))
				break
			}
			if body := b.text("body"); !strings.Contains(body, "webecho on port 8080") {
				t.Fatalf("after sign-out the workspace's address shows %s: %q", b.location(), body)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the workspace still opens %v after signing out", time.Since(signedOut).Round(time.Millisecond))
			case <-tick.C:
			}
		}
	})
}

// loopbackFront listens on the host's loopback and relays each connection to the proxy inside the
// cluster's network namespace, where the browser (a process of the host) cannot reach it. It
// returns the address to map the workspace hosts to.
func (e *proxyEnv) loopbackFront(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go pipeTo(l, func(ctx context.Context) (net.Conn, error) { return e.cluster.DialInside(ctx, e.proxyAddr) })
	return l.Addr().String()
}

// chromium is a headless Chromium with a profile of its own.
type chromium struct {
	name string
	tab  context.Context // the browser's first tab (chromedp)
	out  *outputBuffer   // its output, for failure messages
}

// startBrowser starts Chromium with a fresh profile under t.TempDir(). Workspace hosts resolve to
// front (the proxy, through loopbackFront), the server is at 127.0.0.1 already, and no other name
// resolves: every connection stays on this machine's loopback. The proxy's certificate, from the
// test CA, is accepted by its key (--ignore-certificate-errors-spki-list), so the workspace is a
// secure origin as it is behind a real certificate. The browser is closed when t ends.
func startBrowser(t *testing.T, e *proxyEnv, front, name string) *chromium {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser test needs Debian's chromium at %s (.ci/run installs it: apt-get install chromium): %v", chromiumPath, err)
	}
	block, _ := pem.Decode(e.certPEM)
	if block == nil {
		t.Fatal("the proxy's certificate is not PEM")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)

	profile := filepath.Join(t.TempDir(), "chromium-"+name)
	// Runs after the browser is closed (cleanups run last first): its helper processes may write
	// to the profile a moment longer, so the removal is retried until they are gone.
	t.Cleanup(func() { removeWhenQuiet(t, profile) })
	var cmd *exec.Cmd
	c := &chromium{name: name, out: &outputBuffer{}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // the suite runs as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.Flag("host-resolver-rules", "MAP *."+proxyZone+" "+front+", MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
		chromedp.CombinedOutput(c.out),
		chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
			// A process group of its own, to end its helper processes with it; and killed if this
			// test process dies (chromedp's default, which this replaces).
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			cmd = c
		}),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab() // closes the browser
		cancelAlloc()
		if cmd != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what is left of its group
		}
		if t.Failed() {
			t.Logf("--- output of chromium (%s):\n%s", name, c.out.output())
		}
	})
	start := time.Now()
	if err := chromedp.Run(tab); err != nil { // starts it (bounded by chromedp's 20 s for its address)
		t.Fatalf("start chromium: %v\n%s", err, c.out.output())
	}
	t.Logf("chromium (%s) started in %v", name, time.Since(start).Round(time.Millisecond))
	c.tab = tab
	return c
}

// removeWhenQuiet removes dir, retrying for 10 s while processes still write into it.
func removeWhenQuiet(t testing.TB, dir string) {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := os.RemoveAll(dir)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("remove the browser's profile: %v", err)
			return
		}
		<-tick.C
	}
}

// tab is a browser as one (sub)test drives it.
type tab struct {
	t *testing.T
	c *chromium
}

func (c *chromium) on(t *testing.T) *tab { return &tab{t: t, c: c} }

// stepTimeout bounds each step: navigations, redirects and the wait for what a page shows.
const stepTimeout = 60 * time.Second

// run runs actions, failing the test with where the browser is and what it shows when they fail.
func (b *tab) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.c.tab, stepTimeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, body string
		sctx, scancel := context.WithTimeout(b.c.tab, 5*time.Second)
		defer scancel()
		_ = chromedp.Run(sctx, chromedp.Location(&loc), chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("timed out after " + stepTimeout.String())
		}
		b.t.Fatalf("%s (%s's browser): %v; the browser is at %s showing %q", what, b.c.name, err, loc, body)
	}
}

// open goes to address and waits until the page shows what the XPath waitFor finds.
func (b *tab) open(address, waitFor string) {
	b.t.Helper()
	b.run("open "+address, chromedp.Navigate(address), chromedp.WaitVisible(waitFor, chromedp.BySearch))
}

// click clicks the element the XPath sel finds and waits until the page shows what waitFor finds.
func (b *tab) click(sel, waitFor string) {
	b.t.Helper()
	b.run("click "+sel, chromedp.Click(sel, chromedp.BySearch), chromedp.WaitVisible(waitFor, chromedp.BySearch))
}

// signIn types token into the sign-in form, submits it and waits for what waitFor finds.
func (b *tab) signIn(token, waitFor string) {
	b.t.Helper()
	b.run("sign in", chromedp.SendKeys(`//input[@name="token"]`, token, chromedp.BySearch),
		chromedp.Click(`//button[@type="submit"]`, chromedp.BySearch), chromedp.WaitVisible(waitFor, chromedp.BySearch))
}

// text is the text of the first element the CSS selector sel finds, as shown.
func (b *tab) text(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return strings.TrimSpace(s)
}

// location is the address bar's.
func (b *tab) location() string {
	b.t.Helper()
	var s string
	b.run("read the address", chromedp.Location(&s))
	return s
}
