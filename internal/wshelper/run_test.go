package wshelper

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
)

func TestHostKeyPersisted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	logs := &logBuffer{}
	k1, err := LoadHostKey("", dir, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, HostKeyName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host key file: %v %v, want mode 0600", fi.Mode(), err)
	}
	if k1.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("host key type %s", k1.PublicKey().Type())
	}
	k2, err := LoadHostKey("", dir, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1.PublicKey().Marshal(), k2.PublicKey().Marshal()) {
		t.Fatal("a second start has another host key")
	}
	pub, _ := os.ReadFile(filepath.Join(dir, HostKeyName+".pub"))
	if string(pub) != string(ssh.MarshalAuthorizedKey(k1.PublicKey())) {
		t.Errorf(".pub %q", pub)
	}
	// An explicit file wins and must exist.
	if _, err := LoadHostKey(filepath.Join(dir, "absent"), dir, logs.logger()); err == nil {
		t.Error("a missing --host-key-file was accepted")
	}
	k3, err := LoadHostKey(filepath.Join(dir, HostKeyName), "", logs.logger())
	if err != nil || !bytes.Equal(k3.PublicKey().Marshal(), k1.PublicKey().Marshal()) {
		t.Fatalf("explicit file: %v", err)
	}
}

// helperRun runs Run in the background with a fresh state directory, one authorized key, SSH on
// 127.0.0.1:0; stop cancels it; the result arrives on the returned channel.
type helperRun struct {
	addr   string
	key    ssh.Signer
	host   ssh.PublicKey
	logs   *logBuffer
	stdout *logBuffer
	sigs   chan os.Signal
	stop   context.CancelFunc
	result chan runResult
	waited bool

	listening chan net.Addr
	stateDir  string
}

type runResult struct {
	code int
	err  error
}

func startRun(t *testing.T, cfg Config) *helperRun {
	t.Helper()
	h := launchRun(t, cfg)
	h.waitListening(t)
	return h
}

// waitListening waits until the helper serves SSH.
func (h *helperRun) waitListening(t *testing.T) {
	t.Helper()
	select {
	case a := <-h.listening:
		h.addr = a.String()
	case r := <-h.result:
		t.Fatalf("Run ended at once: %d %v\n%s", r.code, r.err, h.logs.String())
	case <-time.After(testTimeout):
		t.Fatal("Run did not listen")
	}
	hk, err := os.ReadFile(filepath.Join(h.stateDir, HostKeyName+".pub"))
	if err == nil {
		h.host, _, _, _, _ = ssh.ParseAuthorizedKey(hk)
	}
}

// launchRun starts Run as startRun does, without waiting for it to serve SSH.
func launchRun(t *testing.T, cfg Config) *helperRun {
	t.Helper()
	dir := t.TempDir()
	h := &helperRun{key: newSigner(t), logs: &logBuffer{}, stdout: &logBuffer{}, sigs: make(chan os.Signal, 1), result: make(chan runResult, 1)}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(dir, "state")
	}
	cfg.AuthorizedKeysFile = filepath.Join(dir, "authorized_keys")
	writeAuthorizedKeys(t, cfg.AuthorizedKeysFile, h.key)
	cfg.SSHAddr = "127.0.0.1:0"
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "SHELL=/bin/sh"}
	}
	cfg.Stdout, cfg.Stderr = h.stdout, h.stdout
	cfg.Signals = h.sigs
	cfg.Logger = h.logs.logger()
	h.listening, h.stateDir = make(chan net.Addr, 1), cfg.StateDir
	cfg.Listening = func(a net.Addr) { h.listening <- a }
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() {
		code, err := Run(ctx, cfg)
		h.result <- runResult{code, err}
	}()
	t.Cleanup(func() {
		cancel()
		if !h.waited {
			h.wait(t)
		}
		if t.Failed() {
			t.Logf("helper log:\n%s\noutput:\n%s", h.logs.String(), h.stdout.String())
		}
	})
	return h
}

func (h *helperRun) wait(t *testing.T) runResult {
	t.Helper()
	select {
	case r := <-h.result:
		h.waited = true
		return r
	case <-time.After(testTimeout):
		h.waited = true
		t.Fatal("Run did not end")
		return runResult{}
	}
}

func TestRunPropagatesExitCode(t *testing.T) {
	h := startRun(t, Config{Command: []string{"/bin/sh", "-c", "echo from the command; exit 7"}})
	r := h.wait(t)
	if r.err != nil || r.code != 7 {
		t.Fatalf("Run: %d %v, want 7", r.code, r.err)
	}
	if !strings.Contains(h.stdout.String(), "from the command") {
		t.Errorf("the command's output is not the container's: %q", h.stdout.String())
	}
}

func TestRunForwardsSignals(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGTERM, 128 + 15}, {syscall.SIGINT, 128 + 2}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			// A long grace period: the command must end by the forwarded signal, not be killed.
			h := startRun(t, Config{Command: []string{"/bin/sh", "-c", "echo ready; exec sleep 1000"}, GracePeriod: time.Hour})
			eventually(t, "the command to start", func() bool { return strings.Contains(h.stdout.String(), "ready") })
			h.sigs <- c.sig
			if r := h.wait(t); r.err != nil || r.code != c.want {
				t.Fatalf("Run: %d %v, want %d", r.code, r.err, c.want)
			}
		})
	}
}

func TestRunKeepsAliveWithoutCommand(t *testing.T) {
	h := startRun(t, Config{})
	client, err := ssh.Dial("tcp", h.addr, &ssh.ClientConfig{User: "proxy", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.key)}, HostKeyCallback: ssh.FixedHostKey(h.host), Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sess, _ := client.NewSession()
	out, err := sess.Output("echo up")
	if err != nil || string(out) != "up\n" {
		t.Fatalf("exec: %q %v", out, err)
	}
	select {
	case r := <-h.result:
		t.Fatalf("Run ended without being told: %+v", r)
	default:
	}
	h.sigs <- syscall.SIGTERM
	if r := h.wait(t); r.err != nil || r.code != 0 {
		t.Fatalf("Run after SIGTERM: %+v", r)
	}
}

func TestRunPostStartOncePerInstance(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	count := filepath.Join(t.TempDir(), "count")
	cmds := []PostStartCommand{{ID: "count", CommandLine: `echo "$WHO" >> ` + count, Env: []EnvVar{{Name: "WHO", Value: "poststart"}}}}
	runOnce := func(instance, want string) {
		h := startRun(t, Config{StateDir: state, Instance: instance, PostStart: cmds})
		eventually(t, want, func() bool { return strings.Contains(h.logs.String(), want) })
		h.sigs <- syscall.SIGTERM
		if r := h.wait(t); r.err != nil || r.code != 0 {
			t.Fatalf("Run: %+v", r)
		}
	}
	lines := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "poststart\n")
	}
	runOnce("pod-a", "postStart commands succeeded")
	runOnce("pod-a", "already ran in this instance") // the container restarted
	if n := lines(); n != 1 {
		t.Fatalf("postStart ran %d times in one instance, want 1", n)
	}
	runOnce("pod-b", "postStart commands succeeded") // the workspace started again
	if n := lines(); n != 2 {
		t.Fatalf("postStart ran %d times in two instances, want 2", n)
	}
}

// TestRunServesSSHAfterPostStart: SSH (the pod's readiness probe) is served only once the
// postStart commands have ended, so the workspace is Running only then.
func TestRunServesSSHAfterPostStart(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	h := launchRun(t, Config{Instance: "pod", PostStart: []PostStartCommand{
		{ID: "wait", CommandLine: "echo waiting; until [ -e " + gate + " ]; do sleep 0.01; done"}}})
	eventually(t, "postStart to run", func() bool { return strings.Contains(h.stdout.String(), "waiting") })
	select {
	case a := <-h.listening:
		t.Fatalf("ssh served at %s while postStart runs", a)
	default:
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitListening(t)
	if !strings.Contains(h.logs.String(), "postStart commands succeeded") {
		t.Fatalf("served before postStart succeeded:\n%s", h.logs.String())
	}
}

// TestRunServesSSHBesideNonBlockingPostStart: with non-blocking postStart commands (the devfile's
// hangar.dev/startup-behavior), SSH is served at once, the commands running beside; they still
// run to their end.
func TestRunServesSSHBesideNonBlockingPostStart(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	h := launchRun(t, Config{Instance: "pod", PostStartNonBlocking: true, PostStart: []PostStartCommand{
		{ID: "wait", CommandLine: "echo waiting; until [ -e " + gate + " ]; do sleep 0.01; done; echo went on"}}})
	h.waitListening(t)
	if strings.Contains(h.logs.String(), "postStart commands succeeded") {
		t.Fatalf("postStart ended before the gate opened:\n%s", h.logs.String())
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "postStart to end", func() bool { return strings.Contains(h.logs.String(), "postStart commands succeeded") })
	if !strings.Contains(h.stdout.String(), "went on") {
		t.Fatalf("postStart's output: %q", h.stdout.String())
	}
}

// TestRunPostStartFailureIsTold: a failed postStart does not stop the container; SSH is served and
// every shell session is told, with the path of the commands' output.
func TestRunPostStartFailureIsTold(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	h := startRun(t, Config{Instance: "pod", StateDir: state, PostStart: []PostStartCommand{
		{ID: "install", CommandLine: "echo npm says no; exit 3"}}})
	c, err := ssh.Dial("tcp", h.addr, &ssh.ClientConfig{User: "proxy", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.key)}, HostKeyCallback: ssh.FixedHostKey(h.host), Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sess.Stderr = &stderr
	sess.Stdin = strings.NewReader("exit 0\n")
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Wait(); err != nil {
		t.Fatalf("shell: %v", err)
	}
	want := `hangar: this workspace's postStart commands failed: postStart command "install": exit status 3.`
	if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), filepath.Join(state, PostStartLog)) {
		t.Fatalf("the shell was told %q, want %q and the log's path", stderr.String(), want)
	}
	if b, err := os.ReadFile(filepath.Join(state, PostStartLog)); err != nil || string(b) != "npm says no\n" {
		t.Fatalf("the postStart log: %q %v", b, err)
	}
	// An exec session is not told (its output is the command's).
	out, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := out.CombinedOutput("echo plain"); err != nil || string(b) != "plain\n" {
		t.Fatalf("exec: %q %v", b, err)
	}
}

// TestRunPostStartWorkingDirExpands: a working directory such as ${PROJECT_SOURCE}/app is expanded
// from the command's environment, as the devfile means it.
func TestRunPostStartWorkingDirExpands(t *testing.T) {
	src := t.TempDir()
	if err := os.Mkdir(filepath.Join(src, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	cmds := []PostStartCommand{{ID: "where", CommandLine: "pwd > $OUT", WorkingDir: "${PROJECT_SOURCE}/app", Env: []EnvVar{{Name: "OUT", Value: filepath.Join(state, "pwd")}}}}
	if err := RunPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin", "PROJECT_SOURCE=" + src}, state, "pod", io.Discard, (&logBuffer{}).logger()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "pwd")); strings.TrimSpace(string(b)) != filepath.Join(src, "app") {
		t.Fatalf("ran in %q, want %s/app", b, src)
	}
}

func TestRunPostStartFailure(t *testing.T) {
	state := t.TempDir()
	dir := t.TempDir()
	log := &logBuffer{}
	cmds := []PostStartCommand{
		{ID: "first", CommandLine: "pwd > first; echo $A > env", WorkingDir: dir, Env: []EnvVar{{Name: "A", Value: "1"}}},
		{ID: "fails", CommandLine: "exit 3"},
		{ID: "never", CommandLine: "touch " + filepath.Join(dir, "never")},
	}
	err := RunPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod", io.Discard, log.logger())
	if err == nil || !strings.Contains(err.Error(), `"fails"`) {
		t.Fatalf("want the failing command's error, got %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "first")); strings.TrimSpace(string(b)) != dir {
		t.Errorf("working directory: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "env")); string(b) != "1\n" {
		t.Errorf("env: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); err == nil {
		t.Error("a command after the failure ran")
	}
	if _, err := os.Stat(filepath.Join(state, PostStartMarker)); err == nil {
		t.Fatal("a failure was recorded as success")
	}
	cmds[1].CommandLine = "true"
	if err := RunPostStart(context.Background(), cmds, nil, state, "pod", io.Discard, log.logger()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); err != nil {
		t.Fatal("the commands did not run again after a failure")
	}
}

func TestParsePostStart(t *testing.T) {
	cmds, err := ParsePostStart(`[{"id":"a","commandLine":"make","workingDir":"/p","env":[{"name":"X","value":"1"}]}]`)
	if err != nil || len(cmds) != 1 || cmds[0].Env[0].Value != "1" {
		t.Fatalf("%+v %v", cmds, err)
	}
	for _, bad := range []string{`{}`, `[{"id":"a"}]`, `[{"commandLine":"x","shell":"bash"}]`, `[{"commandLine":"x","env":[{"name":"A=B"}]}]`, `[] []`} {
		if _, err := ParsePostStart(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if cmds, err := ParsePostStart(" "); err != nil || cmds != nil {
		t.Errorf("empty: %v %v", cmds, err)
	}
}

// TestReap runs Reap in a subprocess that stands for PID 1 (a child subreaper), with a command
// that leaves an orphan behind: the orphan is reaped once it ends, signals reach the command, and
// the command's exit code is the reaper's.
func TestReap(t *testing.T) {
	orphanIn, orphanInW, _ := os.Pipe() // the orphan reads this; closing the writer ends it
	defer orphanIn.Close()
	// The subshell starts cat and exits, leaving it an orphan; "adopted" is printed once the
	// subshell is gone (had cat ended before, the subshell itself could have waited for it).
	script := `(cat <&3 >/dev/null & echo "orphan $!"); echo adopted; read code; exit "$code"`
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSHELPER_TEST_REAPER=1", "WSHELPER_TEST_SCRIPT="+script)
	cmd.ExtraFiles = []*os.File{orphanIn}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	orphanIn.Close()
	line := readUntil(t, stdout, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "orphan ")))
	if err != nil {
		t.Fatalf("orphan pid: %q", line)
	}
	readUntil(t, stdout, "adopted\n")
	orphanInW.Close() // the orphan ends; only the reaper can wait for it
	t.Cleanup(func() {
		if t.Failed() {
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Logf("orphan %d: %s", pid, st)
		}
	})
	readUntil(t, stderr, `msg="reaped an orphan" pid=`+strconv.Itoa(pid)+"\n")
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("orphan %d still in /proc (a zombie?)", pid)
	}
	io.WriteString(stdin, "7\n")
	err = cmd.Wait()
	if cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("reaper exited %v, want the command's 7", err)
	}

	// A signal to the reaper reaches the command.
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSHELPER_TEST_REAPER=1", "WSHELPER_TEST_SCRIPT=echo ready; exec sleep 1000")
	stdout, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readUntil(t, stdout, "ready")
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if got := cmd.ProcessState.ExitCode(); got != 128+15 {
		t.Fatalf("reaper exited %d after SIGTERM, want 143 (the command's, killed by SIGTERM)", got)
	}
}

// runPostStart reports the postStart commands as the startup step "post-start": running with the
// command that runs, then failed with the output's end and the error, or done; commands that
// already ran in this instance report nothing.
func TestRunPostStartReports(t *testing.T) {
	state := t.TempDir()
	var got []protocol.StartupStep
	report := func(st protocol.StartupStep) { got = append(got, st) }
	cmds := []PostStartCommand{{ID: "first", CommandLine: "echo hello"}, {ID: "fails", CommandLine: "echo boom >&2; exit 3"}}
	if err := runPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod", io.Discard, (&logBuffer{}).logger(), report); err == nil {
		t.Fatal("the failing command did not fail")
	}
	if len(got) != 3 || got[0].State != protocol.StepRunning || got[0].Detail != "command 1/2: first" || got[1].Detail != "command 2/2: fails" ||
		got[2].State != protocol.StepFailed || got[2].Detail != "command 2/2: fails" || got[2].StartedAt == nil || got[2].EndedAt == nil ||
		!strings.HasPrefix(got[2].Log, "hello\nboom\npostStart command \"fails\": exit status 3\n") || got[2].Name != protocol.StepPostStart {
		t.Fatalf("reports of a failure: %+v", got)
	}
	got = nil
	cmds[1].CommandLine = "true"
	if err := runPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod", io.Discard, (&logBuffer{}).logger(), report); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].State != protocol.StepDone || got[2].Log != "hello\n" {
		t.Fatalf("reports of a success: %+v", got)
	}
	got = nil
	if err := runPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod", io.Discard, (&logBuffer{}).logger(), report); err != nil || len(got) != 0 {
		t.Fatalf("in the same instance again: %v, reports %+v", err, got)
	}
}

// The commands that run once per workspace (a devcontainer.json's postCreate) are a step of their
// own, post-create, with its own log, before post-start; at a later start only post-start runs
// and is reported.
func TestRunPostCreateIsAStep(t *testing.T) {
	state := t.TempDir()
	var got []protocol.StartupStep
	report := func(st protocol.StartupStep) { got = append(got, st) }
	cmds := []PostStartCommand{{ID: "install", CommandLine: "echo installed", OncePerWorkspace: true}, {ID: "serve", CommandLine: "echo serving"}}
	if err := runPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod-1", io.Discard, (&logBuffer{}).logger(), report); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, st := range got {
		lines = append(lines, st.Name+" "+st.State+" "+st.Detail+" "+strings.TrimSpace(st.Log))
	}
	want := []string{"post-create running command 1/1: install ", "post-create done command 1/1: install installed",
		"post-start running command 1/1: serve ", "post-start done command 1/1: serve serving"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("reports:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	got = nil
	if err := runPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod-2", io.Discard, (&logBuffer{}).logger(), report); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != protocol.StepPostStart || got[1].Name != protocol.StepPostStart || got[1].State != protocol.StepDone {
		t.Fatalf("the next start: %+v", got)
	}
}

// Reports of a step go from their own goroutine: a server that does not answer holds nothing up,
// and the latest report replaces those not sent yet.
func TestReportStepNeverWaits(t *testing.T) {
	release := make(chan struct{})
	got := make(chan protocol.StartupStep, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var st protocol.StartupStep
		if r.URL.Path != protocol.StartupStepPath || r.Header.Get("Authorization") != "Bearer hwa_test" || json.NewDecoder(r.Body).Decode(&st) != nil {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		got <- st
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	report := reportStep(ctx, Config{ServerURL: srv.URL, Token: "hwa_test"}, (&logBuffer{}).logger())
	report(protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepRunning, Detail: "command 1/2: a"})
	if first := <-got; first.Detail != "command 1/2: a" {
		t.Fatalf("first report %+v", first)
	}
	// The server holds the first request: these return at once all the same.
	report(protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepRunning, Detail: "command 2/2: b"})
	report(protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepFailed, Detail: "command 2/2: b"})
	release <- struct{}{}
	if second := <-got; second.State != protocol.StepFailed {
		t.Fatalf("after the held request: %+v, want the latest report (failed)", second)
	}
	// Another step's report does not replace this one's: each step's latest goes, in order.
	report(protocol.StartupStep{Name: protocol.StepPostCreate, State: protocol.StepDone})
	report(protocol.StartupStep{Name: protocol.StepPostStart, State: protocol.StepRunning})
	release <- struct{}{} // the failed report's request ends
	a := <-got
	release <- struct{}{}
	if b := <-got; a.Name != protocol.StepPostCreate || a.State != protocol.StepDone || b.Name != protocol.StepPostStart {
		t.Fatalf("two steps' reports: %+v then %+v", a, b)
	}
	release <- struct{}{}
}
