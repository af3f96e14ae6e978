package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// TestBrowserConfirmDialogKeyboard: the confirmation dialog in Chromium, by keyboard and in quick
// succession. Escape dismisses it (nothing removed); a dismissal followed at once by a new opening
// (in the same task, before the first closing's queued close event) leaves the new opening
// waiting, and its confirmation is acted on; Enter on the focused dismiss button dismisses.
func TestBrowserConfirmDialogKeyboard(t *testing.T) {
	env := servertest.New(t)
	bob := createUser(t, env, "bob")
	key := newKey(t)
	call(t, env, bob, "POST", "/api/v1/users/me/ssh-keys", map[string]any{"name": "laptop", "public_key": strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))}, nil)
	keys := func() int {
		t.Helper()
		var l sdk.SSHKeyList
		call(t, env, bob, "GET", "/api/v1/users/me/ssh-keys", nil, &l)
		return len(l.SSHKeys)
	}

	c := browser.Start(t, browser.Options{Name: "bob", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Open(env.URL+"/ui/ssh-keys", `//input[@name="token"]`)
	row := `//tr[@data-testid="key-row" and @data-name="laptop"]`
	b.SignIn(bob, row)
	remove := row + `//button[@data-testid="key-remove"]`

	// Escape: dismissed, closed, the key stays.
	b.Click(remove, `//dialog[@data-testid="confirm" and @open]//button[@data-testid="confirm-cancel"]`)
	b.Run("escape", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	if n := keys(); n != 1 {
		t.Fatalf("after Escape %d keys are stored", n)
	}
	// Enter on the focused button (the dismiss one): dismissed.
	b.Click(remove, `//dialog[@data-testid="confirm" and @open]`)
	b.Run("enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	if n := keys(); n != 1 {
		t.Fatalf("after Enter on the focused dismiss button %d keys are stored", n)
	}

	// Dismissed and opened again in one task: the new opening waits for its own answer.
	b.Click(remove, `//dialog[@data-testid="confirm" and @open]`)
	var open bool
	b.Run("dismiss and reopen at once", chromedp.Evaluate(`new Promise((resolve) => {
		const d = document.getElementById('confirm');
		d.addEventListener('close', () => resolve(d.open), { once: true }); // after the page's own listener
		document.querySelector('[data-testid="confirm-cancel"]').click();
		document.querySelector('[data-testid="key-remove"]').click();
	})`, &open, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if !open {
		t.Fatal("the dialog opened again at once was closed by the first closing's close event")
	}
	b.Click(`//button[@data-testid="confirm-ok"]`, `//*[@data-testid="keys-empty"]`)
	if n := keys(); n != 0 {
		t.Errorf("after the confirmation %d keys are stored", n)
	}
}
