package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hangar-dev/hangar/internal/netns"
)

// NodeIP is the real node's address, on the loopback interface of the cluster's network namespace:
// pods reach it, the host does not.
const NodeIP = "10.99.0.2"

// NetnsPath is the path of the cluster's network namespace (/run/netns/<the name in Dir/netns>).
func (c *Cluster) NetnsPath() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "netns"))
	if err != nil {
		return "", fmt.Errorf("the cluster's network namespace: %v", err)
	}
	name := strings.TrimSpace(string(b))
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("the cluster's network namespace: %s/netns holds %q", c.Dir, b)
	}
	return filepath.Join("/run/netns", name), nil
}

// ListenInside opens a TCP listener inside the cluster's network namespace, on addr (such as
// NodeIP+":0"), for servers the cluster's pods reach (a git server for a workspace's projects). A
// socket stays in the namespace it was made in, so the listener serves from this process as any
// other does; only the thread that makes it enters the namespace, and leaves it at once.
func (c *Cluster) ListenInside(addr string) (net.Listener, error) {
	path, err := c.NetnsPath()
	if err != nil {
		return nil, err
	}
	return netns.Listen(path, "tcp", addr)
}

// DialInside opens a TCP connection from inside the cluster's network namespace to addr (a pod's
// address, or a server listening there such as `hangar proxy`): what a client on the cluster's
// network would do. Like ListenInside, only the socket lives in the namespace.
func (c *Cluster) DialInside(ctx context.Context, addr string) (net.Conn, error) {
	path, err := c.NetnsPath()
	if err != nil {
		return nil, err
	}
	return (&netns.Dialer{Path: path}).DialContext(ctx, "tcp", addr)
}

// StartInside starts cmd in the cluster's network namespace: a process there reaches pods by their
// IP, and the API server at the kubeconfig's 127.0.0.1 address (the namespace forwards it). The
// child inherits the namespace of the thread that starts it.
func (c *Cluster) StartInside(cmd *exec.Cmd) error {
	return c.inside(cmd.Start, func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
}

// inside runs fn on an OS thread that has entered the cluster's network namespace (netns.Do).
func (c *Cluster) inside(fn func() error, undo func()) error {
	path, err := c.NetnsPath()
	if err != nil {
		return err
	}
	return netns.Do(path, fn, undo)
}
