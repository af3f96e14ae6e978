//go:build unix

package wshelper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/backoff"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The web editor inside the container (docs/decisions.md, "The web editor runs in the main
// container"): an init container copies the editor (code-server with its own Node.js, loader and
// libraries) into the pod, and the helper runs it here, in the container's own environment, so
// that its terminal has the project's toolchain. The helper starts it, restarts it when it ends
// (with backoff), and stops it with the container.

// EditorProcess is the editor the helper runs (workspace.EditorProcess).
type EditorProcess = workspace.EditorProcess

// DefaultEditorReadyTimeout bounds how long SSH (the pod's readiness) waits for the editor to
// answer: an editor that cannot start does not keep the user out of the workspace.
const DefaultEditorReadyTimeout = 2 * time.Minute

// editorRetry is the backoff between the editor's restarts; a run longer than editorStable resets it.
var editorRetry = backoff.Policy{Base: time.Second, Max: 30 * time.Second}

const editorStable = time.Minute

// ParseEditor decodes --editor; empty is no editor.
func ParseEditor(s string) (*EditorProcess, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var e EditorProcess
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("editor: %w", err)
	}
	if dec.More() {
		return nil, errors.New("editor: text after the object")
	}
	if len(e.Argv) == 0 || e.Argv[0] == "" || !strings.HasPrefix(e.Argv[0], "/") {
		return nil, errors.New("editor: argv must begin with the editor's absolute path")
	}
	for _, a := range e.Argv {
		if strings.ContainsRune(a, 0) {
			return nil, errors.New("editor: NUL in argv")
		}
	}
	if e.Port < 1 || e.Port > 65535 {
		return nil, fmt.Errorf("editor: port %d is not a TCP port", e.Port)
	}
	return &e, nil
}

// editorRunner keeps the editor running until stop.
type editorRunner struct {
	e       EditorProcess
	env     []string
	out     io.Writer
	log     *slog.Logger
	after   func(time.Duration) <-chan time.Time
	ready   chan struct{} // closed once the editor answered on its port (or gave up waiting)
	readyMu sync.Once

	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped bool
	stopCh  chan struct{} // closed by stop
	done    chan struct{}
}

func startEditor(ctx context.Context, e EditorProcess, env []string, out io.Writer, log *slog.Logger, readyTimeout time.Duration, after func(time.Duration) <-chan time.Time) *editorRunner {
	r := &editorRunner{e: e, env: env, out: out, log: log.With("component", "editor"), after: after, ready: make(chan struct{}), stopCh: make(chan struct{}), done: make(chan struct{})}
	go r.run(ctx)
	go r.waitReady(ctx, readyTimeout)
	return r
}

func (r *editorRunner) markReady() { r.readyMu.Do(func() { close(r.ready) }) }

// waitReady closes r.ready once the editor accepts connections on its port, or after timeout.
func (r *editorRunner) waitReady(ctx context.Context, timeout time.Duration) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.e.Port))
	give := r.after(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			r.log.Info("the editor answers", "port", r.e.Port)
			r.markReady()
			return
		}
		select {
		case <-ctx.Done():
			r.markReady()
			return
		case <-give:
			r.log.Warn("the editor does not answer yet; serving the workspace anyway", "port", r.e.Port, "waited", timeout)
			r.markReady()
			return
		case <-r.done:
			r.markReady()
			return
		case <-tick.C:
		}
	}
}

// run starts the editor and starts it again whenever it ends, until ctx ends.
func (r *editorRunner) run(ctx context.Context) {
	defer close(r.done)
	failures := 0
	for {
		cmd := exec.Command(r.e.Argv[0], r.e.Argv[1:]...)
		cmd.Env = r.env
		cmd.Stdout, cmd.Stderr = r.out, r.out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children (extension hosts, terminals) go with it
		cmd.WaitDelay = waitDelay
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		err := cmd.Start()
		if err == nil {
			r.cmd = cmd
		}
		r.mu.Unlock()
		started := time.Now()
		if err != nil {
			r.log.Error("cannot start the editor", "argv0", r.e.Argv[0], "err", err)
		} else {
			r.log.Info("editor started", "pid", cmd.Process.Pid, "port", r.e.Port)
			err = cmd.Wait()
			r.mu.Lock()
			r.cmd = nil
			stopped := r.stopped
			r.mu.Unlock()
			if stopped || ctx.Err() != nil {
				return
			}
			r.log.Warn("the editor ended; starting it again", "err", err, "ran", time.Since(started).Round(time.Millisecond))
		}
		if time.Since(started) >= editorStable {
			failures = 0
		}
		delay := editorRetry.Delay(failures)
		failures++
		select {
		case <-ctx.Done():
			return
		case <-r.stopCh:
			return
		case <-r.after(delay):
		}
	}
}

// stop ends the editor: SIGTERM to its process group, SIGKILL once ctx ends.
func (r *editorRunner) stop(ctx context.Context) {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.stopCh)
	}
	cmd := r.cmd
	r.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		if cmd != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		<-r.done
	}
}
