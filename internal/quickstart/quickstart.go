//go:build !windows

// Package quickstart is `hangar quickstart`: on one Linux machine, as root, a server on its embedded
// store, the local Kubernetes cluster with its real node (scripts/kube-up), an agent, the access
// proxy, the relay that lets the cluster's pods reach the server, the Kubernetes and Terraform
// starter templates and a first workspace with the web editor, each reused by the next run;
// `hangar quickstart stop` ends what it started. The processes are this binary's own commands
// (`hangar server`, `hangar agent`, `hangar proxy`, `hangar relay`), started in the background with
// their logs in the data directory, so that they outlive the command that printed the URLs.
package quickstart

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/devfile"
	nsnet "github.com/hangar-dev/hangar/internal/netns"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/starters"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Names of what the quick start makes.
const (
	AgentName    = "local"
	TemplateName = "kubernetes" // the Kubernetes starter (internal/starters)
	// TerraformTemplateName is the Terraform starter terraform-kubernetes-pod, its kubeconfig the
	// local cluster's: a workspace of it is a pod whose helper connects back through the relay.
	TerraformTemplateName = "terraform-pod"
	WorkspaceName         = "first"
	// NodeIP is the local cluster's node address in its network namespace (tools/kube's kubeup),
	// where the relay listens for the pods: they reach it, the host does not.
	NodeIP = "10.99.0.2"
	// Zone is the agent's DNS zone: every name under .localhost resolves to the loopback address
	// (RFC 6761; Chromium, Firefox, curl and systemd-resolved do so without asking DNS), so the
	// workspace hosts <port>-<name>--<owner>.workspaces.localhost need no DNS set-up.
	Zone = "workspaces.localhost"
)

// Config is the quick start's configuration.
type Config struct {
	DataDir       string
	Source        string // Hangar's source checkout (scripts/kube-up builds the cluster from it)
	Listen        string // the server's address
	ProxyListen   string // the access proxy's (plain http, on loopback)
	SSHListen     string // the proxy's SSH
	Timeout       time.Duration
	NoInstallDeps bool // refuse, instead of installing, when Debian packages the cluster or the editor need are missing
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "hangar", "quickstart")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "hangar", "quickstart")
	}
	return "hangar-quickstart"
}

// Command returns `hangar quickstart` and its `stop`.
func Command() *cobra.Command {
	var cfg Config
	cmd := &cobra.Command{
		Use:   "quickstart [--data-dir DIR] [--source DIR]",
		Short: "Run Hangar, a local Kubernetes cluster and a first workspace on this machine (as root)",
		Long: `Run everything on this Linux machine, as root, and end with a workspace you can open in a
browser and reach with 'hangar ssh': the server on its embedded SQLite store, the local Kubernetes
cluster with its real node (scripts/kube-up: containerd, runc, CNI plugins, no Docker), an agent,
the access proxy on this machine's loopback, the Kubernetes starter template (hangar templates init
kubernetes) and a workspace made from it, with the web editor. The Terraform starter is pushed too,
as the template terraform-pod: 'hangar create mine --template terraform-pod' makes a pod whose
helper connects back to the server through a relay in the cluster's network namespace.

The cluster's programs and the editor's image are built from Hangar's source (a checkout: --source,
or the current directory or one of its parents): the first run builds them (about 7 and 6 minutes
on 2 idle cores) and caches them (.cache/kube in the checkout, ~/.cache/hangar/editor); later runs
take seconds. Everything runs in the background, logging into the data directory; a second run
reuses what is there, and 'hangar quickstart stop' ends it all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	stop := &cobra.Command{
		Use:   "stop [--data-dir DIR]",
		Short: "Stop what 'hangar quickstart' started: the proxy, the agent, the relay, the server and the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Stop(cfg.DataDir, cmd.OutOrStdout())
		},
	}
	cmd.PersistentFlags().StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "directory of the quick start's server data, cluster, keys and logs")
	cmd.Flags().StringVar(&cfg.Source, "source", "", "Hangar's source checkout, which the local cluster is built from (default: the current directory or a parent holding scripts/kube-up)")
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:7080", "address of the server (API and web UI)")
	cmd.Flags().StringVar(&cfg.ProxyListen, "proxy-listen", "127.0.0.1:8080", "address of the access proxy, which serves the workspaces' URLs (plain http: it listens on loopback only)")
	cmd.Flags().StringVar(&cfg.SSHListen, "ssh-listen", "127.0.0.1:2222", "address of the proxy's SSH (hangar ssh)")
	cmd.Flags().DurationVar(&cfg.Timeout, "timeout", 30*time.Minute, "give up when everything is not running after this long (the first run builds the cluster)")
	cmd.Flags().BoolVar(&cfg.NoInstallDeps, "no-install-deps", false, "when Debian packages the local cluster or the editor's image need are missing, say which and stop instead of installing them (scripts/install-deps quickstart)")
	cmd.AddCommand(stop)
	return cmd
}

// layout is where everything goes in the data directory.
type layout struct{ dir string }

func (l layout) serverDir() string   { return filepath.Join(l.dir, "server") }
func (l layout) clusterDir() string  { return filepath.Join(l.dir, "cluster") }
func (l layout) pids() string        { return filepath.Join(l.dir, "pids") }
func (l layout) state() string       { return filepath.Join(l.dir, "state.json") }
func (l layout) agentToken() string  { return filepath.Join(l.dir, "agent-token") }
func (l layout) adminToken() string  { return filepath.Join(l.serverDir(), "admin-token") }
func (l layout) log(n string) string { return filepath.Join(l.dir, n+".log") }

// state is what a run leaves for the next one and for stop.
type state struct {
	Source    string `json:"source"`
	ServerURL string `json:"server_url"`
	// HelperURL is the server's --helper-url: the relay's address in the cluster's namespace.
	HelperURL string `json:"helper_url"`
}

// Run brings everything up (or finds it up) and prints how to use it.
func Run(ctx context.Context, cfg Config, out, progress io.Writer) error {
	if runtime.GOOS != "linux" {
		return errors.New("hangar quickstart runs the local Kubernetes cluster, which needs Linux")
	}
	if os.Geteuid() != 0 {
		return errors.New("hangar quickstart needs root: the local cluster's node runs containerd, runc and a network namespace (run it with sudo)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	src, err := findSource(cfg.Source)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the hangar executable: %w", err)
	}
	l := layout{dir: cfg.DataDir}
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if err := checkDataDir(l.dir); err != nil {
		return err
	}
	p := &progressWriter{w: progress, start: time.Now()}
	p.say("data directory %s (logs: server.log, agent.log, proxy.log, relay.log, kube-up.log)", l.dir)

	// 0. What the local cluster and the editor's image need from Debian (the one list:
	// scripts/install-deps), installed on a fresh machine unless told not to.
	if err := installDeps(ctx, p, l, src, cfg.NoInstallDeps); err != nil {
		return err
	}

	// 1. The server. The pods of Terraform workspaces reach it through the relay (step 2), at the
	// node's address in the cluster's namespace and the server's port.
	st, _ := readState(l)
	serverURL := "http://" + cfg.Listen
	serverHost, serverPort, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.Listen, err)
	}
	relayListen := net.JoinHostPort(NodeIP, serverPort)
	helperURL := "http://" + relayListen
	restartedServer := false
	if !alive(l, "server") || st.ServerURL != serverURL || st.HelperURL != helperURL || !serverAnswers(ctx, serverURL) {
		stopProcess(l, "server")
		restartedServer = true
		p.say("starting the server on %s (SQLite in %s; Terraform workspaces' helpers connect to %s)", serverURL, l.serverDir(), helperURL)
		if err := start(l, "server", self, "server", "--listen", cfg.Listen, "--data-dir", l.serverDir(), "--helper-url", helperURL); err != nil {
			return err
		}
		if err := waitFor(ctx, func() bool { return serverAnswers(ctx, serverURL) }, func() error { return exited(l, "server") }); err != nil {
			return fmt.Errorf("the server did not start (%s): %w", l.log("server"), err)
		}
	} else {
		p.say("the server runs already on %s", serverURL)
	}
	if err := writeState(l, state{Source: src, ServerURL: serverURL, HelperURL: helperURL}); err != nil {
		return err
	}
	tok, err := os.ReadFile(l.adminToken())
	if err != nil {
		return fmt.Errorf("the admin token: %w (the quick start's server data directory must be its own)", err)
	}
	admin, err := sdk.New(serverURL, strings.TrimSpace(string(tok)))
	if err != nil {
		return err
	}

	// 2. The cluster, its binaries built on the first run.
	cluster := l.clusterDir()
	fresh := false
	if !clusterUp(ctx, cluster) {
		p.say("starting the local Kubernetes cluster in %s with scripts/kube-up (the first run builds its programs from %s: about 7 minutes on 2 idle cores, cached in %s)",
			cluster, src, filepath.Join(src, ".cache", "kube"))
		if err := p.run(ctx, l.log("kube-up"), "the cluster", nil, filepath.Join(src, "scripts", "kube-up"), cluster); err != nil {
			return err
		}
		fresh = true
	} else {
		p.say("the local cluster runs already in %s", cluster)
	}
	netnsName, err := os.ReadFile(filepath.Join(cluster, "netns"))
	if err != nil {
		return fmt.Errorf("the cluster's network namespace: %w", err)
	}
	netns := "/run/netns/" + strings.TrimSpace(string(netnsName))

	// The relay from the node's address in the cluster's namespace to the server.
	if restartedServer || fresh || !alive(l, "relay") {
		stopProcess(l, "relay")
		to := net.JoinHostPort(serverHost, serverPort)
		if ip := net.ParseIP(serverHost); serverHost == "" || ip != nil && ip.IsUnspecified() {
			to = net.JoinHostPort("127.0.0.1", serverPort) // a server on every interface answers on loopback
		}
		p.say("starting the relay from %s in the cluster's network namespace to the server at %s (Terraform workspaces' helpers connect through it)", relayListen, to)
		if err := start(l, "relay", self, "relay", "--netns", netns, "--listen", relayListen, "--to", to, "--label", l.dir); err != nil {
			return err
		}
		inside := &nsnet.Dialer{Path: netns}
		if err := waitFor(ctx, func() bool { return listeningInside(ctx, inside, relayListen) }, func() error { return exited(l, "relay") }); err != nil {
			return fmt.Errorf("the relay did not start (%s): %w", l.log("relay"), err)
		}
	}

	// 3. The editor's image on the node.
	if err := loadEditor(ctx, p, l, src, fresh); err != nil {
		return err
	}

	// 4. The agent and the proxy.
	clientPub, err := sshKeys(l)
	if err != nil {
		return err
	}
	starter, err := starters.Get(TemplateName)
	if err != nil {
		return err
	}
	df, err := starter.File("devfile.yaml")
	if err != nil {
		return err
	}
	_, portStr, err := net.SplitHostPort(cfg.ProxyListen)
	if err != nil {
		return fmt.Errorf("--proxy-listen %q: %w", cfg.ProxyListen, err)
	}
	proxyPort, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--proxy-listen %q: the port: %w", cfg.ProxyListen, err)
	}
	// proxy_url_port: the workspaces' URLs carry the proxy's port, in show, list and the page too.
	agentCfg := map[string]any{"dns_zone": Zone, "proxy_url_scheme": "http", "proxy_url_port": proxyPort, "proxy_ssh_public_keys": []string{clientPub},
		"proxy_ssh_address": cfg.SSHListen, "default_devfile": string(df)}
	restart, err := ensureAgent(ctx, admin, l, agentCfg)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(cluster, "kubeconfig")
	var agentStarted time.Time
	if restart || fresh || !alive(l, "agent") {
		agentStarted = time.Now()
		stopProcess(l, "agent")
		p.say("starting the agent %q", AgentName)
		if err := start(l, "agent", self, "agent", "--server", serverURL, "--token-file", l.agentToken(), "--kubeconfig", kubeconfig,
			"--lease-namespace", "", "--metrics-listen", ""); err != nil {
			return err
		}
	}
	proxyURL := "http://" + cfg.ProxyListen
	if restart || fresh || !alive(l, "proxy") {
		stopProcess(l, "proxy")
		p.say("starting the access proxy on %s (SSH on %s), reaching the pods from the cluster's network namespace %s", proxyURL, cfg.SSHListen, netns)
		if err := start(l, "proxy", self, "proxy", "--server", serverURL, "--token-file", l.agentToken(), "--kubeconfig", kubeconfig,
			"--listen", cfg.ProxyListen, "--metrics-listen", "", "--ssh-listen", cfg.SSHListen,
			"--ssh-host-key-file", filepath.Join(l.dir, "ssh_host_key"), "--ssh-client-key-file", filepath.Join(l.dir, "ssh_client_key"),
			"--pod-netns", netns); err != nil {
			return err
		}
	}
	// 5. The starter templates and the first workspace. The Terraform starter is pushed, not
	// built: a workspace of it is the user's to create (docs/decisions.md).
	if err := ensureTemplate(ctx, admin, string(df)); err != nil {
		return err
	}
	if err := ensureTerraformTemplate(ctx, admin, kubeconfig); err != nil {
		return err
	}
	p.say("the workspace %q (template %s) is starting", WorkspaceName, TemplateName)
	w, err := ensureWorkspace(ctx, admin)
	if err != nil {
		return err
	}
	// A state the server holds from before the agent (re)started may be stale (a cluster started
	// again): wait for the agent to have reported since.
	if !agentStarted.IsZero() {
		if err := waitFor(ctx, func() bool { return agentSeenSince(ctx, admin, agentStarted) }, func() error { return exited(l, "agent") }); err != nil {
			return fmt.Errorf("the agent did not connect (%s): %w", l.log("agent"), err)
		}
	}
	w, err = admin.WaitForState(ctx, WorkspaceName, func(w sdk.Workspace) (bool, error) {
		switch workspace.State(w.ActualState) {
		case workspace.Running:
			return true, nil
		case workspace.Failed, workspace.Error:
			return false, fmt.Errorf("the workspace %s is %s (hangar show %s says why)", w.Name, w.ActualState, w.Name)
		}
		return false, nil
	}, nil, time.Second)
	if err != nil {
		return fmt.Errorf("wait for the workspace %s: %w (logs: %s)", WorkspaceName, err, l.log("agent"))
	}
	if err := waitFor(ctx, func() bool { return listening(cfg.ProxyListen) }, func() error {
		if err := exited(l, "agent"); err != nil {
			return err
		}
		return exited(l, "proxy")
	}); err != nil {
		return fmt.Errorf("the proxy did not start (%s, %s): %w", l.log("proxy"), l.log("agent"), err)
	}

	// The workspace's state may lag its pod (a cluster started again on its data): the URL answering
	// through the proxy is what the user waits for.
	wsURL := withPort(w.URL, cfg.ProxyListen)
	if err := waitFor(ctx, func() bool { return editorAnswers(ctx, cfg.ProxyListen, wsURL, strings.TrimSpace(string(tok))) }, func() error { return exited(l, "proxy") }); err != nil {
		return fmt.Errorf("the workspace URL %s did not answer through the proxy (%s): %w", wsURL, l.log("proxy"), err)
	}
	p.say("ready")

	fmt.Fprintf(out, `Hangar is running on this machine (data and logs in %s).
Workspace %s: %s
  Open it in a browser on this machine (names under .localhost reach 127.0.0.1; the proxy serves
  plain http on loopback only). It signs you in through the web UI.
Web UI: %s/ui/ (sign in with the admin token in %s)
Log in:  hangar login --url %s --token "$(cat %s)"
Then:    hangar ssh %s                      # a shell in the workspace
         hangar list                           # your workspaces
         hangar create dev --template %s --agent %s --wait   # another one from the starter
         hangar create mine --template %s --wait     # Terraform: a pod whose helper connects back (hangar ssh mine)
         hangar templates init                 # the starter templates, to make your own
Stop everything: hangar quickstart stop%s
`, l.dir, WorkspaceName, wsURL, serverURL, l.adminToken(), serverURL, l.adminToken(), WorkspaceName, TemplateName, AgentName, TerraformTemplateName, dataDirFlag(cfg.DataDir))
	return nil
}

func dataDirFlag(dir string) string {
	if dir == defaultDataDir() {
		return ""
	}
	return " --data-dir " + dir
}

// withPort gives a workspace URL the proxy's port, if it has none (a workspace created before the
// agent's proxy_url_port was set keeps the URL it was created with).
func withPort(raw, listen string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.Port() != "" {
		return raw
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "80" {
		return raw
	}
	u.Host = net.JoinHostPort(u.Hostname(), port)
	return u.String()
}

// checkDataDir refuses a data directory that a user other than root (or the one who ran sudo)
// could change: the quick start runs as root what it reads there (state.json names the checkout
// whose scripts/kube-down stop runs, pids names what it signals) and writes tokens and keys there,
// following the names. So the directory must not be writable by group or others, and neither it
// nor a directory above it may belong to another user, or be writable by others without the
// sticky bit (as /tmp is, where no one else can move it away).
func checkDataDir(dir string) error {
	return checkTrusted("--data-dir "+dir, dir, true)
}

// checkSource refuses a source checkout whose scripts (which the quick start runs as root) a user
// other than root or the one who ran sudo could change: the scripts, their directory, the
// checkout and every directory above it (a checkout found by walking up from the current
// directory may be /tmp's, where anyone can put a scripts/kube-up).
func checkSource(src string) error {
	for _, f := range []string{"kube-up", "kube-down", "kube-load-image", "build-editor-image"} {
		p := filepath.Join(src, "scripts", f)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := checkTrusted("the source checkout "+src, p, false); err != nil {
			return err
		}
	}
	return checkTrusted("the source checkout "+src, src, false)
}

// checkTrusted refuses path (what names it in the error) when a user other than root, the
// running user or SUDO_UID could change it: it or a directory above it belongs to another user,
// is writable by a group other than root's, the running user's or SUDO_GID, or by everyone (a
// directory above it only with the sticky bit, as /tmp). With private, path itself may be
// writable by no group at all.
func checkTrusted(what, path string, private bool) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	trusted := func(id int, self int, env string) bool {
		if id == 0 || id == self {
			return true
		}
		s, ok := os.LookupEnv(env)
		return ok && s == strconv.Itoa(id)
	}
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		mode, last := fi.Mode(), p == real
		sticky := fi.IsDir() && mode&os.ModeSticky != 0 && !last
		switch {
		case !trusted(int(st.Uid), os.Geteuid(), "SUDO_UID"):
			return fmt.Errorf("%s: %s belongs to uid %d, who could change what the quick start runs as root: use one only root (or you) can write", what, p, st.Uid)
		case mode.Perm()&0o002 != 0 && !sticky:
			return fmt.Errorf("%s: %s is writable by everyone (mode %s), who could change what the quick start runs as root: use one only root (or you) can write", what, p, mode.Perm())
		case mode.Perm()&0o020 != 0 && !sticky && (private && last || !trusted(int(st.Gid), os.Getegid(), "SUDO_GID")):
			return fmt.Errorf("%s: %s is writable by group %d (mode %s), who could change what the quick start runs as root: chmod g-w it, or use another", what, p, st.Gid, mode.Perm())
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

// findSource finds Hangar's source checkout: the one given, else the current directory or a parent.
func findSource(given string) (string, error) {
	isSource := func(d string) bool {
		_, e1 := os.Stat(filepath.Join(d, "scripts", "kube-up"))
		_, e2 := os.Stat(filepath.Join(d, "tools", "kube", "go.mod"))
		return e1 == nil && e2 == nil
	}
	if given != "" {
		abs, err := filepath.Abs(given)
		if err != nil || !isSource(abs) {
			return "", fmt.Errorf("--source %s: not Hangar's source checkout (no scripts/kube-up and tools/kube/go.mod)", given)
		}
		return abs, checkSource(abs)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isSource(d) {
			return d, checkSource(d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", errors.New("the local Kubernetes cluster is built from Hangar's source, and no checkout was found here: " +
		"run hangar quickstart in a clone of Hangar's repository (it also needs Go), or give --source DIR")
}

// progressWriter prints the quick start's steps with the time since it began.
type progressWriter struct {
	w     io.Writer
	start time.Time
}

func (p *progressWriter) say(format string, args ...any) {
	fmt.Fprintf(p.w, "quickstart [%s] %s\n", time.Since(p.start).Round(time.Second), fmt.Sprintf(format, args...))
}

// run runs a slow step, its output in logFile, saying every 30 seconds that it still runs and
// passing on the lines where the step says what it does (kube-up's and build-editor-image's own).
// Its standard output goes to stdout, or to logFile if stdout is nil.
func (p *progressWriter) run(ctx context.Context, logFile, what string, stdout io.Writer, name string, args ...string) error {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(f, sc.Text())
			if t := sc.Text(); strings.HasPrefix(t, "kube-up: ") || strings.HasPrefix(t, "build-editor-image: ") {
				p.say("  %s", t)
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = pw.Close() }()
	began := time.Now()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			<-lines
			if err != nil {
				return fmt.Errorf("%s: %s failed: %w (its output: %s)", what, filepath.Base(name), err, logFile)
			}
			return nil
		case <-tick.C:
			p.say("  %s: still working (%s so far; output in %s)", what, time.Since(began).Round(time.Second), logFile)
		}
	}
}

// clusterUp reports whether the cluster in dir runs and answers.
func clusterUp(ctx context.Context, dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil || len(b) == 0 {
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || syscall.Kill(pid, 0) != nil {
			return false
		}
	}
	_, err = os.Stat(filepath.Join(dir, "containerd", "containerd.sock"))
	return err == nil
}

// loadEditor builds the editor's image (cached) and loads it into the node, when the node was just
// started or has not got this build of it.
func loadEditor(ctx context.Context, p *progressWriter, l layout, src string, fresh bool) error {
	marker := filepath.Join(l.clusterDir(), "quickstart-editor")
	p.say("the editor's image %s (scripts/build-editor-image: the first build takes about 6 minutes on 2 idle cores, cached in ~/.cache/hangar/editor)", devfile.EditorImage)
	logFile := l.log("editor-image")
	var archiveOut strings.Builder
	if err := p.run(ctx, logFile, "the editor's image", &archiveOut, filepath.Join(src, "scripts", "build-editor-image")); err != nil {
		return err
	}
	archive := strings.TrimSpace(archiveOut.String())
	if b, err := os.ReadFile(marker); err == nil && !fresh && strings.TrimSpace(string(b)) == archive {
		return nil
	}
	p.say("loading the editor's image into the node (scripts/kube-load-image)")
	if err := p.run(ctx, logFile, "loading the editor's image", nil, filepath.Join(src, "scripts", "kube-load-image"), l.clusterDir(), archive); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(archive+"\n"), 0o644)
}

// sshKeys makes the proxy's host key and its key for the workspaces' helpers, once; it returns the
// latter's public half (the agent config's proxy_ssh_public_keys).
func sshKeys(l layout) (string, error) {
	var pub string
	for _, name := range []string{"ssh_host_key", "ssh_client_key"} {
		file := filepath.Join(l.dir, name)
		b, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			_, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return "", err
			}
			block, err := ssh.MarshalPrivateKey(priv, "hangar-quickstart")
			if err != nil {
				return "", err
			}
			b = pem.EncodeToMemory(block)
			if err := os.WriteFile(file, b, 0o600); err != nil {
				return "", err
			}
		} else if err != nil {
			return "", err
		}
		signer, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		pub = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	}
	return pub, nil
}

// ensureAgent registers the agent (its token in the data directory) or brings its config up to
// date; it reports whether the agent and proxy must start again (a new token or config).
func ensureAgent(ctx context.Context, admin *sdk.Client, l layout, cfg map[string]any) (bool, error) {
	agents, err := admin.ListAgents(ctx)
	if err != nil {
		return false, fmt.Errorf("list agents: %w", err)
	}
	for _, a := range agents {
		if a.Name != AgentName {
			continue
		}
		var cur map[string]any
		_ = json.Unmarshal(a.Config, &cur)
		changed := false
		for k, v := range cfg {
			want, _ := json.Marshal(v)
			have, _ := json.Marshal(cur[k])
			if string(want) != string(have) {
				changed = true
			}
		}
		if changed {
			if _, err := admin.UpdateAgent(ctx, AgentName, sdk.UpdateAgentRequest{Config: cfg}); err != nil {
				return false, fmt.Errorf("update the agent %s: %w", AgentName, err)
			}
		}
		if _, err := os.Stat(l.agentToken()); err == nil {
			return changed, nil
		}
		a, err := admin.RotateAgentToken(ctx, AgentName, false)
		if err != nil {
			return false, fmt.Errorf("a new token for the agent %s: %w", AgentName, err)
		}
		return true, os.WriteFile(l.agentToken(), []byte(a.Token+"\n"), 0o600)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return false, err
	}
	a, err := admin.CreateAgent(ctx, sdk.CreateAgentRequest{Name: AgentName, Config: raw})
	if err != nil {
		return false, fmt.Errorf("register the agent %s: %w", AgentName, err)
	}
	return true, os.WriteFile(l.agentToken(), []byte(a.Token+"\n"), 0o600)
}

// ensureTemplate pushes the starter as a template unless its active version is this starter.
func ensureTemplate(ctx context.Context, admin *sdk.Client, df string) error {
	if _, err := admin.Template(ctx, TemplateName); err == nil {
		b, _, err := admin.PullTemplateVersion(ctx, TemplateName, 0)
		if err == nil && string(b) == df {
			return nil
		}
	} else if !isNotFound(err) {
		return fmt.Errorf("template %s: %w", TemplateName, err)
	}
	_, err := admin.PushTemplateVersion(ctx, TemplateName, sdk.CreateTemplateVersionRequest{Kind: "kubernetes", Devfile: df})
	if err != nil {
		return fmt.Errorf("push the starter template %s: %w", TemplateName, err)
	}
	return nil
}

// ensureWorkspace creates the first workspace, or starts it if it is stopped.
func ensureWorkspace(ctx context.Context, admin *sdk.Client) (sdk.Workspace, error) {
	w, err := admin.Workspace(ctx, WorkspaceName)
	if isNotFound(err) || err == nil && workspace.State(w.ActualState) == workspace.Terminated {
		return admin.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: WorkspaceName, Template: TemplateName, Agent: AgentName})
	}
	if err != nil {
		return w, err
	}
	if workspace.State(w.DesiredState) != workspace.Running {
		return admin.UpdateWorkspace(ctx, WorkspaceName, sdk.UpdateWorkspaceRequest{DesiredState: string(workspace.Running)})
	}
	return w, nil
}

// agentSeenSince reports whether the quick start's agent called the server after t.
func agentSeenSince(ctx context.Context, admin *sdk.Client, t time.Time) bool {
	agents, err := admin.ListAgents(ctx)
	if err != nil {
		return false
	}
	for _, a := range agents {
		if a.Name == AgentName && a.LastSeenAt != nil && a.LastSeenAt.After(t) {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool {
	var ae *sdk.APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

func serverAnswers(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/ui/", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}

// editorAnswers reports whether the workspace URL answers through the proxy at addr (dialled
// directly: nothing here resolves the workspace's name), as the admin.
func editorAnswers(ctx context.Context, addr, url, token string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 400
}

// listeningInside reports whether addr accepts connections inside the namespace of d.
func listeningInside(ctx context.Context, d *nsnet.Dialer, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// waitFor polls cond until it holds, failed says a process died, or ctx ends.
func waitFor(ctx context.Context, cond func() bool, failed func() error) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		if err := failed(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

var pidLine = regexp.MustCompile(`^(\d+) (\S+)$`)

// readPids reads the data directory's "PID NAME" lines.
func readPids(l layout) map[string]int {
	out := map[string]int{}
	b, err := os.ReadFile(l.pids())
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m := pidLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			pid, _ := strconv.Atoi(m[1])
			out[m[2]] = pid
		}
	}
	return out
}

func writePids(l layout, pids map[string]int) error {
	var b strings.Builder
	for _, n := range []string{"server", "relay", "agent", "proxy"} {
		if pid, ok := pids[n]; ok {
			fmt.Fprintf(&b, "%d %s\n", pid, n)
		}
	}
	return os.WriteFile(l.pids(), []byte(b.String()), 0o600)
}

// ours reports whether pid is the quick start's process name of the data directory l: its command
// line runs `hangar NAME` and names a file of l (a pid reused by another process is left alone).
func ours(l layout, name string, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return len(args) > 1 && args[1] == name && strings.Contains(string(b), l.dir)
}

func alive(l layout, name string) bool {
	pid, ok := readPids(l)[name]
	return ok && ours(l, name, pid)
}

// exited says how the process ended if it is not running.
func exited(l layout, name string) error {
	if alive(l, name) {
		return nil
	}
	return fmt.Errorf("hangar %s exited: %s", name, lastLines(l.log(name), 5))
}

func lastLines(file string, n int) string {
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// start starts `self args...` in a session of its own (it outlives the quick start), its output
// appended to NAME.log, and records its pid.
func start(l layout, name, self string, args ...string) error {
	f, err := os.OpenFile(l.log(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "==> %s hangar %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(args, " "))
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start hangar %s: %w", name, err)
	}
	pids := readPids(l)
	pids[name] = cmd.Process.Pid
	if err := writePids(l, pids); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// stopProcess ends the quick start's process name (TERM, then KILL after 10 s), if it runs.
func stopProcess(l layout, name string) bool {
	pids := readPids(l)
	pid, ok := pids[name]
	if !ok {
		return false
	}
	ran := ours(l, name, pid)
	if ran {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for ours(l, name, pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if ours(l, name, pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	delete(pids, name)
	_ = writePids(l, pids)
	return ran
}

func readState(l layout) (state, error) {
	var s state
	b, err := os.ReadFile(l.state())
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func writeState(l layout, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.state(), append(b, '\n'), 0o600)
}

// Stop ends what the quick start in dataDir started: the proxy, the agent, the relay, the server,
// then the cluster (scripts/kube-down). It keeps the data (the next run reuses it) and may run any number of
// times.
func Stop(dataDir string, out io.Writer) error {
	l := layout{dir: dataDir}
	if _, err := os.Stat(l.dir); errors.Is(err, fs.ErrNotExist) {
		_, err := fmt.Fprintf(out, "Nothing to stop: no quick start in %s.\n", l.dir)
		return err
	}
	if err := checkDataDir(l.dir); err != nil {
		return err
	}
	for _, name := range []string{"proxy", "agent", "relay", "server"} {
		if stopProcess(l, name) {
			fmt.Fprintf(out, "Stopped hangar %s.\n", name)
		}
	}
	st, _ := readState(l)
	if _, err := os.Stat(filepath.Join(l.clusterDir(), "pids")); err == nil {
		kubeDown := filepath.Join(st.Source, "scripts", "kube-down")
		if st.Source == "" {
			return fmt.Errorf("%s has no source checkout recorded: stop the cluster with scripts/kube-down %s", l.state(), l.clusterDir())
		}
		if err := checkSource(st.Source); err != nil {
			return err
		}
		cmd := exec.Command(kubeDown, l.clusterDir())
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("scripts/kube-down %s: %w\n%s", l.clusterDir(), err, b)
		}
		if err := os.Remove(filepath.Join(l.clusterDir(), "pids")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		fmt.Fprintf(out, "Stopped the local cluster (%s).\n", l.clusterDir())
	}
	_, err := fmt.Fprintf(out, "The quick start is stopped; its data stays in %s (hangar quickstart starts it again).\n", l.dir)
	return err
}

// installDeps installs the Debian packages the local cluster and the editor's image need and this
// machine lacks (scripts/install-deps quickstart), or, with refuse, names them and stops.
func installDeps(ctx context.Context, p *progressWriter, l layout, src string, refuse bool) error {
	script := filepath.Join(src, "scripts", "install-deps")
	out, err := exec.CommandContext(ctx, script, "quickstart", "--check").Output()
	if err != nil {
		return fmt.Errorf("scripts/install-deps quickstart --check: %w", err)
	}
	missing := strings.TrimSpace(string(out))
	if missing == "" {
		return nil
	}
	if refuse {
		return fmt.Errorf("the local cluster and the editor's image need these Debian packages, missing here: %s; install them (%s quickstart, or apt-get install), or run without --no-install-deps", missing, script)
	}
	p.say("installing the Debian packages the local cluster and the editor's image need: %s (scripts/install-deps; output in %s)", missing, l.log("install-deps"))
	return p.run(ctx, l.log("install-deps"), "installing Debian packages", nil, script, "quickstart")
}
