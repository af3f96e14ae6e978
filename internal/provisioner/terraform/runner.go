// Package terraform runs the real terraform binary for one workspace build of `hangar provisioner`
// (seed terraform-state-management.md): it unpacks the template version's module (package
// tfmodule), writes the build's input state, runs init and apply (start, stop) or destroy (delete)
// through terraform-exec, streams terraform's output line by line, and hands back the state
// terraform wrote, also after a failure or an interrupt.
package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/tfmodule"
	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// Stages of a run, the Stage of every Line.
const (
	StageSetup     = "Setting up"
	StageInit      = "Initializing Terraform"
	StageApply     = "Applying"
	StageDestroy   = "Destroying"
	StageReadState = "Reading state"
)

// NoStateMessage is logged when a delete finds no state and runs nothing (seed, "Empty State
// Handling").
const NoStateMessage = "The terraform state does not exist, there is nothing to do"

// DefaultGracePeriod is how long an interrupted terraform may take to stop before it is killed.
const DefaultGracePeriod = 5 * time.Minute

// ErrCanceled is wrapped by the Err of a run interrupted by its cancel channel.
var ErrCanceled = errors.New("build canceled")

// stateFile is where the local backend keeps the state, in the module directory.
const stateFile = "terraform.tfstate"

// Line is one line of a run's log.
type Line struct {
	Stage  string
	Level  string // LevelInfo, LevelWarn or LevelError
	Output string
}

// Request is one build for Run.
type Request struct {
	// JobID names the run's directory under Runner.WorkRoot: a single path element.
	JobID      string
	Transition build.Transition
	// Archive is the module, a gzipped tar archive (see Pack).
	Archive []byte
	// State is the state the build starts from; nil for none.
	State []byte
	// Variables are offered to the module: only those it declares are passed to terraform. Their
	// values are treated as secrets and never logged.
	Variables map[string]string
	// Env is added to terraform's environment (the facts Hangar's own provider reads). Like
	// Variables, its values are never logged. TF_* variables are dropped.
	Env map[string]string
	// LogLevel "debug" runs terraform with TF_LOG=DEBUG (this run only): its log lines come on
	// stderr and are logged at LevelDebug. Anything else: no terraform log.
	LogLevel string
	// Log, if not nil, gets every line of the run in order, from one goroutine at a time, and
	// never after Run returns.
	Log func(Line)
}

// Result is how a run ended.
type Result struct {
	// State is terraform.tfstate after the run (also after a failure or an interrupt); nil if there
	// was none.
	State []byte
	// Err is nil on success. It says what was being done and carries terraform's last error lines,
	// never the state or the variables' values.
	Err error
	// Canceled says the cancel channel closed while terraform had work left, and terraform was
	// interrupted. Err then wraps ErrCanceled, or is nil if terraform finished anyway.
	Canceled bool
	// NotStarted (Recover only) says the adopted run never started terraform's apply or destroy:
	// no trace of it is in the work directory, so no resource was changed, and the build may be
	// run again (Err then says why it did not finish).
	NotStarted bool
}

// Runner runs terraform for workspace builds. Its fields are read-only once it runs; one Runner
// may run several builds at once.
type Runner struct {
	// TerraformPath is the terraform executable: a path, or a name looked up in PATH. Default
	// "terraform".
	TerraformPath string
	// WorkRoot holds a directory per run (WorkRoot/<JobID>), removed when the run ends. Default
	// <os.TempDir()>/hangar-terraform.
	WorkRoot string
	// PluginMirror, if set, is a filesystem_mirror directory terraform installs the providers
	// hangar.dev/*/* from (and never from a registry).
	PluginMirror string
	// GracePeriod is how long terraform may take to stop after an interrupt before it is killed.
	// Default DefaultGracePeriod.
	GracePeriod time.Duration
	// KeepWorkDir leaves each run's work directory (with the state terraform wrote) in place when
	// Run returns; the caller removes it with Remove once the outcome is reported. A provisioner
	// killed in between finds it with Leftovers and adopts it with Recover.
	KeepWorkDir bool
	// Shim, if set, is an executable that runs as the survival shim when started with the shim's
	// environment (the hangar binary: IsShim, ShimMain). terraform apply and destroy then outlive a
	// provisioner that is killed, and Recover adopts their result when it comes back.
	Shim string
	// Sandbox, if set, isolates the builds (package sandbox): terraform, its providers and their
	// local-exec commands run as Sandbox.User in a private mount namespace where WorkRoot (but the
	// build's own directory), Sandbox.Hide and /tmp are hidden. Hangar's provider is then offered
	// from the sandbox (PluginMirror is not used).
	Sandbox *sandbox.Config
	// PassEnv names variables of the provisioner's environment that every build gets (cloud
	// credentials an operator gives templates on purpose). Every other variable is left out.
	PassEnv []string
}

// versions caches what `terraform version -json` prints, by terraform path (asked once per
// process; the shim answers terraform-exec's version question with it).
var versions sync.Map

func (r *Runner) versionJSON(ctx context.Context, tfPath string) (string, error) {
	if v, ok := versions.Load(tfPath); ok {
		return v.(string), nil
	}
	cmd := exec.CommandContext(ctx, tfPath, "version", "-json")
	for k, v := range r.terraformEnv(os.DevNull, os.TempDir()) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	if !json.Valid(out) {
		return "", fmt.Errorf("terraform version -json printed no JSON")
	}
	v := strings.TrimSpace(string(out))
	versions.Store(tfPath, v)
	return v, nil
}

func (r *Runner) workRoot() string {
	if r.WorkRoot == "" {
		return filepath.Join(os.TempDir(), "hangar-terraform")
	}
	return r.WorkRoot
}

func (r *Runner) terraformPath() (string, error) {
	name := r.TerraformPath
	if name == "" {
		name = "terraform"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if !strings.ContainsRune(name, filepath.Separator) {
			return "", fmt.Errorf("terraform executable %q not found in PATH (%s): install Terraform, or point --terraform (HANGAR_TERRAFORM) at the terraform binary", name, os.Getenv("PATH"))
		}
		return "", fmt.Errorf("terraform executable %q cannot be run: %w: install Terraform there, or point --terraform (HANGAR_TERRAFORM) at the terraform binary", name, errors.Unwrap(err))
	}
	return p, nil
}

// Check runs `terraform version` and returns the version, or an error naming the executable tried
// and how to fix it. With a Sandbox, terraform runs in it, as the build user, so that a sandbox that
// cannot be set up is known at start.
func (r *Runner) Check(ctx context.Context) (string, error) {
	if err := Supported(); err != nil {
		return "", err
	}
	p, err := r.terraformPath()
	if err != nil {
		return "", err
	}
	execPath, env := p, r.terraformEnv(os.DevNull, os.TempDir())
	if r.Sandbox != nil {
		spec := r.sandboxSpec(p, "")
		v, err := spec.Encode()
		if err != nil {
			return "", err
		}
		execPath, env[sandbox.Env] = r.Sandbox.Exe, v
	}
	tf, err := tfexec.NewTerraform(os.TempDir(), execPath)
	if err != nil {
		return "", fmt.Errorf("terraform %q: %w", p, err)
	}
	if err := tf.SetEnv(env); err != nil {
		return "", err
	}
	v, _, err := tf.Version(ctx, true)
	if err != nil {
		if r.Sandbox != nil {
			return "", fmt.Errorf("terraform %q does not answer `terraform version` in the template sandbox (as user %d): %s", p, r.Sandbox.User.UID, lastLine(err))
		}
		return "", fmt.Errorf("terraform %q does not answer `terraform version`: %s", p, firstLine(err))
	}
	return v.String(), nil
}

// sandboxSpec is the sandbox of a run of terraform tfPath in the job directory jobDir ("": none,
// for `terraform version`).
func (r *Runner) sandboxSpec(tfPath, jobDir string) sandbox.Spec {
	root := r.workRoot()
	if a, err := filepath.Abs(root); err == nil {
		root = a
	}
	if e, err := filepath.EvalSymlinks(root); err == nil {
		root = e
	}
	spec := sandbox.Spec{UID: r.Sandbox.User.UID, GID: r.Sandbox.User.GID, Groups: r.Sandbox.User.Groups, Terraform: tfPath,
		Hide:     append(append([]string{}, r.Sandbox.Hide...), root),
		Provider: r.Sandbox.Exe, ProviderAddress: tfprovider.Address, ProviderVersion: tfprovider.Version}
	if jobDir != "" {
		spec.Expose = []string{filepath.Join(root, filepath.Base(jobDir))}
	}
	return spec
}

// lastLine is the last non-empty line of err (the sandbox stage's own error comes last).
func lastLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// passedEnv are the variables of the provisioner's environment every terraform run gets besides
// Runner.PassEnv: what finding programs, reaching a registry through a proxy and trusting its
// certificate need. Nothing else of the provisioner's environment (Hangar's configuration, a
// database URL, tokens, cloud credentials, TF_* settings) reaches a template.
var passedEnv = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
	"http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// terraformEnv is the environment of every terraform run: passedEnv and Runner.PassEnv from the
// provisioner's own (never a TF_* variable, CHECKPOINT_DISABLE or HANGAR_* variable), HOME, the
// runner's CLI config and CHECKPOINT_DISABLE=1. terraform-exec adds TF_IN_AUTOMATION=1, empties
// TF_LOG* and refuses TF_INPUT in SetEnv; every command it runs has -input=false instead.
func (r *Runner) terraformEnv(cliConfig, home string) map[string]string {
	env := map[string]string{}
	for _, k := range append(append([]string{}, passedEnv...), r.PassEnv...) {
		if strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "HANGAR_") || k == "CHECKPOINT_DISABLE" || k == "HOME" {
			continue // Hangar's own configuration and terraform's settings are the runner's
		}
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	env["HOME"] = home
	env["TF_CLI_CONFIG_FILE"] = cliConfig
	env["CHECKPOINT_DISABLE"] = "1"
	return env
}

// cliConfig is the content of the runner's CLI configuration file.
func (r *Runner) cliConfig() (string, error) {
	var b strings.Builder
	b.WriteString("# Written by hangar provisioner for one run.\ndisable_checkpoint = true\n")
	if mirror := r.PluginMirror; mirror != "" || r.Sandbox != nil {
		if r.Sandbox != nil {
			mirror = sandbox.PluginDir // the sandbox offers the provider there
		}
		mirror, err := filepath.Abs(mirror)
		if err != nil {
			return "", fmt.Errorf("plugin mirror: %w", err)
		}
		fmt.Fprintf(&b, `provider_installation {
  filesystem_mirror {
    path    = %s
    include = ["hangar.dev/*/*"]
  }
  direct {
    exclude = ["hangar.dev/*/*"]
  }
}
`, hclString(mirror))
	}
	return b.String(), nil
}

// providerPackage is the executable terraform installs as Hangar's provider, "" when the runner
// offers none.
func (r *Runner) providerPackage() string {
	switch {
	case r.Sandbox != nil:
		return r.Sandbox.Exe
	case r.PluginMirror != "":
		return mirrorPackage(r.PluginMirror)
	}
	return ""
}

// hclString quotes s as an HCL string literal, with template sequences escaped.
func hclString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case (c == '$' || c == '%') && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte(c)
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Why a run was interrupted.
const (
	notInterrupted = iota
	byCancel
	byContext
)

// varFileName is the file in a run's directory that gives terraform the variables' values.
const varFileName = "hangar.tfvars.json"

// run is the state of one Run.
type run struct {
	// leftInGroup is what remained of terraform's process group when its command ended (killGroup).
	leftInGroup []sandbox.Process
	r           *Runner
	req         Request
	log         *logger
	stdout      *lineWriter
	stderr      *lineWriter

	ctx       context.Context // the caller's
	runCtx    context.Context // terraform's: canceled to interrupt it
	mu        sync.Mutex
	reason    int
	cut       bool // the interrupt stopped a terraform command or kept one from starting
	moduleDir string
}

func (x *run) interruptReason() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.reason
}

// Run runs one build: extract the module, write the state and a CLI config, terraform init, then
// apply (start, stop) or destroy (delete), and read the state back. A delete without state runs
// nothing and succeeds (seed, "Empty State Handling").
//
// When cancel closes (a nil channel never does) while terraform runs, terraform is interrupted
// (SIGINT), given GracePeriod to stop and write its state, then killed; the result is Canceled with
// the state it wrote. ctx ending stops the run the same way, with an Err wrapping ctx.Err().
func (r *Runner) Run(ctx context.Context, cancel <-chan struct{}, req Request) Result {
	log := &logger{fn: req.Log}
	if req.Transition == build.Delete && len(req.State) == 0 {
		log.begin(StageDestroy)
		log.emit(LevelInfo, NoStateMessage)
		return Result{}
	}
	log.begin(StageSetup)
	fail := func(err error) Result {
		log.emit(LevelError, err.Error())
		return Result{Err: err}
	}
	switch req.Transition {
	case build.Start, build.Stop, build.Delete:
	default:
		return fail(fmt.Errorf("unknown transition %q", req.Transition))
	}
	if req.JobID == "" || req.JobID == "." || req.JobID == ".." || strings.ContainsAny(req.JobID, `/\`) || req.JobID != filepath.Base(req.JobID) {
		return fail(fmt.Errorf("job id %q cannot name a directory", req.JobID))
	}
	select {
	case <-cancel:
		log.emit(LevelWarn, "Canceled before terraform started")
		return Result{Canceled: true, Err: fmt.Errorf("%w before terraform started", ErrCanceled)}
	default:
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("before terraform started: %w", err))
	}

	jobDir := filepath.Join(r.workRoot(), req.JobID)
	x := &run{r: r, req: req, log: log, ctx: ctx, moduleDir: filepath.Join(jobDir, "module")}
	varFile := filepath.Join(jobDir, varFileName)
	x.stdout = &lineWriter{log: log, varFile: varFile}
	x.stderr = &lineWriter{log: log, stderr: true, varFile: varFile}
	defer func() {
		if r.KeepWorkDir {
			return
		}
		if err := os.RemoveAll(jobDir); err != nil {
			log.emit(LevelWarn, fmt.Sprintf("Removing the work directory: %v", err))
		}
	}()

	runCtx, interrupt := context.WithCancel(context.WithoutCancel(ctx))
	defer interrupt()
	x.runCtx = runCtx
	done := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		var reason int
		select {
		case <-done:
			return
		case <-cancel:
			reason = byCancel
		case <-ctx.Done():
			reason = byContext
		}
		x.mu.Lock()
		x.reason = reason
		x.mu.Unlock()
		if reason == byCancel {
			log.emit(LevelWarn, fmt.Sprintf("Build canceled: interrupting terraform; it has %s to stop and write its state", x.grace()))
		} else {
			log.emit(LevelWarn, fmt.Sprintf("Stopping (%v): interrupting terraform; it has %s to stop and write its state", ctx.Err(), x.grace()))
		}
		interrupt()
	}()

	err := x.terraform()
	r.killLeftovers(log, x.leftInGroup)
	close(done)
	<-watcherDone

	res := Result{Err: err}
	reason := x.interruptReason()
	if x.cut {
		switch reason {
		case byCancel:
			res.Canceled = true
		case byContext:
			if res.Err == nil {
				res.Err = fmt.Errorf("terraform finished, but the run was stopped: %w", ctx.Err())
			}
		}
	}
	if res.Err != nil {
		// The detail (terraform's error lines) was logged as terraform wrote it.
		log.emit(LevelError, firstLine(res.Err))
	}

	// The state is read in a stage of its own only after terraform succeeded: after a failure or
	// an interrupt the build ends in the stage terraform stopped in, so that a log follower marks
	// that stage as failed or canceled, not the reading of the state after it.
	if res.Err == nil {
		log.begin(StageReadState)
	}
	state, note, rerr := readState(x.moduleDir)
	if note != "" {
		log.emit(LevelWarn, note)
	}
	switch {
	case rerr == nil:
		res.State = state
		log.emit(LevelInfo, fmt.Sprintf("Read the state (%d bytes)", len(state)))
	case errors.Is(rerr, os.ErrNotExist):
		log.emit(LevelInfo, "Terraform wrote no state")
	default:
		rerr = fmt.Errorf("reading the state: %w", rerr)
		log.emit(LevelError, rerr.Error())
		if res.Err == nil {
			res.Err = rerr
		} else {
			res.Err = errors.Join(res.Err, rerr)
		}
	}
	return res
}

// readState reads the state terraform left in dir. A state file that is not JSON (terraform killed
// while rewriting it) is not reported: terraform's backup of the previous state is, if valid, and
// otherwise none (the build keeps the state it started from). note says what was done instead.
func readState(dir string) (state []byte, note string, err error) {
	b, err := readBuildFile(filepath.Join(dir, stateFile))
	if err == nil && json.Valid(b) {
		return b, "", nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", err // no state file: terraform wrote none
	}
	if bk, berr := readBuildFile(filepath.Join(dir, stateFile+".backup")); berr == nil && json.Valid(bk) {
		return bk, "The state file is cut short (terraform was killed while writing it): reporting terraform's backup of the previous state instead", nil
	}
	return nil, "", fmt.Errorf("the state file terraform left is not valid JSON (killed while writing it?), and there is no valid backup: the build keeps the state it started from")
}

// readBuildFile reads a state file the build left, refusing what a template could plant there
// instead of terraform's state: a symbolic link (to a file the sandbox hid from it), a FIFO (the
// provisioner would block), a device, or more than protocol.MaxStateBytes (a sparse file of any size
// would be read whole into memory).
func readBuildFile(path string) ([]byte, error) {
	f, err := openBuildFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%s: not a file terraform wrote (a symbolic link?): %w", filepath.Base(path), err)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): the template replaced terraform's state", filepath.Base(path), fi.Mode().Type())
	}
	if fi.Size() > protocol.MaxStateBytes {
		return nil, fmt.Errorf("%s is %d bytes, over the %d a state may have", filepath.Base(path), fi.Size(), protocol.MaxStateBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, protocol.MaxStateBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > protocol.MaxStateBytes {
		return nil, fmt.Errorf("%s grew over the %d bytes a state may have", filepath.Base(path), protocol.MaxStateBytes)
	}
	return b, nil
}

func (x *run) grace() time.Duration {
	if x.r.GracePeriod > 0 {
		return x.r.GracePeriod
	}
	return DefaultGracePeriod
}

// terraform runs the setup, init and apply or destroy stages.
func (x *run) terraform() error {
	// Setting up.
	tfPath, err := x.r.terraformPath()
	if err != nil {
		return err
	}
	// The work directory holds the state and the CLI config: only the provisioner's user may read
	// it. A directory left by a crashed run of the same job is replaced.
	jobDir := filepath.Dir(x.moduleDir)
	if err := os.MkdirAll(filepath.Dir(jobDir), 0o700); err != nil {
		return fmt.Errorf("creating the work root: %w", err)
	}
	if err := os.RemoveAll(jobDir); err != nil {
		return fmt.Errorf("cleaning the work directory: %w", err)
	}
	if err := os.Mkdir(jobDir, 0o700); err != nil {
		return fmt.Errorf("creating the work directory: %w", err)
	}
	if err := tfmodule.Extract(x.req.Archive, x.moduleDir); err != nil {
		return err
	}
	// The state comes from the request only, never from the archive.
	for _, p := range []string{stateFile, stateFile + ".backup", ".terraform.tfstate.lock.info", ".terraform", "terraform.tfstate.d"} {
		if err := os.RemoveAll(filepath.Join(x.moduleDir, p)); err != nil {
			return fmt.Errorf("setting up: %w", err)
		}
	}
	if x.req.State != nil {
		if err := os.WriteFile(filepath.Join(x.moduleDir, stateFile), x.req.State, 0o600); err != nil {
			return fmt.Errorf("writing the state: %w", err)
		}
	}
	cfg, err := x.r.cliConfig()
	if err != nil {
		return err
	}
	if pkg := x.r.providerPackage(); pkg != "" {
		if err := lockProvider(x.moduleDir, pkg); err != nil {
			return err
		}
	}
	cfgPath := filepath.Join(filepath.Dir(x.moduleDir), "terraform.rc")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("writing the CLI config: %w", err)
	}
	home := filepath.Join(jobDir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return fmt.Errorf("creating the build's home: %w", err)
	}
	execPath, env := tfPath, x.r.terraformEnv(cfgPath, home)
	for k, v := range x.req.Env {
		if !strings.HasPrefix(k, "TF_") {
			env[k] = v
		}
	}
	target := tfPath // what the shim runs as terraform
	if x.r.Sandbox != nil {
		if err := x.r.handOver(jobDir); err != nil {
			return err
		}
		spec, err := x.r.sandboxSpec(tfPath, jobDir).Encode()
		if err != nil {
			return err
		}
		env[sandbox.Env] = spec
		execPath, target = x.r.Sandbox.Exe, x.r.Sandbox.Exe
	}
	if x.r.Shim != "" {
		execPath = x.r.Shim
		env[shimTerraformEnv], env[shimDirEnv] = target, jobDir
		if v, err := x.r.versionJSON(x.runCtx, tfPath); err == nil {
			env[shimVersionEnv] = v
		}
	}
	tf, err := tfexec.NewTerraform(x.moduleDir, execPath)
	if err != nil {
		return fmt.Errorf("terraform: %w", err)
	}
	if err := tf.SetEnv(env); err != nil {
		return fmt.Errorf("terraform environment: %w", err)
	}
	if err := tf.SetWaitDelay(x.grace()); err != nil {
		return err
	}
	if x.interrupted() {
		return x.interruptErr("terraform version", nil)
	}
	// Learn the version before output is logged: terraform-exec asks it before some commands and
	// would otherwise copy its JSON into the log.
	v, _, err := tf.Version(x.runCtx, false)
	if err != nil {
		if x.interruptReason() != notInterrupted {
			return x.interruptErr("terraform version", err)
		}
		return fmt.Errorf("terraform %q does not answer `terraform version`: %s", tfPath, firstLine(err))
	}
	x.log.emit(LevelInfo, "Terraform v"+v.String())
	if x.req.LogLevel == LevelDebug {
		// terraform-exec empties TF_LOG unless a log path is set: the path is terraform's own
		// stderr, which the log ships (the shim appends to its stderr file, so both writers of it
		// keep their lines).
		if err := tf.SetLog("DEBUG"); err != nil {
			return fmt.Errorf("terraform debug log: %w", err)
		}
		if err := tf.SetLogPath("/dev/stderr"); err != nil {
			return fmt.Errorf("terraform debug log: %w", err)
		}
		x.log.emit(LevelInfo, "Terraform log level: DEBUG (TF_LOG=DEBUG for this build)")
	}
	tf.SetStdout(x.stdout)
	tf.SetStderr(x.stderr)

	// Initializing Terraform.
	x.log.begin(StageInit)
	if err := x.command("init", func(ctx context.Context) error { return tf.Init(ctx) }); err != nil {
		return err
	}
	mod, err := tfmodule.Inspect(x.req.Archive)
	if err != nil {
		return err
	}
	var names []string
	for _, n := range mod.Variables {
		if _, ok := x.req.Variables[n]; ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	// Variables are secrets: they go to terraform in a file only the provisioner's user may read,
	// never on its command line (which every local user sees in /proc).
	// A value of a variable whose type is a collection or an object is JSON (package parameter):
	// it goes into the file as JSON, so terraform reads it with its type.
	complexType := map[string]bool{}
	for _, d := range mod.Declared {
		complexType[d.Name] = !parameter.Primitive(d.CtyType())
	}
	values := make(map[string]any, len(names))
	for _, n := range names {
		v := x.req.Variables[n]
		if complexType[n] && json.Valid([]byte(v)) {
			values[n] = json.RawMessage(v)
		} else {
			values[n] = v
		}
	}
	varsJSON, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("encoding the variables: %w", err)
	}
	varFile := filepath.Join(filepath.Dir(x.moduleDir), varFileName)
	if err := os.WriteFile(varFile, varsJSON, 0o600); err != nil {
		return fmt.Errorf("writing the variables: %w", err)
	}
	if x.r.Sandbox != nil {
		if err := x.r.shareFile(varFile); err != nil {
			return fmt.Errorf("writing the variables: %w", err)
		}
	}
	if len(names) > 0 {
		x.log.emit(LevelInfo, "Variables passed: "+strings.Join(names, ", "))
	}

	// Applying or Destroying.
	// Through the shim terraform runs in a group of its own: once the command returns (even after
	// terraform-exec killed the shim at the end of the grace period), nothing of it may remain.
	defer func() { x.leftInGroup = killGroup(jobDir) }()
	if x.req.Transition == build.Delete {
		x.log.begin(StageDestroy)
		return x.command("destroy", func(ctx context.Context) error { return tf.Destroy(ctx, tfexec.VarFile(varFile)) })
	}
	x.log.begin(StageApply)
	return x.command("apply", func(ctx context.Context) error { return tf.Apply(ctx, tfexec.VarFile(varFile)) })
}

// interrupted reports whether the run was interrupted, so the next command must not start; it
// records that terraform had work left.
func (x *run) interrupted() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.reason == notInterrupted {
		return false
	}
	x.cut = true
	return true
}

// command runs one terraform command and turns its failure into the run's error.
func (x *run) command(name string, fn func(context.Context) error) error {
	what := "terraform " + name
	if x.interrupted() {
		return x.interruptErr(what, nil)
	}
	x.stdout.resetCount()
	err := fn(x.runCtx)
	x.stdout.flush()
	x.stderr.flush()
	lines := x.stderr.lastLines()
	if x.interrupted() {
		switch {
		case err == nil:
			return nil
		case err == context.Canceled:
			// terraform-exec saw the interrupt before starting terraform.
			return x.interruptErr(what, nil)
		case x.stdout.count() > 0 && (errors.Unwrap(err) == nil || errors.Unwrap(err) == context.Canceled):
			// terraform exited with status 0: it finished before the interrupt stopped it.
			return nil
		}
		return x.interruptErr(what, withLines(exitStatus(err), lines))
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s", what, withLines(exitStatus(err), lines))
}

// interruptErr is the error of a run interrupted during what.
func (x *run) interruptErr(what string, detail any) error {
	cause := ErrCanceled
	if x.interruptReason() == byContext {
		cause = x.ctx.Err()
	}
	if detail == nil {
		return fmt.Errorf("%s not run: %w", what, cause)
	}
	return fmt.Errorf("%s interrupted: %w: %v", what, cause, detail)
}

// exitStatus describes how a terraform command ended ("exit status 1", "signal: killed"), without
// the output terraform-exec appends to its errors.
func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	if u := errors.Unwrap(err); (u == nil || u == context.Canceled) && errors.Is(err, context.Canceled) {
		return "terraform exited after the interrupt" // and terraform-exec's error may have no text
	}
	return firstLine(err)
}

// withLines appends terraform's last error lines to a status.
func withLines(status string, lines []string) string {
	if len(lines) == 0 {
		return status
	}
	return status + "\n" + strings.Join(lines, "\n")
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
