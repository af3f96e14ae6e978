//go:build unix

package wshelper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/projectclone"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The owner's dotfiles (docs/decisions.md, "A team's repository: dotfiles and identity (issue
// 22)"): at a workspace's first start the helper clones the owner's dotfiles repository into
// ~/.dotfiles, with the owner's forge credentials, and installs it as Coder's `coder dotfiles`
// does: the first executable install script it finds, else symlinks of its dot-files into $HOME.
// It runs beside SSH and the editor, never before them, and is killed after DefaultDotfilesTimeout.

// DotfilesMarker is the file under the state directory that records the dotfiles installed.
const DotfilesMarker = "dotfiles-done.json"

// DotfilesLog is the file under the state directory that holds the output of the latest install.
const DotfilesLog = "dotfiles.log"

// DotfilesDir is where the repository is cloned, under $HOME.
const DotfilesDir = ".dotfiles"

// DefaultDotfilesTimeout bounds a clone and install together.
const DefaultDotfilesTimeout = 5 * time.Minute

// dotfilesScripts are the install scripts looked for, in this order (Coder's `coder dotfiles`).
var dotfilesScripts = []string{"install.sh", "install", "bootstrap.sh", "bootstrap", "script/bootstrap", "setup.sh", "setup", "script/setup"}

// dotfilesSkipped are the repository's dot-files that are the repository's own, not $HOME's.
var dotfilesSkipped = []string{".git", ".github", ".gitmodules"}

// dotfilesRecord is DotfilesMarker's content.
type dotfilesRecord struct {
	Repo     string    `json:"repo"`
	Dir      string    `json:"dir"`
	Script   string    `json:"script,omitempty"`
	Finished time.Time `json:"finished"`
}

// Dotfiles is one install of the owner's dotfiles.
type Dotfiles struct {
	// Repo is the repository, URL[#ref] (workspace.CheckDotfilesRepo).
	Repo string
	// Home is the workspace user's home directory; StateDir keeps the record and the log.
	Home, StateDir string
	// Env is the environment of the install script (the container's, with git's credential
	// helper); its SHELL runs the script as a login shell (/bin/sh when unset).
	Env []string
	// Ask gives the owner's credentials of an http(s) remote (nil: anonymous); CABundle is trusted
	// besides the system's certificates.
	Ask      gitcred.AskFunc
	CABundle []byte
	// SSH signs an SSH remote's clone with the owner's git SSH key through the server (nil: go-git's
	// defaults).
	SSH *gitcred.SSHServer
	// Now stamps the record (time.Now when nil).
	Now func() time.Time
	// Report, when set, is told how the install goes: installing, then installed (with the script
	// run) or failed (with the last lines of the log); installed at once when it was done before.
	Report func(protocol.DotfilesStatus)
}

func (d Dotfiles) report(st protocol.DotfilesStatus) {
	if d.Report != nil {
		st.Repository = d.Repo
		d.Report(st)
	}
}

// Install clones and installs the dotfiles unless the record says this repository was installed
// into a clone that is still there: once per data volume when $HOME is on it, again at each
// start when $HOME is new at each start (its clone is gone then). Output goes to out and to
// DotfilesLog. A failure is returned and nothing is recorded, so the next start tries again;
// ctx's end (the timeout) kills the install script and its children.
func (d Dotfiles) Install(ctx context.Context, out io.Writer, log *slog.Logger) (err error) {
	tail := &tailBuffer{max: protocol.MaxDotfilesLogBytes}
	installing := false
	defer func() {
		if err != nil {
			if !installing {
				fmt.Fprintf(tail, "dotfiles: failed: %v\n", err) // the deferred line below is not written yet
			}
			d.report(protocol.DotfilesStatus{State: protocol.DotfilesFailed, Error: err.Error(), Log: tail.String()})
		}
	}()
	url, ref := workspace.SplitDotfilesRepo(d.Repo)
	if msg := workspace.CheckDotfilesRepo(d.Repo); msg != "" {
		return fmt.Errorf("dotfiles repository %q %s", d.Repo, msg)
	}
	if d.Home == "" || !filepath.IsAbs(d.Home) {
		return fmt.Errorf("dotfiles: the home directory %q is not an absolute path", d.Home)
	}
	dir := filepath.Join(d.Home, DotfilesDir)
	marker := filepath.Join(d.StateDir, DotfilesMarker)
	if b, err := os.ReadFile(marker); err == nil {
		var rec dotfilesRecord
		if json.Unmarshal(b, &rec) == nil && rec.Repo == d.Repo && rec.Dir == dir {
			if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
				log.Info("dotfiles already installed; not again", "repo", d.Repo, "dir", dir, "finished", rec.Finished)
				d.report(protocol.DotfilesStatus{State: protocol.DotfilesInstalled, Script: rec.Script})
				return nil
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("dotfiles: read %s: %w", marker, err)
	}
	if err := os.MkdirAll(d.StateDir, 0o700); err != nil {
		return fmt.Errorf("dotfiles: state directory: %w", err)
	}
	if out == nil {
		out = io.Discard
	}
	out = io.MultiWriter(out, tail)
	installing = true
	d.report(protocol.DotfilesStatus{State: protocol.DotfilesInstalling})
	if f, err := os.OpenFile(filepath.Join(d.StateDir, DotfilesLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
		log.Warn("dotfiles: cannot write their log", "err", err)
	} else {
		defer f.Close()
		out = io.MultiWriter(out, f)
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(out, "dotfiles: failed: %v\n", err)
		}
	}()
	if err := sameOrigin(dir, url); err != nil {
		return err
	}
	err = projectclone.Clone(ctx, d.Home, []projectclone.Project{{
		Name: "dotfiles", Path: DotfilesDir, Remotes: map[string]string{"origin": url}, Remote: "origin", Revision: ref,
	}}, projectclone.Options{Ask: d.Ask, CABundle: d.CABundle, SSH: d.SSH}, out)
	if err != nil {
		return fmt.Errorf("clone %s: %w", url, err)
	}
	script := installScript(dir)
	if script != "" {
		if err := d.runScript(ctx, dir, script, out); err != nil {
			return err
		}
	} else if err := linkDotfiles(dir, d.Home, out, log); err != nil {
		return err
	}
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	rec, _ := json.Marshal(dotfilesRecord{Repo: d.Repo, Dir: dir, Script: script, Finished: now().UTC()})
	if err := writeFileAtomic(marker, rec, 0o600); err != nil {
		return fmt.Errorf("dotfiles: record success: %w", err)
	}
	fmt.Fprintf(out, "dotfiles: installed %s\n", d.Repo)
	d.report(protocol.DotfilesStatus{State: protocol.DotfilesInstalled, Script: script, Log: tail.String()})
	return nil
}

// sameOrigin refuses a clone in dir of another repository than url (the setting changed): the
// user's clone, perhaps with their changes, is theirs to move away.
func sameOrigin(dir, url string) error {
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil
	}
	if err != nil {
		return nil // not a repository: the clone says what is in the way
	}
	r, err := repo.Remote("origin")
	if err != nil || !slices.Contains(r.Config().URLs, url) {
		return fmt.Errorf("%s holds a clone of another repository than %s: move it away to have your dotfiles installed", dir, url)
	}
	return nil
}

// installScript returns the first of dotfilesScripts that is an executable regular file in dir.
func installScript(dir string) string {
	for _, s := range dotfilesScripts {
		fi, err := os.Lstat(filepath.Join(dir, s))
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return s
		}
	}
	return ""
}

// runScript runs the install script with the user's login shell, in the repository's directory,
// in a process group of its own that ctx's end kills whole.
func (d Dotfiles) runScript(ctx context.Context, dir, script string, out io.Writer) error {
	shell := lookupEnv(d.Env, "SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	fmt.Fprintf(out, "dotfiles: running %s with %s -l\n", script, shell)
	cmd := exec.CommandContext(ctx, shell, "-l", "-c", `exec "$0"`, "./"+script)
	cmd.Dir, cmd.Env = dir, d.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not finish in time and was killed: %w", script, ctx.Err())
		}
		return fmt.Errorf("%s: %w", script, err)
	}
	return nil
}

// linkDotfiles links each dot-file at the top of the repository into home, never over a file
// that is there (it is left, with a warning), and again over its own link.
func linkDotfiles(dir, home string, out io.Writer, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, ".") || slices.Contains(dotfilesSkipped, name) {
			continue
		}
		src, dst := filepath.Join(dir, name), filepath.Join(home, name)
		if target, err := os.Readlink(dst); err == nil && target == src {
			continue // linked at an earlier install
		}
		if _, err := os.Lstat(dst); err == nil {
			fmt.Fprintf(out, "dotfiles: %s exists; left as it is, not linked to %s\n", dst, src)
			log.Warn("dotfiles: a file is in the way; left as it is", "file", dst)
			continue
		}
		if err := os.Symlink(src, dst); err != nil {
			return fmt.Errorf("link %s: %w", dst, err)
		}
		fmt.Fprintf(out, "dotfiles: linked %s -> %s\n", dst, src)
	}
	return nil
}

// dotfilesNotice is what shell sessions are told when the dotfiles could not be installed.
func dotfilesNotice(err error, stateDir string) string {
	return fmt.Sprintf("hangar: your dotfiles could not be installed: %v.\n"+
		"hangar: the log is in %s; they are tried again at the next start of the workspace.\n",
		err, filepath.Join(stateDir, DotfilesLog))
}

// installDotfiles installs cfg.Dotfiles for the helper (Run), within its timeout.
func installDotfiles(ctx context.Context, cfg Config, log *slog.Logger) error {
	d := Dotfiles{Repo: cfg.Dotfiles, Home: lookupEnv(cfg.Env, "HOME"), StateDir: cfg.StateDir, Env: cfg.Env}
	if d.Home == "" || d.Home == "/" {
		return errors.New("the workspace user has no home directory ($HOME is unset or /) to install them into")
	}
	if cfg.ServerURL != "" && cfg.Token != "" {
		if !cfg.NoGitCredentials {
			d.Ask = gitcred.AskServer(cfg.Connect.HTTPClient, cfg.ServerURL, cfg.Token)
			d.SSH = &gitcred.SSHServer{HTTP: cfg.Connect.HTTPClient, BaseURL: cfg.ServerURL, Token: cfg.Token}
		}
		d.Report = reportDotfiles(ctx, cfg, log)
	}
	if f := lookupEnv(cfg.Env, "HANGAR_GIT_CA_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read HANGAR_GIT_CA_FILE: %w", err)
		}
		d.CABundle = b
	}
	timeout := cfg.DotfilesTimeout
	if timeout <= 0 {
		timeout = DefaultDotfilesTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log.Info("installing dotfiles", "repo", cfg.Dotfiles, "home", d.Home, "timeout", timeout)
	return d.Install(ctx, cfg.Stdout, log)
}

// reportDotfiles tells the server how the install goes (protocol.DotfilesStatusPath), with the
// helper's token, as it asks for git credentials. A report that fails is logged: the install
// goes on whatever the server says.
func reportDotfiles(ctx context.Context, cfg Config, log *slog.Logger) func(protocol.DotfilesStatus) {
	return func(st protocol.DotfilesStatus) {
		if err := cfg.put(ctx, protocol.DotfilesStatusPath, st); err != nil {
			log.Warn("dotfiles: cannot report their status to the server", "state", st.State, "err", err)
		}
	}
}

// put sends a report to the server with the helper's token, bounded in time, even when ctx ends
// (a last report as the helper stops still goes).
func (cfg Config) put(ctx context.Context, path string, body any) error {
	return cfg.putAnswered(ctx, path, body, nil)
}

// putAnswered is put with the server's answer decoded into out (nil: none read); a server that
// answers nothing (204: one before the answer was added) leaves out as it was.
func (cfg Config) putAnswered(ctx context.Context, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := apiclient.Do(ctx, cfg.Connect.HTTPClient, cfg.ServerURL, cfg.Token, "PUT", path, body, out, 64<<10)
	if out != nil && errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// reportStep tells the server how a startup step the helper runs goes (protocol.StartupStepPath),
// with the helper's token; nil when the helper has no server to tell. Reports go from a goroutine
// of their own, the latest one replacing one not sent yet: a server that is slow or unreachable
// never holds up the step (nor SSH, which waits for postStart). One that fails is logged; the step
// goes on whatever the server says. The goroutine ends with ctx, after sending the report that
// was waiting.
func reportStep(ctx context.Context, cfg Config, log *slog.Logger) func(protocol.StartupStep) {
	if cfg.ServerURL == "" || cfg.Token == "" {
		return nil
	}
	// The latest report of each step waits, in the order the steps were first reported.
	var mu sync.Mutex
	var order []string
	latest := map[string]protocol.StartupStep{}
	wake := make(chan struct{}, 1)
	send := func() {
		for {
			mu.Lock()
			if len(order) == 0 {
				mu.Unlock()
				return
			}
			name := order[0]
			order = order[1:]
			st := latest[name]
			delete(latest, name)
			mu.Unlock()
			if err := cfg.put(ctx, protocol.StartupStepPath, st); err != nil {
				log.Warn("cannot report a startup step to the server", "step", st.Name, "state", st.State, "err", err)
			}
		}
	}
	go func() {
		for {
			select {
			case <-wake:
				send()
			case <-ctx.Done():
				send()
				return
			}
		}
	}()
	return func(st protocol.StartupStep) {
		mu.Lock()
		if _, waiting := latest[st.Name]; !waiting {
			order = append(order, st.Name)
		}
		latest[st.Name] = st
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// tailBuffer keeps the last lines of what is written to it, at most max bytes (a line cut by the
// bound is dropped whole).
type tailBuffer struct {
	max int
	b   []byte
	cut bool // the start of the output was dropped
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b, t.cut = append(t.b[:0], t.b[len(t.b)-t.max:]...), true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	b, cut := t.b, t.cut
	if len(b) > t.max {
		b, cut = b[len(b)-t.max:], true
	}
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
