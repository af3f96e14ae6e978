package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// The commands that follow the builds of terraform workspaces, against the real server (SQLite)
// with the test playing the provisioner through the builder (no Terraform runs).

// tfServer is a real server with a terraform template "tf" and its builder, which the test uses as
// the provisioner's coordinator.
type tfServer struct {
	*servertest.Env
	builder *tfbackend.Service
}

func newTFServer(t *testing.T) *tfServer {
	t.Helper()
	ts := &tfServer{}
	ts.Env = servertest.NewWith(t, "sqlite", func(o *server.Options) {
		ts.builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger})
		o.Builder = ts.builder
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("variable \"start_count\" {\n  type = number\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := tfmodule.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sdk.New(ts.URL, ts.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushTemplateVersion(t.Context(), "tf", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		t.Fatal(err)
	}
	return ts
}

// expectRaw reads progress lines until one equals want.
func (s *started) expectRaw(t *testing.T, want string) {
	t.Helper()
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("the command ended, want a line %q", want)
			}
			if line == want {
				return
			}
		case <-time.After(e2eTimeout):
			t.Fatalf("no line %q after %s", want, e2eTimeout)
		}
	}
}

// A build that fails in a stage shows that stage with ✘, not ✔; the stages it went past keep ✔.
func TestFollowMarksTheFailedStage(t *testing.T) {
	ts := newTFServer(t)
	c := newCLI(t, map[string]string{"HANGAR_URL": ts.URL, "HANGAR_TOKEN": ts.AdminToken})
	s := c.start("create", "w", "--template", "tf", "--wait", "--timeout", "20s")
	s.expectRaw(t, "Build #1 (start) pending")

	ctx := t.Context()
	job, err := ts.builder.Acquire(ctx, "worker-1", 0)
	if err != nil || job == nil {
		t.Fatalf("acquire: %+v %v", job, err)
	}
	at := ts.Clock.Now()
	ts.Clock.Advance(10 * time.Second)
	if err := ts.builder.AppendLogs(ctx, job.ID, "worker-1", []protocol.LogLine{
		{Time: at.Add(1 * time.Second), Stage: terraform.StageInit, Level: "info", Output: "terraform init"},
		{Time: at.Add(3 * time.Second), Stage: terraform.StageApply, Level: "info", Output: "terraform apply"},
		{Time: at.Add(4 * time.Second), Stage: terraform.StageApply, Level: "error", Output: "Error: quota exceeded"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := ts.builder.Finish(ctx, job.ID, "worker-1", build.Outcome{Error: "terraform apply: exit status 1"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range s.lines {
		out = append(out, line)
	}
	got := strings.Join(out, "\n")
	want := "==> Initializing Terraform\n" +
		"  ✔ Initializing Terraform (2s)\n" +
		"==> Applying\n" +
		"    Error: quota exceeded\n" +
		"  ✘ Applying (7s)\n" +
		"Build #1 failed in 10s."
	if !strings.HasPrefix(got, want) {
		t.Errorf("progress:\n%s\nwant it to begin with:\n%s", got, want)
	}
	if strings.Contains(got, "✔ Applying") {
		t.Errorf("the failed stage is marked as passed:\n%s", got)
	}
	r := <-s.done
	if r.code != 1 || !strings.Contains(r.stderr, "workspace w is Failed") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// --timeout bounds the whole wait of a terraform workspace: following its builds and then reading
// the workspace share one deadline (each had its own, so a wait took twice --timeout).
func TestWaitTimeoutBoundsFollowingTheBuild(t *testing.T) {
	ts := newTFServer(t)
	c := newCLI(t, map[string]string{"HANGAR_URL": ts.URL, "HANGAR_TOKEN": ts.AdminToken})
	// The build stays pending (no provisioner). A wait taking twice its --timeout meets the
	// harness's limit instead of its own time-out.
	c.limit = 1800 * time.Millisecond
	r := c.run("create", "w", "--template", "tf", "--wait", "--timeout", "1s")
	want := "error: timed out after 1s waiting for workspace w to be Running (desired=Running actual=Starting)\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	if !strings.HasPrefix(r.stdout, "Build #1 (start) pending\n") {
		t.Errorf("stdout %q", r.stdout)
	}
}

// interruptSubprocess is the environment variable that makes the test binary run the CLI (as
// cmd/hangar does, through Execute and its signal handling) with the arguments in it.
const interruptSubprocess = "HANGAR_CLI_TEST_SUBPROCESS"

func TestMain(m *testing.M) {
	if args := os.Getenv(interruptSubprocess); args != "" {
		root := newRootForSubprocess()
		root.SetArgs(strings.Split(args, "\n"))
		os.Exit(Execute(root))
	}
	os.Exit(m.Run())
}

func newRootForSubprocess() *cobra.Command {
	root := &cobra.Command{Use: "hangar"}
	AddCommands(root)
	return root
}

// Ctrl-C (a real SIGINT) ends `--wait` of a terraform workspace when stdin is not a terminal:
// nobody can answer "cancel the build?" there, so the wait ends and the build goes on. (The
// question once read a pipe that never answered, and Ctrl-C could no longer end the command.)
func TestInterruptEndsTheWaitWithoutATerminal(t *testing.T) {
	ts := newTFServer(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a bound on a hang
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(),
		interruptSubprocess+"="+strings.Join([]string{"create", "w", "--template", "tf", "--wait", "--timeout", "1h"}, "\n"),
		"HANGAR_URL="+ts.URL, "HANGAR_TOKEN="+ts.AdminToken, "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	// stdin: a pipe nobody writes to nor closes, as under a CI runner or `cmd | hangar ...`.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	sc := bufio.NewScanner(stdout)
	var seen []string
	until := func(want string) {
		t.Helper()
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if sc.Text() == want {
				return
			}
		}
		t.Fatalf("output ended before %q:\n%s\nstderr:\n%s", want, strings.Join(seen, "\n"), stderr.String())
	}
	until("Build #1 (start) pending")
	// The build runs: once its first stage shows, the command is following its log.
	job, err := ts.builder.Acquire(t.Context(), "worker-1", 0)
	if err != nil || job == nil {
		t.Fatalf("acquire: %+v %v", job, err)
	}
	if err := ts.builder.AppendLogs(t.Context(), job.ID, "worker-1", []protocol.LogLine{{Stage: terraform.StageInit, Level: "info", Output: "terraform init"}}); err != nil {
		t.Fatal(err)
	}
	until("==> Initializing Terraform")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("Ctrl-C did not end the wait; output:\n%s%s\nstderr:\n%s", strings.Join(seen, "\n"), rest, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1", err)
	}
	want := "error: stopped waiting for workspace w (desired=Running actual=Starting); the change was made and goes on without the wait\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if strings.Contains(string(rest), "Cancel build") {
		t.Errorf("asked a question nobody can answer:\n%s", rest)
	}
}

// The build commands on a Kubernetes workspace say it has no builds and what to use instead, not
// "has no build latest"; `hangar logs` without --build shows its startup steps instead.
func TestBuildCommandsOnAKubernetesWorkspace(t *testing.T) {
	env := servertest.New(t)
	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	admin.ok("agents", "create", "eu")
	admin.ok("create", "web", "--agent", "eu")
	want := "error: not a terraform workspace: workspace \"web\" is a Kubernetes workspace (agent eu): it has no builds, build logs or Terraform state; " +
		"'hangar show web' shows its state and last error, and the agent's cluster has its pods' logs\n"
	// Its startup steps are what `hangar logs` shows of it: none yet.
	if got := admin.fail("logs", "web"); got != "error: workspace web is a Kubernetes workspace and has no build; its agent has reported no startup steps (its definition builds no image)\n" {
		t.Errorf("hangar logs web: %s", got)
	}
	for _, args := range [][]string{
		{"logs", "web", "--build", "1"},
		{"cancel", "web"},
		{"state", "pull", "web"},
	} {
		if got := admin.fail(args...); got != want {
			t.Errorf("hangar %s:\n%s\nwant:\n%s", strings.Join(args, " "), got, want)
		}
	}
}

// `hangar state push --no-build` refuses a file that is not a Terraform state, or that does not
// follow the saved one, naming the field; --force replaces the state with any Terraform state.
func TestStatePushNoBuild(t *testing.T) {
	ts := newTFServer(t)
	c := newCLI(t, map[string]string{"HANGAR_URL": ts.URL, "HANGAR_TOKEN": ts.AdminToken})
	c.ok("create", "w", "--template", "tf")
	ctx := t.Context()
	job, err := ts.builder.Acquire(ctx, "worker-1", 0)
	if err != nil || job == nil {
		t.Fatalf("acquire: %+v %v", job, err)
	}
	saved := []byte(`{"version":4,"terraform_version":"1.9.8","serial":3,"lineage":"l-1","resources":[]}`)
	if err := ts.builder.Finish(ctx, job.ID, "worker-1", build.Outcome{State: saved}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	empty := file("empty.json", `{}`)
	older := file("older.json", `{"version":4,"terraform_version":"1.9.8","serial":2,"lineage":"l-1","resources":[]}`)
	other := file("other.json", `{"version":4,"terraform_version":"1.9.8","serial":9,"lineage":"l-2","resources":[]}`)
	newer := file("newer.json", `{"version":4,"terraform_version":"1.9.8","serial":4,"lineage":"l-1","resources":[]}`)

	if got, want := c.fail("state", "push", "w", empty, "--no-build"), "error: invalid request\n  version: is missing: a Terraform state has a positive integer (4 for the Terraform versions Hangar runs)\n"; got != want {
		t.Errorf("push {}:\n%s\nwant:\n%s", got, want)
	}
	if got, want := c.fail("state", "push", "w", older, "--no-build"), "error: state conflict: the pushed state does not follow the workspace's saved state (use force to replace it anyway)\n"+
		"  serial: is 2, not greater than the saved state's 3: the pushed state is not newer than the saved one (an older copy?); bump its serial after editing it, or push it with force to replace the state anyway\n"; got != want {
		t.Errorf("push an older serial:\n%s\nwant:\n%s", got, want)
	}
	if got := c.fail("state", "push", "w", other, "--no-build"); !strings.Contains(got, "\n  lineage: is \"l-2\", the saved state's is \"l-1\"") {
		t.Errorf("push another lineage:\n%s", got)
	}
	if got := c.fail("state", "push", "w", other, "--force"); !strings.HasPrefix(got, "error: --force applies only with --no-build\n") {
		t.Errorf("--force without --no-build:\n%s", got)
	}
	if got := c.ok("state", "pull", "w"); got != string(saved) {
		t.Fatalf("the refused pushes changed the state: %s", got)
	}
	c.ok("state", "push", "w", newer, "--no-build")
	c.ok("state", "push", "w", other, "--no-build", "--force")
	if got, _ := os.ReadFile(other); c.ok("state", "pull", "w") != string(got) {
		t.Errorf("the forced push did not replace the state")
	}
}
