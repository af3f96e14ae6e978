//go:build unix

package wshelper

import (
	"bytes"
	"context"
	"io"
	"log/slog"

	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/gitcredtest"
)

// hangarGitCredentials stands for the Hangar server's git-credentials endpoint (gitcredtest): it
// answers each question with answer, and asked lists them as "<Authorization> <host>/<path>".
func hangarGitCredentials(t *testing.T, answer func(gitcred.Request) (int, any)) (url string, asked func() []string) {
	t.Helper()
	s := gitcredtest.New(t, answer)
	return s.URL, func() []string {
		var out []string
		for _, a := range s.Asked() {
			out = append(out, a.Authorization+" "+a.Request.Host+"/"+a.Request.Path)
		}
		return out
	}
}

// dotfilesForge is a forge with alice's private repository dots (files), and the Ask of a helper
// whose server hands out alice's token for it.
func dotfilesForge(t *testing.T, files map[string]string) (*forgetest.Forge, gitcred.AskFunc, func() []string) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	forge.CreateRepo("alice", "dots", true, files)
	token := forge.AddToken("alice")
	server, asked := hangarGitCredentials(t, func(gitcred.Request) (int, any) {
		return http.StatusOK, gitcred.Credential{Username: "oauth2", Password: token}
	})
	return forge, gitcred.AskServer(nil, server, "hwa_k1_ws.mac"), asked
}

func dotfilesHome(t *testing.T) (home, state string, env []string) {
	home, state = t.TempDir(), filepath.Join(t.TempDir(), "state")
	return home, state, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "SHELL=/bin/sh"}
}

// The owner's private dotfiles are cloned with the credential the server gives, into
// ~/.dotfiles; their install.sh runs with the login shell in the clone, once: a second start
// finds the record and the clone and does nothing.
func TestDotfilesInstallScriptFromPrivateRepo(t *testing.T) {
	forge, ask, asked := dotfilesForge(t, map[string]string{
		"install.sh": "#!/bin/sh\necho \"installing in $PWD as $0\"\necho run >> \"$HOME/runs\"\n",
		"bootstrap":  "#!/bin/sh\necho bootstrap must not run; exit 9\n",
		".bashrc":    "alias ll='ls -l'\n",
	})
	home, state, env := dotfilesHome(t)
	var reports []protocol.DotfilesStatus
	d := Dotfiles{Repo: forge.CloneURL("alice", "dots"), Home: home, StateDir: state, Env: env, Ask: ask,
		Report: func(st protocol.DotfilesStatus) { reports = append(reports, st) }}
	var out bytes.Buffer
	logs := &logBuffer{}
	if err := d.Install(context.Background(), &out, logs.logger()); err != nil {
		t.Fatalf("Install: %v\n%s", err, out.String())
	}
	// Reported: installing, then installed with the script and the log's end.
	if len(reports) != 2 || reports[0].State != "installing" || reports[1].State != "installed" || reports[1].Script != "install.sh" ||
		reports[1].Repository != d.Repo || !strings.HasSuffix(reports[1].Log, "dotfiles: installed "+d.Repo+"\n") {
		t.Fatalf("reports %+v", reports)
	}
	if got := asked(); len(got) != 1 || !strings.HasPrefix(got[0], "Bearer hwa_k1_ws.mac ") || !strings.HasSuffix(got[0], "/alice/dots.git") {
		t.Fatalf("the server was asked %q", got)
	}
	dir := filepath.Join(home, DotfilesDir)
	if !strings.Contains(out.String(), "installing in "+dir+" as ./install.sh") {
		t.Fatalf("install.sh did not run in the clone:\n%s", out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(home, "runs")); string(b) != "run\n" {
		t.Fatalf("runs = %q, want one", b)
	}
	// With a script, nothing is linked: the script decides.
	if _, err := os.Lstat(filepath.Join(home, ".bashrc")); err == nil {
		t.Fatal(".bashrc was linked although install.sh ran")
	}
	if b, err := os.ReadFile(filepath.Join(state, DotfilesLog)); err != nil || !strings.Contains(string(b), "installing in") || !strings.Contains(string(b), "dotfiles: installed") {
		t.Fatalf("the dotfiles log: %q %v", b, err)
	}
	// The next start: not again, and said to be installed (with the script of the record).
	reports = nil
	if err := d.Install(context.Background(), &out, logs.logger()); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].State != "installed" || reports[0].Script != "install.sh" {
		t.Fatalf("reports of the second start %+v", reports)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "runs")); string(b) != "run\n" {
		t.Fatalf("runs = %q after a second start, want one", b)
	}
	// A new home (not on the data volume): the clone is gone, so it is installed again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := d.Install(context.Background(), &out, logs.logger()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "runs")); string(b) != "run\nrun\n" {
		t.Fatalf("runs = %q after the clone went away, want two", b)
	}
}

// Without an install script the repository's dot-files are linked into $HOME, never over a file
// that is there (left, with a warning in the log); the ref after '#' is what is checked out.
func TestDotfilesSymlinksAtRef(t *testing.T) {
	forge, ask, _ := dotfilesForge(t, map[string]string{".bashrc": "v1\n", ".gitconfig": "[user]\n", "README.md": "mine\n", "install": "not executable\n"})
	first := forge.Head("alice", "dots")
	forge.Commit("alice", "dots", "v2", map[string]string{".bashrc": "v2\n"})
	home, state, env := dotfilesHome(t)
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("the image's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := Dotfiles{Repo: forge.CloneURL("alice", "dots") + "#" + first, Home: home, StateDir: state, Env: env, Ask: ask}
	var out bytes.Buffer
	logs := &logBuffer{}
	if err := d.Install(context.Background(), &out, logs.logger()); err != nil {
		t.Fatalf("Install: %v\n%s", err, out.String())
	}
	if b, err := os.ReadFile(filepath.Join(home, ".bashrc")); err != nil || string(b) != "v1\n" {
		t.Fatalf("~/.bashrc = %q %v, want the linked file at the ref (v1)", b, err)
	}
	if target, err := os.Readlink(filepath.Join(home, ".bashrc")); err != nil || target != filepath.Join(home, DotfilesDir, ".bashrc") {
		t.Fatalf("~/.bashrc links to %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".gitconfig")); string(b) != "the image's\n" {
		t.Fatalf("~/.gitconfig was overwritten: %q", b)
	}
	if !strings.Contains(out.String(), filepath.Join(home, ".gitconfig")+" exists; left as it is") || !strings.Contains(logs.String(), "a file is in the way") {
		t.Fatalf("no warning about ~/.gitconfig:\n%s\n%s", out.String(), logs.String())
	}
	for _, name := range []string{"README.md", ".git", "install"} {
		if _, err := os.Lstat(filepath.Join(home, name)); err == nil {
			t.Errorf("%s was linked into $HOME", name)
		}
	}
}

// An install that does not finish in time is killed, with its children, and reported; nothing is
// recorded, so the next start tries again.
func TestDotfilesTimeout(t *testing.T) {
	forge, ask, _ := dotfilesForge(t, map[string]string{"install.sh": "#!/bin/sh\necho started\nsleep 600 &\nwait\n"})
	home, state, env := dotfilesHome(t)
	d := Dotfiles{Repo: forge.CloneURL("alice", "dots"), Home: home, StateDir: state, Env: env, Ask: ask}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := d.Install(ctx, &out, (&logBuffer{}).logger())
	if err == nil || !strings.Contains(err.Error(), "install.sh did not finish in time and was killed") {
		t.Fatalf("Install = %v, want the timeout said\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(state, DotfilesMarker)); err == nil {
		t.Fatal("a killed install was recorded")
	}
	if b, _ := os.ReadFile(filepath.Join(state, DotfilesLog)); !strings.Contains(string(b), "started") || !strings.Contains(string(b), "did not finish in time") {
		t.Fatalf("the log: %q", b)
	}
}

// The server refuses (the account is not linked): the clone stops with its words, and nothing is
// recorded. A repository setting changed since the clone: the user's clone is left, and the error
// says to move it.
func TestDotfilesRefusals(t *testing.T) {
	forge, ask, _ := dotfilesForge(t, map[string]string{".bashrc": "x\n"})
	server, _ := hangarGitCredentials(t, func(gitcred.Request) (int, any) {
		return http.StatusForbidden, map[string]string{"message": "link your forge account first"}
	})
	home, state, env := dotfilesHome(t)
	d := Dotfiles{Repo: forge.CloneURL("alice", "dots"), Home: home, StateDir: state, Env: env, Ask: gitcred.AskServer(nil, server, "hwa_x")}
	err := d.Install(context.Background(), nil, (&logBuffer{}).logger())
	if err == nil || !strings.Contains(err.Error(), "link your forge account first") {
		t.Fatalf("Install = %v, want the server's reason", err)
	}
	if _, err := os.Stat(filepath.Join(state, DotfilesMarker)); err == nil {
		t.Fatal("a refused clone was recorded")
	}
	d.Ask = ask
	if err := d.Install(context.Background(), nil, (&logBuffer{}).logger()); err != nil {
		t.Fatal(err)
	}
	d.Repo = "https://git.example.com/alice/other.git"
	err = d.Install(context.Background(), nil, (&logBuffer{}).logger())
	if err == nil || !strings.Contains(err.Error(), "holds a clone of another repository") {
		t.Fatalf("Install of another repository = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, DotfilesDir, ".bashrc")); string(b) != "x\n" {
		t.Fatalf("the first clone was touched: %q", b)
	}
}

// TestRunDotfilesFailureIsTold: the helper serves SSH without waiting for the dotfiles, and a
// failed install is told to every shell session with the log's path.
func TestRunDotfilesFailureIsTold(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice"})
	forge.CreateRepo("alice", "dots", true, map[string]string{"install.sh": "#!/bin/sh\necho my install breaks\nexit 4\n"})
	token := forge.AddToken("alice")
	srv := gitcredtest.New(t, func(gitcred.Request) (int, any) {
		return http.StatusOK, gitcred.Credential{Username: "oauth2", Password: token}
	})
	server, asked, reports := srv.URL, func() []gitcredtest.Asked { return srv.Asked() }, srv.Reports
	state := filepath.Join(t.TempDir(), "state")
	// The helper asks its server for the owner's credential of the private repository.
	h := startRun(t, Config{Instance: "pod", StateDir: state, ServerURL: server, Token: "hwa_k1_ws.mac", Dotfiles: forge.CloneURL("alice", "dots")})
	want := "hangar: your dotfiles could not be installed: install.sh: exit status 4."
	var told string
	eventually(t, "the failure to be told", func() bool {
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
		sess.Stderr, sess.Stdin = &stderr, strings.NewReader("exit 0\n")
		if err := sess.Shell(); err != nil {
			t.Fatal(err)
		}
		_ = sess.Wait()
		told = stderr.String()
		return strings.Contains(told, want)
	})
	if !strings.Contains(told, filepath.Join(state, DotfilesLog)) {
		t.Fatalf("the shell was told %q, want the log's path", told)
	}
	if len(asked()) != 1 {
		t.Fatalf("the server was asked %q, want once", asked())
	}
	if b, _ := os.ReadFile(filepath.Join(state, DotfilesLog)); !strings.Contains(string(b), "my install breaks") {
		t.Fatalf("the dotfiles log: %q", b)
	}
	// The server was told, with the helper's token: installing, then failed with the error and
	// the log's last lines.
	var got []protocol.DotfilesStatus
	eventually(t, "the failure to be reported", func() bool {
		got = nil
		for _, r := range reports() {
			if r.Authorization != "Bearer hwa_k1_ws.mac" {
				t.Fatalf("a report with %q", r.Authorization)
			}
			got = append(got, r.Status)
		}
		return len(got) == 2
	})
	if got[0].State != "installing" || got[1].State != "failed" || got[1].Error != "install.sh: exit status 4" || got[1].Script != "" ||
		!strings.Contains(got[1].Log, "my install breaks\n") || !strings.HasSuffix(got[1].Log, "dotfiles: failed: install.sh: exit status 4\n") {
		t.Fatalf("reports %+v", got)
	}
}

// The log reported is the end of the install's output, whole lines, at most
// protocol.MaxDotfilesLogBytes, whatever the install writes.
func TestDotfilesReportedLogIsBounded(t *testing.T) {
	tb := &tailBuffer{max: 64}
	for i := range 1000 {
		fmt.Fprintf(tb, "line %d\n", i)
	}
	got := tb.String()
	if len(got) > 64 || !strings.HasPrefix(got, "line ") || !strings.HasSuffix(got, "line 999\n") {
		t.Fatalf("tail %q", got)
	}
	small := &tailBuffer{max: 64}
	small.Write([]byte("only\n"))
	if small.String() != "only\n" {
		t.Fatalf("a short log %q", small.String())
	}
}

// An SSH dotfiles repository is cloned with the owner's git SSH key through the server (the
// helper's token), its host key checked against the forges' known hosts, as the clone at the
// start does.
func TestDotfilesOverSSH(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice"})
	forge.CreateRepo("alice", "dots", true, map[string]string{"install.sh": "#!/bin/sh\necho ssh > \"$HOME/installed\"\n"})
	owner := newSigningServer(t).signer
	forge.AddSSHKey("alice", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(owner.PublicKey()))))
	srv := gitcredtest.New(t, func(gitcred.Request) (int, any) { return http.StatusNotFound, map[string]string{"message": "no forge"} })
	srv.SetGitSSH(owner, forge.KnownHosts(), "")
	home, state, env := dotfilesHome(t)
	err := installDotfiles(context.Background(), Config{Dotfiles: forge.SSHCloneURL("alice", "dots"), Env: env, StateDir: state, ServerURL: srv.URL, Token: "hwa_test", Stdout: io.Discard},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "installed")); string(b) != "ssh\n" {
		t.Fatalf("install.sh's mark: %q", b)
	}
	if !slices.Contains(srv.SSHAsked(), "POST /api/v1/workspace-agent/gitssh/sign Bearer hwa_test") {
		t.Fatalf("no signature asked of the server: %q", srv.SSHAsked())
	}
}

// TestRunReportsWithoutGitCredentials: a helper whose server has no forges (NoGitCredentials, the
// generated pod's HANGAR_HELPER_GIT_CREDENTIALS=false) reports to it (the dotfiles' install) but
// never asks it for credentials, and git in the workspace has no credential helper of Hangar's.
func TestRunReportsWithoutGitCredentials(t *testing.T) {
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice"})
	forge.CreateRepo("alice", "dots", false, map[string]string{"install.sh": "#!/bin/sh\necho installed my dotfiles\n"})
	srv := gitcredtest.New(t, func(gitcred.Request) (int, any) {
		return http.StatusNotFound, map[string]string{"code": "not_found", "message": "no forge"}
	})
	h := startRun(t, Config{Instance: "pod", ServerURL: srv.URL, Token: "hwa_k1_ws.mac", NoGitCredentials: true, Dotfiles: forge.CloneURL("alice", "dots")})
	var got []protocol.DotfilesStatus
	eventually(t, "the install to be reported", func() bool {
		got = nil
		for _, r := range srv.Reports() {
			got = append(got, r.Status)
		}
		return len(got) == 2
	})
	if got[1].State != "installed" || !strings.Contains(got[1].Log, "installed my dotfiles") {
		t.Fatalf("reports %+v", got)
	}
	if asked := srv.Asked(); len(asked) != 0 {
		t.Fatalf("the server was asked for credentials: %+v", asked)
	}
	c, err := ssh.Dial("tcp", h.addr, &ssh.ClientConfig{User: "proxy", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.key)}, HostKeyCallback: ssh.FixedHostKey(h.host), Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output("env")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "credential.helper") {
		t.Fatalf("a session's environment sets a credential helper:\n%s", out)
	}
}
