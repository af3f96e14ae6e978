package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/browser"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestBrowserImageBuildProgress: a Kubernetes workspace's page in Chromium shows the image
// build's steps as the agent reports them through the real reconcile API, and follows them
// without a reload: the running step with its progress line and its log so far (open), the
// steps before and after with their state; then the build's failure, with the end of its log.
// A log is text: markup in it is shown, not run.
func TestBrowserImageBuildProgress(t *testing.T) {
	env := servertest.New(t)
	agent := createAgent(t, env, "k1")
	bob := createUser(t, env, "bob")
	call(t, env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "devfile": devfile, "agent": "k1"}, nil)
	w := stored(t, env, "dev")
	t0 := env.Clock.Now().UTC().Truncate(time.Second)
	at := func(s int) *time.Time { x := t0.Add(time.Duration(s) * time.Second); return &x }
	steps := func(build protocol.StartupStep) {
		t.Helper()
		rv++
		info := protocol.WorkspaceAgentInfo{Name: w.KubeName, Namespace: w.Namespace, LatestK8sDeploymentInfo: deployment("Starting", rv),
			StartupSteps: []protocol.StartupStep{
				{Name: "image-prepare", State: "done", StartedAt: at(0), EndedAt: at(3), Detail: "building r/b:1 from debian: 3 steps, 0 features", Log: "building r/b:1 from debian: 3 steps, 0 features\n"},
				build,
				{Name: "image-push", State: "pending"},
			}}
		call(t, env, agent, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial,
			WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{info}}, nil)
	}
	steps(protocol.StartupStep{Name: "image-build", State: "running", StartedAt: at(3), Detail: "step 2/3: RUN make",
		Log: "step 1/3: COPY . /src\nstep 2/3: RUN make\ncc -c main.c <img src=x onerror=alert(1)>\n"})

	c := browser.Start(t, browser.Options{Name: "bob", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 800))
	build := `//*[@data-testid="ws-step-log-image-build"]`
	b.Open(env.URL+"/ui/w/bob/dev", `//input[@name="token"]`)
	b.SignIn(bob, build+`//*[@data-testid="ws-step-detail" and text()="step 2/3: RUN make"]`)
	if got := b.Text(`[data-testid="ws-step-image-prepare"]`); got != "image-prepare done in 3s building r/b:1 from debian: 3 steps, 0 features" {
		t.Errorf("the prepare step reads %q", got)
	}
	if got := b.Text(`[data-testid="ws-step-image-push"]`); got != "image-push pending" {
		t.Errorf("the push step reads %q", got)
	}
	var open bool
	var log string
	b.Run("the running step's log", chromedp.Evaluate(`document.querySelector('[data-testid="ws-step-log-image-build"]').open`, &open),
		chromedp.Text(build+`//pre`, &log, chromedp.BySearch))
	if !open || !strings.Contains(log, "cc -c main.c <img src=x onerror=alert(1)>") {
		t.Errorf("the running step's log: open %v, text %q", open, log)
	}
	screenshot(t, b, "workspace-build-running")
	var imgs int
	b.Run("no markup from the log", chromedp.Evaluate(`document.querySelectorAll('[data-testid="ws-startup"] img').length`, &imgs))
	if imgs != 0 {
		t.Errorf("the log's markup made %d elements", imgs)
	}

	// The build fails: the page follows without a reload.
	steps(protocol.StartupStep{Name: "image-build", State: "failed", StartedAt: at(3), EndedAt: at(65), Detail: "step 3/3: RUN false",
		Log: "step 1/3: COPY . /src\nstep 2/3: RUN make\nstep 3/3: RUN false\nimage build: step 3/3: RUN false (Dockerfile:4) exited with code 1\n"})
	b.Run("the failure shows", chromedp.WaitVisible(build+`//*[@data-testid="ws-step-state" and text()="failed in 1m 2s"]`, chromedp.BySearch))
	b.Run("its log", chromedp.Text(build+`//pre`, &log, chromedp.BySearch))
	screenshot(t, b, "workspace-build-failed")
	if !strings.HasSuffix(strings.TrimSpace(log), "exited with code 1") {
		t.Errorf("the failed step's log reads %q", log)
	}
}

// TestBrowserInsideTheWorkspace: a running workspace's page shows what its helper reports from
// inside, through the real helper API: its CPU, memory and volume with their share, a custom
// metadata value, and an alert raised by a figure over its threshold; it follows the next report
// without a reload (read every 10 s while the workspace runs). A value is text: markup in it is
// shown, not run.
func TestBrowserInsideTheWorkspace(t *testing.T) {
	key := []byte("a key of 32 bytes for the tests.")
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		o.HelperTokenKeys = [][]byte{key}
		o.HelperURL = func() string { return "http://127.0.0.1:1" }
	})
	agent := createAgent(t, env, "k1")
	bob := createUser(t, env, "bob")
	call(t, env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "dev", "devfile": devfile, "agent": "k1"}, nil)
	w := stored(t, env, "dev")
	rv++
	call(t, env, agent, "POST", protocol.ReconcilePath, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial,
		WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{{Name: w.KubeName, Namespace: w.Namespace, LatestK8sDeploymentInfo: deployment("Running", rv)}}}, nil)
	const gib = int64(1) << 30
	report := func(used int64, value string) {
		t.Helper()
		call(t, env, workspace.KubeHelperToken(key, w.ID), "PUT", protocol.MetadataPath, protocol.MetadataReport{Resources: protocol.Resources{
			CPU:     &protocol.CPUUsage{UsedCores: 0.5, LimitCores: 2},
			Memory:  &protocol.MemoryUsage{UsedBytes: used, LimitBytes: 2 * gib, Threshold: 90},
			Volumes: []protocol.VolumeUsage{{Path: "/projects", UsedBytes: 5 * gib, TotalBytes: 20 * gib, Threshold: 90}},
		}, Items: []protocol.MetadataValue{{Key: "branch", DisplayName: "Branch", Value: value}},
			Activity: &protocol.Activity{CPUCores: 0.5, TopProcess: "make"}}, nil)
	}
	report(gib, "main <img src=x onerror=alert(1)>")

	c := browser.Start(t, browser.Options{Name: "bob", ResolverRules: "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"})
	b := c.On(t)
	b.Run("viewport", chromedp.EmulateViewport(1280, 800))
	b.Open(env.URL+"/ui/w/bob/dev", `//input[@name="token"]`)
	b.SignIn(bob, `//*[@data-testid="ws-res-memory"]`)
	for sel, want := range map[string]string{
		`[data-testid="ws-res-cpu"]`:     "0.50 of 2 cores",
		`[data-testid="ws-res-memory"]`:  "1.0 GiB of 2.0 GiB (50%)",
		`[data-testid="ws-res-volume"]`:  "5.0 GiB of 20.0 GiB (25%)",
		`[data-testid="ws-meta-branch"]`: "main <img src=x onerror=alert(1)>",
	} {
		if got := b.Text(sel); got != want {
			t.Errorf("%s reads %q, want %q", sel, got, want)
		}
	}
	if got := b.Text(`[data-testid="ws-last-work"]`); !strings.HasSuffix(got, ": CPU: 0.50 cores (most by make)") || !strings.HasPrefix(got, "Work seen inside ") {
		t.Errorf("the last work reads %q", got)
	}
	var imgs int
	b.Run("no markup from a value", chromedp.Evaluate(`document.querySelectorAll('[data-testid="ws-resources"] img').length`, &imgs))
	if imgs != 0 {
		t.Errorf("a value's markup made %d elements", imgs)
	}
	// Memory goes over its threshold: the alert shows without a reload.
	env.Clock.Advance(10 * time.Second)
	report(2*gib-gib/10, "main")
	b.Run("the alert shows", chromedp.WaitVisible(`//*[@data-testid="ws-alert" and contains(., "memory at 95% of 2.0 GiB (threshold 90%)")]`, chromedp.BySearch))
	screenshot(t, b, "workspace-inside")
	if got := b.Text(`[data-testid="ws-alert"]`); !strings.HasPrefix(got, "Active since ") {
		t.Errorf("the alert reads %q", got)
	}
}
