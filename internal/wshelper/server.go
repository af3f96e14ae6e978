//go:build unix

package wshelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/netutil"
)

// Activity kinds passed to an ActivityFunc.
const (
	// ActivitySession: a session channel (shell, exec, sftp) was opened.
	ActivitySession = "ssh-session"
	// ActivityForward: a forwarded TCP connection (direct-tcpip or tcpip-forward) was opened.
	ActivityForward = "port-forward"
	// ActivityOpen: sent every ActivityInterval while any session or forwarded connection is open.
	ActivityOpen = "ssh-open"
)

// ActivityFunc is told about use of the workspace, for idle stop. It is called on the server's
// goroutines and must return quickly (hand the report to a goroutine of its own).
type ActivityFunc func(kind string)

// Defaults of ServerOptions.
const (
	DefaultMaxConnections    = 100
	DefaultMaxChannels       = 256
	DefaultHandshakeTimeout  = 15 * time.Second
	DefaultKeepaliveInterval = 30 * time.Second
	DefaultKeepaliveCountMax = 3
	DefaultActivityInterval  = time.Minute
)

// waitDelay bounds how long a finished command's output is still copied when something it started
// in the background keeps its stdout or pty open (OpenSSH would wait for ever).
const waitDelay = 2 * time.Second

// ServerOptions configure a Server. Zero values take the defaults above.
type ServerOptions struct {
	HostKey ssh.Signer
	// AuthorizedKeysFile lists the keys that may connect (normally the proxy's). Re-read at every
	// authentication; missing or empty refuses everyone.
	AuthorizedKeysFile string
	// TrustedOnly says only ServeTrusted connections are expected (the helper connects out and
	// listens nowhere): an unset authorized_keys file is then not warned about.
	TrustedOnly bool
	// MaxConnections is the most connections served at once; more are closed before the handshake.
	MaxConnections int
	// MaxChannels is the most channels (sessions and forwarded connections) one connection has open
	// at once; more are refused with "resource shortage".
	MaxChannels int
	// HandshakeTimeout bounds the SSH handshake and authentication of a new connection.
	HandshakeTimeout time.Duration
	// KeepaliveInterval is how often the server asks a client for a reply; after KeepaliveCountMax
	// intervals without one the connection is closed, ending its sessions.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// Shell runs shell and exec sessions; empty: $SHELL of Env, else /bin/sh.
	Shell string
	// Env is the environment of sessions, before the client's env requests; nil: the helper's own
	// environment without the helper's HANGAR_HELPER_* settings.
	Env []string
	// Dir is where sessions start; empty: $HOME of Env when it is a directory, else /.
	Dir string
	// Activity, when set, is told when sessions and forwarded connections open and, every
	// ActivityInterval (or at each value of ActivityTicks, when set), while any is open.
	Activity         ActivityFunc
	ActivityInterval time.Duration
	ActivityTicks    <-chan time.Time
	Logger           *slog.Logger
}

// Server is the helper's SSH server: public keys only, sessions (shell, exec, pty, sftp), local and
// remote TCP forwarding.
type Server struct {
	opts    ServerOptions
	log     *slog.Logger
	config  *ssh.ServerConfig
	trusted *ssh.ServerConfig // ServeTrusted's: no client authentication
	slots   chan struct{}     // one per connection being served

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*ssh.ServerConn]struct{}
	streams   map[net.Conn]struct{}    // TCP streams relayed (ServeStream), closed by Shutdown as conns are
	procs     map[*os.Process]struct{} // session commands running, each leading its process group
	procExit  chan struct{}            // closed and replaced whenever a session command ends
	closing   bool

	notice atomic.Pointer[string] // told to every shell session (SetNotice)

	open       atomic.Int64 // channels open, all connections, and TCP streams (ServeStream)
	tcpStreams atomic.Int64 // TCP streams open (ServeStream)
	// output counts the bytes session commands wrote to their clients (activity.go).
	output   atomic.Int64
	wg       sync.WaitGroup // every goroutine of the server
	stopTick chan struct{}
}

// NewServer returns a server; Serve runs it on a listener.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.HostKey == nil {
		return nil, errors.New("ssh server: no host key")
	}
	unignoreHangup()
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MaxChannels <= 0 {
		opts.MaxChannels = DefaultMaxChannels
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.KeepaliveInterval <= 0 {
		opts.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if opts.KeepaliveCountMax <= 0 {
		opts.KeepaliveCountMax = DefaultKeepaliveCountMax
	}
	if opts.ActivityInterval <= 0 {
		opts.ActivityInterval = DefaultActivityInterval
	}
	if opts.Env == nil {
		opts.Env = ContainerEnv(os.Environ())
	}
	if opts.Shell == "" {
		opts.Shell = lookupEnv(opts.Env, "SHELL")
		if opts.Shell == "" {
			opts.Shell = "/bin/sh"
		}
	}
	if !filepath.IsAbs(opts.Shell) {
		path, err := exec.LookPath(opts.Shell)
		if err != nil {
			return nil, fmt.Errorf("ssh server: shell %q: %w", opts.Shell, err)
		}
		opts.Shell = path
	}
	if opts.Dir == "" {
		opts.Dir = "/"
		if home := lookupEnv(opts.Env, "HOME"); home != "" {
			if fi, err := os.Stat(home); err == nil && fi.IsDir() {
				opts.Dir = home
			}
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:      opts,
		log:       log,
		slots:     make(chan struct{}, opts.MaxConnections),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*ssh.ServerConn]struct{}{},
		streams:   map[net.Conn]struct{}{},
		procs:     map[*os.Process]struct{}{},
		procExit:  make(chan struct{}),
		stopTick:  make(chan struct{}),
	}
	auth := &authorizedKeys{path: opts.AuthorizedKeysFile, log: log}
	s.config = &ssh.ServerConfig{
		PublicKeyCallback: auth.check,
		// No password, keyboard-interactive or "none": those callbacks stay nil, so x/crypto/ssh
		// offers public keys only.
		ServerVersion: "SSH-2.0-HangarWorkspaceHelper",
		AuthLogCallback: func(meta ssh.ConnMetadata, method string, err error) {
			if err != nil && method != "none" {
				log.Info("ssh authentication refused", "remote", meta.RemoteAddr().String(), "user", meta.User(), "method", method, "err", err)
			}
		},
	}
	s.config.AddHostKey(opts.HostKey)
	s.trusted = &ssh.ServerConfig{NoClientAuth: true, ServerVersion: s.config.ServerVersion}
	s.trusted.AddHostKey(opts.HostKey)
	if opts.TrustedOnly && opts.AuthorizedKeysFile == "" {
		// Nothing listens: no client will ever be asked for a key.
	} else if _, err := auth.keys(); err != nil { // log the file's state once at start
		log.Warn("ssh clients will be refused until the authorized_keys file holds a key", "file", opts.AuthorizedKeysFile)
	}
	s.wg.Add(1)
	go s.tick()
	return s, nil
}

// ContainerEnv is env without the helper's own settings (HANGAR_HELPER_*), which are not the
// user's.
func ContainerEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HANGAR_HELPER_") {
			out = append(out, kv)
		}
	}
	return out
}

func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// setEnv returns env with name set to value, replacing earlier values.
func setEnv(env []string, name, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// activity reports kind, if anyone listens.
// hangupHandled is where the helper's own SIGHUPs go (and are dropped), once unignoreHangup ran.
var hangupHandled = make(chan os.Signal, 1)

// unignoreHangup makes sure session commands can be hung up on. A helper started with SIGHUP
// ignored (an init script run under nohup, as hangar_agent's often is) would pass that to every
// command it starts, so that a dropped connection's commands never ended. A signal the process
// handles is reset to its default in the commands it starts (an ignored one is not), so the
// helper handles SIGHUP: it drops its own, as it ignored them before.
func unignoreHangup() {
	if signal.Ignored(syscall.SIGHUP) {
		signal.Notify(hangupHandled, syscall.SIGHUP)
	}
}

// TakeOutput returns the bytes session commands wrote to their clients since the last call.
func (s *Server) TakeOutput() int64 { return s.output.Swap(0) }

// counted is a writer that adds what it writes to n.
type counted struct {
	w io.Writer
	n *atomic.Int64
}

func (c counted) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (s *Server) activity(kind string) {
	if s.opts.Activity != nil {
		s.opts.Activity(kind)
	}
}

// tick reports ActivityOpen periodically while channels are open.
func (s *Server) tick() {
	defer s.wg.Done()
	ticks := s.opts.ActivityTicks
	if ticks == nil {
		t := time.NewTicker(s.opts.ActivityInterval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-s.stopTick:
			return
		case <-ticks:
			if s.open.Load() > 0 {
				s.activity(ActivityOpen)
			}
		}
	}
}

// SetNotice sets what every shell session is told first, on its standard error ("" for nothing):
// a failed postStart, for instance.
func (s *Server) SetNotice(msg string) { s.notice.Store(&msg) }

// AddNotice appends msg to the notice (the postStart commands' and the dotfiles' failures are
// told together).
func (s *Server) AddNotice(msg string) {
	for {
		old := s.notice.Load()
		n := msg
		if old != nil {
			n = *old + msg
		}
		if s.notice.CompareAndSwap(old, &n) {
			return
		}
	}
}

// Notice is what SetNotice set.
func (s *Server) Notice() string {
	if p := s.notice.Load(); p != nil {
		return *p
	}
	return ""
}

// OpenChannels is how many sessions and forwarded connections are open now.
func (s *Server) OpenChannels() int { return int(s.open.Load()) }

// Connections is how many connections are being served now (handshakes included).
func (s *Server) Connections() int { return len(s.slots) }

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("ssh server closed")

// Serve accepts connections on ln until Shutdown, and closes ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer ln.Close()
	err := netutil.Accept(ln, netutil.AcceptOptions{
		Slots: s.slots, WG: &s.wg, Serve: func(nc net.Conn) { s.serveConn(nc, s.config) },
		Closing: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.closing
		},
		Refused: func(nc net.Conn) {
			s.log.Warn("ssh connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max", s.opts.MaxConnections)
		},
	})
	s.mu.Lock()
	delete(s.listeners, ln)
	s.mu.Unlock()
	if errors.Is(err, netutil.ErrClosed) {
		return ErrServerClosed
	}
	return fmt.Errorf("ssh %w", err)
}

// Shutdown stops accepting, sends SIGTERM to the process group of every session command and waits
// for them to end; when ctx ends first, it sends them SIGKILL. Then it closes every connection,
// waits in the same way for any command still running, and waits for the server's goroutines.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.stopTick)
	}
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	s.signalProcs(syscall.SIGTERM)
	s.waitProcs(ctx)
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	for c := range s.streams {
		c.Close()
	}
	s.mu.Unlock()
	// A command that started while the first wait found none (it got its SIGTERM from track), or
	// one that ignores the hang-up of its closed connection, is waited for again: until ctx ends,
	// then killed, so that nothing holds the goroutines below past the grace period.
	s.waitProcs(ctx)
	s.wg.Wait()
}

func (s *Server) signalProcs(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.procs {
		_ = syscall.Kill(-p.Pid, sig)
	}
}

// track registers a running session command, so that Shutdown signals it; a command started while
// the server shuts down gets its SIGTERM at once.
func (s *Server) track(p *os.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[p] = struct{}{}
	if s.closing {
		_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	}
}

func (s *Server) untrack(p *os.Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, p)
	close(s.procExit)
	s.procExit = make(chan struct{})
}

// waitProcs waits until no session command runs; when ctx ends first, it kills those left.
func (s *Server) waitProcs(ctx context.Context) {
	killed := false
	for {
		s.mu.Lock()
		n, changed := len(s.procs), s.procExit
		s.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if !killed {
				s.log.Warn("session commands did not end in time; killing them", "left", n)
				s.signalProcs(syscall.SIGKILL)
				killed = true
			}
			ctx = context.Background()
		}
	}
}

// conn is one authenticated connection.
type conn struct {
	s        *Server
	sc       *ssh.ServerConn
	log      *slog.Logger
	ctx      context.Context // ends with the connection
	wg       sync.WaitGroup  // the connection's goroutines
	channels atomic.Int64

	mu       sync.Mutex
	forwards map[string]net.Listener // tcpip-forward listeners by "addr:port"
}

func (s *Server) serveConn(nc net.Conn, config *ssh.ServerConfig) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(nc, config)
	if err != nil {
		s.log.Debug("ssh handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		sc.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	key := "" // none on a trusted connection
	if sc.Permissions != nil {
		key = sc.Permissions.Extensions["pubkey-fp"]
	}
	c := &conn{
		s: s, sc: sc, ctx: ctx, forwards: map[string]net.Listener{},
		log: s.log.With("remote", nc.RemoteAddr().String(), "user", sc.User(), "key", key),
	}
	c.log.Info("ssh connection opened")
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.keepalive() }()
	go func() { defer c.wg.Done(); c.globalRequests(reqs) }()
	for nch := range chans {
		c.openChannel(nch)
	}
	// The connection is gone: end what belongs to it.
	cancel()
	sc.Close()
	c.closeForwards()
	c.wg.Wait()
	s.mu.Lock()
	delete(s.conns, sc)
	s.mu.Unlock()
	c.log.Info("ssh connection closed")
}

// keepalive closes the connection after KeepaliveCountMax intervals without a reply.
func (c *conn) keepalive() {
	t := time.NewTicker(c.s.opts.KeepaliveInterval)
	defer t.Stop()
	reply := make(chan error, 1)
	pending, missed := false, 0
	for {
		select {
		case <-c.ctx.Done():
			if pending {
				<-reply // the request fails once the connection is closed
			}
			return
		case err := <-reply:
			pending = false
			if err != nil {
				c.sc.Close()
				continue
			}
			missed = 0
		case <-t.C:
			if pending {
				missed++
				if missed >= c.s.opts.KeepaliveCountMax {
					c.log.Info("ssh client stopped answering keepalives; closing")
					c.sc.Close()
				}
				continue
			}
			pending = true
			go func() {
				_, _, err := c.sc.SendRequest("keepalive@openssh.com", true, nil)
				reply <- err
			}()
		}
	}
}

func (c *conn) globalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		switch req.Type {
		case "tcpip-forward":
			c.tcpipForward(req)
		case "cancel-tcpip-forward":
			c.cancelTCPIPForward(req)
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

// acquireChannel takes a channel slot of the connection (false when all are taken).
func (c *conn) acquireChannel() bool {
	if c.channels.Add(1) > int64(c.s.opts.MaxChannels) {
		c.channels.Add(-1)
		return false
	}
	c.s.open.Add(1)
	return true
}

func (c *conn) releaseChannel() {
	c.channels.Add(-1)
	c.s.open.Add(-1)
}

func (c *conn) openChannel(nch ssh.NewChannel) {
	switch nch.ChannelType() {
	case "session", "direct-tcpip":
	default:
		_ = nch.Reject(ssh.UnknownChannelType, "unsupported channel type")
		return
	}
	if !c.acquireChannel() {
		c.log.Warn("ssh channel refused: too many channels", "type", nch.ChannelType(), "max", c.s.opts.MaxChannels)
		_ = nch.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d channels per connection", c.s.opts.MaxChannels))
		return
	}
	switch nch.ChannelType() {
	case "session":
		ch, reqs, err := nch.Accept()
		if err != nil {
			c.releaseChannel()
			return
		}
		c.s.activity(ActivitySession)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer c.releaseChannel()
			c.serveSession(ch, reqs)
		}()
	case "direct-tcpip":
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer c.releaseChannel()
			c.directTCPIP(nch)
		}()
	}
}

// pipe copies between a channel and a TCP connection until both directions end (an EOF on one side
// is passed on as a half close) and closes both. When the client closes the channel (or the
// connection is gone), what it sent before is still delivered, and then the TCP connection is
// closed, which ends the other direction.
func pipe(ch ssh.Channel, reqs <-chan *ssh.Request, nc net.Conn) {
	toConn, toChan := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = io.Copy(nc, ch) // ends at the client's EOF, or once the channel is closed and drained
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(toConn)
	}()
	go func() {
		_, _ = io.Copy(ch, nc)
		_ = ch.CloseWrite()
		close(toChan)
	}()
	reqsDone := make(chan struct{})
	go func() { ssh.DiscardRequests(reqs); close(reqsDone) }()
	peer, a, b := reqsDone, toConn, toChan
	peerGone, connDone, closed := false, false, false
	for a != nil || b != nil {
		select {
		case <-a:
			a, connDone = nil, true
		case <-b:
			b = nil
		case <-peer:
			peer, peerGone = nil, true
		}
		if peerGone && connDone && !closed {
			nc.Close() // ends the copy to the channel, which nobody reads any more
			closed = true
		}
	}
	nc.Close()
	ch.Close()
	<-reqsDone
}
