//go:build unix

// Package wshelper is `hangar workspace-helper`, the process a workspace's main container runs
// (issue 9, "the helper inside the workspace"). An init container copies the hangar binary into the
// pod, so the user's image needs nothing of Hangar's. The helper:
//
//   - serves SSH (Server): shell and exec through the user's login shell, with or without a pty;
//     sftp; local (direct-tcpip) and remote (tcpip-forward) port forwarding. Clients authenticate
//     with a public key listed in an authorized_keys file, normally only the Hangar proxy's own key:
//     the proxy authenticates the user, asks the server, and then connects here (docs/decisions.md,
//     "The workspace helper");
//   - runs the container's own command (the arguments after --), passes it SIGTERM and SIGINT and
//     exits with its exit code; without one it stays up until SIGTERM, keeping the container alive;
//   - as PID 1, reaps orphaned children (Reap);
//   - runs the devfile's postStart commands once per workspace start (RunPostStart), then serves
//     SSH, so that the pod is ready only once they ended; a failure does not stop the container
//     (the user gets in and is told, with the log's path);
//   - tells an ActivityFunc when SSH is used, for idle stop (to be wired to the server);
//   - on a Terraform workspace's machine (--connect-url, hangar_agent's init script), connects out
//     to the Hangar server and serves SSH on the streams the server relays to it (Connect).
package wshelper

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// DefaultGracePeriod is how long the helper waits, once told to stop, for sessions and the
// container's command to end before it kills them. Kubernetes' default termination grace period
// is 30 s, so the helper is done before the kubelet's SIGKILL.
const DefaultGracePeriod = 10 * time.Second

// Config is what Run needs.
type Config struct {
	// SSHAddr is where SSH is served (":2222"); empty: nowhere, the helper only connects out
	// (ConnectURL).
	SSHAddr string
	// ConnectURL, when set, is the Hangar server the helper connects out to with Token, to serve
	// SSH on the streams the server opens (Connect): a Terraform workspace's machine.
	ConnectURL, Token string
	// ServerURL, when set, is the Hangar server the helper reports to with Token (startup steps,
	// dotfiles, metadata) and asks for the owner's git credentials, without connecting out (a
	// Kubernetes workspace); ConnectURL implies it.
	ServerURL string
	// NoGitCredentials: the helper does not ask ServerURL for git credentials (its server has no
	// forges), it only reports.
	NoGitCredentials bool
	// Connect tunes that connection (its URL, Token, Server and Logger are set by Run).
	Connect ConnectOptions
	// HostKey, when set, is the host key's PEM text (hangar_agent's, so that a machine made anew
	// keeps its identity); else HostKeyFile and StateDir: see LoadHostKey. StateDir also keeps the
	// postStart record.
	HostKey, HostKeyFile, StateDir string
	// AuthorizedKeysFile lists the keys allowed in (ServerOptions.AuthorizedKeysFile).
	AuthorizedKeysFile string
	// Server holds the SSH limits and the activity hook; its HostKey, AuthorizedKeysFile, Env and
	// Logger are set by Run.
	Server ServerOptions
	// PostStart commands run once per Instance (RunPostStart); SSHAddr is served once they ended,
	// and a failure is told to every shell session (Server.SetNotice).
	PostStart []PostStartCommand
	Instance  string
	// PostStartNonBlocking: SSH is served without waiting for the postStart commands (the
	// devfile's hangar.dev/startup-behavior: non-blocking); their failure is told all the same.
	PostStartNonBlocking bool
	// Dotfiles, when set, is the owner's dotfiles repository (URL[#ref]), installed into $HOME
	// (dotfiles.go) beside everything else, within DotfilesTimeout (DefaultDotfilesTimeout when
	// 0); a failure is told to every shell session.
	Dotfiles        string
	DotfilesTimeout time.Duration
	// Editor, when set, is the web editor the helper runs and keeps running (editor.go); SSHAddr
	// is served once it answers on its port (or EditorReadyTimeout passed: DefaultEditorReadyTimeout).
	Editor             *EditorProcess
	EditorReadyTimeout time.Duration
	// Metadata is what the helper measures and runs for the workspace's metadata, reported to
	// ServerURL every protocol.MetadataInterval (metadata.go); it reports the resources whatever
	// it holds. metadataRoot is where the kernel's files are read ("": /; a test's directory).
	Metadata     protocol.MetadataSpec
	metadataRoot string
	// After makes the timers of the editor's restarts and readiness wait, and the metadata's
	// intervals (default time.After).
	After func(time.Duration) <-chan time.Time
	// Command is the container's own command; empty keeps the container alive until told to stop.
	Command []string
	// GracePeriod bounds the stop (DefaultGracePeriod when 0).
	GracePeriod time.Duration
	// Env is the container's environment, given to the command, postStart and sessions; nil:
	// ContainerEnv(os.Environ()).
	Env []string
	// RemoteEnv is added to Env for sessions, postStart and the editor, not the command
	// (WithRemoteEnv).
	RemoteEnv []EnvVar
	// The command's standard streams; postStart's output goes to Stdout.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Signals delivers the signals the helper was sent. SIGTERM (or ending ctx) stops everything;
	// SIGINT is passed to the command, or stops the helper when there is no command.
	Signals <-chan os.Signal
	Logger  *slog.Logger
	// Listening, when set, is called with the SSH address once it accepts connections.
	Listening func(net.Addr)
}

// Run runs the helper until the command ends or the helper is told to stop, and returns the exit
// code the container should end with: the command's (128 + the signal when a signal ended it), or
// 0 when there is no command. An error means the helper could not start.
func Run(ctx context.Context, cfg Config) (int, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Env == nil {
		cfg.Env = ContainerEnv(os.Environ())
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	// With a server to ask, the helper hands git the owner's forge credentials (gitcred_unix.go).
	if cfg.ServerURL == "" {
		cfg.ServerURL = cfg.ConnectURL
	}
	if cfg.ServerURL != "" && cfg.Token != "" && cfg.StateDir != "" && !cfg.NoGitCredentials {
		env, stop, err := startGitCredentials(cfg, log)
		if err != nil {
			log.Warn("git credentials are not handed out in this workspace", "err", err)
		} else {
			defer stop()
			cfg.Env = env
		}
	}
	var hostKey ssh.Signer
	var err error
	if cfg.HostKey != "" {
		if hostKey, err = ssh.ParsePrivateKey([]byte(cfg.HostKey)); err != nil {
			return 0, fmt.Errorf("--host-key (HANGAR_HELPER_HOST_KEY): %w", err)
		}
	} else if hostKey, err = LoadHostKey(cfg.HostKeyFile, cfg.StateDir, log); err != nil {
		return 0, err
	}
	opts := cfg.Server
	remoteEnv := WithRemoteEnv(cfg.Env, cfg.RemoteEnv)
	opts.HostKey, opts.AuthorizedKeysFile, opts.Env, opts.Logger = hostKey, cfg.AuthorizedKeysFile, remoteEnv, log
	opts.TrustedOnly = cfg.SSHAddr == ""
	srv, err := NewServer(opts)
	if err != nil {
		return 0, err
	}
	serveErr := make(chan error, 1)
	var serving atomic.Bool
	listen := func() error {
		ln, err := net.Listen("tcp", cfg.SSHAddr)
		if err != nil {
			return fmt.Errorf("ssh: listen on %s: %w", cfg.SSHAddr, err)
		}
		log.Info("serving ssh", "addr", ln.Addr().String(), "host_key", ssh.FingerprintSHA256(hostKey.PublicKey()), "authorized_keys", cfg.AuthorizedKeysFile)
		serving.Store(true)
		go func() { serveErr <- srv.Serve(ln) }()
		if cfg.Listening != nil {
			cfg.Listening(ln.Addr())
		}
		return nil
	}
	// With postStart commands or an editor, SSH is served once they have ended and the editor
	// answers (below): the pod's readiness probe is the SSH port, so the workspace is Running only
	// then, as with Kubernetes' own hook.
	gated := (len(cfg.PostStart) > 0 && !cfg.PostStartNonBlocking) || cfg.Editor != nil
	if cfg.SSHAddr != "" && !gated {
		if err := listen(); err != nil {
			srv.Shutdown(context.Background())
			return 0, err
		}
	}
	connectCtx, stopConnect := context.WithCancel(context.Background())
	defer stopConnect()
	connectDone := make(chan struct{})
	connectFailed := make(chan error, 1) // the server refused the helper for good: it exits
	if cfg.ConnectURL != "" {
		co := cfg.Connect
		co.URL, co.Token, co.Server, co.Logger = cfg.ConnectURL, cfg.Token, srv, log
		log.Info("connecting out to the Hangar server", "url", cfg.ConnectURL, "host_key", ssh.FingerprintSHA256(hostKey.PublicKey()))
		go func() {
			defer close(connectDone)
			if err := Connect(connectCtx, co); err != nil {
				connectFailed <- err
			}
		}()
	} else {
		close(connectDone)
	}

	var command *exec.Cmd
	commandDone := make(chan struct{})
	if len(cfg.Command) > 0 {
		command = exec.Command(cfg.Command[0], cfg.Command[1:]...)
		command.Env = cfg.Env
		command.Stdin, command.Stdout, command.Stderr = cfg.Stdin, cfg.Stdout, cfg.Stderr
		if err := command.Start(); err != nil {
			srv.Shutdown(context.Background())
			<-serveErr
			return 0, fmt.Errorf("start the container's command: %w", err)
		}
		log.Info("container command started", "argv", cfg.Command, "pid", command.Process.Pid)
		go func() { _ = command.Wait(); close(commandDone) }()
	}

	postCtx, stopPostStart := context.WithCancel(context.Background())
	var editor *editorRunner
	editorReady := make(chan struct{})
	if cfg.Editor != nil {
		after := cfg.After
		if after == nil {
			after = time.After
		}
		editor = startEditor(postCtx, *cfg.Editor, remoteEnv, cfg.Stdout, log, cmp.Or(cfg.EditorReadyTimeout, DefaultEditorReadyTimeout), after)
		editorReady = editor.ready
	} else {
		close(editorReady)
	}
	var postStart sync.WaitGroup
	listenFailed := make(chan error, 1)
	// postStart runs beside everything; SSH waits for it unless it is non-blocking, and for the
	// editor to answer.
	postDone := make(chan struct{})
	if len(cfg.PostStart) > 0 {
		postStart.Add(1)
		go func() {
			defer postStart.Done()
			defer close(postDone)
			if err := runPostStart(postCtx, cfg.PostStart, remoteEnv, cfg.StateDir, cfg.Instance, cfg.Stdout, log, reportStep(postCtx, cfg, log)); err != nil {
				if postCtx.Err() != nil {
					return // stopping
				}
				log.Error("postStart failed; they will run again at the next container start", "err", err)
				srv.AddNotice(postStartNotice(err, cfg.StateDir))
			}
		}()
	} else {
		close(postDone)
	}
	if gated {
		postStart.Add(1)
		go func() {
			defer postStart.Done()
			if !cfg.PostStartNonBlocking {
				select {
				case <-postDone:
				case <-postCtx.Done():
				}
			}
			select {
			case <-editorReady:
			case <-postCtx.Done():
			}
			if postCtx.Err() == nil && cfg.SSHAddr != "" {
				if err := listen(); err != nil {
					listenFailed <- err
				}
			}
		}()
	}

	if cfg.ServerURL != "" && cfg.Token != "" {
		postStart.Add(1)
		go func() {
			defer postStart.Done()
			reportMetadata(postCtx, cfg, cfg.Metadata, remoteEnv, srv.TakeOutput, log)
		}()
	}
	if cfg.Dotfiles != "" {
		postStart.Add(1)
		go func() {
			defer postStart.Done()
			if err := installDotfiles(postCtx, cfg, log); err != nil && postCtx.Err() == nil {
				log.Error("dotfiles not installed; they are tried again at the next container start", "err", err)
				srv.AddNotice(dotfilesNotice(err, cfg.StateDir))
			}
		}()
	}
	stopEditor := func(ctx context.Context) {
		if editor != nil {
			editor.stop(ctx)
		}
	}

	// stop ends everything within the grace period and returns the command's exit code.
	stop := func(why string) int {
		log.Info("stopping", "why", why, "grace_period", cfg.GracePeriod)
		grace, cancel := context.WithTimeout(context.Background(), cfg.GracePeriod)
		defer cancel()
		if command != nil {
			_ = command.Process.Signal(syscall.SIGTERM)
		}
		stopPostStart()
		stopEditor(grace)
		// Sessions get their SIGTERM and grace period first; the connection to the server, which
		// carries them, ends after.
		srv.Shutdown(grace)
		stopConnect()
		<-connectDone
		if command != nil {
			select {
			case <-commandDone:
			case <-grace.Done():
				log.Warn("the container's command did not end in time; killing it")
				_ = command.Process.Kill()
				<-commandDone
			}
		}
		postStart.Wait()
		if serving.Load() {
			<-serveErr
		}
		if command == nil {
			return 0
		}
		return processExitCode(command.ProcessState)
	}

	for {
		select {
		case <-commandDone:
			code := processExitCode(command.ProcessState)
			log.Info("container command ended", "exit_code", code)
			stopPostStart()
			postStart.Wait()
			grace, cancel := context.WithTimeout(context.Background(), cfg.GracePeriod)
			stopEditor(grace)
			srv.Shutdown(grace)
			cancel()
			stopConnect()
			<-connectDone
			if serving.Load() {
				<-serveErr
			}
			return code, nil
		case sig := <-cfg.Signals:
			if sig == syscall.SIGINT && command != nil {
				_ = command.Process.Signal(sig)
				continue
			}
			return stop(sig.String()), nil
		case <-ctx.Done():
			return stop("context ended"), nil
		case err := <-connectFailed:
			return stop("the Hangar server refused the helper for good"), err
		case err := <-listenFailed:
			log.Error("cannot serve ssh", "err", err)
			return stop("cannot serve ssh"), err
		case err := <-serveErr:
			serveErr <- err // for stop
			log.Error("ssh server failed", "err", err)
			return stop("ssh server failed"), err
		}
	}
}

// postStartNotice is what shell sessions are told when the postStart commands failed.
func postStartNotice(err error, stateDir string) string {
	return fmt.Sprintf("hangar: this workspace's postStart commands failed: %v.\n"+
		"hangar: their output is in %s; they run again at the next start of the workspace.\n",
		err, filepath.Join(stateDir, PostStartLog))
}
