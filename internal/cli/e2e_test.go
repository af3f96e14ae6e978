package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestEndToEnd runs the commands against the real server (SQLite), with a scripted agent speaking
// the real reconcile protocol so that --wait sees real state changes.
func TestEndToEnd(t *testing.T) {
	env := servertest.New(t)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})

	// Users: creation, the token shown once, a validation error naming the field.
	out := admin.ok("users", "create", "alice")
	if !strings.HasPrefix(out, "Created user alice.\nToken: hgu_") || !strings.HasSuffix(out, "\nThis token is shown only once: store it now.\n") {
		t.Fatalf("users create:\n%s", out)
	}
	var bob sdk.User
	if err := json.Unmarshal([]byte(admin.ok("users", "create", "bob", "-o", "json")), &bob); err != nil || bob.Token == "" || bob.Username != "bob" {
		t.Fatalf("users create -o json: %+v, %v", bob, err)
	}
	if got := admin.fail("users", "create", "Bad_Name"); !strings.HasPrefix(got, "error: invalid request\n  username: must be 1 to 32 lower-case letters") {
		t.Errorf("invalid user name:\n%s", got)
	}
	// A new token for rita: the old one is refused from then on.
	var rita, rita2 sdk.User
	if err := json.Unmarshal([]byte(admin.ok("users", "create", "rita", "-o", "json")), &rita); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(admin.ok("users", "rotate-token", "rita", "-o", "json")), &rita2); err != nil || rita2.Token == "" || rita2.Token == rita.Token {
		t.Fatalf("users rotate-token -o json: %+v, %v", rita2, err)
	}
	if got := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": rita.Token}).fail("list"); !strings.Contains(got, `token "initial" was revoked at`) {
		t.Errorf("rita's old token:\n%s", got)
	}
	if out := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": rita2.Token}).ok("users", "rotate-token", "me"); !strings.HasPrefix(out, "New token for rita; the old one no longer works.\nToken: hgu_") {
		t.Errorf("users rotate-token me:\n%s", out)
	}

	// Agents: registration with a config file, list, a config validation error naming the field.
	cfgFile := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(cfgFile, []byte(`{"dns_zone": "ws.example.com"}`), 0o644)
	var agent sdk.Agent
	if err := json.Unmarshal([]byte(admin.ok("agents", "create", "eu", "--config", cfgFile, "-o", "json")), &agent); err != nil || agent.Token == "" {
		t.Fatalf("agents create -o json: %+v, %v", agent, err)
	}
	os.WriteFile(cfgFile, []byte(`{"dns_zone": "ws.example.com", "bogus": 1}`), 0o644)
	if got := admin.fail("agents", "create", "us", "--config", cfgFile); got != "error: invalid request\n  config.bogus: unknown field\n" {
		t.Errorf("agent with an unknown config field:\n%q", got)
	}
	if got := admin.ok("agents", "list"); !strings.Contains(got, "\neu    no         never      ws.example.com  per_workspace  2026-01-01 05:00:00 UTC\n") {
		t.Errorf("agents list:\n%s", got)
	}

	// Alice logs in; her commands use the saved login from then on.
	alice := newCLI(t, nil)
	token := strings.TrimPrefix(strings.Split(out, "\n")[1], "Token: ")
	if got, want := alice.ok("login", "--url", env.URL, "--token", token), "Logged in to "+env.URL+" as alice\n"; got != want {
		t.Errorf("login = %q, want %q", got, want)
	}
	if got := alice.fail("users", "create", "carol"); got != "error: only an admin may do this\n" {
		t.Errorf("users create by a non-admin: %q", got)
	}

	// Create with --wait: every state change the agent causes shows as one line.
	sim := &agentSim{t: t, url: env.URL, token: agent.Token}
	create := alice.start("create", "web", "--agent", "eu", "--wait")
	// The agent has not called yet: the wait says so before anything else (issue 12).
	if line := <-create.lines; line != "Note: agent eu has never connected to this server: nothing happens to workspace web until 'hangar agent' runs with eu's token. Waiting up to 10m0s." {
		t.Fatalf("first line of the wait: %q", line)
	}
	create.expect(t, "desired=Running  actual=CreationRequested")
	resp := sim.report(protocol.UpdateFull)
	if len(resp.WorkspaceRailsInfos) != 1 || !strings.Contains(resp.WorkspaceRailsInfos[0].ConfigToApply, "kind: Deployment") {
		t.Fatalf("the agent was not sent the workspace's config: %+v", resp)
	}
	// The agent names the workspace by its cluster name and namespace.
	kn, ns := resp.WorkspaceRailsInfos[0].Name, resp.WorkspaceRailsInfos[0].Namespace
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Starting"))
	create.expect(t, "desired=Running  actual=Starting")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Running"))
	create.expect(t, "desired=Running  actual=Running")
	create.expectEnd(t, "Workspace web is Running at https://", "")
	if got := admin.ok("agents", "list"); !regexp.MustCompile(`\neu\s+yes\s+2026-01-01 \d\d:\d\d:\d\d UTC\s+ws\.example\.com`).MatchString(got) {
		t.Errorf("agents list once the agent called:\n%s", got)
	}

	if got := alice.fail("create", "Web", "--agent", "nope"); !strings.HasPrefix(got, "error: invalid request\n  name: must be 1 to 40 lower-case letters") {
		t.Errorf("invalid workspace name:\n%s", got)
	}
	if got := alice.fail("create", "web2", "--agent", "nope"); got != "error: invalid request\n  agent: no agent is named \"nope\"\n" {
		t.Errorf("unknown agent: %q", got)
	}
	if got := alice.fail("create", "web", "--agent", "eu"); !strings.HasPrefix(got, "error: already exists") {
		t.Errorf("name taken: %q", got)
	}

	// List and show, as a table and as JSON; admin sees every workspace, bob none of alice's.
	list := alice.ok("list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "OWNER NAME AGENT DESIRED ACTUAL HELPER URL" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "alice web eu Running Running connected https://3000-web--alice.") {
		t.Errorf("list:\n%s", list)
	}
	var listed []sdk.Workspace
	if err := json.Unmarshal([]byte(alice.ok("list", "-o", "json")), &listed); err != nil || len(listed) != 1 || listed[0].Owner != "alice" {
		t.Errorf("list -o json: %+v, %v", listed, err)
	}
	if got := admin.ok("list"); !strings.Contains(got, "\nalice  web ") {
		t.Errorf("admin's list does not show alice's workspace:\n%s", got)
	}
	bobCLI := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": bob.Token})
	if got := bobCLI.ok("list"); got != "No workspaces.\n" {
		t.Errorf("bob's list: %q", got)
	}
	if got := bobCLI.fail("show", "web"); got != "error: workspace \"web\" not found\n" {
		t.Errorf("bob's show of alice's workspace: %q", got)
	}
	show := alice.ok("show", "web")
	for _, want := range []string{
		"Name:                web\n", "Owner:               alice\n", "Agent:               eu\n",
		"Namespace:           " + ns + "\n", "URL:                 https://",
		"Desired state:       Running (since 2026-01-01 05:00:00 UTC)\n",
		"Actual state:        Running (since 2026-01-01 05:00:02 UTC)\n",
		"Last error:          none\n", "Last sent to agent:  2026-01-01 05:00:02 UTC\n",
		"Deployment:          resourceVersion 2\n", "Created:             2026-01-01 05:00:00 UTC\n",
		// The helper is ready since the workspace became Running; the default devfile's editor is
		// its one declared endpoint.
		"Helper:              connected (since 2026-01-01 05:00:02 UTC)\n",
		"Endpoints:           editor (main, port 3000): public, https://3000-web--alice.ws.example.com/\n",
	} {
		if !strings.Contains(show, want) {
			t.Errorf("show is missing %q:\n%s", want, show)
		}
	}
	var shown sdk.Workspace
	if err := json.Unmarshal([]byte(alice.ok("show", "web", "--output", "json")), &shown); err != nil || shown.ActualState != "Running" || shown.RespondedToAgentAt == nil ||
		shown.Helper.Status != "connected" || len(shown.Endpoints) != 1 || shown.Endpoints[0].Exposure != "public" {
		t.Errorf("show -o json: %+v, %v", shown, err)
	}
	if got := alice.fail("show", "nope"); got != "error: workspace \"nope\" not found\n" {
		t.Errorf("show of a missing workspace: %q", got)
	}

	// Stop and wait.
	env.Clock.Advance(time.Second)
	stop := alice.start("stop", "web", "--wait")
	stop.expect(t, "desired=Stopped  actual=Running")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Stopping"))
	stop.expect(t, "desired=Stopped  actual=Stopping")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Stopped"))
	stop.expect(t, "desired=Stopped  actual=Stopped")
	stop.expectEnd(t, "Workspace web is Stopped.", "")

	if got := alice.fail("restart", "web"); !strings.HasPrefix(got, "error: illegal state change: ") || !strings.Contains(got, "(start it instead)") {
		t.Errorf("restart of a stopped workspace: %q", got)
	}

	// Start, then restart: the server turns RestartRequested back into Running once the agent
	// reports Stopped, and the wait ends when the workspace runs again.
	env.Clock.Advance(time.Second)
	alice.ok("start", "web")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Running"))
	env.Clock.Advance(time.Second)
	restart := alice.start("restart", "web", "--wait")
	restart.expect(t, "desired=RestartRequested  actual=Running")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Stopping"))
	restart.expect(t, "desired=RestartRequested  actual=Stopping")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Stopped"))
	restart.expect(t, "desired=Running  actual=Stopped")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Starting"))
	restart.expect(t, "desired=Running  actual=Starting")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Running"))
	restart.expect(t, "desired=Running  actual=Running")
	restart.expectEnd(t, "Workspace web is Running at https://", "")

	// An applier error after a start ends the wait with the error.
	env.Clock.Advance(time.Second)
	alice.ok("stop", "web")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, sim.deployment(kn, ns, "Stopped"))
	env.Clock.Advance(time.Second)
	start := alice.start("start", "web", "--wait")
	start.expect(t, "desired=Running  actual=Stopped")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial) // the agent is told of the change
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, protocol.WorkspaceAgentInfo{Name: kn, Namespace: ns,
		ErrorDetails: &protocol.ErrorDetails{ErrorType: protocol.ErrorTypeApplier, ErrorMessage: "admission webhook denied the request"}})
	start.expect(t, "desired=Running  actual=Error  error=applier: admission webhook denied the request")
	start.expectEnd(t, "", "error: workspace web is Error: applier: admission webhook denied the request\n")

	// Delete and wait; termination is permanent.
	env.Clock.Advance(time.Second)
	del := alice.start("delete", "web", "--yes", "--wait")
	del.expect(t, "desired=Terminated  actual=Error  error=applier: admission webhook denied the request")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, protocol.WorkspaceAgentInfo{Name: kn, Namespace: ns, TerminationProgress: protocol.TerminationTerminating})
	del.expect(t, "desired=Terminated  actual=Terminating")
	env.Clock.Advance(time.Second)
	sim.report(protocol.UpdatePartial, protocol.WorkspaceAgentInfo{Name: kn, Namespace: ns, TerminationProgress: protocol.TerminationTerminated})
	del.expect(t, "desired=Terminated  actual=Terminated")
	del.expectEnd(t, "Workspace web is Terminated.", "")
	if got := alice.fail("start", "web"); got != "error: illegal state change: workspace \"web\" from desired Terminated to Running: the workspace is terminated; termination is permanent\n" {
		t.Errorf("start after delete: %q", got)
	}
}

// started is a command running in the background; its stdout is read line by line, so that the
// test acts (as the agent) only after the command showed the previous state.
type started struct {
	lines chan string
	done  chan result
}

func (c *cli) start(args ...string) *started {
	pr, pw := io.Pipe()
	root := c.root()
	var stderr bytes.Buffer
	root.SetOut(pw)
	root.SetErr(&stderr)
	root.SetArgs(args)
	s := &started{lines: make(chan string, 100), done: make(chan result, 1)}
	ctx, cancel := c.context()
	go func() {
		defer cancel()
		code := execute(ctx, root)
		pw.Close()
		s.done <- result{stderr: stderr.String(), code: code}
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

const e2eTimeout = 10 * time.Second

// expect reads the next progress line and checks what follows its time.
func (s *started) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			t.Fatalf("the command ended, want a line %q", want)
		}
		if _, after, _ := strings.Cut(line, "  "); after != want {
			t.Fatalf("progress line %q, want %q after the time", line, want)
		}
	case <-time.After(e2eTimeout):
		t.Fatalf("no line after %s, want %q", e2eTimeout, want)
	}
}

// expectEnd checks the last line of stdout (a prefix; empty: none) and stderr, and the exit code.
func (s *started) expectEnd(t *testing.T, lastLine, stderr string) {
	t.Helper()
	var rest []string
	for line := range s.lines {
		rest = append(rest, line)
	}
	var r result
	select {
	case r = <-s.done:
	case <-time.After(e2eTimeout):
		t.Fatalf("the command did not end after %s", e2eTimeout)
	}
	if lastLine == "" && len(rest) > 0 || lastLine != "" && (len(rest) != 1 || !strings.HasPrefix(rest[0], lastLine)) {
		t.Errorf("last lines %q, want one starting with %q", rest, lastLine)
	}
	if r.stderr != stderr {
		t.Errorf("stderr = %q, want %q", r.stderr, stderr)
	}
	if want := map[bool]int{true: 1}[stderr != ""]; r.code != want {
		t.Errorf("exit code %d, want %d", r.code, want)
	}
}

// agentSim speaks the reconcile protocol as an agent would, reporting the states the test tells it.
type agentSim struct {
	t          *testing.T
	url, token string
	rv         int
}

func (a *agentSim) report(typ protocol.UpdateType, infos ...protocol.WorkspaceAgentInfo) protocol.ReconcileResponse {
	a.t.Helper()
	if infos == nil {
		infos = []protocol.WorkspaceAgentInfo{}
	}
	body, _ := json.Marshal(protocol.ReconcileRequest{UpdateType: typ, WorkspaceAgentInfos: infos})
	req, _ := http.NewRequest("POST", a.url+protocol.ReconcilePath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		a.t.Fatalf("reconcile: %d %s", resp.StatusCode, b)
	}
	var out protocol.ReconcileResponse
	if err := json.Unmarshal(b, &out); err != nil {
		a.t.Fatal(err)
	}
	return out
}

// deployment returns a report of the workspace's Deployment in state st, by the rules of
// reconcile.DeploymentState, with a new resourceVersion each time.
func (a *agentSim) deployment(name, ns, st string) protocol.WorkspaceAgentInfo {
	a.rv++
	cond := func(typ, reason string) protocol.DeploymentCondition {
		return protocol.DeploymentCondition{Type: typ, Status: "True", Reason: reason}
	}
	replicas := func(n int32) *protocol.DeploymentSpec { return &protocol.DeploymentSpec{Replicas: &n} }
	d := &protocol.DeploymentInfo{Metadata: protocol.DeploymentMetadata{ResourceVersion: strconv.Itoa(a.rv)}}
	switch st {
	case "Starting":
		d.Spec = replicas(1)
		d.Status = &protocol.DeploymentStatus{Replicas: 1, UnavailableReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasUnavailable"), cond("Progressing", "NewReplicaSetCreated")}}
	case "Running":
		d.Spec = replicas(1)
		d.Status = &protocol.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	case "Stopping":
		d.Spec = replicas(0)
		d.Status = &protocol.DeploymentStatus{Replicas: 1, AvailableReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "ReplicaSetUpdated")}}
	case "Stopped":
		d.Spec = replicas(0)
		d.Status = &protocol.DeploymentStatus{Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	default:
		a.t.Fatalf("no deployment for state %q", st)
	}
	return protocol.WorkspaceAgentInfo{Name: name, Namespace: ns, LatestK8sDeploymentInfo: d}
}

// TestLoginSaysWhatIsWrong: `hangar login` against the real server says what is wrong with a
// refused token and how to get a new one (not "log in with 'hangar login'"), and, for a URL where
// no server answers, that the server could not be reached there and the likely cause (not a raw
// dial error).
func TestLoginSaysWhatIsWrong(t *testing.T) {
	env := servertest.New(t)
	c := newCLI(t, nil)
	const newToken = "A new token: an admin runs 'hangar users rotate-token NAME' (a new server prints where its admin token is), or create one with 'hangar tokens create' where you are logged in\n"
	got := c.fail("login", "--url", env.URL, "--token", "hgu_not-a-token")
	if want := "error: the server at " + env.URL + " refused the token: no user of this server has this token (check that it was copied whole, and that the URL is the server that issued it). " + newToken; got != want {
		t.Errorf("login with a bad token:\n got %q\nwant %q", got, want)
	}
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	var rita sdk.User
	if err := json.Unmarshal([]byte(admin.ok("users", "create", "rita", "-o", "json")), &rita); err != nil {
		t.Fatal(err)
	}
	admin.ok("users", "rotate-token", "rita")
	got = c.fail("login", "--url", env.URL, "--token", rita.Token)
	if !strings.HasPrefix(got, "error: the server at "+env.URL+` refused the token: token "initial" was revoked at `) || !strings.HasSuffix(got, newToken) {
		t.Errorf("login with a revoked token: %q", got)
	}
	for _, out := range []string{got, c.fail("login", "--url", env.URL, "--token", "hgu_not-a-token")} {
		if strings.Contains(out, "log in with") {
			t.Errorf("login tells the user to log in: %q", out)
		}
	}

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	got = c.fail("login", "--url", dead, "--token", env.AdminToken)
	if want := "error: could not reach the Hangar server at " + dead + ": nothing listens there: is `hangar server` running, and are the host and port the ones it printed when it started?\n"; got != want {
		t.Errorf("login to a dead URL:\n got %q\nwant %q", got, want)
	}
	// https:// to a server that speaks http.
	https := strings.Replace(env.URL, "http://", "https://", 1)
	got = c.fail("login", "--url", https, "--token", env.AdminToken)
	if !strings.HasPrefix(got, "error: could not reach the Hangar server at "+https+": TLS failed (") || !strings.HasSuffix(got, "): check http:// against https://, and that the server's certificate is trusted\n") {
		t.Errorf("login with https:// to an http server: %q", got)
	}
	if _, err := os.Stat(c.config); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed login wrote the login file: %v", err)
	}
}

// TestProvisionersListShowsTheBuiltIn: `hangar provisioners list` on a server whose in-process
// provisioner runs builds lists it, rather than "No provisioners registered".
func TestProvisionersListShowsTheBuiltIn(t *testing.T) {
	env := servertest.NewTF(t, "sqlite", 1)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := admin.ok("provisioners", "list")
		if strings.Contains(out, "\nbuilt-in (in the server, 1 daemon)  ") && !strings.Contains(out, "No provisioners") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("provisioners list:\n%s\nwant the built-in provisioner", out)
		}
		<-time.After(20 * time.Millisecond) // until the daemon's first call for work
	}
}
