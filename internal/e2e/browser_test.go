package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// TestBrowser is the "done when": a user who created a workspace opens its URL in a real
// browser (headless Chromium), signs in on the server's page, and gets the workspace's page and a
// WebSocket from it; another user, signed in, gets the "No such workspace" page; signed out, the
// owner is sent back to sign in. It asserts what a user sees: page text and the address bar.
func TestBrowser(t *testing.T) {
	parallel(t)
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
		b := owner.On(t)
		// No session: the proxy sends the browser to the server's sign-in.
		b.Open(page+"some/path?x=1", `//input[@name="token"]`)
		if h1 := b.Text("h1"); h1 != "Sign in to Hangar" {
			t.Errorf("the sign-in page says %q", h1)
		}
		if loc := b.Location(); !strings.HasPrefix(loc, e.srv.URL+"/signin?") {
			t.Errorf("the sign-in page is at %s", loc)
		}
		// The token, and back to the workspace: the page the app serves, at the address asked for.
		b.SignIn(aliceToken, `//h1[contains(., "webecho on port 8080")]`)
		if loc := b.Location(); loc != page+"some/path?x=1" {
			t.Errorf("after sign-in the browser is at %s, want %s", loc, page+"some/path?x=1")
		}
		if body := b.Text("body"); !strings.Contains(body, "/some/path") {
			t.Errorf("the workspace's page: %q", body)
		}
		// Signed in, the address opens at once.
		b.Open(page, `//h1[contains(., "webecho on port 8080")]`)
		if loc := b.Location(); loc != page {
			t.Errorf("the workspace's address opens %s", loc)
		}
		signedIn = true
	})

	t.Run("WebSocketFromThePage", func(t *testing.T) {
		if !signedIn {
			t.Fatal("needs the owner signed in by OwnerSignsInAndGetsThePage, which failed")
		}
		b := owner.On(t)
		b.Open(page+"ws-echo?msg="+url.QueryEscape("hello from Chromium"), `//p[@id="status"][starts-with(., "echo: ") or . = "error"]`)
		if got := b.Text("#status"); got != "echo: hello from Chromium" {
			t.Errorf("the page's WebSocket: %q", got)
		}
	})

	t.Run("AnotherUserGetsNotFound", func(t *testing.T) {
		b := startBrowser(t, e, front, "bob").On(t)
		b.Open(page, `//input[@name="token"]`)
		b.SignIn(bobToken, `//h1[contains(., "No such workspace")]`)
		if body := b.Text("body"); strings.Contains(body, "webecho") || !strings.Contains(body, "no running workspace of yours") {
			t.Errorf("bob sees %q", body)
		}
		if loc := b.Location(); !strings.HasPrefix(loc, e.srv.URL+"/") {
			t.Errorf("bob's browser is at %s", loc)
		}
		// Signed in as bob, the address is still nobody's workspace for him.
		b.Open(page, `//h1[contains(., "No such workspace")]`)
		if body := b.Text("body"); strings.Contains(body, "webecho") {
			t.Errorf("bob sees %q", body)
		}
	})

	t.Run("SignOutSendsTheOwnerBackToSignIn", func(t *testing.T) {
		if !signedIn {
			t.Fatal("needs the owner signed in by OwnerSignsInAndGetsThePage, which failed")
		}
		b := owner.On(t)
		b.Open(e.srv.URL+"/signin", `//h1[. = "Signed in"]`)
		if body := b.Text("body"); !strings.Contains(body, "signed in to Hangar as alice") {
			t.Errorf("the server's page: %q", body)
		}
		b.Click(`//button[. = "Sign out"]`, `//h1[. = "Signed out"]`)
		signedOut := time.Now()
		// The proxy may answer from its cached decision (5 s) a little longer; then it refuses the
		// workspace session that the sign-out ended, and the browser has to sign in again.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			b.Open(page, `//h1`)
			if b.Text("h1") == "Sign in to Hangar" && strings.HasPrefix(b.Location(), e.srv.URL+"/signin?") {
				t.Logf("sent to sign in %v after signing out", time.Since(signedOut).Round(time.Millisecond))
				break
			}
			if body := b.Text("body"); !strings.Contains(body, "webecho on port 8080") {
				t.Fatalf("after sign-out the workspace's address shows %s: %q", b.Location(), body)
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

// startBrowser starts Chromium (browser.Start) for name. Workspace hosts resolve to front (the
// proxy, through loopbackFront), the server is at 127.0.0.1 already, and no other name resolves:
// every connection stays on this machine's loopback. The proxy's certificate, from the test CA, is
// accepted by its key, so the workspace is a secure origin as it is behind a real certificate.
func startBrowser(t *testing.T, e *proxyEnv, front, name string) *browser.Chromium {
	t.Helper()
	block, _ := pem.Decode(e.certPEM)
	if block == nil {
		t.Fatal("the proxy's certificate is not PEM")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return browser.Start(t, browser.Options{Name: name,
		ResolverRules: "MAP *." + proxyZone + " " + front + ", MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		SPKIList:      base64.StdEncoding.EncodeToString(spki[:])})
}
