//go:build !windows

package quickstart

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hangar-dev/hangar/internal/netns"
)

// echoServer answers each line with "echo: " and the line, and counts its connections at a time.
type echoServer struct {
	l             net.Listener
	open, maxOpen atomic.Int64
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{l: l}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := e.open.Add(1)
			for m := e.maxOpen.Load(); n > m && !e.maxOpen.CompareAndSwap(m, n); m = e.maxOpen.Load() {
			}
			go func() {
				defer c.Close()
				defer e.open.Add(-1)
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintf(c, "echo: %s\n", sc.Text()); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

// startRelay serves a relay from a listener made inside this process's own network namespace
// (netns.Listen, as hangar relay does with the cluster's), and returns its address and how to
// stop it (which returns Serve's result).
func startRelay(t *testing.T, to string, maxConns int) (string, func() error) {
	t.Helper()
	l, err := netns.Listen("/proc/self/ns/net", "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- (&Relay{Listener: l, To: to, MaxConns: maxConns}).Serve(ctx) }()
	var once sync.Once
	var serr error
	stop := func() error {
		once.Do(func() { cancel(); serr = <-served })
		return serr
	}
	t.Cleanup(func() { _ = stop() })
	return l.Addr().String(), stop
}

func echoOnce(c net.Conn, line string) error {
	if _, err := fmt.Fprintln(c, line); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != "echo: "+line+"\n" {
		return fmt.Errorf("got %q", got)
	}
	return nil
}

// TestRelayBounded: every connection through the relay reaches the target and back, and the
// target never sees more connections at a time than the relay's bound, though more clients than
// that connect at once (they wait their turn and are served).
func TestRelayBounded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("netns.Listen enters a network namespace, which needs root (CI runs as root)")
	}
	e := startEcho(t)
	addr, _ := startRelay(t, e.l.Addr().String(), 2)
	const clients = 12
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if err := echoOnce(c, fmt.Sprintf("client %d", i)); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := e.maxOpen.Load(); m > 2 || m < 1 {
		t.Errorf("the target saw %d connections at a time, want at most the bound 2", m)
	}
}

// TestRelayHalfClose: a client that sends its request and closes its writing side still gets the
// whole answer (the end of one direction is passed on, not taken for the end of both).
func TestRelayHalfClose(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("netns.Listen enters a network namespace, which needs root (CI runs as root)")
	}
	e := startEcho(t)
	addr, _ := startRelay(t, e.l.Addr().String(), 4)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "one\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "echo: one\necho: two\n" {
		t.Fatalf("after a half-close: %q %v", got, err)
	}
}

// TestRelayShutdown: stopping the relay closes its listener and the connections it relays (the
// client reads their end), and Serve returns nil; a relay whose target does not answer closes the
// client's connection instead of holding it.
func TestRelayShutdown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("netns.Listen enters a network namespace, which needs root (CI runs as root)")
	}
	e := startEcho(t)
	addr, stop := startRelay(t, e.l.Addr().String(), 4)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echoOnce(c, "before"); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve after stop: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a relayed connection after stop reads %v, want EOF", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("the relay's address %s still accepts after stop", addr)
	}

	// A target that is gone: the client's connection ends.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	addr, _ = startRelay(t, deadAddr, 4)
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Error("a connection to a relay whose target refuses stays open")
	}
}
