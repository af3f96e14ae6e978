package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestBrowserUI drives the web UI in Debian's Chromium against a real server (SQLite, the real
// HTTP server, a fake agent answering through the real reconcile API): sign in with a token, see
// the list, create a workspace from a devfile, watch it become Running in the list without a
// reload, stop it, read a failure's reason, and open the admin's pages. It measures what
// docs/benchmarks.md records ("Web UI"): the first paint, the page weight, the time from a store
// change to the page showing it (with 1 and with 1,000 workspaces), and checks that the page asks
// nothing of any other address. HANGAR_SCREENSHOTS=DIR saves the main pages as PNG there.
func TestBrowserUI(t *testing.T) {
	env := servertest.New(t)
	agent := createAgent(t, env, "k1")
	alice := createUser(t, env, "alice")

	c := browser.Start(t, browser.Options{Name: "alice", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 800))
	shot := func(name string) { t.Helper(); screenshot(t, b, name) }
	eval := func(what, js string, out any) {
		t.Helper()
		b.Run(what, chromedp.Evaluate(js, out))
	}
	row := func(name string) string { return `//tr[@data-testid="ws-row" and @data-name="` + name + `"]` }
	rowState := func(name, state string) string {
		return row(name) + `//span[@data-testid="ws-actual-state" and text()="` + state + `"]`
	}

	// Signed out, / goes to the sign-in, which comes back to the list.
	b.Open(env.URL+"/", `//input[@name="token"]`)
	if loc := b.Location(); !strings.Contains(loc, "/signin?return_to=%2Fui%2F") {
		t.Fatalf("signed out, / went to %s", loc)
	}
	b.SignIn(alice, `//*[@data-testid="ws-empty"]`)
	if who := b.Text(`[data-testid="whoami"]`); who != "alice" {
		t.Errorf("the page says it is %q's", who)
	}
	b.Run("the stream is live", chromedp.WaitVisible(`//*[@data-testid="live" and text()="live"]`, chromedp.BySearch))

	// First paint and page weight of a fresh load of the list.
	b.Run("reload", chromedp.Reload(), chromedp.WaitVisible(`//*[@data-testid="ws-empty"]`, chromedp.BySearch))
	var perf struct {
		FCP       float64 `json:"fcp"`
		DocBytes  int     `json:"doc"`
		Resources []struct {
			Name      string `json:"name"`
			Initiator string `json:"initiator"`
			Transfer  int    `json:"transfer"`
			Body      int    `json:"body"`
			Decoded   int    `json:"decoded"`
		} `json:"resources"`
	}
	// The paint's entry may come a moment after the page shows: wait for it (buffered).
	b.Run("performance entries", chromedp.Evaluate(`(async () => {
		const nav = performance.getEntriesByType('navigation')[0];
		const fcp = await new Promise((resolve) => {
			const e = performance.getEntriesByName('first-contentful-paint')[0];
			if (e) return resolve(e.startTime);
			new PerformanceObserver((l) => {
				for (const x of l.getEntries()) if (x.name === 'first-contentful-paint') resolve(x.startTime);
			}).observe({ type: 'paint', buffered: true });
		});
		return { fcp, doc: nav.transferSize,
			resources: performance.getEntriesByType('resource').map(r => ({ name: r.name, initiator: r.initiatorType, transfer: r.transferSize, body: r.encodedBodySize, decoded: r.decodedBodySize })) };
	})()`, &perf, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	assetsSent, assetsRaw := perf.DocBytes, 0
	for _, r := range perf.Resources {
		if !strings.HasPrefix(r.Name, env.URL+"/") {
			t.Errorf("the page asked %s of another address", r.Name)
		}
		if strings.Contains(r.Name, "/ui/assets/") {
			assetsSent += r.Body
			assetsRaw += r.Decoded
		}
	}
	t.Logf("first contentful paint %.0f ms; page weight %d bytes sent (%d bytes of assets uncompressed, %d requests)", perf.FCP, assetsSent, assetsRaw, len(perf.Resources))
	if perf.FCP < 0 || perf.FCP > 1000 {
		t.Errorf("first contentful paint at %.0f ms, want under 1 s", perf.FCP)
	}
	shot("workspaces-empty")

	// Create a workspace from a devfile.
	b.Click(`//a[@data-testid="ws-new"]`, `//*[@data-testid="create-form"]`)
	b.Run("fill the form",
		chromedp.SendKeys(`//input[@data-testid="create-name"]`, "dev", chromedp.BySearch),
		chromedp.Click(`//input[@data-testid="create-source-devfile"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//textarea[@data-testid="create-devfile"]`, chromedp.BySearch),
		chromedp.SetValue(`//textarea[@data-testid="create-devfile"]`, devfile, chromedp.BySearch),
		chromedp.SetValue(`//select[@data-testid="create-agent"]`, "k1", chromedp.BySearch))
	shot("create")
	b.Click(`//button[@data-testid="create-submit"]`, `//span[@data-testid="ws-detail-state" and text()="CreationRequested"]`)
	if loc := b.Location(); !strings.HasSuffix(loc, "/ui/w/alice/dev") {
		t.Errorf("after the creation the browser is at %s", loc)
	}
	// Apps lists every endpoint the devfile declares, a public one with its address; the helper
	// is waiting for the pod.
	b.Run("the endpoints", chromedp.WaitVisible(`//tr[@data-testid="ws-endpoint"][2]`, chromedp.BySearch))
	if eps := b.Text(`[data-testid="ws-endpoints"]`); !strings.Contains(eps, "web\tmain\t8080\tpublic\thttps://8080-dev--alice.") ||
		!strings.Contains(eps, "api\tmain\t9000\tinternal\tnot served by the access proxy") {
		t.Errorf("the Apps section's endpoints read %q", eps)
	}
	if got := b.Text(`[data-testid="ws-helper-status"]`); got != "waiting" {
		t.Errorf("the helper's status reads %q, want waiting", got)
	}
	// Two minutes after the start, it says why it is not reachable.
	env.Clock.Advance(2 * time.Minute)
	b.Run("reload", chromedp.Reload(), chromedp.WaitVisible(`//*[@data-testid="ws-helper-problem" and contains(., "the workspace's pod is not ready 2m0s after the start")]`, chromedp.BySearch))

	// The list shows it; the agent's report makes it Running there, without a reload.
	b.Click(`//a[@data-testid="nav-workspaces"]`, rowState("dev", "CreationRequested"))
	latency := func(name, state string, change func()) time.Duration {
		t.Helper()
		var ok bool
		eval("watch "+name, `(() => {
			window.__seenAt = 0;
			const cell = document.querySelector('tr[data-testid="ws-row"][data-name="`+name+`"] [data-testid="ws-actual"]');
			new MutationObserver((_, o) => { if (cell.textContent === '`+state+`') { window.__seenAt = Date.now(); o.disconnect(); } })
				.observe(cell, { subtree: true, childList: true, characterData: true });
			return true;
		})()`, &ok)
		start := time.Now()
		change()
		b.Run("see "+name+" "+state, chromedp.WaitVisible(rowState(name, state), chromedp.BySearch))
		var seen float64
		eval("read the time", `window.__seenAt`, &seen)
		return time.UnixMilli(int64(seen)).Sub(start)
	}
	d1 := latency("dev", "Running", func() { report(t, env, agent, "dev", "Running", nil) })
	t.Logf("store change to page: %v (1 workspace)", d1)
	shot("workspaces")

	// Stop it from its page; the agent stops it; the page follows.
	b.Click(row("dev")+`//a`, `//button[@data-testid="ws-stop"]`)
	b.Click(`//button[@data-testid="ws-stop"]`, `//span[@data-testid="ws-detail-desired" and text()="Stopped"]`)
	if w := stored(t, env, "dev"); w.DesiredState != workspace.Stopped {
		t.Fatalf("after Stop the workspace is desired %s", w.DesiredState)
	}
	report(t, env, agent, "dev", "Stopped", nil)
	b.Run("see it Stopped", chromedp.WaitVisible(`//span[@data-testid="ws-detail-state" and text()="Stopped"]`, chromedp.BySearch))

	// Start it again; its pod cannot pull its image: the page says why.
	b.Click(`//button[@data-testid="ws-start"]`, `//span[@data-testid="ws-detail-desired" and text()="Running"]`)
	report(t, env, agent, "dev", "Starting", &protocol.PodFailure{Reason: "ImagePullBackOff", Message: `image "alpine:nope" not found`})
	b.Run("see the failure", chromedp.WaitVisible(`//*[@data-testid="ws-detail-error" and contains(., "ImagePullBackOff")]`, chromedp.BySearch))
	if msg := b.Text(`[data-testid="ws-detail-error"]`); !strings.Contains(msg, `image "alpine:nope" not found`) {
		t.Errorf("the failure reads %q", msg)
	}
	if ssh := b.Text(`[data-testid="ws-ssh-command"]`); !strings.Contains(ssh, "hangar ssh dev") {
		t.Errorf("the SSH command reads %q", ssh)
	}
	shot("workspace")

	// Tokens: create one on the page, use it, revoke it on the page, and it is refused at once.
	b.Click(`//a[@data-testid="nav-tokens"]`, `//*[@data-testid="tokens-table"]`)
	b.Run("name a token", chromedp.SendKeys(`//input[@data-testid="token-new-name"]`, "laptop", chromedp.BySearch))
	b.Click(`//form[@data-testid="token-create"]//button[@type="submit"]`, `//tr[@data-testid="token-row" and @data-name="laptop"]`)
	secret := b.Text(`[data-testid="new-secret-value"]`)
	if status, body := bearerGet(t, env, secret, "/api/v1/users/me"); status != http.StatusOK || !strings.Contains(body, `"alice"`) {
		t.Fatalf("the token made on the page: GET /api/v1/users/me = %d %s", status, body)
	}
	b.Click(`//tr[@data-testid="token-row" and @data-name="laptop"]//button[@data-testid="token-revoke"]`, `//button[@data-testid="confirm-ok"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//tr[@data-testid="token-row" and @data-name="laptop" and @data-status="revoked"]`)
	if status, body := bearerGet(t, env, secret, "/api/v1/users/me"); status != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
		t.Errorf("the token revoked on the page: GET /api/v1/users/me = %d %s, want 401 saying it was revoked", status, body)
	}
	b.Run("back", chromedp.NavigateBack(), chromedp.WaitVisible(`//button[@data-testid="ws-delete"]`, chromedp.BySearch))

	// Delete asks first; cancelled, nothing happens.
	b.Click(`//button[@data-testid="ws-delete"]`, `//button[@data-testid="confirm-cancel"]`)
	b.Run("cancel", chromedp.Click(`//button[@data-testid="confirm-cancel"]`, chromedp.BySearch), chromedp.WaitNotVisible(`//dialog[@data-testid="confirm"]`, chromedp.BySearch))
	if w := stored(t, env, "dev"); w.DesiredState != workspace.Running {
		t.Fatalf("after a cancelled delete the workspace is desired %s", w.DesiredState)
	}

	// 1,000 workspaces: the list renders them, and a change still shows at once.
	seed(t, env, "alice", 1000)
	start := time.Now()
	b.Run("open the list of 1,001", chromedp.Navigate(env.URL+"/ui/"),
		chromedp.WaitVisible(`//*[@data-testid="ws-count" and text()="1001 workspaces"]`, chromedp.BySearch))
	var marks struct{ Received, Shown, Bytes float64 }
	eval("the snapshot's marks", `(() => {
		const m = (n) => { const e = performance.getEntriesByName(n); return e.length ? e[e.length - 1].startTime : -1; };
		const es = performance.getEntriesByType('resource').filter(r => r.name.includes('/workspaces/events'));
		return { Received: m('hangar-snapshot-received'), Shown: m('hangar-snapshot-shown'), Bytes: es.length ? es[es.length - 1].transferSize : -1 };
	})()`, &marks)
	t.Logf("list of 1,001 workspaces shown in %v (snapshot received at %.0f ms, rows shown at %.0f ms after the navigation began)",
		time.Since(start), marks.Received, marks.Shown)
	d1000 := latency("load-0500", "Running", func() { setActual(t, env, "load-0500", workspace.Running) })
	t.Logf("store change to page: %v (1,001 workspaces)", d1000)

	// The admin's pages.
	b.Run("sign out", chromedp.Click(`//button[@data-testid="signout"]`, chromedp.BySearch), chromedp.WaitVisible(`//h1[text()="Signed out"]`, chromedp.BySearch))
	b.Open(env.URL+"/ui/admin/agents", `//input[@name="token"]`)
	b.SignIn(env.AdminToken, `//tr[@data-testid="agent-row" and @data-name="k1"]//td[@data-testid="agent-connected" and text()="connected"]`)
	shot("admin-agents")
	b.Click(`//a[@data-testid="nav-audit"]`, `//tr[@data-testid="audit-row"]`)
	shot("admin-audit")
	b.Click(`//a[@data-testid="nav-users"]`, `//tr[@data-testid="user-row" and @data-name="alice"]`)
	// The admin reads alice's tokens and revokes her first one; it is refused at once.
	b.Click(`//tr[@data-testid="user-row" and @data-name="alice"]//a[@data-testid="user-tokens"]`,
		`//h1[text()="API tokens of alice"]/following::tr[@data-testid="token-row" and @data-name="laptop" and @data-status="revoked"]`)
	b.Click(`//tr[@data-testid="token-row" and @data-name="initial"]//button[@data-testid="token-revoke"]`, `//button[@data-testid="confirm-ok"]`)
	b.Click(`//button[@data-testid="confirm-ok"]`, `//tr[@data-testid="token-row" and @data-name="initial" and @data-status="revoked"]`)
	if status, body := bearerGet(t, env, alice, "/api/v1/users/me"); status != http.StatusUnauthorized {
		t.Errorf("alice's token revoked by the admin on the page: GET /api/v1/users/me = %d %s, want 401", status, body)
	}
	b.Click(`//a[@data-testid="nav-users"]`, `//tr[@data-testid="user-row" and @data-name="alice"]`)
	b.Click(`//a[@data-testid="nav-workspaces"]`, `//*[@data-testid="ws-count" and text()="1001 workspaces"]`)
}

// screenshot saves what the tab shows as HANGAR_SCREENSHOTS/name.png, when that is set.
func screenshot(t *testing.T, b *browser.Tab, name string) {
	t.Helper()
	dir := os.Getenv("HANGAR_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	b.Run("screenshot "+name, chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

const devfile = `schemaVersion: 2.2.0
components:
- name: main
  container:
    image: alpine
    endpoints:
    - {name: web, targetPort: 8080}
    - {name: api, targetPort: 9000, exposure: internal}
`

// bearerGet is GET path with token, answering the status and body.
func bearerGet(t testing.TB, env *servertest.Env, token, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func call(t testing.TB, env *servertest.Env, token, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, env.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
}

func createAgent(t *testing.T, env *servertest.Env, name string) string {
	var a sdk.Agent
	call(t, env, env.AdminToken, "POST", "/api/v1/agents", map[string]any{"name": name}, &a)
	return a.Token
}

func createUser(t testing.TB, env *servertest.Env, name string) string {
	var u sdk.User
	call(t, env, env.AdminToken, "POST", "/api/v1/users", map[string]any{"username": name}, &u)
	return u.Token
}

func stored(t *testing.T, env *servertest.Env, name string) workspace.Workspace {
	t.Helper()
	all, err := env.Store.ListWorkspaces(context.Background(), store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range all {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no workspace %q", name)
	return workspace.Workspace{}
}

var rv = 0

// report plays the agent: a partial reconcile reporting the workspace's Deployment in state st
// (and a pod failure), through the real API.
func report(t *testing.T, env *servertest.Env, agentToken, name, st string, failure *protocol.PodFailure) {
	t.Helper()
	w := stored(t, env, name)
	rv++
	info := protocol.WorkspaceAgentInfo{Name: w.KubeName, Namespace: w.Namespace, LatestK8sDeploymentInfo: deployment(st, rv), PodFailure: failure}
	call(t, env, agentToken, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial,
		WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}}, nil)
}

func deployment(st string, rv int) *protocol.DeploymentInfo {
	one, zero := int32(1), int32(0)
	d := &protocol.DeploymentInfo{Metadata: protocol.DeploymentMetadata{ResourceVersion: strconv.Itoa(rv)}}
	cond := func(typ, reason string) protocol.DeploymentCondition {
		return protocol.DeploymentCondition{Type: typ, Status: "True", Reason: reason}
	}
	switch st {
	case "Running":
		d.Spec = &protocol.DeploymentSpec{Replicas: &one}
		d.Status = &protocol.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	case "Starting":
		d.Spec = &protocol.DeploymentSpec{Replicas: &one}
		d.Status = &protocol.DeploymentStatus{Replicas: 1, UnavailableReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasUnavailable"), cond("Progressing", "NewReplicaSetCreated")}}
	case "Stopped":
		d.Spec = &protocol.DeploymentSpec{Replicas: &zero}
		d.Status = &protocol.DeploymentStatus{Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	default:
		panic(st)
	}
	return d
}

// seed inserts n workspaces of the user at once (the load generator's bulk insert).
func seed(t *testing.T, env *servertest.Env, username string, n int) {
	t.Helper()
	ctx := context.Background()
	u, err := env.Store.UserByUsername(ctx, username)
	if err != nil {
		t.Fatal(err)
	}
	a, err := env.Store.AgentByName(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]workspace.Workspace, n)
	for i := range rows {
		name := fmt.Sprintf("load-%04d", i)
		rows[i] = workspace.Workspace{ID: uuid.NewString(), Name: name, OwnerID: u.ID, AgentID: a.ID, Namespace: "hangar-" + name, Devfile: devfile,
			DesiredState: workspace.Running, ActualState: workspace.Starting, DesiredStateUpdatedAt: env.Clock.Now(), CreatedAt: env.Clock.Now()}
	}
	seeder, ok := env.Store.(interface {
		InsertWorkspaces(context.Context, []workspace.Workspace) error
	})
	if !ok {
		t.Fatal("the store cannot insert in bulk")
	}
	if err := seeder.InsertWorkspaces(ctx, rows); err != nil {
		t.Fatal(err)
	}
}

// setActual changes a workspace's actual state in the store, as a reconcile's writer does.
func setActual(t *testing.T, env *servertest.Env, name string, st workspace.State) {
	t.Helper()
	w := stored(t, env, name)
	w.ActualState = st
	if err := env.Store.UpdateWorkspacesBatch(context.Background(), []workspace.Workspace{w}); err != nil {
		t.Fatal(err)
	}
}
