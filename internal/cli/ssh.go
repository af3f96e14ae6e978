package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/term"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// exitCode is an error that only sets the process's exit code (the remote command's): nothing is
// printed for it.
type exitCode int

func (e exitCode) Error() string { return "exit status " + strconv.Itoa(int(e)) }

var flagSSHAddress = globalFlag{name: "ssh-address", env: "HANGAR_SSH_ADDRESS",
	usage: "`HOST:PORT` of the access proxy's SSH (env HANGAR_SSH_ADDRESS; default: the workspace's agent config, proxy_ssh_address)"}

// sshTarget is where a workspace's SSH is: the proxy's address and the user name that names the
// workspace there.
type sshTarget struct {
	ws   sdk.Workspace
	addr string
	user string
	// viaServer: a Terraform workspace, whose helper the server relays to (addr is empty).
	viaServer bool
}

// workspaceHostKeyAlias is the name a Terraform workspace's helper's host key is kept under in
// Hangar's known_hosts (and config-ssh's HostKeyAlias): one per workspace, by id, so that a new
// workspace of the same name is not taken for the old one.
func workspaceHostKeyAlias(ws sdk.Workspace) string { return "hangar-workspace-" + ws.ID }

// sshTarget reads the workspace and finds the proxy's SSH address.
func (a *app) sshTarget(cmd *cobra.Command, c *sdk.Client, name string) (sshTarget, error) {
	ws, err := c.Workspace(cmd.Context(), name)
	if err != nil {
		return sshTarget{}, err
	}
	if ws.Backend == "terraform" {
		// The workspace's helper connected out to the server, which relays to it.
		return sshTarget{ws: ws, user: ws.Ref(), viaServer: true}, nil
	}
	if ws.Backend != "kubernetes" {
		return sshTarget{}, fmt.Errorf("workspace %s runs on %s: SSH reaches Kubernetes and Terraform workspaces only", ws.Ref(), ws.Backend)
	}
	addr, ok := a.value(cmd, flagSSHAddress)
	if !ok {
		if addr, err = proxySSHAddress(cmd.Context(), c, ws.Agent); err != nil {
			return sshTarget{}, err
		}
	}
	if addr == "" {
		return sshTarget{}, fmt.Errorf("the agent %s of workspace %s has no proxy_ssh_address in its config: ask an admin to set it, or pass --ssh-address HOST:PORT", ws.Agent, ws.Ref())
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return sshTarget{}, fmt.Errorf("the proxy's SSH address %q: want HOST:PORT", addr)
	}
	return sshTarget{ws: ws, addr: addr, user: ws.Ref()}, nil
}

// proxySSHAddress is the proxy_ssh_address of an agent's config ("" when it has none).
func proxySSHAddress(ctx context.Context, c *sdk.Client, agent string) (string, error) {
	agents, err := c.ListAgents(ctx)
	if err != nil {
		return "", err
	}
	for _, ag := range agents {
		if ag.Name != agent {
			continue
		}
		var cfg struct {
			ProxySSHAddress string `json:"proxy_ssh_address"`
		}
		if err := json.Unmarshal(ag.Config, &cfg); err != nil {
			return "", fmt.Errorf("read the config of agent %s: %w", agent, err)
		}
		return cfg.ProxySSHAddress, nil
	}
	return "", fmt.Errorf("no agent %s", agent)
}

// knownHostsPath is where the CLI keeps the proxies' host keys: beside the login file.
func (a *app) knownHostsPath() (string, error) {
	p, err := a.configPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "known_hosts"), nil
}

// hostKeyCallback trusts a proxy's host key on first use and remembers it in knownHostsPath, as
// OpenSSH's StrictHostKeyChecking=accept-new does; a changed key is refused.
func (a *app) hostKeyCallback(stderr io.Writer) (ssh.HostKeyCallback, string, error) {
	path, err := a.knownHostsPath()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", fmt.Errorf("known hosts: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("known hosts: %w", err)
	}
	f.Close()
	check, err := knownhosts.New(path)
	if err != nil {
		return nil, "", fmt.Errorf("known hosts %s: %w", path, err)
	}
	var mu sync.Mutex
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		mu.Lock()
		defer mu.Unlock()
		err := check(hostname, remote, key)
		var ke *knownhosts.KeyError
		if err == nil || !errors.As(err, &ke) {
			return err
		}
		what := "the proxy"
		if strings.HasPrefix(hostname, "hangar-workspace-") {
			what = "the workspace's helper"
		}
		if len(ke.Want) > 0 {
			return fmt.Errorf("the host key of %s changed (now %s); if %s's key really was replaced, remove its line from %s", hostname, ssh.FingerprintSHA256(key), what, path)
		}
		line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key)
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("known hosts: %w", err)
		}
		defer f.Close()
		if _, err := fmt.Fprintln(f, line); err != nil {
			return fmt.Errorf("known hosts: %w", err)
		}
		fmt.Fprintf(stderr, "hangar: trusting %s %s, host key %s (saved in %s)\n", what, knownhosts.Normalize(hostname), ssh.FingerprintSHA256(key), path)
		check, _ = knownhosts.New(path)
		return nil
	}, path, nil
}

// dialSSH connects to the workspace through the proxy, with the user's token as the password.
func (a *app) dialSSH(cmd *cobra.Command, name string) (*ssh.Client, sshTarget, error) {
	c, err := a.client(cmd)
	if err != nil {
		return nil, sshTarget{}, err
	}
	t, err := a.sshTarget(cmd, c, name)
	if err != nil {
		return nil, t, err
	}
	_, token, err := a.connection(cmd)
	if err != nil {
		return nil, t, err
	}
	if token == "" {
		return nil, t, errors.New("no token: log in with 'hangar login --url URL --token TOKEN', or set HANGAR_TOKEN")
	}
	hostKey, _, err := a.hostKeyCallback(cmd.ErrOrStderr())
	if err != nil {
		return nil, t, err
	}
	var banner strings.Builder
	cfg := &ssh.ClientConfig{
		User: t.user, Auth: []ssh.AuthMethod{ssh.Password(token)}, HostKeyCallback: hostKey, Timeout: 15 * time.Second,
		BannerCallback: func(m string) error { banner.WriteString(m); return nil },
	}
	if t.viaServer {
		// The server let us in (our token, on the WebSocket); the helper asks for nothing more.
		nc, err := c.DialWorkspaceSSH(cmd.Context(), t.ws.Ref())
		if err != nil {
			return nil, t, err
		}
		cfg.Auth = nil
		// The helper's key is checked under the workspace's alias only: the connection has no
		// address of its own (knownhosts still wants one it can parse).
		cfg.HostKeyCallback = func(hostname string, _ net.Addr, key ssh.PublicKey) error {
			return hostKey(hostname, &net.TCPAddr{IP: net.IPv4zero, Port: 22}, key)
		}
		addr := workspaceHostKeyAlias(t.ws) + ":22"
		sc, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
		if err != nil {
			nc.Close()
			return nil, t, fmt.Errorf("ssh to %s through the server: %w", t.ws.Ref(), err)
		}
		return ssh.NewClient(sc, chans, reqs), t, nil
	}
	d := net.Dialer{Timeout: cfg.Timeout}
	nc, err := d.DialContext(cmd.Context(), "tcp", t.addr)
	if err != nil {
		return nil, t, fmt.Errorf("connect to the proxy's SSH at %s: %w", t.addr, err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, t.addr, cfg)
	if err != nil {
		nc.Close()
		if msg := strings.TrimSpace(banner.String()); msg != "" {
			return nil, t, errors.New(strings.TrimPrefix(msg, "hangar: "))
		}
		return nil, t, fmt.Errorf("ssh to %s through %s: %w", t.ws.Ref(), t.addr, err)
	}
	return ssh.NewClient(sc, chans, reqs), t, nil
}

func (a *app) sshCmd() *cobra.Command {
	var tty, noTTY, stdio bool
	cmd := &cobra.Command{
		Use:   "ssh NAME [-- COMMAND [ARG...]]",
		Short: "Open a shell in a workspace, or run a command there",
		Long: `Open a shell in a workspace, or run a command there: a Kubernetes workspace through the access
proxy's SSH, a Terraform workspace through the server, which relays to the helper its machine runs
(hangar_agent). The CLI authenticates with your token; for Kubernetes workspaces plain ssh, VS Code
and JetBrains use a key you registered with 'hangar ssh-keys add' (see 'hangar config-ssh').

The command's output and exit status are the remote command's. A terminal is allocated for a shell
when standard input is one (-t forces it, -T refuses it).

--stdio connects standard input and output to the proxy's SSH port (or, for a Terraform
workspace, to its helper through the server) and nothing else: it is the ProxyCommand that
'hangar config-ssh' writes.

` + nameHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usageError{errors.New("ssh takes a workspace name")}
			}
			if at := cmd.ArgsLenAtDash(); at > 1 || at == -1 && len(args) > 1 {
				return usageError{errors.New("put the command after --: hangar ssh NAME -- COMMAND")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if stdio {
				return a.sshStdio(cmd, args[0])
			}
			client, t, err := a.dialSSH(cmd, args[0])
			if err != nil {
				return err
			}
			defer client.Close()
			return runSSHSession(cmd, client, t, args[1:], tty, noTTY)
		},
	}
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "allocate a terminal even for a command")
	cmd.Flags().BoolVarP(&noTTY, "no-tty", "T", false, "never allocate a terminal")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "connect stdin and stdout to the proxy's SSH port (for ssh's ProxyCommand)")
	addSSHAddressFlag(cmd)
	return cmd
}

func addSSHAddressFlag(cmd *cobra.Command) {
	cmd.Flags().String(flagSSHAddress.name, "", flagSSHAddress.usage)
}

// runSSHSession runs a shell or a command and returns its exit status as an exitCode.
func runSSHSession(cmd *cobra.Command, client *ssh.Client, t sshTarget, command []string, tty, noTTY bool) error {
	sess, err := client.NewSession()
	if err != nil {
		return fmt.Errorf("open a session in %s: %w", t.ws.Ref(), err)
	}
	defer sess.Close()
	in, out := os.Stdin, os.Stdout
	sess.Stdin, sess.Stdout, sess.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	fd := int(in.Fd())
	isTerm := cmd.InOrStdin() == io.Reader(os.Stdin) && term.IsTerminal(fd)
	wantPTY := !noTTY && (tty || len(command) == 0 && isTerm)
	if wantPTY {
		w, h := 80, 24
		if isTerm {
			if cw, ch, err := term.GetSize(int(out.Fd())); err == nil {
				w, h = cw, ch
			}
		}
		termName := os.Getenv("TERM")
		if termName == "" {
			termName = "xterm-256color"
		}
		if err := sess.RequestPty(termName, h, w, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
			return fmt.Errorf("allocate a terminal: %w", err)
		}
		if isTerm {
			state, err := term.MakeRaw(fd)
			if err == nil {
				defer func() { _ = term.Restore(fd, state) }()
			}
			resized, stopResized := notifyResize(int(out.Fd()))
			defer stopResized()
			go func() {
				for range resized {
					if cw, ch, err := term.GetSize(int(out.Fd())); err == nil {
						_ = sess.WindowChange(ch, cw)
					}
				}
			}()
		}
	}
	if len(command) == 0 {
		err = sess.Shell()
		if err == nil {
			err = sess.Wait()
		}
	} else {
		err = sess.Run(strings.Join(command, " "))
	}
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ee.Signal() != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "hangar: the command was killed by SIG%s\n", ee.Signal())
		}
		return exitCode(ee.ExitStatus())
	case errors.Is(err, io.EOF) || errors.As(err, new(*ssh.ExitMissingError)):
		return fmt.Errorf("the connection to %s ended before the command did (the workspace stopped, or your access ended)", t.ws.Ref())
	}
	return err
}

// sshStdio relays stdin and stdout to the proxy's SSH port: ssh's ProxyCommand.
func (a *app) sshStdio(cmd *cobra.Command, name string) error {
	c, err := a.client(cmd)
	if err != nil {
		return err
	}
	t, err := a.sshTarget(cmd, c, name)
	if err != nil {
		return err
	}
	var nc net.Conn
	if t.viaServer {
		if nc, err = c.DialWorkspaceSSH(cmd.Context(), t.ws.Ref()); err != nil {
			return err
		}
	} else {
		d := net.Dialer{Timeout: 15 * time.Second}
		if nc, err = d.DialContext(cmd.Context(), "tcp", t.addr); err != nil {
			return fmt.Errorf("connect to the proxy's SSH at %s: %w", t.addr, err)
		}
	}
	defer nc.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(nc, cmd.InOrStdin())
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() { _, _ = io.Copy(cmd.OutOrStdout(), nc); done <- struct{}{} }()
	<-done // the proxy ended the connection, or ssh closed our stdin
	return nil
}

// forwardSpec is LOCAL:REMOTE, or PORT for both.
type forwardSpec struct{ local, remote int }

func parseForwardSpec(s string) (forwardSpec, error) {
	l, r, ok := strings.Cut(s, ":")
	if !ok {
		r = l
	}
	lp, err1 := strconv.Atoi(l)
	rp, err2 := strconv.Atoi(r)
	if err1 != nil || err2 != nil || lp < 0 || lp > 65535 || rp < 1 || rp > 65535 {
		return forwardSpec{}, usageError{fmt.Errorf("%q: want LOCAL:REMOTE or PORT, ports from 1 to 65535 (LOCAL 0 picks a free one)", s)}
	}
	return forwardSpec{local: lp, remote: rp}, nil
}

func (a *app) portForwardCmd() *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:   "port-forward NAME LOCAL:REMOTE [LOCAL:REMOTE...]",
		Short: "Forward local ports to ports inside a workspace",
		Long: `Forward local ports to ports inside a workspace, through the access proxy's SSH (a Terraform
workspace: through the server to its helper): any port a process in the workspace listens on,
exposed as an endpoint or not. PORT alone forwards the same
port; LOCAL 0 picks a free local port. Runs until interrupted (Ctrl-C).

` + nameHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{errors.New("port-forward takes a workspace name and at least one LOCAL:REMOTE")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			specs := make([]forwardSpec, 0, len(args)-1)
			for _, s := range args[1:] {
				f, err := parseForwardSpec(s)
				if err != nil {
					return err
				}
				specs = append(specs, f)
			}
			client, t, err := a.dialSSH(cmd, args[0])
			if err != nil {
				return err
			}
			defer client.Close()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			var wg sync.WaitGroup
			defer wg.Wait()
			for _, f := range specs {
				ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(f.local)))
				if err != nil {
					cancel()
					return fmt.Errorf("listen on %s:%d: %w", address, f.local, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Forwarding %s -> %s:%d\n", ln.Addr(), t.ws.Ref(), f.remote)
				wg.Add(2)
				go func() { defer wg.Done(); <-ctx.Done(); ln.Close() }()
				go func() { defer wg.Done(); forwardLoop(ctx, ln, client, f.remote, cmd.ErrOrStderr()) }()
			}
			// The SSH connection ending (the workspace stopped, access revoked) ends the command.
			connDone := make(chan error, 1)
			go func() { connDone <- client.Wait() }()
			select {
			case <-ctx.Done():
				return nil
			case <-connDone:
				cancel()
				return fmt.Errorf("the connection to %s ended (the workspace stopped, or your access ended)", t.ws.Ref())
			}
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local `ADDRESS` to listen on")
	addSSHAddressFlag(cmd)
	return cmd
}

// forwardLoop serves one local listener until it is closed.
func forwardLoop(ctx context.Context, ln net.Listener, client *ssh.Client, remote int, stderr io.Writer) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		lc, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer lc.Close()
			rc, err := client.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(remote)))
			if err != nil {
				fmt.Fprintf(stderr, "hangar: forward to port %d: %v\n", remote, err)
				return
			}
			defer rc.Close()
			done := make(chan struct{}, 2)
			go func() {
				_, _ = io.Copy(rc, lc)
				if cw, ok := rc.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
				done <- struct{}{}
			}()
			go func() {
				_, _ = io.Copy(lc, rc)
				if tc, ok := lc.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}()
			<-done
			<-done
		}()
	}
}
