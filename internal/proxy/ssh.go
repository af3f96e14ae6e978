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
	// now is closed (and replaced) by RecheckNow: every open connection's recheck waits on it
	// beside its ticker.
	now chan struct{}
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
		listeners: map[net.Listener]struct{}{}, conns: map[io.Closer]struct{}{}, now: make(chan struct{})}
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

	b := &bridge{s: s, wsID: wsID, log: log}
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); b.channels(chans, up, true) }()
	go func() { defer wg.Done(); b.channels(upChans, down, false); down.Close() }()
	go func() { defer wg.Done(); relayRequests(reqs, up) }()
	go func() { defer wg.Done(); relayRequests(upReqs, down) }()
	recheckDone := make(chan struct{})
	go func() { defer wg.Done(); b.recheck(down, ext, recheckDone) }()
	_ = down.Wait()
	up.Close()
	close(recheckDone)
	wg.Wait()
	log.Info("ssh connection closed", "duration", time.Since(start).Round(time.Millisecond).String())
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
	s    *SSHServer
	wsID string
	log  *slog.Logger

	mu   sync.Mutex
	open int
}

// channels opens, on to, every channel asked for on from, and relays the two. Channels the client
// opens (sessions, direct-tcpip) count as activity; those the helper opens (forwarded-tcpip,
// agent forwarding) serve a session already counted.
func (b *bridge) channels(from <-chan ssh.NewChannel, to ssh.Conn, fromClient bool) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for nch := range from {
		toCh, toReqs, err := to.OpenChannel(nch.ChannelType(), nch.ExtraData())
		if err != nil {
			var oce *ssh.OpenChannelError
			if errors.As(err, &oce) {
				_ = nch.Reject(oce.Reason, oce.Message)
			} else {
				_ = nch.Reject(ssh.ConnectionFailed, err.Error())
			}
			continue
		}
		fromCh, fromReqs, err := nch.Accept()
		if err != nil {
			toCh.Close()
			continue
		}
		if fromClient {
			b.s.activity(b.wsID, nch.ChannelType())
		}
		b.mu.Lock()
		b.open++
		b.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			relayChannel(fromCh, fromReqs, toCh, toReqs)
			b.mu.Lock()
			b.open--
			b.mu.Unlock()
		}()
	}
}

func (s *SSHServer) activity(wsID, channelType string) {
	if s.opts.Activity != nil && (channelType == "session" || channelType == "direct-tcpip") {
		s.opts.Activity(wsID, protocol.ActivitySSH)
	}
}

// recheck asks the server again every RecheckInterval, and at once on RecheckNow, and closes the
// connection once the answer is a refusal. Errors are tolerated three times in a row (a server
// restart should not cut every session), then the connection is closed too: the proxy fails closed.
func (b *bridge) recheck(down *ssh.ServerConn, ext map[string]string, done <-chan struct{}) {
	ticks, stop := b.s.opts.NewTicker(b.s.opts.RecheckInterval)
	defer stop()
	req := protocol.ProxySSHCheckRequest{Workspace: down.User(), PublicKey: ext[extPublicKey], Token: ext[extToken]}
	failures := 0
	for {
		select {
		case <-done:
			return
		case <-ticks:
		case <-b.s.recheckSignal():
		}
		b.mu.Lock()
		busy := b.open > 0
		b.mu.Unlock()
		if busy && b.s.opts.Activity != nil {
			b.s.opts.Activity(b.wsID, protocol.ActivitySSH)
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.s.opts.HandshakeTimeout)
		d, err := b.s.opts.Checker.SSHCheck(ctx, req)
		cancel()
		switch {
		case err != nil:
			failures++
			b.log.Warn("ssh: cannot recheck access", "err", err, "failures", failures)
			if failures < 3 {
				continue
			}
		case d.Allowed && d.WorkspaceID == b.wsID:
			failures = 0
			continue
		}
		b.log.Info("ssh: access ended; closing the connection", "reason", d.Reason)
		_ = down.Close()
		return
	}
}

// relayRequests forwards global requests (keepalives, tcpip-forward, ...) and their replies.
func relayRequests(reqs <-chan *ssh.Request, to ssh.Conn) {
	for req := range reqs {
		ok, payload, err := to.SendRequest(req.Type, req.WantReply, req.Payload)
		if req.WantReply {
			if err != nil {
				ok, payload = false, nil
			}
			_ = req.Reply(ok, payload)
		}
	}
}

// relayChannel copies data, stderr and requests between two channels until both are done. A side's
// end of data is passed on (CloseWrite). When a side closes, its requests (exit-status comes before
// close) and the rest of its data are passed on before the other side is closed.
func relayChannel(a ssh.Channel, aReqs <-chan *ssh.Request, b ssh.Channel, bReqs <-chan *ssh.Request) {
	copyHalf := func(dst, src ssh.Channel, done chan<- struct{}) {
		defer close(done)
		stderr := make(chan struct{})
		go func() { defer close(stderr); _, _ = io.Copy(dst.Stderr(), src.Stderr()) }()
		_, _ = io.Copy(dst, src)
		<-stderr
		_ = dst.CloseWrite()
	}
	// replying[x] is held while a request of side x waits for the other side's answer: x is not
	// closed meanwhile. A quick command's end (its exit-status and close, relayed from the
	// workspace) could otherwise reach the client before the answer to its exec, and the client
	// sees its request fail with no exit status (TestSSH saw it under load).
	var replyingA, replyingB sync.Mutex
	closeAfter := func(dst ssh.Channel, reqs <-chan *ssh.Request, copied <-chan struct{}, replying, dstReplying *sync.Mutex) {
		for req := range reqs {
			if req.WantReply {
				replying.Lock()
			}
			ok, err := dst.SendRequest(req.Type, req.WantReply, req.Payload)
			if req.WantReply {
				_ = req.Reply(ok && err == nil, nil)
				replying.Unlock()
			}
		}
		// reqs ends when its channel is closed: close the other side once the data is across
		// and no request of that side waits for its answer.
		<-copied
		dstReplying.Lock()
		_ = dst.Close()
		dstReplying.Unlock()
	}
	aToB, bToA := make(chan struct{}), make(chan struct{})
	go copyHalf(b, a, aToB)
	go copyHalf(a, b, bToA)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); closeAfter(b, aReqs, aToB, &replyingA, &replyingB) }()
	go func() { defer wg.Done(); closeAfter(a, bReqs, bToA, &replyingB, &replyingA) }()
	wg.Wait()
	<-aToB
	<-bToA
}

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
