package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/netutil"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// SSHChecker asks the server (POST /api/v1/proxy/ssh-check).
type SSHChecker interface {
	SSHCheck(ctx context.Context, req protocol.ProxySSHCheckRequest) (protocol.ProxySSHCheckResponse, error)
}

// SSHRoutes finds the helper's SSH address (pod IP and port) of a workspace; "" when no pod of it
// is ready.
type SSHRoutes interface {
	SSHAddr(workspaceID string) string
}

// SSHOptions configure SSHServer.
type SSHOptions struct {
	// HostKeys are the proxy's own SSH host keys, which clients verify.
	HostKeys []ssh.Signer
	Checker  SSHChecker
	Routes   SSHRoutes
	// UpstreamKey is the key the proxy logs in to the workspaces' helpers with: its public half is
	// in the agent config's proxy_ssh_public_keys.
	UpstreamKey ssh.Signer
	// HelperHostKey is the host key a workspace's helper must show (workspace.HelperHostKey, from
	// the agent's token). Nil accepts any (tests of other parts only).
	HelperHostKey func(workspaceID string) ssh.PublicKey
	// Dial connects to a helper (default: net.Dialer with HandshakeTimeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Activity, when set, is told about every session and forwarded connection opened, and, at
	// every recheck, about each connection with channels open.
	Activity func(workspaceID, kind string)
	// RecheckInterval is how often an open connection's access is asked again; a connection whose
	// user may no longer enter (token revoked, key removed, user removed, workspace deleted) is
	// closed. Default 10 s.
	RecheckInterval time.Duration
	// NewTicker makes the recheck ticker (tests inject theirs). Default time.NewTicker.
	NewTicker func(time.Duration) (<-chan time.Time, func())
	// HandshakeTimeout bounds the client's handshake and the connection to the helper. Default 10 s.
	HandshakeTimeout time.Duration
	// MaxConnections caps concurrent client connections (default 10,000).
	MaxConnections int
	Logger         *slog.Logger
	Metrics        *SSHMetrics
}

// SSHServer is the proxy's SSH side: it authenticates a client with the server, then opens its own
// SSH connection to the helper in the workspace and relays every channel and request between the
// two, both ways (sessions, sftp, exec, port forwarding, remote forwarding, agent forwarding).
type SSHServer struct {
	opts   SSHOptions
	config *ssh.ServerConfig
	log    *slog.Logger
	slots  chan struct{}

	mu        sync.Mutex
	closing   bool
	listeners map[net.Listener]struct{}
	conns     map[io.Closer]struct{}
	wg        sync.WaitGroup
	// now is closed (and replaced) by RecheckNow: the recheck loop waits on it beside its ticker.
	now chan struct{}
	// bridges are the relayed connections, which the one recheck loop (started with the first)
	// asks about; stopRecheck ends it (Close).
	bridges     map[*bridge]struct{}
	recheckOnce sync.Once
	stopRecheck chan struct{}
}

// RecheckNow makes every open connection ask the server about its access at once (the server said
// that access was taken away somewhere: Revocations).
func (s *SSHServer) RecheckNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.now)
	s.now = make(chan struct{})
}

// recheckSignal is the channel the next RecheckNow closes.
func (s *SSHServer) recheckSignal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Permissions extensions set by the authentication callbacks.
const (
	extWorkspaceID = "hangar-workspace-id"
	extWorkspace   = "hangar-workspace"
	extUser        = "hangar-user"
	extStatus      = "hangar-status"
	extPublicKey   = "hangar-public-key"
	extToken       = "hangar-token"
)

// NewSSHServer checks opts and returns the server.
func NewSSHServer(opts SSHOptions) (*SSHServer, error) {
	if len(opts.HostKeys) == 0 {
		return nil, errors.New("ssh: no host key")
	}
	if opts.Checker == nil || opts.Routes == nil || opts.UpstreamKey == nil {
		return nil, errors.New("ssh: Checker, Routes and UpstreamKey are required")
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = 10 * time.Second
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = 10000
	}
	if opts.NewTicker == nil {
		opts.NewTicker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: opts.HandshakeTimeout}
		opts.Dial = d.DialContext
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &SSHServer{opts: opts, log: opts.Logger, slots: make(chan struct{}, opts.MaxConnections),
		listeners: map[net.Listener]struct{}{}, conns: map[io.Closer]struct{}{}, now: make(chan struct{}),
		bridges: map[*bridge]struct{}{}, stopRecheck: make(chan struct{})}
	s.config = &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-hangar-proxy",
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
			return s.authenticate(meta, protocol.ProxySSHCheckRequest{Workspace: meta.User(), PublicKey: line}, extPublicKey, line)
		},
		PasswordCallback: func(meta ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			token := strings.TrimSpace(string(password))
			return s.authenticate(meta, protocol.ProxySSHCheckRequest{Workspace: meta.User(), Token: token}, extToken, token)
		},
		MaxAuthTries: 10,
	}
	for _, k := range opts.HostKeys {
		s.config.AddHostKey(k)
	}
	return s, nil
}

// The server's limits on an ssh-check (internal/server/proxyssh.go).
const (
	maxSSHUser      = 200
	maxSSHToken     = 512
	maxSSHPublicKey = 16 << 10
)

// errRefused is what the client learns of a refused key: nothing, so that it tries its next one.
var errRefused = errors.New("refused")

// authenticate asks the server. A key the server does not know is refused quietly (the client then
// offers its next key or a password); a known user refused for the workspace, or a wrong token, is
// told why in a banner, the same words for a workspace that is not theirs and one that does not
// exist.
func (s *SSHServer) authenticate(meta ssh.ConnMetadata, req protocol.ProxySSHCheckRequest, ext, cred string) (*ssh.Permissions, error) {
	// What the server would refuse as malformed is refused here, so that it is not taken for the
	// server failing: no workspace reference is that long, nor any token.
	switch {
	case len(req.Workspace) > maxSSHUser:
		return nil, &ssh.BannerError{Err: errRefused, Message: "hangar: the user name must name a workspace: NAME or OWNER/NAME.\r\n"}
	case len(req.Token) > maxSSHToken:
		return nil, &ssh.BannerError{Err: errRefused, Message: "hangar: that token is not valid (revoked, rotated or mistyped).\r\n"}
	case len(req.PublicKey) > maxSSHPublicKey:
		return nil, errRefused
	}
	// The client's address, which the server counts a refused password (token) against.
	if ap, err := netip.ParseAddrPort(meta.RemoteAddr().String()); err == nil {
		req.ClientAddress = ap.Addr().Unmap().WithZone("").String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.HandshakeTimeout)
	defer cancel()
	d, err := s.opts.Checker.SSHCheck(ctx, req)
	method := "publickey"
	if ext == extToken {
		method = "password"
	}
	s.opts.Metrics.authed(method, d, err)
	log := s.log.With("remote", meta.RemoteAddr().String(), "workspace", meta.User(), "method", method)
	switch {
	case err != nil:
		log.Warn("ssh: cannot ask the server; refusing", "err", err)
		return nil, &ssh.BannerError{Err: err, Message: "hangar: the proxy cannot reach the Hangar server; try again shortly.\r\n"}
	case d.Allowed:
		return &ssh.Permissions{Extensions: map[string]string{
			extWorkspaceID: d.WorkspaceID, extWorkspace: d.Workspace, extUser: d.User, extStatus: d.Status, ext: cred,
		}}, nil
	case d.Reason == protocol.ProxyRateLimited:
		log.Info("ssh: token refused: too many failed authentications from this client", "retry_after", d.RetryAfter)
		return nil, &ssh.BannerError{Err: errRefused,
			Message: fmt.Sprintf("hangar: too many wrong tokens were sent from your address lately; try again in %d s.\r\n", max(1, d.RetryAfter))}
	case d.Reason == protocol.ProxyUnauthenticated && ext == extPublicKey:
		log.Debug("ssh: key not registered")
		return nil, errRefused
	case d.Reason == protocol.ProxyUnauthenticated:
		log.Info("ssh: token refused")
		return nil, &ssh.BannerError{Err: errRefused, Message: "hangar: that token is not valid (revoked, rotated or mistyped).\r\n"}
	default:
		log.Info("ssh: refused", "user", d.User, "reason", d.Reason)
		return nil, &ssh.BannerError{Err: errRefused, Message: fmt.Sprintf("hangar: %s has no workspace %q on this proxy that you may enter.\r\n", d.User, meta.User())}
	}
}

// ErrSSHServerClosed is returned by Serve after Close.
var ErrSSHServerClosed = errors.New("ssh proxy closed")

// Serve accepts connections on ln until Close.
func (s *SSHServer) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrSSHServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer ln.Close()
	err := netutil.Accept(ln, netutil.AcceptOptions{
		Slots: s.slots, WG: &s.wg,
		Closing: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.closing
		},
		Serve: func(nc net.Conn) {
			if !s.track(nc) { // closing: Close has gone through the connections already
				nc.Close()
				return
			}
			defer s.untrack(nc)
			s.serveConn(nc)
		},
		Refused: func(nc net.Conn) {
			s.log.Warn("ssh connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", s.opts.MaxConnections)
		},
	})
	s.mu.Lock()
	delete(s.listeners, ln)
	s.mu.Unlock()
	if errors.Is(err, netutil.ErrClosed) {
		return ErrSSHServerClosed
	}
	return fmt.Errorf("ssh %w", err)
}

func (s *SSHServer) track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *SSHServer) untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops accepting, closes every connection and waits for their goroutines.
func (s *SSHServer) Close() {
	s.mu.Lock()
	if !s.closing {
		close(s.stopRecheck)
	}
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Connections returns how many client connections are open.
func (s *SSHServer) Connections() int { return len(s.slots) }

func (s *SSHServer) serveConn(nc net.Conn) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	down, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		s.log.Debug("ssh handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	defer down.Close()
	ext := down.Permissions.Extensions
	wsID := ext[extWorkspaceID]
	log := s.log.With("remote", nc.RemoteAddr().String(), "user", ext[extUser], "workspace", ext[extWorkspace])
	s.opts.Metrics.connOpened()
	defer s.opts.Metrics.connClosed()
	start := time.Now()

	addr := s.opts.Routes.SSHAddr(wsID)
	if addr == "" {
		log.Info("ssh: the workspace is not running", "status", ext[extStatus])
		ws := ext[extWorkspace]
		s.refuse(down, chans, reqs, fmt.Sprintf("hangar: workspace %s is not running (%s); start it with: hangar start %s", ws, ext[extStatus], ws))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.HandshakeTimeout)
	uc, err := s.opts.Dial(ctx, "tcp", addr)
	if err == nil {
		_ = uc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	}
	cancel()
	var up ssh.Conn
	var upChans <-chan ssh.NewChannel
	var upReqs <-chan *ssh.Request
	if err == nil {
		up, upChans, upReqs, err = ssh.NewClientConn(uc, addr, &ssh.ClientConfig{
			User: ext[extUser], Auth: []ssh.AuthMethod{ssh.PublicKeys(s.opts.UpstreamKey)},
			HostKeyCallback: s.helperHostKeyCallback(wsID),
			Timeout:         s.opts.HandshakeTimeout,
		})
		if err != nil {
			uc.Close()
		}
	}
	if err != nil {
		ws := ext[extWorkspace]
		msg := fmt.Sprintf("hangar: workspace %s is not running (unreachable (%v)); start it with: hangar start %s", ws, err, ws)
		if why, ok := PodNetworkUnreachable(addr, err); ok {
			msg = "hangar: workspace " + ws + " cannot be reached. " + why
		}
		log.Warn("ssh: cannot reach the workspace's helper", "addr", addr, "err", err)
		s.refuse(down, chans, reqs, msg)
		return
	}
	_ = uc.SetDeadline(time.Time{})
	defer up.Close()
	log.Info("ssh connection opened", "helper", addr)

	// The goroutines of a relayed connection, besides x/crypto/ssh's three per SSH connection: this
	// one, which relays the requests and opens the channels of both sides, and those of each open
	// channel (relayChannel). TestSSHProxyGoroutinesPerConnection counts them.
	b := &bridge{s: s, wsID: wsID, log: log, down: down,
		check: protocol.ProxySSHCheckRequest{Workspace: down.User(), PublicKey: ext[extPublicKey], Token: ext[extToken]}}
	if !s.addBridge(b) {
		return
	}
	defer s.removeBridge(b)
	var relays sync.WaitGroup // the channels' openings and relays
	b.relay(chans, reqs, down, upChans, upReqs, up, &relays)
	relays.Wait()
	log.Info("ssh connection closed", "duration", time.Since(start).Round(time.Millisecond).String())
}

// addBridge registers b for the recheck loop, starting the loop with the first connection.
func (s *SSHServer) addBridge(b *bridge) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.bridges[b] = struct{}{}
	s.recheckOnce.Do(func() {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.recheckLoop() }()
	})
	return true
}

func (s *SSHServer) removeBridge(b *bridge) {
	s.mu.Lock()
	delete(s.bridges, b)
	s.mu.Unlock()
}

// errHostKeyMismatch: the pod at the workspace's address is not its helper, or has a key of
// another agent token.
var errHostKeyMismatch = errors.New("the SSH server at the workspace's address did not show the workspace's host key (a pod of another workspace, or a helper started before the agent's token changed: restart the workspace)")

// helperHostKeyCallback accepts exactly the workspace's derived host key (docs/decisions.md, "The
// proxy pins the helper's host key").
func (s *SSHServer) helperHostKeyCallback(wsID string) ssh.HostKeyCallback {
	if s.opts.HelperHostKey == nil {
		return ssh.InsecureIgnoreHostKey()
	}
	want := s.opts.HelperHostKey(wsID)
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		if want == nil || !bytes.Equal(key.Marshal(), want.Marshal()) {
			return errHostKeyMismatch
		}
		return nil
	}
}

// refuse answers a client whose workspace cannot be reached (no ready pod, or no way to it): every
// session prints msg on stderr and exits 1; other channels are refused with the same words.
func (s *SSHServer) refuse(down *ssh.ServerConn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, msg string) {
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.ConnectionFailed, msg)
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		go func() {
			for req := range creqs {
				ok := req.Type == "shell" || req.Type == "exec" || req.Type == "subsystem" || req.Type == "pty-req" || req.Type == "env"
				if req.WantReply {
					_ = req.Reply(ok, nil)
				}
				if req.Type == "shell" || req.Type == "exec" || req.Type == "subsystem" {
					_, _ = io.WriteString(ch.Stderr(), msg+"\r\n")
					_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{1}))
					_ = ch.Close()
				}
			}
		}()
	}
	_ = down.Close()
}

// bridge relays one client connection's channels.
type bridge struct {
	s     *SSHServer
	wsID  string
	log   *slog.Logger
	down  *ssh.ServerConn
	check protocol.ProxySSHCheckRequest // what the recheck asks

	checking atomic.Bool // a recheck of this connection is under way
	failures int         // rechecks that failed in a row (read and written by the one under way)

	mu       sync.Mutex
	channels int // open
}

// relay relays the two connections until both have ended: the global requests (keepalives,
// tcpip-forward, ...) of each side to the other, one at a time (SSH answers them in order: a
// request waits for its answer before the next is relayed), and the channels each side opens,
// each opened on the other side and relayed by a goroutine of its own (relays counts them). When
// either connection ends, the other is closed.
func (b *bridge) relay(chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, down ssh.Conn,
	upChans <-chan ssh.NewChannel, upReqs <-chan *ssh.Request, up ssh.Conn, relays *sync.WaitGroup) {
	for chans != nil || reqs != nil || upChans != nil || upReqs != nil {
		select {
		case nch, ok := <-chans:
			if !ok {
				chans = nil
				up.Close() // the client's connection ended
				continue
			}
			b.open(nch, up, true, relays)
		case req, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			relayRequest(req, up)
		case nch, ok := <-upChans:
			if !ok {
				upChans = nil
				down.Close() // the helper's connection ended
				continue
			}
			b.open(nch, down, false, relays)
		case req, ok := <-upReqs:
			if !ok {
				upReqs = nil
				continue
			}
			relayRequest(req, down)
		}
	}
}

// open opens a channel asked for on one side on the other side, and relays the two, in a
// goroutine of its own: opening waits for the other side's answer (a helper's connection to a
// port can take seconds), which holds up nothing else. Channels the client opens (sessions,
// direct-tcpip) count as activity; those the helper opens (forwarded-tcpip, agent forwarding)
// serve a session already counted.
func (b *bridge) open(nch ssh.NewChannel, to ssh.Conn, fromClient bool, relays *sync.WaitGroup) {
	relays.Add(1)
	go func() {
		defer relays.Done()
		b.openChannel(nch, to, fromClient)
	}()
}

func (b *bridge) openChannel(nch ssh.NewChannel, to ssh.Conn, fromClient bool) {
	toCh, toReqs, err := to.OpenChannel(nch.ChannelType(), nch.ExtraData())
	if err != nil {
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) {
			_ = nch.Reject(oce.Reason, oce.Message)
		} else {
			_ = nch.Reject(ssh.ConnectionFailed, err.Error())
		}
		return
	}
	fromCh, fromReqs, err := nch.Accept()
	if err != nil {
		toCh.Close()
		return
	}
	if fromClient {
		b.s.activity(b.wsID, nch.ChannelType())
	}
	b.mu.Lock()
	b.channels++
	b.mu.Unlock()
	// Only a session has a stderr, and only the workspace's side writes one (RFC 4254, 5.2: a
	// client's extended data has no use, and the helper reads none).
	relayChannel(fromCh, fromReqs, toCh, toReqs, fromClient && nch.ChannelType() == "session")
	b.mu.Lock()
	b.channels--
	b.mu.Unlock()
}

func (s *SSHServer) activity(wsID, channelType string) {
	if s.opts.Activity != nil && (channelType == "session" || channelType == "direct-tcpip") {
		s.opts.Activity(wsID, protocol.ActivitySSH)
	}
}

// maxRechecks bounds the rechecks under way at once (each is a call to the server).
const maxRechecks = 32

// recheckLoop asks the server again about every open connection every RecheckInterval, and at
// once on RecheckNow, until Close. One loop for all connections: a connection has no goroutine
// of its own waiting for its next recheck.
func (s *SSHServer) recheckLoop() {
	ticks, stop := s.opts.NewTicker(s.opts.RecheckInterval)
	defer stop()
	sem := make(chan struct{}, maxRechecks)
	for {
		select {
		case <-s.stopRecheck:
			return
		case <-ticks:
		case <-s.recheckSignal():
		}
		s.mu.Lock()
		due := make([]*bridge, 0, len(s.bridges))
		for b := range s.bridges {
			if b.checking.CompareAndSwap(false, true) { // one recheck of a connection at a time
				due = append(due, b)
			}
		}
		s.mu.Unlock()
		for _, b := range due {
			sem <- struct{}{}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() { <-sem }()
				defer b.checking.Store(false)
				b.recheck()
			}()
		}
	}
}

// recheck asks the server about the connection and closes it once the answer is a refusal.
// Errors are tolerated three times in a row (a server restart should not cut every session), then
// the connection is closed too: the proxy fails closed.
func (b *bridge) recheck() {
	b.mu.Lock()
	busy := b.channels > 0
	b.mu.Unlock()
	if busy && b.s.opts.Activity != nil {
		b.s.opts.Activity(b.wsID, protocol.ActivitySSH)
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.s.opts.HandshakeTimeout)
	d, err := b.s.opts.Checker.SSHCheck(ctx, b.check)
	cancel()
	switch {
	case err != nil:
		b.failures++
		b.log.Warn("ssh: cannot recheck access", "err", err, "failures", b.failures)
		if b.failures < 3 {
			return
		}
	case d.Allowed && d.WorkspaceID == b.wsID:
		b.failures = 0
		return
	}
	b.log.Info("ssh: access ended; closing the connection", "reason", d.Reason)
	_ = b.down.Close()
}

// relayRequest forwards a global request and, when one is wanted, its answer.
func relayRequest(req *ssh.Request, to ssh.Conn) {
	ok, payload, err := to.SendRequest(req.Type, req.WantReply, req.Payload)
	if req.WantReply {
		if err != nil {
			ok, payload = false, nil
		}
		_ = req.Reply(ok, payload)
	}
}

// relayChannelRequest forwards a channel's request and, when one is wanted, its answer.
func relayChannelRequest(req *ssh.Request, to ssh.Channel) {
	ok, err := to.SendRequest(req.Type, req.WantReply, req.Payload)
	if req.WantReply {
		_ = req.Reply(ok && err == nil, nil)
	}
}

// relayChannel relays two channels until both are done: the data of each to the other (a side's
// end of data passed on: CloseWrite), b's stderr to a when stderr says so, and the requests of
// each to the other, one goroutine for those of both (a request waits for its answer before the
// next of either side is relayed). When a side closes, its requests (exit-status comes before
// close) and the rest of its data are passed on before the other side is closed.
func relayChannel(a ssh.Channel, aReqs <-chan *ssh.Request, b ssh.Channel, bReqs <-chan *ssh.Request, stderr bool) {
	aToB, bToA := make(chan struct{}), make(chan struct{})
	errs := &stderrCopy{from: b, to: a}
	go func() {
		defer close(aToB)
		_ = channelBuffers.Copy(b, a)
		_ = b.CloseWrite()
	}()
	go func() {
		defer close(bToA)
		_ = channelBuffers.Copy(a, b)
		errs.end()
		_ = a.CloseWrite()
	}()
	// A request waits for its answer before anything else is relayed, so a quick command's end
	// (its exit-status and close, relayed from the workspace) cannot reach the client before the
	// answer to its exec (the client would see its request fail with no exit status: TestSSH saw
	// it under load). A side is closed once the other side's requests ended (it closed) and its
	// data is across.
	aEnded, bEnded, aCopied, bCopied := false, false, false, false
	aClosed, bClosed := false, false
	for !aClosed || !bClosed || !aCopied || !bCopied {
		select {
		case req, ok := <-aReqs:
			if !ok {
				aReqs, aEnded = nil, true
				break
			}
			if stderr && (req.Type == "shell" || req.Type == "exec" || req.Type == "subsystem") {
				errs.start() // the command's stderr, from before the request reaches the workspace
			}
			relayChannelRequest(req, b)
		case req, ok := <-bReqs:
			if !ok {
				bReqs, bEnded = nil, true
				break
			}
			relayChannelRequest(req, a)
		case <-aToB:
			aToB, aCopied = nil, true
		case <-bToA:
			bToA, bCopied = nil, true
		}
		if aEnded && aCopied && !bClosed {
			_ = b.Close()
			bClosed = true
		}
		if bEnded && bCopied && !aClosed {
			_ = a.Close()
			aClosed = true
		}
	}
}

// stderrCopy copies a session's stderr from the workspace to the client, started only once the
// client asks for a command (a session has no stderr before), so that an idle session has no
// goroutine waiting on it.
type stderrCopy struct {
	from, to ssh.Channel
	mu       sync.Mutex
	ended    bool          // the data's copy ended: no stderr is started any more
	done     chan struct{} // closed when the started copy ends
}

func (c *stderrCopy) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.done != nil {
		return
	}
	c.done = make(chan struct{})
	go func() { defer close(c.done); _ = channelBuffers.Copy(c.to.Stderr(), c.from.Stderr()) }()
}

// end waits for the started copy to end, once the data's copy ended.
func (c *stderrCopy) end() {
	c.mu.Lock()
	c.ended = true
	done := c.done
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}

// channelBuffers are the relay's copy buffers while data flows: 32 KiB, SSH's largest packet.
var channelBuffers = netutil.NewBuffers(32 << 10)

// SSHMetrics are the SSH side's Prometheus metrics; a nil *SSHMetrics records nothing.
type SSHMetrics struct {
	conns prometheus.Gauge
	auths *prometheus.CounterVec
}

// NewSSHMetrics registers the SSH metrics with reg.
func NewSSHMetrics(reg prometheus.Registerer) *SSHMetrics {
	m := &SSHMetrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hangar_proxy_ssh_connections",
			Help: "SSH client connections open now."}),
		auths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hangar_proxy_ssh_auth_total",
			Help: "SSH authentication attempts, by method and result (allowed, the refusal's reason, or error)."}, []string{"method", "result"}),
	}
	reg.MustRegister(m.conns, m.auths)
	return m
}

func (m *SSHMetrics) connOpened() {
	if m != nil {
		m.conns.Inc()
	}
}

func (m *SSHMetrics) connClosed() {
	if m != nil {
		m.conns.Dec()
	}
}

func (m *SSHMetrics) authed(method string, d protocol.ProxySSHCheckResponse, err error) {
	if m != nil {
		m.auths.WithLabelValues(method, decisionLabel(d.Allowed, d.Reason, err)).Inc()
	}
}
