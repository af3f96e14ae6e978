package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
	"github.com/hangar-dev/hangar/internal/wsmux"
)

// A Terraform workspace's apps in the browser (docs/decisions.md, "Terraform workspaces in the
// browser"): the server serves the hosts `<port>-<name>--<owner>.<apps zone>` itself, with the
// access proxy's handler (sign-in through /proxy/authorize, host-only cookies, the same checks,
// asked in process), and reaches the port on the workspace's machine through its helper's
// connection: a TCP stream of that helper's yamux session per connection to the app (a helper of
// version 2: docs/decisions.md, "The way in, faster"), or, for a version-1 helper, a direct-tcpip
// channel of one SSH connection of the server's own on a stream. The machine needs no inbound
// port, as for `hangar ssh`.

const (
	// appsActivityEvery is how often the use of one workspace's apps is written as activity.
	appsActivityEvery = 10 * time.Second
	// appsConnsPerWorkspace bounds the connections to one workspace's apps (the helper takes 256
	// channels on one SSH connection).
	appsConnsPerWorkspace = 128
	// AppsAuthCacheTTL is how long the apps handler trusts a decision: none, so that a revoked
	// token, a suspended user or an ended session is refused from the next request on (the check is
	// in process: a few queries).
	AppsAuthCacheTTL time.Duration = 0
)

// AppsOptions configure the serving of Terraform workspaces' apps.
type AppsOptions struct {
	// Zone is the DNS zone whose hosts `<port>-<name>--<owner>.<zone>` are Terraform workspaces'
	// apps (a wildcard record *.<zone> leads to the server); "" serves none.
	Zone string
	// Scheme is how browsers reach those hosts: "https" (the default; cookies are then Secure and
	// __Host- named) or "http".
	Scheme string
	// Port is the port browsers reach them on, "" for the scheme's own, for the addresses shown
	// to users (the hosts are served on whatever port the request came to).
	Port string
	// ServerURL is the server as browsers reach it: where a browser without a session is sent to
	// sign in.
	ServerURL string
	// MaxBodyBytes and WriteTimeout are the proxy's limits (proxy.Options); 0 takes the
	// proxy's defaults.
	MaxBodyBytes int64
	WriteTimeout time.Duration
}

// apps is the server's serving of Terraform workspaces' apps (nil handler: none).
type apps struct {
	zone, scheme, port string
	handler            *proxy.Handler

	mu       sync.Mutex
	recorded map[string]time.Time // workspace id → when its apps' use was last written
}

// inZone reports whether h is a host of the apps zone.
func (a *apps) inZone(h workspaceHost) bool {
	return a != nil && a.zone != "" && strings.EqualFold(h.zone, a.zone)
}

// serves reports whether the server's apps handler serves the request's host: the zone and every
// name under it (those that name no workspace get its "No such workspace"), never the server's
// own pages.
func (a *apps) serves(r *http.Request) bool {
	if a == nil || a.handler == nil {
		return false
	}
	name, _, ok := workspace.NormalizeHost(r.Host)
	return ok && (name == a.zone || strings.HasSuffix(name, "."+a.zone))
}

// appsURLTemplate is the address of a Terraform workspace's apps, with {port} for the port, ""
// when the server serves no apps.
func (s *Server) appsURLTemplate(ws workspace.Workspace) string {
	if s.apps == nil {
		return ""
	}
	host := "{port}-" + strings.TrimPrefix(workspace.HostLabel(1, ws.Name, ws.OwnerName), "1-") + "." + s.apps.zone
	if s.apps.port != "" {
		host += ":" + s.apps.port
	}
	return s.apps.scheme + "://" + host + "/"
}

func (s *Server) newApps(o AppsOptions) *apps {
	zone := strings.ToLower(strings.TrimSuffix(o.Zone, "."))
	if zone == "" {
		return nil
	}
	a := &apps{zone: zone, scheme: "https", port: o.Port, recorded: map[string]time.Time{}}
	if o.Scheme == "http" {
		a.scheme = "http"
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = proxy.DefaultMaxBodyBytes
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Minute
	}
	inProcess := appsServer{s}
	a.handler = proxy.NewHandler(proxy.Options{
		Routes:       appsRoutes{s},
		Auth:         &proxy.Auth{Checker: inProcess, Clock: s.clock, AllowTTL: AppsAuthCacheTTL, DenyTTL: time.Second, MaxEntries: 100000},
		Exchanger:    inProcess,
		ServerURL:    o.ServerURL,
		Zone:         zone,
		TLS:          a.scheme == "https",
		MaxBodyBytes: o.MaxBodyBytes,
		WriteTimeout: o.WriteTimeout,
		Logger:       s.log.With("component", "apps"),
		Clock:        s.clock,
		Dial:         s.dialApp,
		Transport:    appsTransport(s.dialApp),
		Activity:     s.appsActivity,
		// The apps zone is not behind harden: its checks count refused tokens against the
		// client's address as --trusted-proxies says it (proxylimit.go).
		ClientAddr: s.clientAddr,
	})
	return a
}

// appsTransport is the proxy's transport through dial, with at most half of a workspace's
// connections kept for plain requests (more wait for one), the other half for WebSockets.
func appsTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	t := proxy.NewTransport()
	t.DialContext = dial
	t.MaxConnsPerHost = appsConnsPerWorkspace / 2
	t.MaxIdleConnsPerHost = appsConnsPerWorkspace / 4
	return t
}

// appsServer answers the apps handler's questions in process, as the server answers a proxy's.
type appsServer struct{ s *Server }

func (p appsServer) Check(ctx context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error) {
	resp, err := p.s.checkAccess(ctx, accessScope{terraform: true}, req)
	return resp, asStatusError(err)
}

func (p appsServer) Exchange(ctx context.Context, req protocol.ProxyExchangeRequest) (protocol.ProxyExchangeResponse, error) {
	resp, err := p.s.exchangeCode(ctx, accessScope{terraform: true}, req)
	return resp, asStatusError(err)
}

// asStatusError gives an API error the form a proxy sees over HTTP, which the handler tells
// refusals (4xx) from failures by.
func asStatusError(err error) error {
	if err == nil {
		return nil
	}
	if status, body := statusOf(err); status < 500 {
		return &apiclient.StatusError{Code: status, Body: body.Message, ErrorCode: body.Code}
	}
	return err
}

// appsRoutes routes an apps host to its workspace's connected helper: the route's address is the
// workspace id and the port, which dialApp reaches.
type appsRoutes struct{ s *Server }

func (r appsRoutes) Lookup(host string) proxy.Route {
	h, ok := parseWorkspaceHost(host)
	if !ok {
		return proxy.Route{}
	}
	if ac := r.s.agents.byRef(h.owner, h.name); ac != nil {
		return proxy.Route{Known: true, Addr: net.JoinHostPort(ac.workspaceID, fmt.Sprint(h.port)), WorkspaceID: ac.workspaceID}
	}
	// Not connected here: say why, if more than "stopped" is to be said.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := r.s.hostWorkspace(ctx, h)
	if err != nil {
		return proxy.Route{}
	}
	ref := ws.OwnerName + "/" + ws.Name
	if c, err := r.s.store.WorkspaceAgentConnection(ctx, ws.ID); err == nil && c.Replica != r.s.replica {
		return proxy.Route{Known: true, WorkspaceID: ws.ID, Why: fmt.Sprintf("The machine of workspace %s is connected to another Hangar server replica (%s, since %s), which takes no relayed connections. Try again in a moment, or give every replica --relay-url.",
			ref, c.Replica, c.ConnectedAt.Format(time.RFC3339))}
	}
	if ws.ActualState != workspace.Running {
		return proxy.Route{} // "not running (it is ...)"
	}
	return proxy.Route{Known: true, WorkspaceID: ws.ID, Why: fmt.Sprintf("Workspace %s is running, but its machine's Hangar helper is not connected: it may still be starting, or the machine did not run hangar_agent's init script. `hangar logs %s` shows the build.", ref, ref)}
}

// appsElsewhere tells whether r, for an apps host, goes to a workspace whose helper another
// replica holds and takes relayed connections for (relay.go), and carries a credential allowed
// there. Everything else (signing in, the callback, refusals) is served here, from the shared
// store: only what would reach the workspace is relayed.
func (s *Server) appsElsewhere(r *http.Request) (store.AgentConnection, bool) {
	h, ok := parseWorkspaceHost(r.Host)
	if !ok || r.Header.Get(RelayHeader) != "" || s.agents.byRef(h.owner, h.name) != nil || !s.apps.handler.Allowed(r) {
		return store.AgentConnection{}, false
	}
	ws, err := s.hostWorkspace(r.Context(), h)
	if err != nil || ws.Backend != workspace.KindTerraform {
		return store.AgentConnection{}, false
	}
	return s.remoteHelper(r.Context(), r, ws.ID)
}

// dialApp opens a TCP connection to a port on a workspace's machine (addr: workspace id and
// port) through its helper.
func (s *Server) dialApp(ctx context.Context, _, addr string) (net.Conn, error) {
	id, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ac := s.agents.get(id)
	if ac == nil {
		return nil, errors.New("the workspace's helper is not connected")
	}
	select {
	case ac.appConns <- struct{}{}:
	default:
		return nil, fmt.Errorf("the workspace's apps have %d connections open, the most there may be", appsConnsPerWorkspace)
	}
	var nc net.Conn
	if ac.v2 {
		nc, err = ac.dialTCP(ctx, port)
	} else {
		nc, err = ac.dialOverSSH(ctx, port)
	}
	if err != nil {
		<-ac.appConns
		return nil, err
	}
	return &appConn{Conn: nc, release: func() { <-ac.appConns }}, nil
}

// dialTCP opens a stream of a version-2 connection to the port: the helper connects to it on
// the machine's loopback address and relays, with no SSH between (docs/decisions.md, "The way in,
// faster").
func (c *agentConn) dialTCP(ctx context.Context, port string) (net.Conn, error) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, fmt.Errorf("connect to port %s on the workspace's machine: not a port", port)
	}
	stream, err := c.openStream(wsmux.StreamHeader{Kind: wsmux.KindTCP, Port: uint16(p)})
	if err != nil {
		return nil, fmt.Errorf("open a stream to the workspace's helper: %w", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = stream.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { stream.Close() })
	err = wsmux.ReadReply(stream)
	if !stop() && err == nil {
		err = ctx.Err() // the stream was closed as ctx ended
	}
	if err != nil {
		stream.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("connect to port %s on the workspace's machine: %w", port, err)
	}
	_ = stream.SetReadDeadline(time.Time{})
	return stream, nil
}

// dialOverSSH opens a direct-tcpip channel to the port on the server's SSH connection to a
// version-1 helper.
func (c *agentConn) dialOverSSH(ctx context.Context, port string) (net.Conn, error) {
	client, err := c.appsClient(ctx)
	if err != nil {
		return nil, err
	}
	nc, err := client.DialContext(ctx, "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		return nil, fmt.Errorf("connect to port %s on the workspace's machine: %w", port, err)
	}
	return nc, nil
}

// appConn is a connection to an app, which gives its slot back once closed.
type appConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *appConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// appsClient returns the server's SSH connection to a version-1 helper, opening it on first use
// (and again once it ended). The helper serves it as a trusted stream (wshelper ServeTrusted): the
// helper authenticated with its token when it connected, so neither side has a key to show; the
// host key is not checked for the same reason.
func (c *agentConn) appsClient(ctx context.Context) (*ssh.Client, error) {
	c.appsMu.Lock()
	defer c.appsMu.Unlock()
	if c.apps != nil {
		return c.apps, nil
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, fmt.Errorf("the workspace's helper has %d connections open, the most there may be", maxStreamsPerHelper)
	}
	release := func() { <-c.slots }
	stream, err := c.openStream(wsmux.StreamHeader{Kind: wsmux.KindSSH})
	if err != nil {
		release()
		return nil, fmt.Errorf("open a stream to the workspace's helper: %w", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = stream.SetDeadline(deadline)
	cc, chans, reqs, err := ssh.NewClientConn(stream, "workspace-helper", &ssh.ClientConfig{
		User:            "hangar-apps",
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // the stream is the helper's own token-authenticated connection
		Timeout:         15 * time.Second,
	})
	if err != nil {
		stream.Close()
		release()
		return nil, fmt.Errorf("ssh to the workspace's helper: %w", err)
	}
	_ = stream.SetDeadline(time.Time{})
	client := ssh.NewClient(cc, chans, reqs)
	c.apps = client
	go func() {
		_ = client.Wait()
		c.appsMu.Lock()
		if c.apps == client {
			c.apps = nil
		}
		c.appsMu.Unlock()
		release()
	}()
	return client, nil
}

// appsActivity writes a workspace's apps' use as its activity, at most every appsActivityEvery.
func (s *Server) appsActivity(workspaceID, _ string) {
	now := s.clock.Now()
	s.apps.mu.Lock()
	if last, ok := s.apps.recorded[workspaceID]; ok && now.Sub(last) < appsActivityEvery {
		s.apps.mu.Unlock()
		return
	}
	s.apps.recorded[workspaceID] = now
	if len(s.apps.recorded) > 100000 { // forget the old ones rather than grow without bound
		for id, at := range s.apps.recorded {
			if now.Sub(at) >= appsActivityEvery {
				delete(s.apps.recorded, id)
			}
		}
	}
	s.apps.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.recordActivity(ctx, workspaceID)
	}()
}
