//go:build !windows

package quickstart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/netns"
)

// DefaultRelayConns bounds the relay's connections at a time: each is two goroutines and two
// sockets; the quick start's Terraform workspaces hold one each (their helpers' connections) and
// their builds none.
const DefaultRelayConns = 256

// RelayCommand is `hangar relay` (hidden: the quick start runs it): it listens inside a network
// namespace (the local cluster's) and forwards each connection to an address of the host's, so
// that the cluster's pods reach the server on the host's loopback (their helpers connect out to
// it) while nothing else of the host is reachable from there.
func RelayCommand() *cobra.Command {
	var path, listen, to, label string
	var maxConns int
	cmd := &cobra.Command{
		Use:    "relay --netns PATH --listen ADDR --to ADDR [--label TEXT]",
		Short:  "Forward connections made inside a network namespace to an address of this host (hangar quickstart runs it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" || listen == "" || to == "" {
				return errors.New("--netns, --listen and --to are all required")
			}
			if _, _, err := net.SplitHostPort(to); err != nil {
				return fmt.Errorf("--to %q: want HOST:PORT: %w", to, err)
			}
			if maxConns < 1 {
				return fmt.Errorf("--max-conns: want at least 1, got %d", maxConns)
			}
			l, err := netns.Listen(path, "tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s in --netns %s: %w", listen, path, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			log.Info("relaying", "listen", l.Addr().String(), "netns", path, "to", to, "max_conns", maxConns, "label", label)
			err = (&Relay{Listener: l, To: to, MaxConns: maxConns, Log: log}).Serve(ctx)
			log.Info("relay stopped")
			return err
		},
	}
	cmd.Flags().StringVar(&path, "netns", "", "the network namespace to listen in (such as /run/netns/hangar-kube-...)")
	cmd.Flags().StringVar(&listen, "listen", "", "the address to listen on inside the namespace (such as 10.99.0.2:7080)")
	cmd.Flags().StringVar(&to, "to", "", "the address to forward to, dialled from this host's own namespace (such as 127.0.0.1:7080)")
	cmd.Flags().StringVar(&label, "label", "", "a label for the process list and the log (the quick start's data directory, by which it knows its relay)")
	cmd.Flags().IntVar(&maxConns, "max-conns", DefaultRelayConns, "the most connections relayed at a time; more wait to be accepted")
	return cmd
}

// Relay forwards each connection accepted on Listener to a new connection to To, dialled from this
// process's own network namespace.
type Relay struct {
	Listener net.Listener
	To       string
	// MaxConns bounds the connections relayed at a time (0: DefaultRelayConns). A further one waits
	// in the listener's backlog until one ends.
	MaxConns int
	// DialTimeout bounds each dial of To (0: 10 s).
	DialTimeout time.Duration
	Log         *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Serve relays until ctx ends (it then closes the listener and every connection, waits for them to
// be done and returns nil) or the listener fails.
func (r *Relay) Serve(ctx context.Context) error {
	if r.MaxConns <= 0 {
		r.MaxConns = DefaultRelayConns
	}
	if r.DialTimeout <= 0 {
		r.DialTimeout = 10 * time.Second
	}
	if r.Log == nil {
		r.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.conns = map[net.Conn]struct{}{}
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		_ = r.Listener.Close()
		r.mu.Lock()
		for c := range r.conns {
			_ = c.Close()
		}
		r.conns = nil // a connection accepted or dialled from now on is closed at once
		r.mu.Unlock()
	}()
	defer func() {
		close(stopped)
		wg.Wait()
	}()
	turns := make(chan struct{}, r.MaxConns)
	for {
		select {
		case turns <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := r.Listener.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("relay: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-turns }()
			r.relay(ctx, c)
		}()
	}
}

// track records c to be closed at shutdown; it reports false (and closes c) once shut down.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		_ = c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	_ = c.Close()
}

// relay copies both ways between c and a new connection to To; an end of one direction is passed
// on as a half-close, and the connections close when both directions are done (or one fails).
func (r *Relay) relay(ctx context.Context, c net.Conn) {
	if !r.track(c) {
		return
	}
	defer r.untrack(c)
	dctx, cancel := context.WithTimeout(ctx, r.DialTimeout)
	s, err := (&net.Dialer{}).DialContext(dctx, "tcp", r.To)
	cancel()
	if err != nil {
		r.Log.Warn("relay: dial", "to", r.To, "from", c.RemoteAddr().String(), "err", err)
		return
	}
	if !r.track(s) {
		return
	}
	defer r.untrack(s)
	done := make(chan error, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		}
		done <- err
	}
	go pipe(s, c)
	go pipe(c, s)
	if err := <-done; err != nil {
		_ = c.Close()
		_ = s.Close()
	}
	<-done
}
