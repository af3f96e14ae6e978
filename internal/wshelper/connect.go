//go:build unix

package wshelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"

	"github.com/hangar-dev/hangar/internal/backoff"
	"github.com/hangar-dev/hangar/internal/netutil"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/wsmux"
)

// The helper of a Terraform workspace connects out to the Hangar server (docs/decisions.md,
// "Terraform workspaces: the helper connects out"): a WebSocket to the server's
// protocol.WorkspaceAgentConnectPath with its token, multiplexed with yamux. The server opens a
// stream for each user connection it let in (GET /api/v1/workspaces/{name}/ssh), and the helper
// serves SSH on it with ServeTrusted: the server authenticated and authorized the user, so the
// stream needs no key of its own. On version 2 of the connection a stream may instead be a TCP
// connection to an app's port (ServeStream). The machine needs no inbound port.

// ConnectOptions configure Connect.
type ConnectOptions struct {
	// URL is the server's base URL (http:// or https://).
	URL string
	// Token is the helper's token (hwa_...).
	Token  string
	Server *Server
	Logger *slog.Logger
	// Retry is the backoff between attempts (default 500 ms doubling to 30 s).
	Retry backoff.Policy
	// After makes the backoff's timers; default time.After. Tests inject their own.
	After func(time.Duration) <-chan time.Time
	// HTTPClient dials the WebSocket (default http.DefaultClient).
	HTTPClient *http.Client
	// Connected, when set, is called each time a connection to the server is up, and Disconnected
	// when it ended (with why).
	Connected    func()
	Disconnected func(error)
}

// DefaultRetry is the helper's backoff between connection attempts.
var DefaultRetry = backoff.Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second}

// ConnectURL checks a server URL for --connect-url and returns the WebSocket endpoint's URL.
func ConnectURL(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("want the Hangar server's http:// or https:// URL, got %q", server)
	}
	return strings.TrimSuffix(server, "/") + protocol.WorkspaceAgentConnectPath, nil
}

// ErrRefused is the error of a connection the server refused for good: it answered 401 (its
// workspace is deleted or gone, or its token is no longer in the workspace's Terraform state: a
// later build removed that agent) or 403. No later attempt can succeed, since a token is never
// valid again once it is not, so Connect returns it instead of retrying. Every other failure
// (the network, a 5xx, a 429, a server being restarted) is retried with backoff.
var ErrRefused = errors.New("the Hangar server refused this helper for good")

// final reports whether the server's answer to a connection means no later attempt can succeed.
func final(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// Connect keeps a connection to the server up until ctx ends, reconnecting with backoff when it
// drops or cannot be made, and serves the streams the server opens. It returns nil when ctx ends,
// and an error wrapping ErrRefused when the server refused the helper for good.
func Connect(ctx context.Context, o ConnectOptions) error {
	endpoint, err := ConnectURL(o.URL)
	if err != nil {
		return fmt.Errorf("--connect-url: %w", err)
	}
	if !strings.HasPrefix(o.Token, protocol.WorkspaceAgentTokenPrefix) {
		return fmt.Errorf("the helper's token must begin with %s (the token of a hangar_agent resource)", protocol.WorkspaceAgentTokenPrefix)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry.Base <= 0 {
		o.Retry = DefaultRetry
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	o.HTTPClient = corkingClient(o.HTTPClient)
	failures := 0
	for ctx.Err() == nil {
		up, err := connectOnce(ctx, o, endpoint)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, ErrRefused) {
			o.Logger.Error("the Hangar server refused this helper for good (its workspace is deleted, or its token was revoked: a later build replaced or removed its hangar_agent); exiting", "url", o.URL, "err", err)
			return err
		}
		if up {
			failures = 0 // the connection worked: start the backoff again from the beginning
		}
		wait := o.Retry.Delay(failures)
		failures++
		o.Logger.Warn("not connected to the Hangar server; retrying", "url", o.URL, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
		case <-o.After(wait):
		}
	}
	return nil
}

// connectOnce makes one connection and serves it until it ends; up tells whether it was made.
func connectOnce(ctx context.Context, o ConnectOptions, endpoint string) (up bool, err error) {
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	var cork *wsmux.CorkConn // the connection, when o.HTTPClient's transport let it be wrapped
	dialCtx = context.WithValue(dialCtx, corkKey{}, &cork)
	c, resp, err := websocket.Dial(dialCtx, endpoint, &websocket.DialOptions{
		HTTPClient: o.HTTPClient,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + o.Token}},
		// Version 2 first: its streams say what they carry (an app's TCP connection needs no SSH);
		// a server that knows only version 1 picks that, and every stream is SSH.
		Subprotocols: []string{protocol.WorkspaceAgentSubprotocolV2, protocol.WorkspaceAgentSubprotocol},
	})
	cancel()
	if err != nil {
		if resp != nil && final(resp.StatusCode) {
			return false, fmt.Errorf("%w (HTTP %d%s)", ErrRefused, resp.StatusCode, refusal(resp))
		}
		if resp != nil && resp.StatusCode >= 400 {
			return false, fmt.Errorf("the server refused the connection (HTTP %d%s)", resp.StatusCode, refusal(resp))
		}
		return false, err
	}
	v2 := c.Subprotocol() == protocol.WorkspaceAgentSubprotocolV2
	if !v2 && c.Subprotocol() != protocol.WorkspaceAgentSubprotocol {
		c.Close(websocket.StatusProtocolError, "unsupported subprotocol")
		return false, fmt.Errorf("the server does not speak %s", protocol.WorkspaceAgentSubprotocol)
	}
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	sess, err := yamux.Server(wsmux.Conn(nc, cork), wsmux.Config())
	if err != nil {
		nc.Close()
		return false, err
	}
	defer sess.Close()
	o.Logger.Info("connected to the Hangar server", "url", o.URL)
	if o.Connected != nil {
		o.Connected()
	}
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	for {
		stream, err := sess.Accept()
		if err != nil {
			if errors.Is(err, io.EOF) || sess.IsClosed() {
				err = errors.New("the connection ended")
			}
			if o.Disconnected != nil {
				o.Disconnected(err)
			}
			return true, err
		}
		if v2 {
			go func() { _ = o.Server.ServeStream(stream) }()
		} else {
			go func() { _ = o.Server.ServeTrusted(stream) }()
		}
	}
}

// corkKey is the context key of where corkingClient's dial puts the connection it made.
type corkKey struct{}

// corkingClient is c with a transport whose connections, dialled for a request whose context
// has a corkKey, are wsmux.CorkConns (put there): the WebSocket's messages then leave in one write
// each (wsmux.Conn). A transport that is not an *http.Transport is kept as it is.
func corkingClient(c *http.Client) *http.Client {
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return c
	}
	t = t.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if put, ok := ctx.Value(corkKey{}).(**wsmux.CorkConn); ok {
			cc := wsmux.NewCorkConn(nc)
			*put = cc
			return cc, nil
		}
		return nc, nil
	}
	cc := *c
	cc.Transport = t
	return &cc
}

// refusal is the server's error message of a refused connection, when it sent one.
func refusal(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if s := strings.TrimSpace(string(b)); s != "" {
		return ": " + s
	}
	return ""
}

// ServeTrusted serves SSH on one connection whose peer is already authorized: a stream the Hangar
// server opened after it let a user in. No client authentication is asked for (the "none" method
// succeeds); connections accepted by Serve keep their authorized_keys check. It returns when the
// connection ends, ErrServerClosed after Shutdown, or at once when MaxConnections are served.
func (s *Server) ServeTrusted(nc net.Conn) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	select {
	case s.slots <- struct{}{}:
	default:
		s.log.Warn("ssh connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", s.opts.MaxConnections)
		nc.Close()
		return fmt.Errorf("too many connections (at most %d)", s.opts.MaxConnections)
	}
	defer func() { <-s.slots }()
	s.serveConn(nc, s.trusted)
	return nil
}

// ServeStream serves one stream of a version-2 connection (protocol.WorkspaceAgentSubprotocolV2),
// which the server opened after it let a user in: its header says whether it is an SSH connection
// (served as ServeTrusted does) or a TCP connection to a port on this machine's loopback address
// (a Terraform workspace's app, relayed with no SSH: docs/decisions.md, "The way in, faster").
func (s *Server) ServeStream(nc net.Conn) error {
	_ = nc.SetReadDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	h, err := wsmux.ReadStreamHeader(nc)
	_ = nc.SetReadDeadline(time.Time{})
	if err != nil {
		s.log.Warn("a stream from the server was refused", "err", err)
		nc.Close()
		return err
	}
	if h.Kind == wsmux.KindSSH {
		return s.ServeTrusted(nc)
	}
	return s.serveTCP(nc, h.Port)
}

// serveTCP connects a stream to a port on the loopback address, as a direct-tcpip channel to
// localhost would, and relays the two until both directions end. A stream counts as a channel
// (MaxChannels of them at once, and as open for activity).
func (s *Server) serveTCP(stream net.Conn, port uint16) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		stream.Close()
		return ErrServerClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer stream.Close()
	if s.tcpStreams.Add(1) > int64(s.opts.MaxChannels) {
		s.tcpStreams.Add(-1)
		err := fmt.Errorf("at most %d connections to ports at once", s.opts.MaxChannels)
		_ = wsmux.WriteReply(stream, err)
		return err
	}
	defer s.tcpStreams.Add(-1)
	s.open.Add(1)
	defer s.open.Add(-1)
	addr := net.JoinHostPort("localhost", strconv.Itoa(int(port)))
	d := net.Dialer{Timeout: s.opts.HandshakeTimeout}
	tc, err := d.Dial("tcp", addr)
	if err != nil {
		s.log.Info("port connection: cannot connect", "to", addr, "err", err)
		_ = wsmux.WriteReply(stream, fmt.Errorf("connect to %s: %w", addr, err))
		return err
	}
	defer tc.Close()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = wsmux.WriteReply(stream, ErrServerClosed)
		return ErrServerClosed
	}
	s.streams[stream] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, stream)
		s.mu.Unlock()
	}()
	if err := wsmux.WriteReply(stream, nil); err != nil {
		return err
	}
	s.activity(ActivityForward)
	s.log.Debug("port connection", "to", addr)
	relayStream(stream, tc)
	return nil
}

// relayStream copies between a stream and a TCP connection. The server never half-closes a
// stream: its end (EOF) is the connection's end, so once what it sent is delivered the TCP
// connection is closed, which ends the other direction. The application's end of output is
// passed on (the stream's FIN), and its reading side stays open until then.
func relayStream(stream, tc net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = streamBuffers.Copy(stream, tc)
		_ = stream.Close() // yamux: a FIN; the stream still reads
	}()
	_ = streamBuffers.Copy(tc, stream)
	tc.Close()
	<-done
}

// streamBuffers are relayStream's copy buffers while data flows: larger than io.Copy's 32 KiB, so
// that a download crosses the connection to the server in fewer, larger frames; an idle stream
// holds none (netutil.Buffers).
var streamBuffers = netutil.NewBuffers(256 << 10)
