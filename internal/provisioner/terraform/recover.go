package terraform

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// groupOf reads the process group of the job's survivable command; 0 when there is none.
func groupOf(jobDir string) int {
	b, err := os.ReadFile(filepath.Join(jobDir, runPID))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 || fields[1] != bootID() {
		return 0 // recorded before a reboot (or unreadable): that process is gone
	}
	pgid, err := strconv.Atoi(fields[0])
	if err != nil || pgid <= 1 {
		return 0
	}
	return pgid
}

// killGroup kills whatever remains of the job's survivable command.
func killGroup(jobDir string) []sandbox.Process {
	pgid := groupOf(jobDir)
	if !alive(pgid) {
		return nil
	}
	left := sandbox.GroupMembers(pgid) // what was left, as it was: a helper among it gets a warning
	killProcessGroup(pgid)
	return left
}

// Remove deletes a job's work directory (a Runner with KeepWorkDir leaves it to the caller, who
// removes it once the outcome is safe elsewhere).
func (r *Runner) Remove(jobID string) error {
	if jobID == "" || jobID != filepath.Base(jobID) || jobID == "." || jobID == ".." {
		return fmt.Errorf("job id %q cannot name a directory", jobID)
	}
	return os.RemoveAll(filepath.Join(r.workRoot(), jobID))
}

// Leftovers lists the jobs whose work directory is still in WorkRoot: runs a provisioner did not
// see to their end (it was killed or its machine stopped). Recover adopts each.
func (r *Runner) Leftovers() ([]string, error) {
	entries, err := os.ReadDir(r.workRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the work root: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") { // job ids; dot directories are the daemon's (the provider mirror)
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// recoverPoll is how often Recover looks whether the terraform it adopted has ended.
const recoverPoll = 200 * time.Millisecond

// Recover adopts the run of jobID that a previous provisioner left behind: it waits for the
// terraform still running (if any) to end — interrupting it when cancel closes, and killing it
// after GracePeriod — then returns the state it wrote and how it ended, logging the output
// terraform wrote meanwhile. found is false when there is no such run. The work directory stays:
// the caller removes it (Remove) once the outcome is reported.
func (r *Runner) Recover(ctx context.Context, cancel <-chan struct{}, jobID string, logf func(Line)) (res Result, found bool) {
	log := &logger{fn: logf}
	jobDir := filepath.Join(r.workRoot(), jobID)
	if fi, err := os.Stat(jobDir); err != nil || !fi.IsDir() || jobID != filepath.Base(jobID) {
		return Result{}, false
	}
	log.begin("Recovering")
	pgid := groupOf(jobDir)
	if alive(pgid) {
		log.emit(LevelWarn, "The provisioner stopped during this build; terraform is still running: waiting for it to finish.")
	}
	var graceEnd <-chan time.Time
	tick := time.NewTicker(recoverPoll)
	defer tick.Stop()
	canceled := false
	for alive(pgid) {
		if _, err := os.Stat(filepath.Join(jobDir, runExit)); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return Result{Err: fmt.Errorf("recovering the build: %w", ctx.Err())}, true
		case <-cancel:
			cancel = nil
			canceled = true
			log.emit(LevelWarn, "Build canceled: interrupting terraform")
			interruptProcessGroup(pgid)
			g := r.GracePeriod
			if g <= 0 {
				g = DefaultGracePeriod
			}
			graceEnd = time.After(g)
		case <-graceEnd:
			log.emit(LevelWarn, "terraform did not stop in its grace period: killing it")
			killProcessGroup(pgid)
		case <-tick.C:
		}
	}
	r.killLeftovers(log, nil)
	for _, f := range []struct {
		name, level string
	}{{runStdout, LevelInfo}, {runStderr, LevelError}} {
		if b, err := os.ReadFile(filepath.Join(jobDir, f.name)); err == nil && len(b) > 0 {
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(make([]byte, 64<<10), maxLineBytes)
			for sc.Scan() {
				log.emit(f.level, sc.Text())
			}
		}
	}
	switch code, err := exitStatusIn(jobDir); {
	case pgid == 0 && neverStarted(jobDir):
		res.Err = errors.New("the provisioner stopped before terraform applied anything; the state is the one the build started from")
		res.NotStarted = true
	case err != nil:
		res.Err = fmt.Errorf("the provisioner stopped during the build and terraform ended without an exit status (killed): %w", err)
	case code != 0:
		res.Err = fmt.Errorf("the provisioner stopped during the build; terraform then exited with status %d", code)
	}
	if canceled {
		res.Canceled = true
		if res.Err != nil { // nil: terraform finished anyway
			res.Err = fmt.Errorf("%w: %v", ErrCanceled, res.Err)
		}
	}
	log.begin(StageReadState)
	state, note, err := readState(filepath.Join(jobDir, "module"))
	if note != "" {
		log.emit(LevelWarn, note)
	}
	switch {
	case err == nil:
		res.State = state
		log.emit(LevelInfo, fmt.Sprintf("Read the state terraform wrote (%d bytes)", len(state)))
	case errors.Is(err, os.ErrNotExist):
		log.emit(LevelInfo, "Terraform wrote no state")
	default:
		res.Err = errors.Join(res.Err, fmt.Errorf("reading the state: %w", err))
	}
	if res.Err != nil {
		log.emit(LevelError, firstLine(res.Err))
	} else {
		log.emit(LevelInfo, "terraform finished while the provisioner was away; its result is adopted")
	}
	return res, true
}

// neverStarted reports whether the job's survivable command (apply or destroy) left no trace in its
// work directory: no pid, exit status or output, which the shim writes as it starts terraform.
func neverStarted(jobDir string) bool {
	for _, f := range []string{runPID, runExit, runStdout, runStderr} {
		if _, err := os.Lstat(filepath.Join(jobDir, f)); !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return true
}
