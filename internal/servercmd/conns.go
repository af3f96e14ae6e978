package servercmd

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// The server's connections (docs/decisions.md, "Server hardening"): every ordinary request is
// bounded in time (timeouts, below), idle connections are closed after IdleTimeout, and one client
// address holds at most MaxConnsPerAddress connections at once. A new connection from an address at
// its cap closes that address's oldest connection that is idle (or has not sent a request yet), so
// a client holding thousands of idle connections cannot crowd out the others, and a busy NAT is
// not refused while some of its connections idle; only when all of them are busy is the new one
// refused.

// Timeouts of the http.Server. Long-polls, streams and WebSockets lift the read and write timeouts
// for their own request (server.openStream).
const (
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request: a template's archive (16 MiB at most) takes it at
	// 140 KB/s.
	ReadTimeout  = 2 * time.Minute
	WriteTimeout = 2 * time.Minute
	IdleTimeout  = 90 * time.Second
)

// DefaultMaxConnsPerAddress is --max-conns-per-address's default: far above what one client opens
// (a browser opens 6 connections per host over HTTP/1.1, one over HTTP/2), room for a NAT.
const DefaultMaxConnsPerAddress = 512

// connLimiter caps the connections per client address (the TCP peer; trusted proxies are not
// capped: they carry many clients). Its listener counts connections in, ConnState tells which are
// idle, and closing a connection counts it out.
type connLimiter struct {
	max     int
	trusted []netip.Prefix
	log     *slog.Logger

	mu     sync.Mutex
	byAddr map[netip.Addr]*list.List // of *trackedConn, oldest first
}

type trackedConn struct {
	net.Conn
	l     *connLimiter
	addr  netip.Addr
	elem  *list.Element // nil once counted out
	state http.ConnState
	once  sync.Once
}

func newConnLimiter(max int, trusted []netip.Prefix, log *slog.Logger) *connLimiter {
	return &connLimiter{max: max, trusted: trusted, log: log, byAddr: map[netip.Addr]*list.List{}}
}

// listener wraps ln so that its connections are counted.
func (l *connLimiter) listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := ln.l.admit(c); ok {
			return tc, nil
		}
	}
}

// admit counts c in, closing its address's oldest idle connection when the address is at its cap,
// or closes c itself when none of them is idle.
func (l *connLimiter) admit(c net.Conn) (net.Conn, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return c, true // not TCP (a test's pipe): nothing to count
	}
	addr := ap.Addr().Unmap()
	for _, p := range l.trusted {
		if p.Contains(addr) {
			return c, true
		}
	}
	tc := &trackedConn{Conn: c, l: l, addr: addr}
	l.mu.Lock()
	conns := l.byAddr[addr]
	if conns == nil {
		conns = list.New()
		l.byAddr[addr] = conns
	}
	var victim *trackedConn
	if conns.Len() >= l.max {
		for e := conns.Front(); e != nil; e = e.Next() {
			if o := e.Value.(*trackedConn); o.state == http.StateNew || o.state == http.StateIdle {
				victim = o
				break
			}
		}
		if victim == nil {
			l.mu.Unlock()
			l.log.Warn("connection refused: the client's address has its most connections open, all busy", "client", addr.String(), "max", l.max)
			_ = c.Close()
			return nil, false
		}
		l.forget(victim)
	}
	tc.elem = conns.PushBack(tc)
	l.mu.Unlock()
	if victim != nil {
		l.log.Debug("closed a client's oldest idle connection: its address has its most connections open", "client", addr.String(), "max", l.max)
		_ = victim.Conn.Close()
	}
	return tc, true
}

// forget counts c out. Its caller holds mu.
func (l *connLimiter) forget(c *trackedConn) {
	if c.elem == nil {
		return
	}
	conns := l.byAddr[c.addr]
	conns.Remove(c.elem)
	c.elem = nil
	if conns.Len() == 0 {
		delete(l.byAddr, c.addr)
	}
}

// connState is the http.Server's ConnState hook: it records which connections are idle.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = tc.NetConn()
	}
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tc.state = state
	if state == http.StateClosed {
		l.forget(tc)
	}
}

// open returns how many connections addr has open.
func (l *connLimiter) open(addr netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if conns := l.byAddr[addr]; conns != nil {
		return conns.Len()
	}
	return 0
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
