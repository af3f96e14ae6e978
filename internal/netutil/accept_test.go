package netutil

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

func TestAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var closing atomic.Bool
	release := make(chan struct{})
	served, refused := make(chan struct{}, 4), make(chan struct{}, 4)
	done := make(chan error, 1)
	go func() {
		done <- Accept(ln, AcceptOptions{
			Slots: make(chan struct{}, 1), WG: &wg, Closing: closing.Load,
			Serve:   func(c net.Conn) { served <- struct{}{}; <-release; c.Close() },
			Refused: func(net.Conn) { refused <- struct{}{} },
		})
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-served
	// The one slot is taken: the next connection is closed at once.
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-refused
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a connection over the limit: read %v, want EOF", err)
	}
	close(release)
	wg.Wait() // the served connection's goroutine ends and frees its slot
	c1.Close()
	closing.Store(true)
	ln.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Accept after closing: %v, want ErrClosed", err)
	}
}

func TestAcceptFailsWhenNotClosing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	var wg sync.WaitGroup
	err = Accept(ln, AcceptOptions{Slots: make(chan struct{}, 1), WG: &wg, Closing: func() bool { return false }, Serve: func(net.Conn) {}})
	if err == nil || errors.Is(err, ErrClosed) {
		t.Errorf("a listener that fails on its own: %v, want its error", err)
	}
}
