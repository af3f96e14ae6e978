// Package browser drives Debian's Chromium headless (chromedp) for end-to-end tests: a browser
// with a profile of its own whose host names resolve only as the test says, and a tab that fails
// the test with where the browser is and what it shows when a step does not happen.
package browser

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's chromium, which .ci/run installs.
const ChromiumPath = "/usr/bin/chromium"

// StepTimeout bounds each step: navigations, redirects and the wait for what a page shows.
const StepTimeout = 60 * time.Second

// Options configure Start.
type Options struct {
	// Name tells browsers apart in messages (the user it plays).
	Name string
	// ResolverRules is Chromium's --host-resolver-rules: the test's names to its addresses, and
	// every other name to nothing, so that every connection stays where the test put it.
	ResolverRules string
	// SPKIList, when set, is --ignore-certificate-errors-spki-list: certificates with these
	// (base64 SHA-256) keys are accepted, as behind a real certificate.
	SPKIList string
}

// Chromium is a headless Chromium with a profile of its own.
type Chromium struct {
	name string
	tab  context.Context // the browser's first tab (chromedp)
	out  *output
}

// Start starts Chromium with a fresh profile under t.TempDir(); it is closed when t ends.
func Start(t *testing.T, o Options) *Chromium {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("the browser test needs Debian's chromium at %s (.ci/run installs it: apt-get install chromium): %v", ChromiumPath, err)
	}
	profile := filepath.Join(t.TempDir(), "chromium-"+o.Name)
	// Runs after the browser is closed (cleanups run last first): its helper processes may write
	// to the profile a moment longer, so the removal is retried until they are gone.
	t.Cleanup(func() { removeWhenQuiet(t, profile) })
	var cmd *exec.Cmd
	c := &Chromium{name: o.Name, out: &output{}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // the suite runs as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.Flag("host-resolver-rules", o.ResolverRules),
		chromedp.CombinedOutput(c.out),
		chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
			// A process group of its own, to end its helper processes with it; and killed if this
			// test process dies (chromedp's default, which this replaces).
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			cmd = c
		}),
	}
	if o.SPKIList != "" {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", o.SPKIList))
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
			t.Logf("--- output of chromium (%s):\n%s", o.Name, c.out.String())
		}
	})
	start := time.Now()
	if err := chromedp.Run(tab); err != nil { // starts it (bounded by chromedp's 20 s for its address)
		t.Fatalf("start chromium: %v\n%s", err, c.out.String())
	}
	t.Logf("chromium (%s) started in %v", o.Name, time.Since(start).Round(time.Millisecond))
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

// output keeps the last 64 KiB the browser wrote.
type output struct {
	mu  sync.Mutex
	buf []byte
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, b...)
	if len(o.buf) > 64<<10 {
		o.buf = o.buf[len(o.buf)-64<<10:]
	}
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

// Tab is a browser as one (sub)test drives it.
type Tab struct {
	t *testing.T
	c *Chromium
}

// On returns the browser's tab for t.
func (c *Chromium) On(t *testing.T) *Tab { return &Tab{t: t, c: c} }

// Run runs actions, failing the test with where the browser is and what it shows when they fail.
func (b *Tab) Run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	b.RunWithin(StepTimeout, what, actions...)
}

// RunWithin is Run with a time limit of its own, for a step that waits on real work (a pod that
// starts, a container that stops).
func (b *Tab) RunWithin(limit time.Duration, what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.c.tab, limit)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, body string
		sctx, scancel := context.WithTimeout(b.c.tab, 5*time.Second)
		defer scancel()
		_ = chromedp.Run(sctx, chromedp.Location(&loc), chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("timed out after " + limit.String())
		}
		b.t.Fatalf("%s (%s's browser): %v; the browser is at %s showing %q", what, b.c.name, err, loc, body)
	}
}

// Open goes to address and waits until the page shows what the XPath waitFor finds.
func (b *Tab) Open(address, waitFor string) {
	b.t.Helper()
	b.Run("open "+address, chromedp.Navigate(address), chromedp.WaitVisible(waitFor, chromedp.BySearch))
}

// Click clicks the element the XPath sel finds and waits until the page shows what waitFor finds.
func (b *Tab) Click(sel, waitFor string) {
	b.t.Helper()
	b.Run("click "+sel, chromedp.Click(sel, chromedp.BySearch), chromedp.WaitVisible(waitFor, chromedp.BySearch))
}

// SignIn types token into Hangar's sign-in form, submits it and waits for what waitFor finds.
func (b *Tab) SignIn(token, waitFor string) {
	b.t.Helper()
	b.Run("sign in", chromedp.SendKeys(`//input[@name="token"]`, token, chromedp.BySearch),
		chromedp.Click(`//button[@type="submit"]`, chromedp.BySearch), chromedp.WaitVisible(waitFor, chromedp.BySearch))
}

// Text is the text of the first element the CSS selector sel finds, as shown.
func (b *Tab) Text(sel string) string {
	b.t.Helper()
	var s string
	b.Run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return strings.TrimSpace(s)
}

// Location is the address bar's.
func (b *Tab) Location() string {
	b.t.Helper()
	var s string
	b.Run("read the address", chromedp.Location(&s))
	return s
}
