package kubetest

import (
	"fmt"
	"net"
	"os"
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
	path, err := c.NetnsPath()
	if err != nil {
		return nil, err
	}
	target, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the cluster's network namespace: %v", err)
	}
	defer target.Close()
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	// A goroutine of its own: should the thread fail to return to its namespace, the goroutine ends
	// still locked to it, and the runtime then ends the thread instead of reusing it.
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("this thread's network namespace: %v", err)}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("enter %s: %v", path, err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			if l != nil {
				_ = l.Close()
			}
			done <- result{nil, fmt.Errorf("leave %s: %v", path, err)} // the thread stays locked and ends
			return
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("listen on %s in %s: %v", addr, path, lerr)
		}
		done <- result{l, lerr}
	}()
	r := <-done
	return r.l, r.err
}
