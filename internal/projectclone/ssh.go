package projectclone

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/gitcred"
)

// An SSH remote is cloned with the workspace owner's git SSH key, which never leaves the Hangar
// server: each signature is asked of the server with the helper's token, as the workspace's own
// SSH agent asks (docs/decisions.md, "A team's repository: SSH clones and Terraform workspaces").
// The forge's host key is checked against the forges' ssh_known_hosts, which the server gives with
// the key: an unknown host or another key is refused, never trusted on first use.

// sshKeys asks the server for the owner's key and the known hosts once per Clone, at the first SSH
// remote.
type sshKeys struct {
	server *gitcred.SSHServer
	key    *gitcred.SSHKey
}

// auth is the AuthMethod of an SSH remote; nil for any other remote or without a server to ask.
func (k *sshKeys) auth(ctx context.Context, remote string) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(remote)
	if err != nil || ep.Protocol != "ssh" || k.server == nil {
		return nil, nil
	}
	if k.key == nil {
		key, err := k.server.Key(ctx)
		if err != nil {
			return nil, fmt.Errorf("clone %s over SSH: the workspace owner's git SSH key: %w", remote, err)
		}
		k.key = &key
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	port := ep.Port
	if port <= 0 {
		port = 22
	}
	check, algorithms := gitcred.HostKeyCheck(k.key.KnownHosts)
	return &serverKeyAuth{user: user, signer: k.server.Signer(ctx, k.key.Key), check: check,
		algorithms: algorithms(net.JoinHostPort(ep.Host, strconv.Itoa(port)))}, nil
}

// serverKeyAuth is go-git's SSH AuthMethod for the owner's key: the public key authentication of
// user with a signer that asks the server, and the host key check.
type serverKeyAuth struct {
	user       string
	signer     ssh.Signer
	check      ssh.HostKeyCallback
	algorithms []string
}

func (a *serverKeyAuth) Name() string { return "hangar-git-ssh-key" }

func (a *serverKeyAuth) String() string {
	return fmt.Sprintf("user: %s, the workspace owner's git SSH key %s (signed by the Hangar server)", a.user, ssh.FingerprintSHA256(a.signer.PublicKey()))
}

func (a *serverKeyAuth) ClientConfig() (*ssh.ClientConfig, error) {
	return &ssh.ClientConfig{User: a.user, Auth: []ssh.AuthMethod{ssh.PublicKeys(a.signer)}, HostKeyCallback: a.check,
		HostKeyAlgorithms: a.algorithms}, nil
}
