// Package netns makes sockets inside another network namespace (such as the local test cluster's,
// /run/netns/hangar-kube-…) from a process that stays in its own. A socket belongs to the namespace
// it was made in for its whole life, so only the making needs to happen there: a locked OS thread
// enters the namespace, makes the socket, and comes back. Everything else of the process (its
// listeners, its other connections, DNS) stays where it was. Linux only; it needs CAP_SYS_ADMIN
// (root).
package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
)

// Do runs fn on an OS thread that has entered the network namespace at path, and brings the thread
// back. If the thread cannot come back, undo is called (what fn made is of no use then: it may not
// be handed out as if it were fine) and the thread ends with its goroutine.
func Do(path string, fn func() error, undo func()) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer target.Close()
	done := make(chan error, 1)
	// A goroutine of its own: should the thread fail to return to its namespace, the goroutine ends
	// still locked to it, and the runtime then ends the thread instead of reusing it.
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(threadNetns())
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("this thread's network namespace: %w", err)
			return
		}
		defer own.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := setns(own); err != nil {
			undo()
			done <- fmt.Errorf("leave %s: %w", path, err) // the thread stays locked and ends
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

// Check says whether path is a network namespace this process can enter.
func Check(path string) error {
	return Do(path, func() error { return nil }, func() {})
}

// MaxDials bounds a Dialer's dials in progress. Each holds an OS thread of its own until its
// connection is made or fails (the thread is locked in the namespace), and the proxy dials for
// every request: unbounded, requests to a port that does not answer would pile up threads until
// the Go runtime's limit (10000) ends the process. Further dials wait for a turn, within their
// context.
const MaxDials = 64

// Dialer dials from inside the network namespace at Path; its DialContext has the signature of
// net.Dialer's, for the proxy's Dial options.
type Dialer struct {
	Path   string
	Dialer net.Dialer

	once  sync.Once
	turns chan struct{}
}

// DialContext connects to addr from inside the namespace. The dial itself (the SYN, waiting for
// the answer) runs on the thread in the namespace, so a context's deadline bounds it as usual.
// At most MaxDials run at a time.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.once.Do(func() { d.turns = make(chan struct{}, MaxDials) })
	select {
	case d.turns <- struct{}{}:
		defer func() { <-d.turns }()
	case <-ctx.Done():
		return nil, fmt.Errorf("dial %s in %s: waiting for one of %d dials in progress to end: %w", addr, d.Path, MaxDials, ctx.Err())
	}
	var conn net.Conn
	err := Do(d.Path, func() error {
		var err error
		conn, err = d.Dialer.DialContext(ctx, network, addr)
		return err
	}, func() {
		if conn != nil {
			_ = conn.Close()
		}
	})
	return conn, err
}

// Listen opens a listener inside the namespace at path; it serves from this process as any other.
func Listen(path, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(path, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	}, func() {
		if l != nil {
			_ = l.Close()
		}
	})
	return l, err
}
