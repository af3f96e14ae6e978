//go:build unix

package wshelper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// PostStartCommand is one of a devfile's postStart commands (workspace.PostStartCommand).
type PostStartCommand = workspace.PostStartCommand

// EnvVar is one environment variable of a PostStartCommand.
type EnvVar = workspace.EnvVar

// ParsePostStart decodes the JSON list of postStart commands; empty input is no command. Unknown
// fields are refused: the generator and the helper are the same binary's, so one is a mistake.
func ParsePostStart(s string) ([]PostStartCommand, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var cmds []PostStartCommand
	if err := dec.Decode(&cmds); err != nil {
		return nil, fmt.Errorf("postStart commands: %w", err)
	}
	if dec.More() {
		return nil, errors.New("postStart commands: text after the list")
	}
	for i, c := range cmds {
		if strings.TrimSpace(c.CommandLine) == "" {
			return nil, fmt.Errorf("postStart command %d (%q): empty commandLine", i, c.ID)
		}
		if c.OncePerWorkspace && !onceIDRe.MatchString(c.ID) {
			return nil, fmt.Errorf("postStart command %d (%q): a command that runs once per workspace needs an id of letters, digits and '-' (it names its record)", i, c.ID)
		}
		if strings.ContainsRune(c.CommandLine, 0) || strings.ContainsRune(c.WorkingDir, 0) {
			return nil, fmt.Errorf("postStart command %d (%q): NUL in command or directory", i, c.ID)
		}
		for _, e := range c.Env {
			if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") || strings.ContainsRune(e.Value, 0) {
				return nil, fmt.Errorf("postStart command %d (%q): bad environment variable %q", i, c.ID, e.Name)
			}
		}
	}
	return cmds, nil
}

var onceIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`)

// ParseRemoteEnv decodes the JSON list of remote environment variables; empty input is none.
func ParseRemoteEnv(s string) ([]EnvVar, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var env []EnvVar
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("remote environment: %w", err)
	}
	for _, e := range env {
		if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") || strings.ContainsRune(e.Value, 0) {
			return nil, fmt.Errorf("remote environment: bad variable %q", e.Name)
		}
	}
	return env, nil
}

// WithRemoteEnv returns env with vars set in order, each value's ${NAME} replaced by NAME's value
// so far (empty when unset): `PATH=${PATH}:/home/me/bin` extends the image's PATH. Nothing else in
// a value is expanded.
func WithRemoteEnv(env []string, vars []EnvVar) []string {
	if len(vars) == 0 {
		return env
	}
	out := append([]string(nil), env...)
	for _, e := range vars {
		val := remoteVarRe.ReplaceAllStringFunc(e.Value, func(m string) string { return lookupEnv(out, m[2:len(m)-1]) })
		out = setEnv(out, e.Name, val)
	}
	return out
}

var remoteVarRe = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// PostStartMarker is the file under the state directory that records postStart commands that
// succeeded.
const PostStartMarker = "poststart-done.json"

// PostStartLog is the file under the state directory that holds the output of the latest run of
// the postStart commands.
const PostStartLog = "poststart.log"

// OnceMarkerPrefix, followed by a command's id, is the file under the state directory that records
// the success of a command that runs once per workspace (PostStartCommand.OncePerWorkspace).
const OnceMarkerPrefix = "once-done-"

// postStartRecord is PostStartMarker's content.
type postStartRecord struct {
	Instance string    `json:"instance"`
	Commands string    `json:"commands"` // sha256 of the commands' JSON
	Finished time.Time `json:"finished"`
}

// RunPostStart runs cmds in order, each with /bin/sh -c, the container's environment env plus its
// own, and its output to out, unless they already succeeded in this instance.
//
// "Once" is once per instance: instance is the pod's name (the hostname), the same across restarts
// of the container and new at every start of the workspace. So a crashed and restarted container
// does not run them again, and a workspace started again after a stop does, as a devfile's postStart
// expects (and as Kubernetes' own postStart hook would, which the helper replaces). Success is
// recorded in stateDir (PostStartMarker) with the instance and a hash of the commands.
//
// On failure RunPostStart stops at the failing command and returns its error; nothing is recorded,
// so all of them run again at the next container start. The helper logs the failure and keeps
// serving: unlike a failed Kubernetes postStart hook, it does not kill the container, so that the
// user can enter the workspace and see why.
func RunPostStart(ctx context.Context, cmds []PostStartCommand, env []string, stateDir, instance string, out io.Writer, log *slog.Logger) error {
	return runPostStart(ctx, cmds, env, stateDir, instance, out, log, nil)
}

// runPostStart is RunPostStart that also tells report (nil: nobody) how the commands go, as the
// startup steps protocol.StepPostCreate (the commands that run once per workspace) and
// protocol.StepPostStart (the others): running, with the command that runs as its detail, then
// done or failed with the last lines of their output. Commands that already ran in this instance
// (or, once per workspace, ever) are not reported again (the server has their step from when
// they ran).
func runPostStart(ctx context.Context, cmds []PostStartCommand, env []string, stateDir, instance string, out io.Writer, log *slog.Logger, report func(protocol.StartupStep)) (err error) {
	if len(cmds) == 0 {
		return nil
	}
	if report == nil {
		report = func(protocol.StartupStep) {}
	}
	b, err := json.Marshal(cmds)
	if err != nil {
		return fmt.Errorf("postStart: %w", err)
	}
	sum := sha256.Sum256(b)
	want := postStartRecord{Instance: instance, Commands: hex.EncodeToString(sum[:])}
	marker := filepath.Join(stateDir, PostStartMarker)
	if rec, err := os.ReadFile(marker); err == nil {
		var got postStartRecord
		if json.Unmarshal(rec, &got) == nil && got.Instance == want.Instance && got.Commands == want.Commands {
			log.Info("postStart commands already ran in this instance; not running them again", "instance", instance, "finished", got.Finished)
			return nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("postStart: read %s: %w", marker, err)
	}
	// Each run of commands of one kind is a step: those that run once per workspace are
	// post-create, the others post-start; each step has its own log.
	var cur *stepRun
	end := func(err error) {
		if cur == nil {
			return
		}
		ended := time.Now().UTC()
		st := cur.step
		st.EndedAt, st.Log, st.State = &ended, cur.tail.String(), protocol.StepDone
		if cur.tail.cut {
			st.Log = protocol.TruncatedPrefix + st.Log
		}
		if err != nil {
			st.State = protocol.StepFailed
			st.Log += strings.ToValidUTF8(err.Error(), "\uFFFD") + "\n"
		}
		// Within the bound once valid UTF-8 (a bad byte becomes three), or the server refuses it.
		st.Log = protocol.TruncateLogHead(st.Log, protocol.MaxStepLogBytes)
		report(st)
		cur = nil
	}
	defer func() {
		if ctx.Err() != nil {
			return // stopping: the workspace's state says it
		}
		end(err)
	}()
	out = io.MultiWriter(out, writerFunc(func(p []byte) (int, error) {
		if cur != nil {
			return cur.tail.Write(p)
		}
		return len(p), nil
	}))
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("postStart: state directory: %w", err)
	}
	// Their output also goes to a log in the state directory, where the user finds it.
	if f, err := os.OpenFile(filepath.Join(stateDir, PostStartLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
		log.Warn("postStart: cannot write its log", "err", err)
	} else {
		defer f.Close()
		out = io.MultiWriter(out, f)
	}
	stepOf := func(c PostStartCommand) string {
		if c.OncePerWorkspace {
			return protocol.StepPostCreate
		}
		return protocol.StepPostStart
	}
	counts := map[string]int{}
	for _, c := range cmds {
		counts[stepOf(c)]++
	}
	seen := map[string]int{}
	for i, c := range cmds {
		name := stepOf(c)
		seen[name]++
		once := filepath.Join(stateDir, OnceMarkerPrefix+c.ID)
		if c.OncePerWorkspace {
			if _, err := os.Stat(once); err == nil {
				log.Info("postStart command runs once per workspace and already succeeded; not running it again", "id", c.ID)
				continue
			}
		}
		if cur == nil || cur.step.Name != name {
			end(nil)
			started := time.Now().UTC()
			cur = &stepRun{step: protocol.StartupStep{Name: name, State: protocol.StepRunning, StartedAt: &started},
				tail: &tailBuffer{max: protocol.MaxStepLogBytes - len(protocol.TruncatedPrefix)}}
		}
		log.Info("postStart command", "id", c.ID, "n", i+1, "of", len(cmds), "step", name)
		cur.step.Detail = protocol.TruncateMessage(fmt.Sprintf("command %d/%d: %s", seen[name], counts[name], c.ID), protocol.MaxStepDetailBytes)
		report(cur.step)
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.CommandLine)
		cmd.Env = append([]string(nil), env...)
		for _, e := range c.Env {
			cmd.Env = setEnv(cmd.Env, e.Name, e.Value)
		}
		// ${PROJECT_SOURCE}/app, as the devfile means it.
		cmd.Dir = os.Expand(c.WorkingDir, func(name string) string { return lookupEnv(cmd.Env, name) })
		cmd.Stdout, cmd.Stderr = out, out
		cmd.WaitDelay = waitDelay
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("postStart command %q: %w", c.ID, err)
		}
		if c.OncePerWorkspace {
			// Recorded at once: a later command's failure must not run this one again.
			if err := writeFileAtomic(once, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
				return fmt.Errorf("postStart: record success of %q: %w", c.ID, err)
			}
		}
	}
	want.Finished = time.Now().UTC()
	rec, _ := json.Marshal(want)
	if err := writeFileAtomic(marker, rec, 0o600); err != nil {
		return fmt.Errorf("postStart: record success: %w", err)
	}
	log.Info("postStart commands succeeded", "count", len(cmds))
	return nil
}

// stepRun is a startup step being run, with the end of its output.
type stepRun struct {
	step protocol.StartupStep
	tail *tailBuffer
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
