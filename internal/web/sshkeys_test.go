package web_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// TestBrowserSSHKeys: the SSH keys page (hangar ssh-keys add/list/remove) in Chromium against a
// real server. A workspace's page sends a user without a key there; a malformed key gets the
// server's error next to the field, naming it, and nothing is stored; a real ed25519 key is listed
// with the fingerprint the server computes; the same key again is refused with the server's
// reason; the workspace's page no longer asks for a key; the key is removed behind the
// confirmation (dismissed first: it stays).
func TestBrowserSSHKeys(t *testing.T) {
	env := servertest.New(t)
	createAgent(t, env, "k1")
	bob := createUser(t, env, "bob")
	call(t, env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "devfile": devfile, "agent": "k1"}, nil)
	key := newKey(t)
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " bob@laptop\n"
	fingerprint := ssh.FingerprintSHA256(key)
	keys := func() []sdk.SSHKey {
		t.Helper()
		var l sdk.SSHKeyList
		call(t, env, bob, "GET", "/api/v1/users/me/ssh-keys", nil, &l)
		return l.SSHKeys
	}

	c := browser.Start(t, browser.Options{Name: "bob", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 800))
	b.Open(env.URL+"/ui/w/bob/dev", `//input[@name="token"]`)
	b.SignIn(bob, `//*[@data-testid="ws-ssh-nokey" and contains(., "add an SSH key first")]`)
	b.Click(`//a[@data-testid="ws-ssh-addkey"]`, `//*[@data-testid="keys-empty"]`)
	if loc := b.Location(); !strings.HasSuffix(loc, "/ui/ssh-keys") {
		t.Errorf("the link went to %s", loc)
	}

	// A malformed key: the server's validation, next to the field it names.
	b.Run("paste a malformed key", chromedp.SetValue(`//textarea[@data-testid="key-public"]`, "ssh-ed25519 not-a-key me@laptop", chromedp.BySearch))
	b.Click(`//button[@data-testid="key-submit"]`, `//textarea[@data-testid="key-public"]/following::*[1][@data-testid="key-public_key-error"]`)
	if msg := b.Text(`[data-testid="key-public_key-error"]`); !strings.Contains(msg, "public_key") || !strings.Contains(msg, "authorized_keys form") {
		t.Errorf("the malformed key's error reads %q, want the server's, naming public_key", msg)
	}
	var invalid, described string
	b.Run("the field is marked", chromedp.AttributeValue(`//textarea[@data-testid="key-public"]`, "aria-invalid", &invalid, nil, chromedp.BySearch),
		chromedp.AttributeValue(`//textarea[@data-testid="key-public"]`, "aria-describedby", &described, nil, chromedp.BySearch))
	if invalid != "true" || !strings.Contains(described, "key-public_key-error") {
		t.Errorf("the key's field: aria-invalid %q, aria-describedby %q", invalid, described)
	}
	if ks := keys(); len(ks) != 0 {
		t.Fatalf("the malformed key stored %d keys", len(ks))
	}

	// A private key is refused in the page, before anything is sent (as the CLI does).
	b.Run("paste a private key", chromedp.SetValue(`//textarea[@data-testid="key-public"]`, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", chromedp.BySearch))
	b.Click(`//button[@data-testid="key-submit"]`, `//*[@data-testid="key-public_key-error" and contains(., "is a private key")]`)
	if status, body := bearerGet(t, env, env.AdminToken, "/api/v1/audit?action=ssh_key.add"); status != http.StatusOK || strings.Count(body, `"outcome"`) != 1 {
		t.Errorf("after the private key the audit log holds: %d %s; want the malformed key's attempt only", status, body)
	}

	// The real key, named on the page.
	b.Run("paste the key", chromedp.SetValue(`//textarea[@data-testid="key-public"]`, authorized, chromedp.BySearch),
		chromedp.SendKeys(`//input[@data-testid="key-name"]`, "laptop", chromedp.BySearch))
	row := `//tr[@data-testid="key-row" and @data-name="laptop"]`
	b.Click(`//button[@data-testid="key-submit"]`, row+`//td[@data-testid="key-fingerprint" and text()="`+fingerprint+`"]`)
	if text := b.Text(`tr[data-testid="key-row"]`); !strings.Contains(text, "ssh-ed25519") {
		t.Errorf("the key's row reads %q, want its type", text)
	}
	ks := keys()
	if len(ks) != 1 || ks[0].Fingerprint != fingerprint || ks[0].Name != "laptop" {
		t.Fatalf("stored keys %+v, want laptop %s", ks, fingerprint)
	}
	screenshot(t, b, "ssh-keys")

	// The same key again: refused, with the server's reason.
	b.Run("paste it again", chromedp.SetValue(`//textarea[@data-testid="key-public"]`, authorized, chromedp.BySearch))
	b.Click(`//button[@data-testid="key-submit"]`, `//*[@data-testid="key-error" and contains(., "already registered")]`)

	// The workspace's page no longer asks for a key.
	b.Run("back to the workspace", chromedp.Navigate(env.URL+"/ui/w/bob/dev"), chromedp.WaitVisible(`//pre[@data-testid="ws-ssh-command"]`, chromedp.BySearch))
	var asks bool
	b.Run("look for the note", chromedp.Evaluate(`!!document.querySelector('[data-testid="ws-ssh-nokey"]')`, &asks))
	if asks {
		t.Error("with a key, the workspace's page still asks for one")
	}

	// Removal asks first; dismissed, the key stays; confirmed, it goes.
	b.Click(`//a[@data-testid="nav-ssh-keys"]`, row)
	b.Click(row+`//button[@data-testid="key-remove"]`, `//dialog[@data-testid="confirm" and contains(., "`+fingerprint+`")]//button[@data-testid="confirm-cancel"]`)
	b.Run("dismiss", chromedp.Click(`//button[@data-testid="confirm-cancel"]`, chromedp.BySearch), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	if ks := keys(); len(ks) != 1 {
		t.Fatalf("after a dismissed removal %d keys are stored", len(ks))
	}
	b.Click(row+`//button[@data-testid="key-remove"]`, `//button[@data-testid="confirm-ok" and text()="Remove"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//*[@data-testid="keys-empty"]`)
	if ks := keys(); len(ks) != 0 {
		t.Errorf("after the removal %d keys are stored", len(ks))
	}
}

// newKey is a fresh ed25519 SSH public key.
func newKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
