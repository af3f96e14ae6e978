package terraform

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The survival shim. terraform-exec starts terraform as a child that dies with its parent (Linux
// Pdeathsig SIGKILL): if the provisioner is killed mid-apply, so is terraform, between creating a
// resource and recording it in its state — an orphaned resource nobody knows of. With a shim (the
// hangar binary itself, Runner.Shim), terraform-exec starts the shim instead; for apply and destroy
// the shim starts terraform in a session of its own, writing its output to files, so that it
// outlives the shim and the provisioner, finishes, and records its state and exit status in the
// work directory. The provisioner, when it comes back, adopts the result (Runner.Recover). Every
// other command (version, init) the shim simply becomes (exec).

// Environment the Runner gives the shim (never passed on to terraform).
const (
	shimTerraformEnv = "HANGAR_TF_SHIM_TERRAFORM" // the real terraform
	shimDirEnv       = "HANGAR_TF_SHIM_DIR"       // the job's work directory
	shimVersionEnv   = "HANGAR_TF_SHIM_VERSION"   // what `terraform version -json` printed (the Runner asked once)
)

// Files of a survivable command, in the job's work directory.
const (
	runPID    = "run.pid"    // the process group of the command (the session leader's pid)
	runStdout = "run.stdout" // terraform's output
	runStderr = "run.stderr"
	runExit   = "run.exit" // its exit status, written when it ends
)

// IsShim reports whether this process was started as the shim (cmd/hangar checks it first).
func IsShim() bool { return os.Getenv(shimTerraformEnv) != "" }

// ShimMain runs the shim and returns its exit status.
func ShimMain() int {
	tf, dir := os.Getenv(shimTerraformEnv), os.Getenv(shimDirEnv)
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, shimTerraformEnv+"=") && !strings.HasPrefix(kv, shimDirEnv+"=") && !strings.HasPrefix(kv, shimVersionEnv+"=") {
			env = append(env, kv)
		}
	}
	args := os.Args[1:]
	// terraform-exec asks the version before every run; the Runner knows it already, which saves a
	// terraform start (about a third of a small build's fixed cost).
	if v := os.Getenv(shimVersionEnv); v != "" && len(args) == 2 && args[0] == "version" && args[1] == "-json" {
		fmt.Println(v)
		return 0
	}
	if dir == "" || len(args) == 0 || (args[0] != "apply" && args[0] != "destroy") {
		err := execProgram(tf, args, env)
		fmt.Fprintf(os.Stderr, "hangar terraform shim: exec %s: %v\n", tf, err)
		return 127
	}
	code, err := survive(tf, dir, args, env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hangar terraform shim: %v\n", err)
		return 127
	}
	return code
}

// survive runs terraform args in a session of its own (through sh, which records the exit status),
// copies its output to ours as it comes, forwards interrupts to it, and returns its exit status.
func survive(tf, dir string, args, env []string) (int, error) {
	for _, f := range []string{runExit, runStdout, runStderr, runPID} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	}
	// sh traps INT and TERM so that an interrupt sent to the whole group stops terraform (which
	// gets the default handling back when exec'd) and not the shell that records its status.
	script := `trap : INT TERM; "$0" "$@" >"$HANGAR_RUN_DIR/` + runStdout + `" 2>>"$HANGAR_RUN_DIR/` + runStderr + `" </dev/null
echo $? >"$HANGAR_RUN_DIR/` + runExit + `.tmp" && mv "$HANGAR_RUN_DIR/` + runExit + `.tmp" "$HANGAR_RUN_DIR/` + runExit + `"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, tf}, args...)...)
	cmd.Env = append(env, "HANGAR_RUN_DIR="+dir)
	if err := ownSession(cmd); err != nil {
		return 0, err
	}
	// Interrupts reach the shim from terraform-exec; pass them to terraform's group.
	sigs, stopSignals := notifyInterrupts()
	defer stopSignals()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start terraform: %w", err)
	}
	pgid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, runPID), []byte(strconv.Itoa(pgid)+" "+bootID()), 0o600); err != nil {
		killProcessGroup(pgid)
		return 0, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	out := &tail{path: filepath.Join(dir, runStdout), w: os.Stdout}
	errOut := &tail{path: filepath.Join(dir, runStderr), w: os.Stderr}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case s := <-sigs:
			signalProcessGroup(pgid, s)
		case <-tick.C:
			out.copy()
			errOut.copy()
		case <-exited:
			break wait
		}
	}
	out.copy()
	errOut.copy()
	return exitStatusIn(dir)
}

// bootID names the running kernel's boot: a pid recorded in another boot means nothing now.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "unknown"
	}
	return string(bytes.TrimSpace(b))
}

// exitStatusIn reads the exit status a survivable command recorded.
func exitStatusIn(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, runExit))
	if err != nil {
		return 0, fmt.Errorf("terraform recorded no exit status: %w", err)
	}
	code, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0, fmt.Errorf("terraform's exit status %q: %w", b, err)
	}
	return code, nil
}

// tail copies what is appended to a file.
type tail struct {
	path string
	w    io.Writer
	off  int64
}

func (t *tail) copy() {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return
	}
	n, _ := io.Copy(t.w, f)
	t.off += n
}
