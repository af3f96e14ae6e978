//go:build unix

package wshelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/logging"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Options are the subcommand's flags, each also an environment variable (HANGAR_HELPER_*, which
// sessions do not see).
type Options struct {
	SSHAddr, HostKey, HostKeyFile, StateDir, AuthorizedKeysFile, PostStart, RemoteEnv, Instance, Editor string
	MaxConnections, MaxChannels, HandshakeTimeout, KeepaliveInterval                                    string
	KeepaliveCountMax, GracePeriod, LogLevel, LogFormat                                                 string
	ConnectURL, ServerURL, Token, TokenFile                                                             string
	Dotfiles, DotfilesTimeout, GitCredentials, Metadata, PostStartBlocking                              string
}

// Command returns `hangar workspace-helper [flags] [-- COMMAND [ARG...]]`, hidden: the agent's
// generated pods run it, people do not.
func Command() *cobra.Command {
	var o Options
	cmd := &cobra.Command{
		Use:   "workspace-helper [flags] [-- COMMAND [ARG...]]",
		Short: "Serve SSH inside a workspace and run its command (a workspace's main container)",
		Long: "The process a workspace's main container runs: it serves SSH (public keys of the authorized_keys\n" +
			"file only), runs the container's own command given after -- (or keeps the container alive), reaps\n" +
			"orphans as PID 1 and runs the postStart commands once per workspace start.\n\n" +
			"With --connect-url (a Terraform workspace's machine, started by hangar_agent's init script) it\n" +
			"connects out to the Hangar server with its token instead, and serves SSH on the connections the\n" +
			"server relays (users it already let in); it needs no inbound port, and listens on none unless\n" +
			"--ssh-addr is set.\n\n" +
			"Every flag can also be set with the environment variable shown.",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return errors.New("the container's command goes after --")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Connecting out, the helper serves SSH on no port unless --ssh-addr says where.
			if o.ConnectURL != "" && !cmd.Flags().Changed("ssh-addr") && os.Getenv("HANGAR_HELPER_SSH_ADDR") == "" {
				o.SSHAddr = ""
			}
			// Not cmd.Context(): the CLI ends it on SIGINT too, and SIGINT is the command's
			// (Main handles SIGTERM and SIGINT itself).
			code, err := Main(context.Background(), o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			os.Exit(code)
			return nil
		},
	}
	cmdopt.Register(cmd, []cmdopt.Option{
		cmdopt.String(&o.SSHAddr, "ssh-addr", "HANGAR_HELPER_SSH_ADDR", ":2222", "address to serve SSH on (with --connect-url: none unless set; empty: none)"),
		cmdopt.String(&o.ConnectURL, "connect-url", "HANGAR_HELPER_CONNECT_URL", "", "the Hangar server's URL to connect out to, serving SSH on the connections it relays (a Terraform workspace's machine: hangar_agent's init script)"),
		cmdopt.String(&o.ServerURL, "server-url", "HANGAR_HELPER_SERVER_URL", "", "the Hangar server's URL to ask, with the helper's token, for the workspace owner's git credentials, without connecting out (a Kubernetes workspace: its generated pod sets it); --connect-url implies it"),
		cmdopt.Bool(&o.GitCredentials, "git-credentials", "HANGAR_HELPER_GIT_CREDENTIALS", "true", "ask the server (--server-url or --connect-url) for the owner's git credentials and hand them to git in the workspace; false: the helper only reports to the server (a server without forges)"),
		cmdopt.String(&o.Token, "token", "HANGAR_HELPER_TOKEN", "", "the helper's token for --connect-url (hwa_...; prefer the environment variable or --token-file, which other users of the machine cannot read)").Arg("TOKEN"),
		cmdopt.String(&o.TokenFile, "token-file", "HANGAR_HELPER_TOKEN_FILE", "", "file holding the helper's token for --connect-url"),
		cmdopt.String(&o.HostKey, "host-key", "HANGAR_HELPER_HOST_KEY", "", "SSH host key (a private key's PEM text; prefer the environment variable, as hangar_agent's init script does); it wins over --host-key-file and the state directory").Arg("PEM"),
		cmdopt.String(&o.HostKeyFile, "host-key-file", "HANGAR_HELPER_HOST_KEY_FILE", "", "SSH host key (a private key file); empty: generate one and keep it in the state directory"),
		cmdopt.String(&o.StateDir, "state-dir", "HANGAR_HELPER_STATE_DIR", "", "directory that keeps the generated host key and the postStart record, on the workspace's data volume (default: $HOME/.local/state/hangar-helper)"),
		cmdopt.String(&o.AuthorizedKeysFile, "authorized-keys-file", "HANGAR_HELPER_AUTHORIZED_KEYS_FILE", "", "authorized_keys file of the keys allowed in (normally the proxy's), re-read at every connection; missing or empty refuses everyone"),
		cmdopt.String(&o.PostStart, "post-start", "HANGAR_HELPER_POST_START", "", `postStart commands as JSON: [{"id":..,"commandLine":..,"workingDir":..,"env":[{"name":..,"value":..}]}], run once per instance`).Arg("JSON"),
		cmdopt.Bool(&o.PostStartBlocking, "post-start-blocking", "HANGAR_HELPER_POST_START_BLOCKING", "true", "serve SSH (the pod's readiness) only once the postStart commands ended; false: at once, the commands running beside"),
		cmdopt.String(&o.RemoteEnv, "remote-env", "HANGAR_HELPER_REMOTE_ENV", "", `environment variables of SSH sessions, postStart commands and the editor, as JSON: [{"name":..,"value":..}]; ${NAME} in a value is expanded from the container's environment`).Arg("JSON"),
		cmdopt.String(&o.Editor, "editor", "HANGAR_HELPER_EDITOR", "", `the web editor to run and keep running, as JSON: {"argv":[..],"port":60001}; SSH is served once it answers on its port`).Arg("JSON"),
		cmdopt.String(&o.Metadata, "metadata", protocol.HelperMetadataEnv, "", `custom metadata commands and resource alert thresholds as JSON: {"items":[{"key":..,"display_name":..,"script":..,"interval":10,"timeout":5}],"resources_monitoring":{"memory":90,"volumes":[{"path":..,"threshold":90}]}}; the CPU, memory and volume figures are reported to the server whatever it says`).Arg("JSON"),
		cmdopt.String(&o.Dotfiles, "dotfiles-repo", "HANGAR_HELPER_DOTFILES_REPO", "", "the workspace owner's dotfiles repository (URL[#ref]), cloned into ~/.dotfiles with the owner's git credentials and installed at the first start").Arg("URL"),
		cmdopt.Duration(&o.DotfilesTimeout, "dotfiles-timeout", "HANGAR_HELPER_DOTFILES_TIMEOUT", DefaultDotfilesTimeout.String(), "how long the dotfiles' clone and install may take before they are killed"),
		cmdopt.String(&o.Instance, "instance", "HANGAR_HELPER_INSTANCE", "", "what identifies one start of the workspace for postStart (default: the hostname, which is the pod's name)").Arg("NAME"),
		cmdopt.Int(&o.MaxConnections, "max-connections", "HANGAR_HELPER_MAX_CONNECTIONS", strconv.Itoa(DefaultMaxConnections), "most SSH connections served at once"),
		cmdopt.Int(&o.MaxChannels, "max-channels", "HANGAR_HELPER_MAX_CHANNELS", strconv.Itoa(DefaultMaxChannels), "most sessions and forwarded connections open at once on one SSH connection"),
		cmdopt.Duration(&o.HandshakeTimeout, "handshake-timeout", "HANGAR_HELPER_HANDSHAKE_TIMEOUT", DefaultHandshakeTimeout.String(), "time allowed for an SSH handshake and authentication (and for a port forward's connect)"),
		cmdopt.Duration(&o.KeepaliveInterval, "keepalive-interval", "HANGAR_HELPER_KEEPALIVE_INTERVAL", DefaultKeepaliveInterval.String(), "how often an idle SSH client is asked to answer"),
		cmdopt.Int(&o.KeepaliveCountMax, "keepalive-count-max", "HANGAR_HELPER_KEEPALIVE_COUNT_MAX", strconv.Itoa(DefaultKeepaliveCountMax), "unanswered keepalives after which a connection is closed"),
		cmdopt.Duration(&o.GracePeriod, "grace-period", "HANGAR_HELPER_GRACE_PERIOD", DefaultGracePeriod.String(), "on SIGTERM, how long sessions and the command get to end before they are killed"),
		cmdopt.String(&o.LogLevel, "log-level", "HANGAR_HELPER_LOG_LEVEL", "info", "debug, info, warn or error").Arg("LEVEL"),
		cmdopt.String(&o.LogFormat, "log-format", "HANGAR_HELPER_LOG_FORMAT", "text", "text or json").Arg("FORMAT"),
	})
	return cmd
}

// Main runs the subcommand and returns the process's exit code. As PID 1 it starts itself again
// as the child of a reaper (Reap) and returns that child's exit code.
func Main(ctx context.Context, o Options, command []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	log, err := logging.New(o.LogLevel, o.LogFormat, stderr)
	if err != nil {
		return 0, err
	}
	if os.Getpid() == 1 && os.Getenv(ReaperEnv) == "" {
		self, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("reaper: find my own binary: %w", err)
		}
		child := exec.Command(self, os.Args[1:]...)
		child.Env = append(os.Environ(), ReaperEnv+"=1")
		child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
		return Reap(child, log)
	}
	if o.ConnectURL == "" && o.SSHAddr == "" {
		return 0, errors.New("--ssh-addr is empty and there is no --connect-url: the helper would serve SSH nowhere")
	}
	token, err := helperToken(o)
	if err != nil {
		return 0, err
	}
	cfg := Config{
		ConnectURL: o.ConnectURL, ServerURL: o.ServerURL, Token: token,
		SSHAddr: o.SSHAddr, HostKey: o.HostKey, HostKeyFile: o.HostKeyFile, StateDir: o.StateDir,
		AuthorizedKeysFile: o.AuthorizedKeysFile, Instance: o.Instance, Command: command, Dotfiles: o.Dotfiles,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Logger: log,
	}
	cfg.NoGitCredentials = o.GitCredentials == "false"
	cfg.PostStartNonBlocking = o.PostStartBlocking == "false"
	if cfg.PostStart, err = ParsePostStart(o.PostStart); err != nil {
		return 0, fmt.Errorf("--post-start: %w", err)
	}
	if cfg.Metadata, err = protocol.ParseMetadataSpec(o.Metadata); err != nil {
		return 0, fmt.Errorf("--metadata (%s): %w", protocol.HelperMetadataEnv, err)
	}
	if cfg.RemoteEnv, err = ParseRemoteEnv(o.RemoteEnv); err != nil {
		return 0, fmt.Errorf("--remote-env: %w", err)
	}
	if msg := workspace.CheckDotfilesRepo(o.Dotfiles); msg != "" {
		return 0, fmt.Errorf("--dotfiles-repo %s", msg)
	}
	if cfg.Editor, err = ParseEditor(o.Editor); err != nil {
		return 0, fmt.Errorf("--editor: %w", err)
	}
	if cfg.StateDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return 0, fmt.Errorf("--state-dir is not set and there is no home directory: %w", err)
		}
		cfg.StateDir = filepath.Join(home, ".local", "state", "hangar-helper")
	}
	if cfg.Instance == "" {
		if cfg.Instance, err = os.Hostname(); err != nil {
			return 0, fmt.Errorf("--instance is not set: %w", err)
		}
	}
	ints := []struct {
		flag, v string
		to      *int
	}{
		{"--max-connections", o.MaxConnections, &cfg.Server.MaxConnections},
		{"--max-channels", o.MaxChannels, &cfg.Server.MaxChannels},
		{"--keepalive-count-max", o.KeepaliveCountMax, &cfg.Server.KeepaliveCountMax},
	}
	for _, i := range ints {
		n, err := strconv.Atoi(i.v)
		if err != nil || n < 1 || n > 1_000_000 {
			return 0, fmt.Errorf("%s: want a whole number from 1 to 1000000, got %q", i.flag, i.v)
		}
		*i.to = n
	}
	durations := []struct {
		flag, v string
		to      *time.Duration
	}{
		{"--handshake-timeout", o.HandshakeTimeout, &cfg.Server.HandshakeTimeout},
		{"--keepalive-interval", o.KeepaliveInterval, &cfg.Server.KeepaliveInterval},
		{"--grace-period", o.GracePeriod, &cfg.GracePeriod},
		{"--dotfiles-timeout", o.DotfilesTimeout, &cfg.DotfilesTimeout},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("%s: want a positive duration such as 30s, got %q", d.flag, d.v)
		}
		*d.to = v
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	cfg.Signals = sigs
	return Run(ctx, cfg)
}

// helperToken is the token of --token or --token-file, checked, when --connect-url is set.
func helperToken(o Options) (string, error) {
	if o.ConnectURL == "" && o.ServerURL == "" {
		if o.Token != "" || o.TokenFile != "" {
			return "", errors.New("--token and --token-file go with --connect-url or --server-url")
		}
		return "", nil
	}
	if o.ConnectURL != "" {
		if _, err := ConnectURL(o.ConnectURL); err != nil {
			return "", fmt.Errorf("--connect-url: %w", err)
		}
	} else if _, err := ConnectURL(o.ServerURL); err != nil {
		return "", fmt.Errorf("--server-url: %w", err)
	}
	token, from := o.Token, "--token"
	switch {
	case o.Token != "" && o.TokenFile != "":
		return "", errors.New("--token and --token-file: give one of them")
	case o.TokenFile != "":
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		token, from = strings.TrimSpace(string(b)), "--token-file"
	case o.Token == "":
		return "", errors.New("--connect-url and --server-url need the helper's token: --token-file, --token or HANGAR_HELPER_TOKEN")
	}
	if !strings.HasPrefix(token, protocol.WorkspaceAgentTokenPrefix) || len(token) > 512 || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("%s: want a helper token (%s..., from hangar_agent), not %q", from, protocol.WorkspaceAgentTokenPrefix, redact(token))
	}
	return token, nil
}

// redact shows the start of a token only.
func redact(s string) string {
	if len(s) > 6 {
		return s[:6] + "..."
	}
	return s
}
