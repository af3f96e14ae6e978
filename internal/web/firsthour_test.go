package web_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// styledPage checks, in the browser, that the page open now has the UI's look (its top bar's
// background and font: the inline style was allowed by the strict CSP) and a link back to the UI at
// home.
func styledPage(t *testing.T, b *browser.Tab, what, home string) {
	t.Helper()
	var got struct {
		Bar  string `json:"bar"`
		Font string `json:"font"`
		Back string `json:"back"`
		Home string `json:"home"`
	}
	b.Run("the look of "+what, chromedp.Evaluate(`(() => {
		const bar = document.querySelector('header.top'), back = document.querySelector('a#back'), brand = document.querySelector('a.brand');
		return { bar: bar ? getComputedStyle(bar).backgroundColor : '', font: getComputedStyle(document.body).fontFamily,
			back: back ? back.href : '', home: brand ? brand.href : '' };
	})()`, &got))
	if got.Bar != "rgb(246, 248, 250)" || !strings.Contains(got.Font, "system-ui") {
		t.Errorf("%s is unstyled: top bar %q, font %q (want the UI's)", what, got.Bar, got.Font)
	}
	if got.Home != home {
		t.Errorf("%s's Hangar link goes to %q, want %q", what, got.Home, home)
	}
	if what != "the sign-in page" && got.Back != home {
		t.Errorf("%s's link back goes to %q, want %q", what, got.Back, home)
	}
}

const tfModuleV2 = `
# hangar:mutable
variable "region" {
  type    = string
  default = "eu"
}
# hangar:mutable
variable "zone" {
  type = string
}
`

// TestBrowserFirstHour: what a new user tripped over in the web UI (issue 21): the sign-in page and
// the server's and an app's error pages have the UI's look and a link back to it; the agent
// selector is not offered for a Terraform template; on a workspace's page, a parameter the active
// version added is "new" (and "required" only without a default), one it had is neither; the apps
// port box starts empty, with a placeholder, and its link shows once a port is typed.
func TestBrowserFirstHour(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1, func(o *server.Options) {
		o.Apps = server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test:7080"}
	})
	env.PushModule("vm", map[string]string{"main.tf": strings.Replace(tfModule, "%s", "1", 1)})
	ann := createUser(t, env.Env, "ann")
	home := env.URL + "/ui/"

	c := browser.Start(t, browser.Options{Name: "ann", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 900))

	// A sign-in error page, then the sign-in page it leads back to.
	b.Open(env.URL+"/signin?return_to=https%3A%2F%2Fexample.com%2F", `//h1[text()="Cannot sign in"]`)
	styledPage(t, b, "the sign-in error page", home)
	b.Click(`//a[@id="back"]`, `//input[@name="token"]`)
	styledPage(t, b, "the sign-in page", home)
	screenshot(t, b, "signin")

	// The create form: no agent for a Terraform template; for a devfile, one.
	b.Open(env.URL+"/ui/new", `//input[@name="token"]`)
	b.SignIn(ann, `//*[@data-testid="create-form"]`)
	agentShown := func() bool {
		var shown bool
		b.Run("is the agent selector shown", chromedp.Evaluate(`document.querySelector('[data-testid="create-agent"]').offsetParent !== null`, &shown))
		return shown
	}
	b.Run("choose the template", chromedp.WaitReady(`//select[@data-testid="create-template"]/option[@value="vm"]`, chromedp.BySearch),
		chromedp.SetValue(`//select[@data-testid="create-template"]`, "vm", chromedp.BySearch),
		chromedp.Evaluate(`document.querySelector('[data-testid="create-template"]').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitVisible(`//input[@data-testid="param-size"]`, chromedp.BySearch))
	if agentShown() {
		t.Error("the create form offers an agent for a Terraform template")
	}
	b.Run("a devfile", chromedp.Click(`//input[@data-testid="create-source-devfile"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//textarea[@data-testid="create-devfile"]`, chromedp.BySearch))
	if !agentShown() {
		t.Error("the create form offers no agent for a devfile")
	}

	// A workspace on v1; v2 adds region (a default) and zone (none).
	call(t, env.Env, ann, "POST", "/api/v1/workspaces", map[string]any{"name": "vm1", "template": "vm"}, nil)
	env.PushModule("vm", map[string]string{"main.tf": strings.Replace(tfModule, "%s", "2", 1) + tfModuleV2})
	b.Open(env.URL+"/ui/w/ann/vm1", `//input[@data-testid="uparam-zone"]`)
	for name, want := range map[string]string{"size": "size", "region": "region (new)", "zone": "zone (new, required)"} {
		label := b.Text(`[data-testid="uparam-label-` + name + `"]`)
		if first, _, _ := strings.Cut(label, "\n"); strings.TrimSpace(first) != want {
			t.Errorf("the parameter %s is labelled %q, want %q", name, first, want)
		}
	}

	// Deleting it says what goes for a Terraform workspace (not "its volume").
	b.Click(`//button[@data-testid="ws-delete"]`, `//dialog[@data-testid="confirm" and contains(., "terraform destroy deletes the workspace’s resources. This cannot be undone.")]`)
	if text := b.Text(`dialog[data-testid="confirm"]`); strings.Contains(text, "volume") {
		t.Errorf("the delete dialog of a Terraform workspace reads %q", text)
	}
	b.Run("keep it", chromedp.Click(`//button[@data-testid="confirm-cancel"]`, chromedp.BySearch), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))

	// The apps port box.
	var port struct {
		Value, Placeholder string
		LinkShown          bool
	}
	readPort := func() {
		b.Run("read the port box", chromedp.WaitVisible(`//input[@data-testid="ws-app-port"]`, chromedp.BySearch),
			chromedp.Evaluate(`(() => { const p = document.querySelector('[data-testid="ws-app-port"]'), l = document.querySelector('[data-testid="ws-app-port-link"]');
				return { Value: p.value, Placeholder: p.placeholder, LinkShown: l.offsetParent !== null }; })()`, &port))
	}
	readPort()
	if port.Value != "" || port.Placeholder != "a port, e.g. 8080" || port.LinkShown {
		t.Errorf("the apps port box starts at %q (placeholder %q, link shown %v): want empty, with a placeholder, no link", port.Value, port.Placeholder, port.LinkShown)
	}
	b.Run("type a port", chromedp.SendKeys(`//input[@data-testid="ws-app-port"]`, "3000", chromedp.BySearch))
	readPort()
	if link := b.Text(`[data-testid="ws-app-port-link"]`); !port.LinkShown || link != "http://3000-vm1--ann.apps.test/" {
		t.Errorf("with port 3000 the link reads %q (shown %v)", link, port.LinkShown)
	}

	// The admin's provisioners page shows the built-in provisioner that ran vm1's build, and so
	// does the API.
	var ps []sdk.Provisioner
	call(t, env.Env, env.AdminToken, "GET", "/api/v1/provisioners", nil, &ps)
	if len(ps) != 1 || !ps[0].BuiltIn || ps[0].Name != "built-in" || ps[0].Daemons != 1 || ps[0].LastSeenAt == nil {
		t.Errorf("GET /api/v1/provisioners = %+v, want the built-in provisioner with its 1 daemon", ps)
	}
	b.Run("sign out", chromedp.Click(`//button[@data-testid="signout"]`, chromedp.BySearch), chromedp.WaitVisible(`//h1[text()="Signed out"]`, chromedp.BySearch))
	b.Open(env.URL+"/ui/admin/provisioners", `//input[@name="token"]`)
	b.SignIn(env.AdminToken, `//h1[text()="Provisioners"]`)
	if text := b.Text(`main`); strings.Contains(text, "No provisioner") || !strings.Contains(text, "built-in (in the server, 1 daemon)") {
		t.Errorf("the provisioners page reads %q: want the built-in provisioner", text)
	}

	// An app's error page, as the access proxy (and the server's apps) answer it.
	app := httptest.NewServer(proxy.NewHandler(proxy.Options{ServerURL: env.URL, Zone: "apps.test"}))
	t.Cleanup(app.Close)
	b.Open(app.URL+"/", `//h1[text()="No such workspace"]`)
	styledPage(t, b, "an app's error page", home)
	screenshot(t, b, "app-error")
	b.Click(`//a[@id="back"]`, `//h1[text()="Workspaces"]`)
}
