package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
)

// TestStartupLogs: `hangar logs` on a Kubernetes workspace (the build endpoints answer that it has
// no builds) prints its startup steps, each with its log; -f follows them, printing only what is
// new of each log, until no step is pending or running; -o json prints the steps; a workspace
// without steps says why there is nothing (with -f too, when it does not start).
func TestStartupLogs(t *testing.T) {
	f, srv := newFakeAPI(t)
	start := t0.Add(-time.Minute)
	step := func(name, state, detail, log string) sdk.WorkspaceStartupStep {
		st := sdk.WorkspaceStartupStep{Name: name, State: state, Detail: detail, Log: log, UpdatedAt: t0}
		if state != "pending" {
			st.StartedAt = &start
		}
		return st
	}
	ws := func(steps ...sdk.WorkspaceStartupStep) sdk.Workspace {
		return sdk.Workspace{ID: "w-1", Name: "img", Owner: "admin", Agent: "k1", DesiredState: "Running", ActualState: "Starting", CreatedAt: t0, StartupSteps: steps}
	}
	prepared := step("image-prepare", "done", "building r:1 from b:1: 1 steps, 0 features", "building r:1 from b:1: 1 steps, 0 features\n")
	f.workspaces = map[string]sdk.Workspace{"plain": {ID: "w-2", Name: "plain", Owner: "admin", DesiredState: "Running", ActualState: "Running", CreatedAt: t0}}
	f.script = map[string][]sdk.Workspace{"img": {
		ws(prepared, step("image-build", "running", "step 1/1: RUN make", "step 1/1: RUN make\ncc a.c\n"), step("image-push", "pending", "", "")),
		ws(prepared, step("image-build", "running", "step 1/1: RUN make", "step 1/1: RUN make\ncc a.c\ncc b.c\n"), step("image-push", "pending", "", "")),
		ws(prepared, step("image-build", "done", "step 1/1: RUN make", "step 1/1: RUN make\ncc a.c\ncc b.c\nld app\n"), step("image-push", "done", "pushed r:1 (sha256:0)", "pushing r:1\npushed r:1 (sha256:0)\n")),
	}}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	want := `== image-prepare: done (building r:1 from b:1: 1 steps, 0 features)
building r:1 from b:1: 1 steps, 0 features
== image-build: running (step 1/1: RUN make)
step 1/1: RUN make
cc a.c
== image-push: pending
== image-build: running (step 1/1: RUN make)
cc b.c
== image-build: done (step 1/1: RUN make)
ld app
== image-push: done (pushed r:1 (sha256:0))
pushing r:1
pushed r:1 (sha256:0)
`
	if got := c.ok("logs", "img", "-f"); got != want {
		t.Errorf("logs -f:\n%s\nwant\n%s", got, want)
	}
	// Read once more (the script's last answer repeats): the whole of each log.
	out := c.ok("logs", "img", "-o", "json")
	var first sdk.WorkspaceStartupStep
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&first); err != nil || first.Name != "image-prepare" || strings.Count(out, "\n") != 3 {
		t.Errorf("logs -o json: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"logs", "plain"}, {"logs", "plain", "-f"}} {
		if errOut := c.fail(args...); !strings.Contains(errOut, "has no build; its agent has reported no startup steps") {
			t.Errorf("%s of a running workspace without steps: %s", args, errOut)
		}
	}
}

// logAfter finds what a newer tail of a log adds, when lines were cut from its beginning too, and
// when the log repeats the same line (a match at the end would drop every new line).
func TestLogAfter(t *testing.T) {
	cut := protocol.TruncatedPrefix
	for _, tc := range []struct{ old, now, want string }{
		{"", "a\nb\n", "a\nb\n"},
		{"a\nb\n", "a\nb\nc\n", "c\n"},
		{"a\nb\nc\n", cut + "b\nc\nd\ne\n", "d\ne\n"},
		{cut + "b\nc\n", cut + "c\nd\n", "d\n"},
		{"x\nx\nx\n", cut + "x\nx\nx\nx\n", "x\n"},
		{"x\nx\nx\n", cut + "x\nx\n", ""},
		{"a\nb\n", cut + "y\nz\n", "y\nz\n"},
		{"a\nb\n", "a\nb\n", ""},
	} {
		if got := logAfter(tc.old, tc.now); got != tc.want {
			t.Errorf("logAfter(%q, %q) = %q, want %q", tc.old, tc.now, got, tc.want)
		}
	}
}

// TestShowResources: `hangar show` of a running workspace prints what its helper measured (CPU,
// memory, volumes with their share), its custom metadata values (a command's failure beside its
// value) and its alerts, an active one first saying so; control characters from the workspace's
// commands do not reach the terminal.
func TestShowResources(t *testing.T) {
	f, srv := newFakeAPI(t)
	const gib = int64(1) << 30
	raised, cleared := t0.Add(-2*time.Minute), t0.Add(-time.Minute)
	f.workspaces = map[string]sdk.Workspace{"app": {ID: "w-1", Name: "app", Owner: "admin", Agent: "k1", DesiredState: "Running", ActualState: "Running", CreatedAt: t0,
		Resources: &sdk.WorkspaceResources{CollectedAt: t0, Resources: protocol.Resources{
			CPU:     &protocol.CPUUsage{UsedCores: 0.25, LimitCores: 2},
			Memory:  &protocol.MemoryUsage{UsedBytes: gib, LimitBytes: 2 * gib},
			Volumes: []protocol.VolumeUsage{{Path: "/projects", UsedBytes: 19 * gib, TotalBytes: 20 * gib}},
		}},
		Metadata: []protocol.MetadataValue{{Key: "branch", DisplayName: "Branch", Value: "main\x1b[31m"}, {Key: "load", DisplayName: "Load", Error: "exit status 3"}},
		Alerts: []sdk.WorkspaceAlert{
			{Kind: "volume", Subject: "/projects", Detail: "volume /projects at 95% of 20.0 GiB (threshold 90%)", Active: true, RaisedAt: raised},
			{Kind: "oom-killed", Detail: "1 process(es) in the workspace killed for lack of memory (limit 2.0 GiB)", RaisedAt: cleared, ClearedAt: &cleared},
		}}}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	out := c.ok("show", "app")
	for _, want := range []string{
		"Resources:           CPU 0.25 of 2 cores, memory 1.0 GiB of 2.0 GiB (50%), /projects 19.0 GiB of 20.0 GiB (95%) (measured ",
		"Metadata:            Branch: main\n",
		"                     Load: (exit status 3)\n",
		"Alerts:              ACTIVE since ",
		" volume /projects at 95% of 20.0 GiB (threshold 90%)\n",
		" 1 process(es) in the workspace killed for lack of memory (limit 2.0 GiB)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("a terminal escape reached the output:\n%q", out)
	}
}

// TestStartupLogsFlag: `hangar logs WS --startup` shows the startup steps of either backend
// without looking for a build (a Terraform workspace's postStart, as its helper reported it), as
// text or JSON; one without steps says why; --startup with --build is refused.
func TestStartupLogsFlag(t *testing.T) {
	f, srv := newFakeAPI(t)
	start := t0.Add(-time.Minute)
	failed := sdk.WorkspaceStartupStep{Name: "post-start", State: "failed", StartedAt: &start, EndedAt: &t0, Detail: "command 1/1: setup", Log: "npm ERR! missing script\n", UpdatedAt: t0}
	f.workspaces = map[string]sdk.Workspace{
		"vm":   {ID: "w-1", Name: "vm", Owner: "admin", Backend: "terraform", DesiredState: "Running", ActualState: "Running", CreatedAt: t0, StartupSteps: []sdk.WorkspaceStartupStep{failed}, StartupFailed: "post-start"},
		"bare": {ID: "w-2", Name: "bare", Owner: "admin", Backend: "terraform", DesiredState: "Running", ActualState: "Running", CreatedAt: t0},
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	if got := c.ok("logs", "vm", "--startup"); got != "== post-start: failed (command 1/1: setup)\nnpm ERR! missing script\n" {
		t.Errorf("logs --startup:\n%s", got)
	}
	var st sdk.WorkspaceStartupStep
	if out := c.ok("logs", "vm", "--startup", "-o", "json"); json.Unmarshal([]byte(out), &st) != nil || st.Name != "post-start" || st.State != "failed" {
		t.Errorf("logs --startup -o json: %s", out)
	}
	if errOut := c.fail("logs", "bare", "--startup"); !strings.Contains(errOut, "workspace bare has no startup steps: its helper has reported none") {
		t.Errorf("a Terraform workspace without steps: %s", errOut)
	}
	if errOut := c.fail("logs", "vm", "--startup", "--build", "2"); !strings.Contains(errOut, "give one of them") {
		t.Errorf("--startup with --build: %s", errOut)
	}
}
