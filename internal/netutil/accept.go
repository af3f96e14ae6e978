// Package netutil holds what the proxy's SSH side and the workspace helper share: the accept loop of
// their SSH servers, and copies that hold no large buffer while idle (Buffers).
package netutil

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// AcceptOptions configure Accept.
type AcceptOptions struct {
	// Slots holds one token per connection being served; when it is full a new connection is
	// closed at once (Refused is told first).
	Slots chan struct{}
	// Closing says whether the server is closing, which makes an Accept error the normal end.
	Closing func() bool
	// Serve serves one connection, in a goroutine of its own, while its slot is held; WG counts it.
	Serve func(net.Conn)
	// Refused, when set, is told of a connection closed for want of a slot.
	Refused func(net.Conn)
	WG      *sync.WaitGroup
}

// ErrClosed is what Accept returns when the listener failed because the server is closing.
var ErrClosed = errors.New("server closed")

// Accept accepts connections on ln until it fails: ErrClosed when o.Closing says so, the error
// otherwise. Timeouts (a listener with a deadline) are retried.
func Accept(ln net.Listener, o AcceptOptions) error {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if o.Closing() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		select {
		case o.Slots <- struct{}{}:
		default:
			if o.Refused != nil {
				o.Refused(nc)
			}
			nc.Close()
			continue
		}
		o.WG.Add(1)
		go func() {
			defer o.WG.Done()
			defer func() { <-o.Slots }()
			o.Serve(nc)
		}()
	}
}
