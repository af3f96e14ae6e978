package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

const tfModule = `variable "start_count" {
  type = number
}
variable "size" {
  type        = string
  default     = "small"
  description = "The machine's size"
}
variable "secret" {
  type        = string
  sensitive   = true
  default     = "changeme"
  description = "A password for the machine"
}
resource "terraform_data" "home" {
  count = var.start_count
  input = var.size
  provisioner "local-exec" {
    command = "echo hello-from-the-build size=${var.size} version=%s"
  }
}
`

// TestBrowserTerraform: a Terraform template in the page (real terraform in the server's
// provisioner). The creation form shows the template's parameters with their types, defaults and
// descriptions, the sensitive one as a password field, and a preset that sets them; the
// build's log streams into the workspace's page and the state becomes Running without a reload;
// once a new version is active, Update builds it; the admin promotes the first version back.
func TestBrowserTerraform(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1)
	env.PushModule("vm", map[string]string{"main.tf": strings.Replace(tfModule, "%s", "1", 1)})
	call(t, env.Env, env.AdminToken, "PUT", "/api/v1/templates/vm/presets/big", sdk.PutPresetRequest{Parameters: map[string]string{"size": "large"}}, nil)
	ann := createUser(t, env.Env, "ann")

	c := browser.Start(t, browser.Options{Name: "ann", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))
	b.Open(env.URL+"/ui/new", `//input[@name="token"]`)
	b.SignIn(ann, `//*[@data-testid="create-form"]`)
	b.Run("choose the template", chromedp.WaitReady(`//select[@data-testid="create-template"]/option[@value="vm"]`, chromedp.BySearch),
		chromedp.SetValue(`//select[@data-testid="create-template"]`, "vm", chromedp.BySearch),
		chromedp.Evaluate(`document.querySelector('[data-testid="create-template"]').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitVisible(`//input[@data-testid="param-secret" and @type="password"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//label[contains(., "The machine's size") and contains(., "default small")]//input[@data-testid="param-size"]`, chromedp.BySearch),
		chromedp.WaitReady(`//select[@data-testid="create-preset"]/option[@value="big"]`, chromedp.BySearch))
	if strings.Contains(b.Text(`[data-testid="create-params"]`), "start_count") {
		t.Error("the form asks for start_count, which Hangar sets itself")
	}
	b.Run("choose the preset, fill in the rest",
		chromedp.SetValue(`//select[@data-testid="create-preset"]`, "big", chromedp.BySearch),
		chromedp.Evaluate(`document.querySelector('[data-testid="create-preset"]').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitVisible(`//input[@data-testid="param-size"]`, chromedp.BySearch))
	var size string
	var locked bool
	b.Run("read the size", chromedp.Value(`//input[@data-testid="param-size"]`, &size, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelector('[data-testid="param-size"]').disabled`, &locked))
	if size != "large" || !locked {
		t.Errorf("the preset set size to %q (locked %v), want large, locked", size, locked)
	}
	screenshot(t, b, "create-template")
	b.Run("name it", chromedp.SendKeys(`//input[@data-testid="create-name"]`, "vm1", chromedp.BySearch))
	b.Click(`//button[@data-testid="create-submit"]`, `//*[@data-testid="ws-logs"]`)

	// The build's log streams in; the state follows without a reload.
	b.Run("the log", chromedp.WaitVisible(`//pre[@data-testid="ws-logs" and contains(., "hello-from-the-build size=large version=1")]`, chromedp.BySearch))
	b.Run("Running", chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Running"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//*[@data-testid="ws-logs-status" and contains(., "succeeded")]`, chromedp.BySearch))
	if logs := b.Text(`[data-testid="ws-logs"]`); strings.Contains(logs, "undefined") {
		t.Errorf("the log shows %q", logs)
	}
	if props := b.Text(`[data-testid="ws-props"]`); strings.Contains(props, "changeme") || !strings.Contains(props, "size = large") {
		t.Errorf("the workspace's parameters read %q: want size = large, and the sensitive value hidden", props)
	}

	b.Run("to the logs", chromedp.ScrollIntoView(`//pre[@data-testid="ws-logs"]`, chromedp.BySearch))
	screenshot(t, b, "workspace-terraform")

	// A new version: Update builds it.
	env.PushModule("vm", map[string]string{"main.tf": strings.Replace(tfModule, "%s", "2", 1)})
	b.Run("reload", chromedp.Reload(), chromedp.WaitVisible(`//*[@data-testid="ws-outdated"]`, chromedp.BySearch))
	b.Click(`//button[@data-testid="ws-update"]`, `//pre[@data-testid="ws-logs" and contains(., "version=2")]`)
	b.Run("updated", chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Running"]`, chromedp.BySearch),
		chromedp.WaitNotPresent(`//*[@data-testid="ws-outdated"]`, chromedp.BySearch))

	// The admin promotes version 1 back, after a confirmation.
	b.Run("sign out", chromedp.Click(`//button[@data-testid="signout"]`, chromedp.BySearch), chromedp.WaitVisible(`//h1[text()="Signed out"]`, chromedp.BySearch))
	b.Open(env.URL+"/ui/admin/templates", `//input[@name="token"]`)
	b.SignIn(env.AdminToken, `//tr[@data-testid="template-row" and @data-name="vm"]`)
	b.Click(`//tr[@data-name="vm"]//a`, `//tr[@data-testid="version-row" and @data-number="2" and @data-active="true"]`)
	screenshot(t, b, "admin-template")
	b.Click(`//tr[@data-number="1"]//button[@data-testid="version-promote"]`, `//button[@data-testid="confirm-ok"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//tr[@data-testid="version-row" and @data-number="1" and @data-active="true"]`)
	var tmpl sdk.Template
	call(t, env.Env, env.AdminToken, "GET", "/api/v1/templates/vm", nil, &tmpl)
	if tmpl.ActiveVersion != 1 {
		t.Errorf("after the promotion the active version is %d, want 1", tmpl.ActiveVersion)
	}
	b.Click(`//a[@data-testid="nav-provisioners"]`, `//h1[text()="Provisioners"]`)
}
