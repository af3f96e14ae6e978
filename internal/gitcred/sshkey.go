package gitcred

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
)

// The owner's git SSH key, as a workspace reaches it (docs/decisions.md, "A team's repository: a
// git SSH key per user" and "SSH clones and Terraform workspaces"): the server holds the private
// key and signs; the workspace asks, with its helper token, for the public key (and the forges'
// host keys) and for each signature. The helper's SSH agent and the clone at the start
// (project-clone) both ask through SSHServer.

// maxSSHKeyAnswer bounds the key's answer: a key line and the forges' known_hosts lines.
const maxSSHKeyAnswer = 1 << 20

// maxSignAnswer bounds a signature's answer (an ed25519 signature is 64 bytes).
const maxSignAnswer = 64 << 10

// SSHServer asks the Hangar server at BaseURL, with a helper's Token, for the owner's git SSH key
// and its signatures.
type SSHServer struct {
	HTTP    *http.Client // nil: http.DefaultClient
	BaseURL string
	Token   string
}

// SSHKey is the owner's public key and the forges' known_hosts lines.
type SSHKey struct {
	Key        ssh.PublicKey
	Comment    string
	KnownHosts string
}

func (s SSHServer) ask(ctx context.Context, method, path string, in, out any, max int64) error {
	err := apiclient.Do(ctx, s.HTTP, s.BaseURL, s.Token, method, path, in, out, max)
	var se *apiclient.StatusError
	if errors.As(err, &se) {
		return fmt.Errorf("the Hangar server refused: %s", ErrorMessage(se.Body))
	}
	return err
}

// Key reads the owner's current public key and the forges' host keys.
func (s SSHServer) Key(ctx context.Context) (SSHKey, error) {
	var k sdk.WorkspaceGitSSH
	if err := s.ask(ctx, http.MethodGet, protocol.GitSSHKeyPath, nil, &k, maxSSHKeyAnswer); err != nil {
		return SSHKey{}, err
	}
	pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
	if err != nil {
		return SSHKey{}, fmt.Errorf("the Hangar server's git SSH key: %w", err)
	}
	return SSHKey{Key: pub, Comment: comment, KnownHosts: k.KnownHosts}, nil
}

// Sign asks the server to sign data with the owner's key, which must be key.
func (s SSHServer) Sign(ctx context.Context, key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	var sig sdk.GitSSHSignature
	if err := s.ask(ctx, http.MethodPost, protocol.GitSSHSignPath, sdk.GitSSHSignRequest{PublicKey: key.Marshal(), Data: data}, &sig, maxSignAnswer); err != nil {
		return nil, err
	}
	return &ssh.Signature{Format: sig.Format, Blob: sig.Blob}, nil
}

// Signer is an ssh.Signer whose signatures the server makes with the owner's key (ctx bounds each).
func (s SSHServer) Signer(ctx context.Context, key ssh.PublicKey) ssh.Signer {
	return &serverSigner{ctx: ctx, s: s, key: key}
}

type serverSigner struct {
	ctx context.Context
	s   SSHServer
	key ssh.PublicKey
}

func (g *serverSigner) PublicKey() ssh.PublicKey { return g.key }

func (g *serverSigner) Sign(_ io.Reader, data []byte) (*ssh.Signature, error) {
	return g.s.Sign(g.ctx, g.key, data)
}

// HostKeyCheck checks an SSH server's host key against known_hosts lines (ssh's format, as the
// forges' ssh_known_hosts): the key must be the one a line names for that host and port; an
// unknown host and a different key are refused, naming the host and the key offered. Algorithms
// are the key types the lines hold for the host, for ssh.ClientConfig.HostKeyAlgorithms (a server
// with several keys then offers the one known).
func HostKeyCheck(knownHostsLines string) (check ssh.HostKeyCallback, algorithms func(hostport string) []string) {
	type entry struct {
		hosts []string
		key   ssh.PublicKey
	}
	var entries []entry
	for line := range strings.SplitSeq(knownHostsLines, "\n") {
		marker, hosts, key, _, _, err := ssh.ParseKnownHosts([]byte(line))
		if err != nil || marker != "" {
			continue // comments, blank lines; the server's config checked the lines
		}
		entries = append(entries, entry{hosts, key})
	}
	keysOf := func(hostport string) []ssh.PublicKey {
		name := knownhosts.Normalize(hostport)
		var keys []ssh.PublicKey
		for _, e := range entries {
			for _, h := range e.hosts {
				if h == name {
					keys = append(keys, e.key)
				}
			}
		}
		return keys
	}
	check = func(hostport string, _ net.Addr, key ssh.PublicKey) error {
		keys := keysOf(hostport)
		for _, k := range keys {
			if string(k.Marshal()) == string(key.Marshal()) {
				return nil
			}
		}
		if len(keys) == 0 {
			return fmt.Errorf("the SSH host %s is not among the forges' known hosts (an admin lists its key in the forge's ssh_known_hosts)", knownhosts.Normalize(hostport))
		}
		return fmt.Errorf("the SSH host %s offered the key %s %s, which is not the forge's known one: refused (a changed key, or someone in between)",
			knownhosts.Normalize(hostport), key.Type(), ssh.FingerprintSHA256(key))
	}
	algorithms = func(hostport string) []string {
		var algs []string
		for _, k := range keysOf(hostport) {
			switch t := k.Type(); t {
			case ssh.KeyAlgoRSA:
				algs = append(algs, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
			default:
				algs = append(algs, t)
			}
		}
		return algs
	}
	return check, algorithms
}
