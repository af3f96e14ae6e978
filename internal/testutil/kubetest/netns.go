package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
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
	var l net.Listener
	err := c.inside(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %v", addr, err)
		}
		return nil
	}, func() {
		if l != nil {
			_ = l.Close()
		}
	})
	return l, err
}

// DialInside opens a TCP connection from inside the cluster's network namespace to addr (a pod's
// address, or a server listening there such as `hangar proxy`): what a client on the cluster's
// network would do. Like ListenInside, only the socket lives in the namespace.
func (c *Cluster) DialInside(ctx context.Context, addr string) (net.Conn, error) {
	var conn net.Conn
	err := c.inside(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	}, func() {
		if conn != nil {
			_ = conn.Close()
		}
	})
	return conn, err
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

// inside runs fn on an OS thread that has entered the cluster's network namespace, and brings the
// thread back. If the thread cannot come back, undo is called (what fn made is of no use then) and
// the thread ends with its goroutine.
func (c *Cluster) inside(fn func() error, undo func()) error {
	path, err := c.NetnsPath()
	if err != nil {
		return err
	}
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the cluster's network namespace: %v", err)
	}
	defer target.Close()
	done := make(chan error, 1)
	// A goroutine of its own: should the thread fail to return to its namespace, the goroutine ends
	// still locked to it, and the runtime then ends the thread instead of reusing it.
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("this thread's network namespace: %v", err)
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter %s: %v", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			undo()
			done <- fmt.Errorf("leave %s: %v", path, err) // the thread stays locked and ends
			return
		}
		runtime.UnlockOSThread()
		if ferr != nil {
			ferr = fmt.Errorf("in %s: %w", path, ferr)
		}
		done <- ferr
	}()
	return <-done
}
