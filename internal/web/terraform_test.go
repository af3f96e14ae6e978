package web_test

import (
	"strconv"
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
# hangar:mutable
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
	// Its helper has not connected (the module has no machine): the page says it is waiting.
	if got := b.Text(`[data-testid="ws-helper-status"]`); got != "waiting" {
		t.Errorf("the helper's status reads %q, want waiting", got)
	}
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
	// Running: the update (a stop and a start) asks first; dismissed, nothing is built.
	b.Click(`//button[@data-testid="ws-update"]`, `//button[@data-testid="confirm-ok" and text()="Update"]`)
	b.Click(`//button[@data-testid="confirm-cancel"]`, `//button[@data-testid="ws-update" and not(@disabled)]`)
	var builds []sdk.Build
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1/builds", nil, &builds)
	if len(builds) != 1 {
		t.Fatalf("a dismissed update made builds: the workspace has %d, want 1", len(builds))
	}
	b.Click(`//button[@data-testid="ws-update"]`, `//button[@data-testid="confirm-ok" and text()="Update"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//pre[@data-testid="ws-logs" and contains(., "version=2")]`)
	b.Run("updated", chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Running"]`, chromedp.BySearch),
		chromedp.WaitNotPresent(`//*[@data-testid="ws-outdated"]`, chromedp.BySearch))

	// A mutable parameter changes on the page, as hangar update --parameter does: the workspace is
	// built again with the new value. The immutable ones are not offered.
	b.Run("the parameters form", chromedp.WaitVisible(`//input[@data-testid="uparam-size"]`, chromedp.BySearch))
	if form := b.Text(`[data-testid="params-form"]`); strings.Contains(form, "secret") {
		t.Errorf("the parameters form offers the immutable secret: %q", form)
	}
	b.Run("nothing changed", chromedp.Click(`//button[@data-testid="params-save"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//*[@data-testid="params-error" and contains(., "Nothing to change")]`, chromedp.BySearch))
	b.Run("change the size", chromedp.SetValue(`//input[@data-testid="uparam-size"]`, "medium", chromedp.BySearch))
	// Running: saving (a stop and a start) asks first, as Update does; dismissed, nothing is built.
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1/builds", nil, &builds)
	before := len(builds)
	b.Click(`//button[@data-testid="params-save"]`, `//dialog[@data-testid="confirm" and contains(., "these values")]//button[@data-testid="confirm-ok" and text()="Update"]`)
	b.Click(`//button[@data-testid="confirm-cancel"]`, `//button[@data-testid="params-save" and not(@disabled)]`)
	b.Run("dialog closed", chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1/builds", nil, &builds)
	if len(builds) != before {
		t.Fatalf("a dismissed change of parameters made builds: the workspace has %d, want %d", len(builds), before)
	}
	b.Click(`//button[@data-testid="params-save"]`, `//button[@data-testid="confirm-ok" and text()="Update"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//pre[@data-testid="ws-logs" and contains(., "size=medium version=2")]`)
	b.Run("changed", chromedp.WaitVisible(`//*[@data-testid="ws-props" and contains(., "size = medium")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Running"]`, chromedp.BySearch))
	var ws sdk.Workspace
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1", nil, &ws)
	for _, p := range ws.Parameters {
		if p.Name == "size" && p.Value != "medium" {
			t.Errorf("after the change on the page size is %q", p.Value)
		}
	}

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
	// Delete, after a confirmation: refused while ann's workspace and the preset use the template,
	// the page saying which; the template stays.
	b.Click(`//button[@data-testid="template-delete"]`, `//button[@data-testid="confirm-ok"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//p[@data-testid="template-delete-error" and contains(., "is used by 1 workspace that is not deleted (ann/vm1)") and contains(., "preset big")]`)
	call(t, env.Env, env.AdminToken, "GET", "/api/v1/templates/vm", nil, &tmpl)
	b.Click(`//a[@data-testid="nav-provisioners"]`, `//h1[text()="Provisioners"]`)
}

// slowModule's start runs a command that says it started, then sleeps 30 s (the test does not
// wait for it: it cancels the build, and terraform interrupts the command). Its stop has nothing to
// run (start_count 0).
const slowModule = `variable "start_count" {
  type = number
}
resource "terraform_data" "slow" {
  count = var.start_count
  provisioner "local-exec" {
    command = "echo slow-started; sleep 30"
  }
}
`

// TestBrowserTerraformBuilds: a Terraform workspace's builds on its page, as hangar builds, logs
// and cancel give them (real terraform in the server's provisioner). The running build is listed
// (number, transition, status, who) with its log streaming; Cancel asks first, then the build
// becomes canceled on the page without a reload, with the reason in its row, and the workspace
// Canceled with what to do next; a stop's build then appears above it and its log replaces the first; the
// user picks the first build's log again.
func TestBrowserTerraformBuilds(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1)
	env.PushModule("slow", map[string]string{"main.tf": slowModule})
	ann := createUser(t, env.Env, "ann")
	call(t, env.Env, ann, "POST", "/api/v1/workspaces", map[string]any{"name": "vm1", "template": "slow"}, nil)

	c := browser.Start(t, browser.Options{Name: "ann", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))
	b.Open(env.URL+"/ui/w/ann/vm1", `//input[@name="token"]`)
	row := func(n int) string { return `//tr[@data-testid="build-row" and @data-number="` + strconv.Itoa(n) + `"]` }
	b.SignIn(ann, `//pre[@data-testid="ws-logs" and contains(., "slow-started")]`)
	b.Run("build #1 running", chromedp.WaitVisible(row(1)+`[@data-status="running"]//button[@data-testid="build-cancel"]`, chromedp.BySearch))
	if text := b.Text(`tr[data-testid="build-row"][data-number="1"]`); !strings.Contains(text, "start") || !strings.Contains(text, "ann") {
		t.Errorf("build #1's row reads %q: want its transition and who started it", text)
	}
	if title := b.Text(`[data-testid="ws-logs-title"]`); title != "Log of build #1" {
		t.Errorf("the log is titled %q", title)
	}

	// Cancel asks first.
	b.Click(row(1)+`//button[@data-testid="build-cancel"]`, `//dialog[@data-testid="confirm" and contains(., "Cancel build #1 of vm1?")]//button[@data-testid="confirm-cancel" and text()="Let it run"]`)
	b.Run("let it run", chromedp.Click(`//button[@data-testid="confirm-cancel"]`, chromedp.BySearch), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	var bl sdk.Build
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1/builds/1", nil, &bl)
	if bl.Status != "running" {
		t.Fatalf("after a dismissed cancel build #1 is %s", bl.Status)
	}
	b.Click(row(1)+`//button[@data-testid="build-cancel"]`, `//button[@data-testid="confirm-ok" and text()="Cancel the build"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//*[@data-testid="toast" and starts-with(., "Build #1 is cancel")]`)
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1/builds/1", nil, &bl)
	if bl.Status != "canceling" && bl.Status != "canceled" || bl.CanceledAt == nil {
		t.Fatalf("after the cancel on the page build #1 is %s (canceled at %v)", bl.Status, bl.CanceledAt)
	}
	b.Run("canceled live", chromedp.WaitVisible(row(1)+`[@data-status="canceled"]//td[@data-testid="build-error" and contains(., "canceled by ann")]`, chromedp.BySearch))
	b.Run("canceled", chromedp.WaitVisible(`//*[@data-testid="ws-logs-status" and text()="build canceled"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//*[@data-testid="ws-detail-error" and starts-with(., "Canceled: build #1 (start) was canceled by ann; start, stop or delete the workspace")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Canceled"]`, chromedp.BySearch),
		chromedp.WaitNotVisible(row(1)+`//button[@data-testid="build-cancel"]`, chromedp.BySearch))
	call(t, env.Env, ann, "GET", "/api/v1/workspaces/vm1/builds/1", nil, &bl)
	if bl.Status != "canceled" || !strings.HasPrefix(bl.Error, "canceled by ann") || bl.CompletedAt == nil {
		t.Errorf("build #1 after the cancel on the page: %s %q", bl.Status, bl.Error)
	}
	if ended := b.Text(`tr[data-testid="build-row"][data-number="1"] [data-testid="build-ended"]`); ended == "" {
		t.Error("the canceled build's row shows no end")
	}
	b.Run("to the builds", chromedp.ScrollIntoView(`//table[@data-testid="builds-table"]`, chromedp.BySearch))
	screenshot(t, b, "workspace-builds")

	// Stop: its build appears above the first, and its log is shown.
	b.Click(`//button[@data-testid="ws-stop"]`, row(2)+`[@data-status="succeeded"]//td[@data-testid="build-transition" and text()="stop"]`)
	b.Run("the stop's log", chromedp.WaitVisible(`//*[@data-testid="ws-logs-title" and text()="Log of build #2"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//*[@data-testid="ws-logs-status" and text()="build succeeded"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//tbody[@data-testid="builds-rows"]/tr[1][@data-number="2"]`, chromedp.BySearch))
	if logs := b.Text(`[data-testid="ws-logs"]`); strings.Contains(logs, "slow-started") {
		t.Errorf("the stop's log shows the start's: %q", logs)
	}
	// The user picks the first build's log.
	b.Click(row(1)+`//button[@data-testid="build-log"]`, `//pre[@data-testid="ws-logs" and contains(., "slow-started")]`)
	b.Run("its status", chromedp.WaitVisible(`//*[@data-testid="ws-logs-status" and text()="build canceled"]`, chromedp.BySearch),
		chromedp.WaitVisible(row(1)+`//button[@data-testid="build-log" and @aria-pressed="true"]`, chromedp.BySearch))
}

// failingModule's start always fails, as a template whose machines cannot be had would.
const failingModule = `variable "start_count" {
  type = number
}
resource "terraform_data" "machine" {
  count = var.start_count
  provisioner "local-exec" {
    command = "echo no capacity left >&2; exit 3"
  }
}
`

// TestBrowserFailingPreset: a preset whose pool keeps failing (real terraform) says so, with its
// last error, where the page offers it: the creation form's preset choice.
func TestBrowserFailingPreset(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1)
	env.PushModule("vm", map[string]string{"main.tf": failingModule})
	call(t, env.Env, env.AdminToken, "PUT", "/api/v1/templates/vm/presets/small", sdk.PutPresetRequest{Instances: 1}, nil)
	if res, err := env.Server.Prebuilds().Tick(env.Ctx); err != nil || res.Created != 1 {
		t.Fatalf("tick: %+v, %v", res, err)
	}
	env.WaitBuilds(1)
	ann := createUser(t, env.Env, "ann")

	c := browser.Start(t, browser.Options{Name: "ann", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Open(env.URL+"/ui/new", `//input[@name="token"]`)
	b.SignIn(ann, `//*[@data-testid="create-form"]`)
	b.Run("choose the template", chromedp.WaitReady(`//select[@data-testid="create-template"]/option[@value="vm"]`, chromedp.BySearch),
		chromedp.SetValue(`//select[@data-testid="create-template"]`, "vm", chromedp.BySearch),
		chromedp.Evaluate(`document.querySelector('[data-testid="create-template"]').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitReady(`//select[@data-testid="create-preset"]/option[@value="small" and contains(., "failing: 1 prebuild creates failed in a row; last: terraform apply: exit status 1") and contains(@title, "no capacity left")]`, chromedp.BySearch))
}
