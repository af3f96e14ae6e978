package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/tfmodule"
	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// testTimeout bounds every wait of these tests; terraform runs in well under a second per command
// here.
const testTimeout = 2 * time.Minute

// terraformBinary is the real terraform; the tests fail without it.
func terraformBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("these tests need terraform on PATH: %v", err)
	}
	return p
}

func newRunner(t *testing.T) *Runner {
	return &Runner{TerraformPath: terraformBinary(t), WorkRoot: t.TempDir(), GracePeriod: time.Minute}
}

func packTestdata(t *testing.T, dir string) []byte {
	t.Helper()
	archive, err := tfmodule.Pack(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// logSink collects a run's lines and checks they are never logged concurrently or after Run.
type logSink struct {
	mu     sync.Mutex
	lines  []Line
	busy   bool
	closed bool
	t      *testing.T
	onLine func(Line)
}

func (s *logSink) log(l Line) {
	s.mu.Lock()
	if s.busy {
		s.t.Errorf("Log called concurrently")
	}
	if s.closed {
		s.t.Errorf("Log called after Run returned: %+v", l)
	}
	s.busy = true
	s.lines = append(s.lines, l)
	s.mu.Unlock()
	if s.onLine != nil {
		s.onLine(l)
	}
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

func (s *logSink) close() []Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return slices.Clone(s.lines)
}

// runBuild runs req with r and returns the result and the lines logged.
func runBuild(t *testing.T, r *Runner, ctx context.Context, cancel <-chan struct{}, req Request, onLine func(Line)) (Result, []Line) {
	t.Helper()
	sink := &logSink{t: t, onLine: onLine}
	req.Log = sink.log
	if req.JobID == "" {
		req.JobID = "job-" + strings.ReplaceAll(t.Name(), "/", "-")
	}
	res := r.Run(ctx, cancel, req)
	lines := sink.close()
	if t.Failed() || testing.Verbose() {
		for _, l := range lines {
			t.Logf("%-22s %-5s %s", l.Stage, l.Level, l.Output)
		}
	}
	return res, lines
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// hangarVariables are the variables Hangar offers every module, plus marker_dir.
func hangarVariables(startCount, markerDir string) map[string]string {
	return map[string]string{
		"start_count":          startCount,
		"marker_dir":           markerDir,
		"workspace_id":         "6f1c1f0e-0000-4000-8000-000000000001",
		"workspace_name":       "secret-workspace-name-42",
		"workspace_owner":      "secret-owner-value-17",
		"workspace_transition": "start",
		"is_prebuild":          "false",
		"is_prebuild_claim":    "false",
	}
}

type tfState struct {
	Resources []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			IndexKey   any            `json:"index_key"`
			Status     string         `json:"status"`
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// stateInstances lists "type.name[index]" of the instances in a state, with " (tainted)" when so.
func stateInstances(t *testing.T, state []byte) []string {
	t.Helper()
	var s tfState
	if err := json.Unmarshal(state, &s); err != nil {
		t.Fatalf("state is not JSON: %v", err)
	}
	var out []string
	for _, r := range s.Resources {
		for _, i := range r.Instances {
			name := r.Type + "." + r.Name
			if i.IndexKey != nil {
				name += "[" + jsonString(i.IndexKey) + "]"
			}
			if i.Status != "" {
				name += " (" + i.Status + ")"
			}
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func markers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func stages(lines []Line) []string {
	var s []string
	for _, l := range lines {
		if len(s) == 0 || s[len(s)-1] != l.Stage {
			s = append(s, l.Stage)
		}
	}
	return s
}

func hasLine(lines []Line, pred func(Line) bool) bool {
	return slices.ContainsFunc(lines, pred)
}

// checkSecrets fails if a line shows -var arguments or the value of a variable that is not
// printed by the module itself.
func checkSecrets(t *testing.T, lines []Line, vars map[string]string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l.Output, "-var") || strings.Contains(l.Output, "start_count=") {
			t.Errorf("line shows terraform's arguments: %q", l.Output)
		}
		for _, k := range []string{"workspace_name", "workspace_owner", "workspace_id"} {
			if v, ok := vars[k]; ok && strings.Contains(l.Output, v) {
				t.Errorf("line shows the value of %s: %q", k, l.Output)
			}
		}
	}
}

func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	ctx := testContext(t)
	archive := packTestdata(t, "markers")
	dir := t.TempDir()

	step := func(name string, tr build.Transition, startCount string, state []byte) []byte {
		t.Helper()
		vars := hangarVariables(startCount, dir)
		res, lines := runBuild(t, r, ctx, nil, Request{JobID: "lifecycle-" + name, Transition: tr, Archive: archive, State: state, Variables: vars}, nil)
		if res.Err != nil || res.Canceled {
			t.Fatalf("%s: Err = %v, Canceled = %v", name, res.Err, res.Canceled)
		}
		if res.State == nil {
			t.Fatalf("%s: no state", name)
		}
		action := StageApply
		if tr == build.Delete {
			action = StageDestroy
		}
		if got, want := stages(lines), []string{StageSetup, StageInit, action, StageReadState}; !slices.Equal(got, want) {
			t.Errorf("%s: stages %v, want %v", name, got, want)
		}
		for _, st := range []string{StageSetup, StageInit, action, StageReadState} {
			if !hasLine(lines, func(l Line) bool { return l.Stage == st && l.Output == st && l.Level == LevelInfo }) {
				t.Errorf("%s: stage %q not announced", name, st)
			}
		}
		if !hasLine(lines, func(l Line) bool { return l.Output == "Variables passed: marker_dir, start_count, workspace_name" }) {
			t.Errorf("%s: variables passed not logged", name)
		}
		checkSecrets(t, lines, vars)
		if ents, _ := os.ReadDir(r.WorkRoot); len(ents) != 0 {
			t.Errorf("%s: work directory left behind: %v", name, ents)
		}
		return res.State
	}

	state := step("start", build.Start, "1", nil)
	if got, want := markers(t, dir), []string{"home", "session-0"}; !slices.Equal(got, want) {
		t.Fatalf("after start: markers %v, want %v", got, want)
	}
	if got, want := stateInstances(t, state), []string{"terraform_data.home", "terraform_data.session[0]"}; !slices.Equal(got, want) {
		t.Fatalf("after start: state %v, want %v", got, want)
	}

	state = step("stop", build.Stop, "0", state)
	if got, want := markers(t, dir), []string{"home"}; !slices.Equal(got, want) {
		t.Fatalf("after stop: markers %v, want %v", got, want)
	}
	if got, want := stateInstances(t, state), []string{"terraform_data.home"}; !slices.Equal(got, want) {
		t.Fatalf("after stop: state %v, want %v", got, want)
	}

	state = step("start-again", build.Start, "1", state)
	if got, want := markers(t, dir), []string{"home", "session-0"}; !slices.Equal(got, want) {
		t.Fatalf("after the second start: markers %v, want %v", got, want)
	}

	state = step("delete", build.Delete, "0", state)
	if got := markers(t, dir); len(got) != 0 {
		t.Fatalf("after delete: markers %v, want none", got)
	}
	if got := stateInstances(t, state); len(got) != 0 {
		t.Fatalf("after delete: state %v, want no resources", got)
	}
}

func TestRunDestroyWithoutState(t *testing.T) {
	t.Parallel()
	// terraform is not even looked for.
	r := &Runner{TerraformPath: filepath.Join(t.TempDir(), "no-terraform-here"), WorkRoot: t.TempDir()}
	for _, state := range [][]byte{nil, {}} {
		res, lines := runBuild(t, r, testContext(t), nil, Request{JobID: "j", Transition: build.Delete, Archive: []byte("not even an archive"), State: state}, nil)
		if res.Err != nil || res.Canceled || res.State != nil {
			t.Fatalf("Result = %+v, want success without state", res)
		}
		if !hasLine(lines, func(l Line) bool {
			return l.Output == "The terraform state does not exist, there is nothing to do" && l.Level == LevelInfo
		}) {
			t.Errorf("the seed's line was not logged: %v", lines)
		}
	}
}

func TestRunOnlyDeclaredVariables(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	vars := hangarVariables("1", "/nonexistent")
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "onlycount"), Variables: vars}, nil)
	if res.Err != nil {
		t.Fatalf("Err = %v", res.Err)
	}
	if got, want := stateInstances(t, res.State), []string{"terraform_data.session[0]"}; !slices.Equal(got, want) {
		t.Errorf("state %v, want %v", got, want)
	}
	if !hasLine(lines, func(l Line) bool { return l.Output == "Variables passed: start_count" }) {
		t.Error("variables passed not logged")
	}
	checkSecrets(t, lines, vars)
}

// TestRunIgnoresTerraformEnvironment: TF_* variables of the provisioner's environment do not reach
// terraform (not parallel: it sets the environment).
func TestRunIgnoresTerraformEnvironment(t *testing.T) {
	t.Setenv("TF_CLI_CONFIG_FILE", filepath.Join(t.TempDir(), "missing.tfrc"))
	t.Setenv("TF_CLI_ARGS_apply", "-no-such-flag")
	t.Setenv("TF_VAR_start_count", "5")
	t.Setenv("TF_LOG", "TRACE")
	t.Setenv("TF_DATA_DIR", filepath.Join(t.TempDir(), "data"))
	t.Setenv("CHECKPOINT_DISABLE", "")
	r := newRunner(t)
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "onlycount"), Variables: map[string]string{"start_count": "2"}}, nil)
	if res.Err != nil {
		t.Fatalf("Err = %v", res.Err)
	}
	if got := stateInstances(t, res.State); len(got) != 2 {
		t.Errorf("state %v, want 2 instances (start_count from the request)", got)
	}
	for _, l := range lines {
		if strings.Contains(l.Output, "CLI configuration") || strings.Contains(l.Output, "[TRACE]") {
			t.Errorf("terraform saw the provisioner's environment: %q", l.Output)
		}
	}
}

func TestRunCancelDuringApply(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	ctx := testContext(t)
	dir := t.TempDir()
	archive := packTestdata(t, "slow")
	vars := map[string]string{"marker_dir": dir}

	started := make(chan struct{})
	var once sync.Once
	cancel := make(chan struct{})
	type outcome struct {
		res   Result
		lines []Line
	}
	done := make(chan outcome, 1)
	begin := time.Now()
	go func() {
		res, lines := runBuild(t, r, ctx, cancel, Request{JobID: "cancel", Transition: build.Start, Archive: archive, Variables: vars}, func(l Line) {
			// The slow resource starts once the quick ones are created (depends_on).
			if strings.HasSuffix(l.Output, "(local-exec): slow-started") {
				once.Do(func() { close(started) })
			}
		})
		done <- outcome{res, lines}
	}()
	select {
	case <-started:
	case o := <-done:
		t.Fatalf("run ended before the slow resource started: %+v", o.res)
	case <-ctx.Done():
		t.Fatal("the slow resource never started")
	}
	if got, want := markers(t, dir), []string{"quick-0", "quick-1", "quick-2", "slow"}; !slices.Equal(got, want) {
		t.Fatalf("markers %v, want %v", got, want)
	}
	close(cancel)
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		t.Fatal("Run did not return after the cancel")
	}
	if elapsed := time.Since(begin); elapsed > 25*time.Second {
		t.Errorf("Run took %v: terraform was not interrupted but waited for the 30 s sleep", elapsed)
	}
	res := o.res
	if !res.Canceled || !errors.Is(res.Err, ErrCanceled) {
		t.Fatalf("Canceled = %v, Err = %v; want a canceled run", res.Canceled, res.Err)
	}
	if !strings.Contains(res.Err.Error(), "terraform apply") {
		t.Errorf("Err %q does not say what was interrupted", res.Err)
	}
	if res.State == nil {
		t.Fatal("no state after the interrupt")
	}
	got := stateInstances(t, res.State)
	for _, want := range []string{"terraform_data.quick[0]", "terraform_data.quick[1]", "terraform_data.quick[2]"} {
		if !slices.Contains(got, want) {
			t.Errorf("state %v lacks %s", got, want)
		}
	}
	if !hasLine(o.lines, func(l Line) bool { return l.Level == LevelWarn && strings.Contains(l.Output, "interrupting terraform") }) {
		t.Error("the interrupt was not logged")
	}

	// The state returned lets a delete remove what the interrupted start created.
	res, _ = runBuild(t, r, ctx, nil, Request{JobID: "cancel-delete", Transition: build.Delete, Archive: archive, State: res.State, Variables: vars}, nil)
	if res.Err != nil {
		t.Fatalf("delete after cancel: %v", res.Err)
	}
	for _, m := range markers(t, dir) {
		if strings.HasPrefix(m, "quick-") {
			t.Errorf("marker %s left after delete", m)
		}
	}
}

func TestRunContextEndsDuringApply(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	dir := t.TempDir()
	ctx, stop := context.WithCancel(testContext(t))
	defer stop()
	res, _ := runBuild(t, r, ctx, nil, Request{Transition: build.Start, Archive: packTestdata(t, "slow"), Variables: map[string]string{"marker_dir": dir}}, func(l Line) {
		if strings.HasSuffix(l.Output, "(local-exec): slow-started") {
			stop()
		}
	})
	if res.Canceled || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("Canceled = %v, Err = %v; want Err wrapping context.Canceled", res.Canceled, res.Err)
	}
	if got := stateInstances(t, res.State); !slices.Contains(got, "terraform_data.quick[2]") {
		t.Errorf("state %v lacks the quick resources", got)
	}
}

func TestRunCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	cancel := make(chan struct{})
	close(cancel)
	res, _ := runBuild(t, r, testContext(t), cancel, Request{Transition: build.Start, Archive: packTestdata(t, "onlycount"), State: []byte(`{}`)}, nil)
	if !res.Canceled || !errors.Is(res.Err, ErrCanceled) || res.State != nil {
		t.Fatalf("Result = %+v, want canceled without state", res)
	}
}

func TestRunInitFailure(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "syntaxerror"), Variables: hangarVariables("1", "")}, nil)
	if res.Err == nil {
		t.Fatal("Run succeeded")
	}
	for _, want := range []string{"terraform init", "main.tf line 6"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("Err %q does not contain %q", res.Err, want)
		}
	}
	if res.State != nil || res.Canceled {
		t.Errorf("State = %q, Canceled = %v; want no state", res.State, res.Canceled)
	}
	if !hasLine(lines, func(l Line) bool {
		return l.Level == LevelError && l.Stage == StageInit && strings.Contains(l.Output, "Error:")
	}) {
		t.Error("no error line from terraform init")
	}
}

func TestRunProviderFromMirror(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	r.PluginMirror = t.TempDir() // empty: the provider cannot be found there, nor anywhere else
	state := []byte(`{"version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "8a2b3c4d-0000-4000-8000-000000000000", "outputs": {}, "resources": [], "check_results": null}`)
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Stop, Archive: packTestdata(t, "missingprovider"), State: state}, nil)
	if res.Err == nil {
		t.Fatal("Run succeeded")
	}
	if !strings.Contains(res.Err.Error(), "terraform init") || !strings.Contains(res.Err.Error(), "hangar.dev/test/missing") {
		t.Errorf("Err %q does not name the command and the provider", res.Err)
	}
	// The input state is handed back unchanged: terraform never got to it.
	if string(res.State) != string(state) {
		t.Errorf("State = %q, want the input state", res.State)
	}
	text := ""
	for _, l := range lines {
		text += l.Output + "\n"
	}
	if !strings.Contains(text, r.PluginMirror) {
		t.Errorf("terraform did not look in the mirror %s", r.PluginMirror)
	}
}

func TestRunBadRequests(t *testing.T) {
	t.Parallel()
	r := &Runner{TerraformPath: filepath.Join(t.TempDir(), "missing"), WorkRoot: t.TempDir()}
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"transition", Request{JobID: "j", Transition: "restart"}, `unknown transition "restart"`},
		{"job id", Request{JobID: "../j", Transition: build.Start}, `job id "../j"`},
		{"terraform missing", Request{JobID: "j", Transition: build.Start}, r.TerraformPath},
		{"bad archive", Request{JobID: "j", Transition: build.Start, Archive: []byte("x")}, "gzip"},
	} {
		if tc.name == "bad archive" {
			tc.req.Archive = []byte("x")
			rr := *r
			rr.TerraformPath = terraformBinary(t)
			res, lines := runBuild(t, &rr, testContext(t), nil, tc.req, nil)
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) || !hasLine(lines, func(l Line) bool { return l.Level == LevelError }) {
				t.Errorf("%s: Err = %v", tc.name, res.Err)
			}
			continue
		}
		res, lines := runBuild(t, r, testContext(t), nil, tc.req, nil)
		if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) || !hasLine(lines, func(l Line) bool { return l.Level == LevelError }) {
			t.Errorf("%s: Err = %v, want it to contain %q", tc.name, res.Err, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "bin", "terraform")
	_, err := (&Runner{TerraformPath: missing}).Check(testContext(t))
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Check = %v, want an error naming %s", err, missing)
	}
	_, err = (&Runner{TerraformPath: "no-such-terraform-binary"}).Check(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "no-such-terraform-binary") || !strings.Contains(err.Error(), "PATH") {
		t.Fatalf("Check = %v, want an error naming the name looked up in PATH", err)
	}
	terraformBinary(t)
	v, err := (&Runner{}).Check(testContext(t))
	if err != nil || !strings.HasPrefix(v, "1.") {
		t.Fatalf("Check = %q, %v; want terraform 1.x", v, err)
	}
}

func TestHCLString(t *testing.T) {
	for in, want := range map[string]string{
		`/srv/mirror`:        `"/srv/mirror"`,
		`/a "b"\c`:           `"/a \"b\"\\c"`,
		"/x/${HOME}/%{if}y$": `"/x/$${HOME}/%%{if}y$"`,
	} {
		if got := hclString(in); got != want {
			t.Errorf("hclString(%q) = %s, want %s", in, got, want)
		}
	}
}

// A build that uses Hangar's provider from the built-in mirror installs it without terraform's
// "Incomplete lock file information" warning, even over an author's stale lock entry for it.
func TestRunProviderFromMirrorHasCompleteLock(t *testing.T) {
	t.Parallel()
	r := newMirrorRunner(t)
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "hangarprovider")}, nil)
	if res.Err != nil {
		t.Fatalf("Run: %v", res.Err)
	}
	if !hasLine(lines, func(l Line) bool {
		return l.Stage == StageInit && strings.Contains(l.Output, "Installed hangar.dev/hangar/hangar")
	}) {
		t.Error("terraform init did not install Hangar's provider from the mirror")
	}
	for _, l := range lines {
		if strings.Contains(l.Output, "Incomplete lock file information") || strings.Contains(l.Output, "calculate lock file checksums locally") {
			t.Errorf("the build log has terraform's incomplete lock file warning: %s %q", l.Level, l.Output)
		}
	}
}

// terraform's refusal of a variable's value names the parameter, never the provisioner's work path
// or the variables file's line (which holds every value, sensitive ones too).
func TestRunVariableValidationNamesTheParameter(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	vars := map[string]string{"size": "xl", "count_of": "two", "token": "secret-token-value-93"}
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "validation"), Variables: vars}, nil)
	if res.Err == nil {
		t.Fatal("Run succeeded")
	}
	text := res.Err.Error() + "\n"
	for _, l := range lines {
		text += l.Output + "\n"
	}
	for _, want := range []string{`parameter "size": value must be one of s, m.`, `parameter "count_of": `} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("Err %q does not contain %q", res.Err, want)
		}
		if !hasLine(lines, func(l Line) bool { return l.Level == LevelError && strings.Contains(l.Output, want) }) {
			t.Errorf("no error line contains %q", want)
		}
	}
	for _, leak := range []string{r.WorkRoot, "tfvars", "secret-token-value-93", `"xl"`} {
		if strings.Contains(text, leak) {
			t.Errorf("the error or the log shows %q:\n%s", leak, text)
		}
	}
}

// A template reads a devcontainer.json through Hangar's data source, with the real terraform: what a
// Kubernetes workspace would run, as outputs it can use on any machine; a file asking for privileges
// fails the build naming the fields.
func TestDevcontainerDataSource(t *testing.T) {
	t.Parallel()
	r := newMirrorRunner(t)
	res, _ := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "devcontainer")}, nil)
	if res.Err != nil {
		t.Fatalf("Run: %v", res.Err)
	}
	var state struct {
		Outputs map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(res.State, &state); err != nil {
		t.Fatal(err)
	}
	var dc struct {
		User              int64             `json:"user"`
		WorkspaceFolder   string            `json:"workspace_folder"`
		ContainerEnv      map[string]string `json:"container_env"`
		RemoteEnv         map[string]string `json:"remote_env"`
		ForwardPorts      []int             `json:"forward_ports"`
		PostCreateCommand string            `json:"post_create_command"`
		PostStartCommand  string            `json:"post_start_command"`
		Warnings          []string          `json:"warnings"`
	}
	if err := json.Unmarshal(state.Outputs["devcontainer"].Value, &dc); err != nil {
		t.Fatalf("outputs %s: %v", res.State, err)
	}
	if string(state.Outputs["image"].Value) != `"mcr.microsoft.com/devcontainers/python:3"` || dc.User != 1000 || dc.WorkspaceFolder != "/workspaces/app" ||
		dc.ContainerEnv["APP_MODE"] != "dev" || dc.RemoteEnv["PATH"] != "${PATH}:/home/vscode/.local/bin" || len(dc.ForwardPorts) != 1 || dc.ForwardPorts[0] != 8000 ||
		!strings.Contains(dc.PostCreateCommand, "pip install -r requirements.txt") || !strings.Contains(dc.PostStartCommand, "make serve &") ||
		len(dc.Warnings) == 0 || !strings.Contains(strings.Join(dc.Warnings, "\n"), "ms-python.python") {
		t.Fatalf("image %s, devcontainer %+v", state.Outputs["image"].Value, dc)
	}

	res, _ = runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "devcontainer"), Variables: map[string]string{"which": "privileged.json"}}, nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "devcontainer.privileged") || !strings.Contains(res.Err.Error(), "devcontainer.runArgs[0]") {
		t.Fatalf("a privileged devcontainer.json: %v", res.Err)
	}
}

// A template reads its owner's profile from data.hangar_workspace (the environment the
// provisioner gives terraform from the build's variables), with the real terraform and provider.
func TestRunOwnerProfileInDataSource(t *testing.T) {
	t.Parallel()
	r := newMirrorRunner(t)
	vars := map[string]string{"start_count": "1", "workspace_id": "w-1", "workspace_name": "dev", "workspace_owner": "ada", "workspace_transition": "start",
		"workspace_owner_full_name": "Ada Lovelace", "workspace_owner_email": "ada@example.com", "workspace_owner_dotfiles_repo": "https://git.example.com/ada/dots.git#main"}
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "ownerprofile"), Variables: vars, Env: tfprovider.Env(vars)}, nil)
	if res.Err != nil {
		text := ""
		for _, l := range lines {
			text += l.Output + "\n"
		}
		t.Fatalf("Run: %v\n%s", res.Err, text)
	}
	var state struct {
		Outputs map[string]struct{ Value string } `json:"outputs"`
	}
	if err := json.Unmarshal(res.State, &state); err != nil {
		t.Fatal(err)
	}
	if got := state.Outputs["git"].Value; got != "Ada Lovelace <ada@example.com>" {
		t.Errorf("output git = %q", got)
	}
	if got := state.Outputs["dotfiles"].Value; got != "https://git.example.com/ada/dots.git#main" {
		t.Errorf("output dotfiles = %q", got)
	}
}

// newMirrorRunner is a runner whose terraform installs Hangar's provider from a mirror of this test
// binary (TestMain serves the provider when terraform starts it).
func newMirrorRunner(t *testing.T) *Runner {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t)
	if r.PluginMirror, err = tfprovider.Mirror(t.TempDir(), exe); err != nil {
		t.Fatal(err)
	}
	return r
}
