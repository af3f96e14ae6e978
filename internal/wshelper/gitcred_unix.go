//go:build unix

package wshelper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/gitcred"
)

// GitCredentialSocketEnv names the helper's credential socket for `hangar git-credential`; the
// helper sets it in the environment of the command, postStart commands and sessions.
const GitCredentialSocketEnv = "HANGAR_GIT_CREDENTIAL_SOCKET"

// gitCredentialSocketName is the socket's name in the helper's state directory (mode 0700).
const gitCredentialSocketName = "git-credential.sock"

// gitCredentialTimeout bounds one question, from git's request to the server's answer.
const gitCredentialTimeout = 30 * time.Second

// maxGitCredentialsInFlight bounds the questions the helper asks the server at once; more wait.
const maxGitCredentialsInFlight = 8

// listenGitCredentials opens the credential socket in stateDir and returns it with its path.
func listenGitCredentials(stateDir string) (net.Listener, string, error) {
	return listenStateSocket(stateDir, gitCredentialSocketName)
}

// listenStateSocket opens the Unix socket name in stateDir (which the helper keeps 0700, so only
// the workspace's user reaches it; the socket is 0600 too) and returns it with its path.
func listenStateSocket(stateDir, name string) (net.Listener, string, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, "", err
	}
	path := filepath.Join(stateDir, name)
	_ = os.Remove(path) // a previous run's
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, "", err
	}
	return ln, path, nil
}

// serveLocal serves the connections of a local socket the helper opened for the workspace's
// processes (git's credentials, git's SSH agent) until ln is closed: each by handle, with its
// deadline lifetime away, at most max at once (the others wait in the listener's backlog).
func serveLocal(ctx context.Context, ln net.Listener, max int, lifetime time.Duration, handle func(net.Conn)) {
	slots := make(chan struct{}, max)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			c.Close()
			return
		}
		go func() {
			defer func() { <-slots }()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(lifetime))
			handle(c)
		}()
	}
}

// serveGitCredentials answers `hangar git-credential` on ln until it is closed: one request per
// connection, in git's format both ways, at most maxGitCredentialsInFlight at once.
func serveGitCredentials(ctx context.Context, ln net.Listener, ask gitcred.AskFunc, log *slog.Logger) {
	serveLocal(ctx, ln, maxGitCredentialsInFlight, gitCredentialTimeout, func(c net.Conn) {
		req, err := gitcred.ParseRequest(c)
		var a gitcred.Answer
		if err != nil {
			a = gitcred.Answer{Error: err.Error()}
		} else {
			qctx, cancel := context.WithTimeout(ctx, gitCredentialTimeout)
			a = ask(qctx, req)
			cancel()
			log.Info("git credential asked", "protocol", req.Protocol, "host", req.Host, "path", req.Path, "answered", a.Error == "", "error", a.Error)
		}
		_ = writeAnswer(c, a)
	})
}

// writeAnswer writes a in the socket's format: username/password lines, or error (one line) and
// quit.
func writeAnswer(w io.Writer, a gitcred.Answer) error {
	if a.Error == "" {
		return gitcred.FormatCredential(w, a.Credential)
	}
	msg := strings.Join(strings.Fields(a.Error), " ")
	out := "error=" + msg + "\n"
	if a.Quit {
		out += "quit=1\n"
	}
	_, err := io.WriteString(w, out)
	return err
}

// readAnswer reads the helper's answer (bounded).
func readAnswer(r io.Reader) (gitcred.Answer, error) {
	var a gitcred.Answer
	sc := bufio.NewScanner(io.LimitReader(r, gitcred.MaxRequestBytes))
	sc.Buffer(make([]byte, 0, 4096), gitcred.MaxRequestBytes)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), "=")
		switch key {
		case "username":
			a.Username = value
		case "password":
			a.Password = value
		case "error":
			a.Error = value
		case "quit":
			a.Quit = value == "1" || value == "true"
		}
	}
	if err := sc.Err(); err != nil {
		return gitcred.Answer{}, err
	}
	if a.Error == "" && (a.Username == "" || a.Password == "") {
		return gitcred.Answer{}, errors.New("the workspace helper closed the connection without an answer")
	}
	return a, nil
}

// startGitCredentials opens the credential socket and the git SSH agent's socket
// (gitssh_unix.go) in cfg.StateDir and answers on them with the server cfg.ServerURL
// (cfg.Connect.HTTPClient, as the connection); it returns cfg.Env with git pointed at them, and
// what stops them.
func startGitCredentials(cfg Config, log *slog.Logger) ([]string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find my own binary: %w", err)
	}
	ln, path, err := listenGitCredentials(cfg.StateDir)
	if err != nil {
		return nil, nil, fmt.Errorf("the credential socket: %w", err)
	}
	agentPath, stopAgent, err := startGitSSHAgent(cfg, log)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveGitCredentials(ctx, ln, gitcred.AskServer(cfg.Connect.HTTPClient, cfg.ServerURL, cfg.Token), log)
	}()
	knownHosts := sshHasKnownHostsCommand(cfg.Env)
	if !knownHosts {
		log.Info("git's ssh here predates OpenSSH 8.5 (or was not found): it checks the forges' host keys against the user's known_hosts only")
	}
	return gitCredentialEnv(cfg.Env, self, path, agentPath, knownHosts), func() { cancel(); ln.Close(); <-done; stopAgent() }, nil
}

// sshHasKnownHostsCommand reports whether the ssh on env's PATH is OpenSSH 8.5 or later, the
// first with KnownHostsCommand (an older one refuses the whole command line with the option, so
// git over SSH would not work at all).
func sshHasKnownHostsCommand(env []string) bool {
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		p := filepath.Join(dir, "ssh")
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, p, "-V").CombinedOutput() // OpenSSH prints its version on stderr
		return openSSHAtLeast(string(out), 8, 5)
	}
	return false
}

// openSSHAtLeast reads `ssh -V`'s "OpenSSH_9.2p1 ..." and compares its version with major.minor.
func openSSHAtLeast(version string, major, minor int) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(version), "OpenSSH_")
	if !ok {
		return false
	}
	maj, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	ma, err1 := strconv.Atoi(maj)
	mi, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// gitCredentialEnv returns env with git told to ask `self git-credential` (after the user's own
// credential helpers, with the remote's path, so a server can tell repositories apart) and where
// the socket is. It appends to GIT_CONFIG_COUNT's entries rather than replacing them. With an
// agent socket, git's ssh also uses the git SSH agent (core.sshCommand = ssh -o
// IdentityAgent=SOCKET, the user's own agent untouched) and checks the forges' host keys
// (KnownHostsCommand=`self git-known-hosts SOCKET`, after the user's own known_hosts files, when
// knownHostsCommand says the container's ssh has the option), unless env sets GIT_SSH_COMMAND or
// GIT_SSH: then the container chose its own ssh, and keeps it.
func gitCredentialEnv(env []string, self, socket, agentSocket string, knownHostsCommand bool) []string {
	n := 0
	if v := lookupEnv(env, "GIT_CONFIG_COUNT"); v != "" {
		if c, err := strconv.Atoi(v); err == nil && c >= 0 && c < 1000 {
			n = c
		}
	}
	env = setEnv(env, fmt.Sprintf("GIT_CONFIG_KEY_%d", n), "credential.helper")
	env = setEnv(env, fmt.Sprintf("GIT_CONFIG_VALUE_%d", n), "!"+shellQuote(self)+" git-credential")
	env = setEnv(env, fmt.Sprintf("GIT_CONFIG_KEY_%d", n+1), "credential.useHttpPath")
	env = setEnv(env, fmt.Sprintf("GIT_CONFIG_VALUE_%d", n+1), "true")
	n += 2
	if agentSocket != "" && lookupEnv(env, "GIT_SSH_COMMAND") == "" && lookupEnv(env, "GIT_SSH") == "" {
		env = setEnv(env, fmt.Sprintf("GIT_CONFIG_KEY_%d", n), "core.sshCommand")
		// KnownHostsCommand's value is split by ssh itself (its own double quotes), then the
		// whole option is quoted for the shell git runs core.sshCommand with.
		command := "ssh -o IdentityAgent=" + shellQuote(agentSocket)
		if knownHostsCommand {
			command += " -o " + shellQuote("KnownHostsCommand="+`"`+self+`" git-known-hosts "`+agentSocket+`"`)
		}
		env = setEnv(env, fmt.Sprintf("GIT_CONFIG_VALUE_%d", n), command)
		n++
	}
	// `git config user.name` and `user.email` answer with the owner's identity (the profile's,
	// given as GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL, which commits use anyway), for the tools that
	// read git's config rather than make commits; an entry the environment already has wins.
	for _, id := range [][2]string{{"user.name", "GIT_AUTHOR_NAME"}, {"user.email", "GIT_AUTHOR_EMAIL"}} {
		if v := lookupEnv(env, id[1]); v != "" && !hasGitConfigKey(env, n, id[0]) {
			env = setEnv(env, fmt.Sprintf("GIT_CONFIG_KEY_%d", n), id[0])
			env = setEnv(env, fmt.Sprintf("GIT_CONFIG_VALUE_%d", n), v)
			n++
		}
	}
	env = setEnv(env, "GIT_CONFIG_COUNT", strconv.Itoa(n))
	return setEnv(env, GitCredentialSocketEnv, socket)
}

// hasGitConfigKey reports whether one of env's first n GIT_CONFIG_KEY_i entries is key.
func hasGitConfigKey(env []string, n int, key string) bool {
	for i := range n {
		if strings.EqualFold(lookupEnv(env, fmt.Sprintf("GIT_CONFIG_KEY_%d", i)), key) {
			return true
		}
	}
	return false
}

// shellQuote quotes s for the shell git runs a "!" helper with (the operation appended).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// GitCredentialCommand returns `hangar git-credential OPERATION`, hidden: git runs it inside a
// workspace (credential.helper), people do not.
func GitCredentialCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "git-credential get|store|erase",
		Short:  "Give git the workspace owner's forge credentials (git's credential helper protocol)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			GitCredentialMain(cmd.Context(), args[0], os.Getenv(GitCredentialSocketEnv), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			return nil
		},
	}
}

// GitKnownHostsCommand returns `hangar git-known-hosts SOCKET`, hidden: git's ssh runs it inside a
// workspace (KnownHostsCommand), people do not.
func GitKnownHostsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "git-known-hosts SOCKET",
		Short:  "Print the forges' SSH host keys for ssh (its KnownHostsCommand), in a workspace",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			GitKnownHostsMain(args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
			return nil
		},
	}
}

// GitCredentialMain runs one operation of git's credential protocol against the helper's socket.
// It always lets git go on (exit status 0): without an answer, git tries its other helpers or
// asks; a reason goes to standard error, which git shows.
func GitCredentialMain(ctx context.Context, op, socket string, stdin io.Reader, stdout, stderr io.Writer) {
	if op != "get" {
		_, _ = io.Copy(io.Discard, io.LimitReader(stdin, gitcred.MaxRequestBytes)) // store, erase: nothing is kept here
		return
	}
	req, err := gitcred.ParseRequest(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "hangar git-credential: %v\n", err)
		return
	}
	if socket == "" {
		fmt.Fprintf(stderr, "hangar git-credential: %s is not set: this workspace's helper does not hand out git credentials\n", GitCredentialSocketEnv)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, gitCredentialTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
	if err != nil {
		fmt.Fprintf(stderr, "hangar git-credential: the workspace helper does not answer on %s: %v\n", socket, err)
		return
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := req.Format(c); err != nil {
		fmt.Fprintf(stderr, "hangar git-credential: %v\n", err)
		return
	}
	a, err := readAnswer(c)
	if err != nil {
		fmt.Fprintf(stderr, "hangar git-credential: %v\n", err)
		return
	}
	if a.Error != "" {
		fmt.Fprintf(stderr, "hangar: no credentials for %s://%s: %s\n", req.Protocol, req.Host, a.Error)
		if a.Quit {
			fmt.Fprintln(stdout, "quit=1")
		}
		return
	}
	if err := gitcred.FormatCredential(stdout, a.Credential); err != nil {
		fmt.Fprintf(stderr, "hangar git-credential: %v\n", err)
	}
}
