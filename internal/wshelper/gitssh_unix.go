//go:build unix

package wshelper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hangar-dev/hangar/internal/gitcred"
)

// The workspace's git SSH agent (docs/decisions.md, "A team's repository: a git SSH key per user
// (issue 22)"): an SSH agent on a socket in the helper's state directory whose one key is the
// workspace owner's git SSH key; the server holds the private key and makes each signature, so
// the key is never in the workspace, and a suspension or a rotation stops signing at the next
// request.

// gitSSHAgentSocketName is the agent's socket in the helper's state directory (mode 0700; the
// socket 0600).
const gitSSHAgentSocketName = "git-ssh-agent.sock"

// maxGitSSHAgentConns bounds the agent's connections at once (an ssh process keeps one for its
// whole connection); more wait.
const maxGitSSHAgentConns = 16

// gitSSHAgentConnLifetime bounds one connection: ssh asks at authentication, minutes are plenty.
const gitSSHAgentConnLifetime = 10 * time.Minute

// maxGitSSHAgentRequest bounds one agent request (ssh's sign request: a key and a session's
// data, well under 1 KiB); the library's own cap is 16 MiB.
const maxGitSSHAgentRequest = 64 << 10

// errGitSSHAgentRefused answers every operation but List and Sign: the agent holds the owner's
// key only, which nobody adds, removes or locks from the workspace.
var errGitSSHAgentRefused = errors.New("the Hangar git SSH agent only lists and signs with the workspace owner's key")

// gitSSHAgent is the agent.Agent: List and Sign ask the server, with the helper's token.
type gitSSHAgent struct {
	ctx    context.Context
	server gitcred.SSHServer
	log    *slog.Logger
}

// List gives the owner's current public key.
func (a *gitSSHAgent) List() ([]*agent.Key, error) {
	ctx, cancel := context.WithTimeout(a.ctx, gitCredentialTimeout)
	defer cancel()
	k, err := a.server.Key(ctx)
	if err != nil {
		a.log.Warn("git SSH agent: list", "err", err)
		return nil, err
	}
	return []*agent.Key{{Format: k.Key.Type(), Blob: k.Key.Marshal(), Comment: k.Comment}}, nil
}

// Sign asks the server to sign data with the owner's key (key must be it).
func (a *gitSSHAgent) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	ctx, cancel := context.WithTimeout(a.ctx, gitCredentialTimeout)
	defer cancel()
	sig, err := a.server.Sign(ctx, key, data)
	if err != nil {
		a.log.Warn("git SSH agent: sign", "err", err)
		return nil, err
	}
	a.log.Info("git SSH signature made by the server", "key", ssh.FingerprintSHA256(key))
	return sig, nil
}

// SignWithFlags is Sign: the owner's key is ed25519, whose signatures take no flags (RSA's hash
// choice is what they select).
func (a *gitSSHAgent) SignWithFlags(key ssh.PublicKey, data []byte, _ agent.SignatureFlags) (*ssh.Signature, error) {
	return a.Sign(key, data)
}

// KnownHostsExtension is the agent extension that answers the forges' SSH host keys (known_hosts
// lines, after agentSuccess), which `hangar git-known-hosts` asks for ssh's KnownHostsCommand.
const KnownHostsExtension = "known-hosts@hangar.dev"

// agentSuccess begins an extension's answer (SSH_AGENT_SUCCESS, PROTOCOL.agent 4.7), so that an
// answer is never taken for a failure by its first byte.
const agentSuccess = 6

// Extension answers KnownHostsExtension from the server, asked each time (an admin's change of a
// forge's keys is seen at the next connection); every other extension is refused.
func (a *gitSSHAgent) Extension(extensionType string, _ []byte) ([]byte, error) {
	if extensionType != KnownHostsExtension {
		return nil, agent.ErrExtensionUnsupported
	}
	ctx, cancel := context.WithTimeout(a.ctx, gitCredentialTimeout)
	defer cancel()
	k, err := a.server.Key(ctx)
	if err != nil {
		a.log.Warn("git SSH agent: known hosts", "err", err)
		return nil, err
	}
	return append([]byte{agentSuccess}, k.KnownHosts...), nil
}

// GitKnownHostsMain prints the forges' known_hosts lines for ssh's KnownHostsCommand, asked of
// the helper's git SSH agent at socket. It always exits 0: without lines, ssh refuses an unknown
// host as it would anyway, and the reason goes to standard error, which ssh shows.
func GitKnownHostsMain(socket string, stdout, stderr io.Writer) {
	c, err := net.DialTimeout("unix", socket, gitCredentialTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "hangar git-known-hosts: the workspace helper's git SSH agent: %v\n", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(gitCredentialTimeout))
	res, err := agent.NewClient(c).Extension(KnownHostsExtension, nil)
	if err != nil || len(res) == 0 || res[0] != agentSuccess {
		fmt.Fprintf(stderr, "hangar git-known-hosts: the forges' SSH host keys could not be read (the workspace helper's log says why): %v\n", err)
		return
	}
	_, _ = stdout.Write(res[1:])
}

func (a *gitSSHAgent) Add(agent.AddedKey) error       { return errGitSSHAgentRefused }
func (a *gitSSHAgent) Remove(ssh.PublicKey) error     { return errGitSSHAgentRefused }
func (a *gitSSHAgent) RemoveAll() error               { return errGitSSHAgentRefused }
func (a *gitSSHAgent) Lock([]byte) error              { return errGitSSHAgentRefused }
func (a *gitSSHAgent) Unlock([]byte) error            { return errGitSSHAgentRefused }
func (a *gitSSHAgent) Signers() ([]ssh.Signer, error) { return nil, errGitSSHAgentRefused }

// boundedAgentConn lets through agent requests of at most maxGitSSHAgentRequest bytes: it reads
// each request's length first and fails the connection on a larger one, before the library
// allocates it.
type boundedAgentConn struct {
	net.Conn
	left    int    // bytes of the current request still to pass on
	pending []byte // the length prefix, read and not yet passed on
}

func (b *boundedAgentConn) Read(p []byte) (int, error) {
	if b.left == 0 && len(b.pending) == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(b.Conn, hdr[:]); err != nil {
			return 0, err
		}
		l := binary.BigEndian.Uint32(hdr[:])
		if l > maxGitSSHAgentRequest {
			return 0, fmt.Errorf("git SSH agent: a request of %d bytes, at most %d", l, maxGitSSHAgentRequest)
		}
		b.pending, b.left = hdr[:], int(l)
	}
	if len(b.pending) > 0 {
		n := copy(p, b.pending)
		b.pending = b.pending[n:]
		return n, nil
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.Conn.Read(p)
	b.left -= n
	return n, err
}

// serveGitSSHAgent serves ag on ln until it is closed, at most maxGitSSHAgentConns connections at
// once.
func serveGitSSHAgent(ctx context.Context, ln net.Listener, ag agent.Agent) {
	serveLocal(ctx, ln, maxGitSSHAgentConns, gitSSHAgentConnLifetime, func(c net.Conn) {
		_ = agent.ServeAgent(ag, &boundedAgentConn{Conn: c})
	})
}

// startGitSSHAgent opens the agent's socket in cfg.StateDir and serves the owner's key through
// the server cfg.ServerURL; it returns the socket's path and what stops it.
func startGitSSHAgent(cfg Config, log *slog.Logger) (string, func(), error) {
	ln, path, err := listenStateSocket(cfg.StateDir, gitSSHAgentSocketName)
	if err != nil {
		return "", nil, fmt.Errorf("the git SSH agent's socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ag := &gitSSHAgent{ctx: ctx, server: gitcred.SSHServer{HTTP: cfg.Connect.HTTPClient, BaseURL: cfg.ServerURL, Token: cfg.Token}, log: log}
	go func() {
		defer close(done)
		serveGitSSHAgent(ctx, ln, ag)
	}()
	return path, func() { cancel(); ln.Close(); <-done }, nil
}
