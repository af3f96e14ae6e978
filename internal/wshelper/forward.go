//go:build unix

package wshelper

import (
	"fmt"
	"net"
	"strconv"

	"golang.org/x/crypto/ssh"
)

// directTCPIP serves local port forwarding (`ssh -L`, `hangar port-forward`): it connects to the
// host and port the client names, from inside the workspace. Any port of any host the pod can reach
// may be asked for; what limits it is the pod's network boundary (the workspace's NetworkPolicy),
// not the helper, since a client that got in could run the same connection from a shell.
func (c *conn) directTCPIP(nch ssh.NewChannel) {
	t, err := parseForwardTarget(nch.ExtraData())
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	addr := net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port)))
	d := net.Dialer{Timeout: c.s.opts.HandshakeTimeout}
	nc, err := d.DialContext(c.ctx, "tcp", addr)
	if err != nil {
		c.log.Info("ssh port forward: cannot connect", "to", addr, "err", err)
		_ = nch.Reject(ssh.ConnectionFailed, fmt.Sprintf("connect to %s: %v", addr, err))
		return
	}
	ch, reqs, err := nch.Accept()
	if err != nil {
		nc.Close()
		return
	}
	c.s.activity(ActivityForward)
	c.log.Debug("ssh port forward", "to", addr)
	pipe(ch, reqs, nc)
}

// tcpipForward serves remote port forwarding (`ssh -R`): it listens inside the workspace and opens
// a "forwarded-tcpip" channel to the client for every connection. An empty address listens on all
// of the pod's addresses; port 0 picks a free port, sent back in the reply.
func (c *conn) tcpipForward(req *ssh.Request) {
	f, err := parseForwardRequest(req.Payload)
	if err != nil {
		_ = req.Reply(false, nil)
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.BindAddr, strconv.Itoa(int(f.BindPort))))
	if err != nil {
		c.log.Info("ssh remote forward: cannot listen", "addr", f.BindAddr, "port", f.BindPort, "err", err)
		_ = req.Reply(false, nil)
		return
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	key := net.JoinHostPort(f.BindAddr, strconv.Itoa(int(port)))
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		ln.Close()
		_ = req.Reply(false, nil)
		return
	}
	c.forwards[key] = ln
	c.mu.Unlock()
	var reply []byte
	if f.BindPort == 0 {
		reply = ssh.Marshal(struct{ Port uint32 }{port})
	}
	_ = req.Reply(true, reply)
	c.log.Info("ssh remote forward", "listen", ln.Addr().String())
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return // closed by cancel-tcpip-forward or the connection's end
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				c.forwarded(f.BindAddr, port, nc)
			}()
		}
	}()
}

// forwarded opens a "forwarded-tcpip" channel for a connection accepted on a remote forward.
func (c *conn) forwarded(bindAddr string, port uint32, nc net.Conn) {
	if !c.acquireChannel() {
		nc.Close()
		return
	}
	defer c.releaseChannel()
	origin := nc.RemoteAddr().(*net.TCPAddr)
	payload := ssh.Marshal(struct {
		Addr       string
		Port       uint32
		OriginAddr string
		OriginPort uint32
	}{bindAddr, port, origin.IP.String(), uint32(origin.Port)})
	ch, reqs, err := c.sc.OpenChannel("forwarded-tcpip", payload)
	if err != nil {
		nc.Close()
		return
	}
	c.s.activity(ActivityForward)
	pipe(ch, reqs, nc)
}

func (c *conn) cancelTCPIPForward(req *ssh.Request) {
	f, err := parseForwardRequest(req.Payload)
	if err != nil {
		_ = req.Reply(false, nil)
		return
	}
	key := net.JoinHostPort(f.BindAddr, strconv.Itoa(int(f.BindPort)))
	c.mu.Lock()
	ln, ok := c.forwards[key]
	delete(c.forwards, key)
	c.mu.Unlock()
	if ok {
		ln.Close()
	}
	_ = req.Reply(ok, nil)
}

// closeForwards closes the connection's remote-forward listeners.
func (c *conn) closeForwards() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, ln := range c.forwards {
		ln.Close()
		delete(c.forwards, k)
	}
}
