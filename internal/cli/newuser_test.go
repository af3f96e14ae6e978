package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// delete asks on a terminal, refuses without one unless --yes, and sends nothing before a yes.
func TestDeleteAsksFirst(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workspaces["web"] = sdk.Workspace{ID: "w-web", Name: "web", Owner: "admin", Agent: "k1", DesiredState: "Running", ActualState: "Running"}
	f.workspaces["web2"] = sdk.Workspace{ID: "w-web2", Name: "web2", Owner: "admin", Agent: "k1", DesiredState: "Running", ActualState: "Running"}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	patches := func() int { return f.count("PATCH", "/api/v1/workspaces/web") }

	if got := c.fail("delete", "web"); !strings.Contains(got, "error: deleting workspace web cannot be undone (its Kubernetes objects and its volume are deleted): pass --yes to confirm (stdin is not a terminal to ask on)") {
		t.Errorf("no terminal, no --yes: %q", got)
	}
	c.terminal = true
	for _, answer := range []string{"n\n", "\n", "whatever\n", ""} {
		c.stdin = answer
		r := c.run("delete", "web")
		if r.code != 1 || !strings.Contains(r.stderr, "Delete workspace web? Its Kubernetes objects and its volume are deleted; this cannot be undone. [y/N] ") ||
			!strings.Contains(r.stderr, "workspace web was not deleted") {
			t.Errorf("answer %q: exit %d, stderr %q", answer, r.code, r.stderr)
		}
	}
	if got := c.fail("delete", "nosuch"); !strings.Contains(got, `workspace "nosuch" not found`) || strings.Contains(got, "[y/N]") {
		t.Errorf("a wrong name is asked about: %q", got)
	}
	if n := patches(); n != 0 {
		t.Fatalf("%d PATCHes sent without a yes", n)
	}
	c.stdin = "y\n"
	c.ok("delete", "web")
	c.terminal, c.stdin = false, ""
	c.ok("delete", "web2", "--yes")
	if n, n2 := patches(), f.count("PATCH", "/api/v1/workspaces/web2"); n != 1 || n2 != 1 {
		t.Errorf("%d and %d PATCHes after a yes and a --yes, want 1 each", n, n2)
	}

	f.workspaces["vm"] = sdk.Workspace{ID: "w-vm", Name: "vm", Owner: "admin", Backend: "terraform", DesiredState: "Running", ActualState: "Running"}
	if got := c.fail("delete", "vm", "--orphan"); !strings.Contains(got, "Terraform is not run: its resources are left in place, unmanaged") {
		t.Errorf("delete --orphan of a terraform workspace: %q", got)
	}
}

func TestAgentsListSaysWhoIsConnected(t *testing.T) {
	f, srv := newFakeAPI(t)
	yes, no := true, false
	seen := t0.Add(-90 * time.Second)
	f.agents = []sdk.Agent{
		{ID: "a1", Name: "k1", Config: []byte(`{}`), CreatedAt: t0, LastSeenAt: &seen, Connected: &yes},
		{ID: "a2", Name: "k2", Config: []byte(`{}`), CreatedAt: t0, Connected: &no},
		{ID: "a3", Name: "old", Config: []byte(`{}`), CreatedAt: t0}, // a server from before the fields
	}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})
	out := c.ok("agents", "list")
	for _, re := range []string{`(?m)^NAME\s+CONNECTED\s+LAST SEEN\s+DNS ZONE`, `(?m)^k1\s+yes\s+` + regexp.QuoteMeta(seen.Format(timeLayout)), `(?m)^k2\s+no\s+never\s`, `(?m)^old\s+-\s+-\s`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("agents list lacks %s:\n%s", re, out)
		}
	}
}

func TestWaitSaysTheAgentIsAway(t *testing.T) {
	f, srv := newFakeAPI(t)
	no, yes := false, true
	seen := t0.Add(-time.Hour)
	f.agents = []sdk.Agent{{ID: "a2", Name: "k2", Config: []byte(`{}`), Connected: &no},
		{ID: "a3", Name: "k3", Config: []byte(`{}`), Connected: &no, LastSeenAt: &seen},
		{ID: "a1", Name: "k1", Config: []byte(`{}`), Connected: &yes, LastSeenAt: &seen}}
	c := newCLI(t, map[string]string{"HANGAR_URL": srv.URL, "HANGAR_TOKEN": adminToken})

	r := c.run("create", "w2", "--agent", "k2", "--wait", "--timeout", "100ms")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "Note: agent k2 has never connected to this server: nothing happens to workspace w2 until 'hangar agent' runs with k2's token. Waiting up to 100ms.\n") ||
		!strings.Contains(r.stderr, "error: timed out after 100ms waiting for workspace w2 to be Running (desired=Running actual=CreationRequested): agent k2 has never connected") {
		t.Errorf("never connected: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("create", "w3", "--agent", "k3", "--wait", "--timeout", "100ms")
	if !strings.Contains(r.stdout, "Note: agent k3 is not connected (last seen "+seen.Format(timeLayout)+")") {
		t.Errorf("away: stdout:\n%s", r.stdout)
	}
	r = c.run("create", "w1", "--agent", "k1", "--wait", "--timeout", "100ms")
	if strings.Contains(r.stdout+r.stderr, "connected") {
		t.Errorf("a connected agent is said to be away:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}
