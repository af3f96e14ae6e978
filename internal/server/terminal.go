package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
	"github.com/hangar-dev/hangar/internal/wsmux"
)

// The workspace page's terminal (docs/decisions.md, "Inside the workspace: the terminal in the
// browser"): GET /api/v1/workspaces/{name}/terminal, a WebSocket (protocol.TerminalSubprotocol).
// The server opens a shell with a terminal in the workspace by the way `hangar ssh` enters it,
// with the caller's own credential: a Kubernetes workspace through the access proxy's SSH (which
// asks ssh-check, and rechecks, as for any SSH client), a Terraform workspace through a new stream
// of its helper's connection (as GET .../ssh). It adds no way in of its own: what a user may do
// with `hangar ssh` they may do here, and nothing else.

const (
	// terminalDialTimeout bounds connecting to the proxy's SSH (or the helper) and its handshake.
	terminalDialTimeout = 15 * time.Second
	// terminalTERM is the terminal type the shell is told: xterm.js emulates it.
	terminalTERM = "xterm-256color"
)

// sameOriginUpgrade tells why a WebSocket opened with the session cookie does not come from this
// server's own page ("" when it does). The cookie goes with a cross-site page's WebSocket too
// (SameSite=Lax does not stop a same-site one, such as a workspace's app on a sibling host), and
// http.CrossOriginProtection lets every GET through: the Origin, which browsers always send on a
// WebSocket and pages cannot forge, must be this host, and Sec-Fetch-Site, when sent, same-origin.
func sameOriginUpgrade(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "Sec-Fetch-Site is " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "no Origin header"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "Origin " + origin + " is not this server's"
	}
	want := "http"
	if secureRequest(r) {
		want = "https"
	}
	if u.Scheme != want {
		return "Origin " + origin + " is not this server's (want " + want + ")"
	}
	return ""
}

// terminalSize reads the terminal's first size from the query (cols, rows; default 80×24).
func terminalSize(r *http.Request) (cols, rows int, err error) {
	v := &workspace.ValidationError{}
	read := func(name string, def, most int) int {
		s := r.URL.Query().Get(name)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > most {
			v.Add(name, "must be a number from 1 to %d, got %q", most, s)
		}
		return n
	}
	cols = read("cols", 80, protocol.MaxTerminalCols)
	rows = read("rows", 24, protocol.MaxTerminalRows)
	return cols, rows, v.Err()
}

// workspaceTerminal serves GET /api/v1/workspaces/{name}/terminal.
func (s *Server) workspaceTerminal(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	if _, byToken := bearer(r); !byToken {
		if why := sameOriginUpgrade(r); why != "" {
			s.log.Info("terminal refused: cross-origin", "user", u.Username, "why", why)
			return errForbidden("cross-origin terminal refused: " + why + "; the terminal opens from this server's own workspace page")
		}
	}
	if !isWebSocket(r) {
		return errBadRequest("this endpoint takes a WebSocket: the workspace page's terminal (subprotocol " + protocol.TerminalSubprotocol + ")")
	}
	cols, rows, err := terminalSize(r)
	if err != nil {
		return err
	}
	ws, err := s.readWorkspace(r, u)
	if err != nil {
		return err
	}
	ref := ws.OwnerName + "/" + ws.Name
	if ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return errConflict("workspace "+ref+" is deleted", "")
	}
	release, err := s.openStream(w, r, "user:"+u.ID, 0)
	if err != nil {
		return err
	}
	defer release()

	// Where the shell is to be had. What cannot be reached now is told on the terminal (a page
	// cannot read a refused upgrade's body), and the page tries again.
	var dial func(ctx context.Context) (*ssh.Client, error)
	unavailable := ""
	switch ws.Backend {
	case workspace.KindTerraform:
		ac := s.agents.get(ws.ID)
		if ac == nil {
			if c, ok := s.remoteHelper(r.Context(), r, ws.ID); ok {
				s.relay(w, r, c, false)
				return nil
			}
			unavailable = "The workspace's helper is not connected (is its machine running?); workspace " + ref + " is " + string(ws.ActualState) + "."
			break
		}
		dial = func(ctx context.Context) (*ssh.Client, error) { return ac.terminalClient(ctx, ref) }
	case workspace.KindKubernetes:
		if ws.ActualState != workspace.Running {
			unavailable = "Workspace " + ref + " is " + string(ws.ActualState) + ": start it to open a terminal."
			break
		}
		dial, unavailable, err = s.proxyTerminalDialer(r, ws)
		if err != nil {
			return err
		}
	default:
		return errConflict("workspace "+ref+" runs on "+string(ws.Backend), "the terminal reaches Kubernetes and Terraform workspaces")
	}

	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.TerminalSubprotocol}})
	if err != nil {
		return nil // Accept answered
	}
	defer c.CloseNow()
	if c.Subprotocol() != protocol.TerminalSubprotocol {
		c.Close(websocket.StatusPolicyViolation, "want the subprotocol "+protocol.TerminalSubprotocol)
		return nil
	}
	c.SetReadLimit(protocol.MaxTerminalDataBytes)
	ctx, cancel := s.untilShutdown(r)
	defer cancel()
	log := s.log.With("workspace", ref, "user", u.Username)
	t := &terminal{c: c}
	if unavailable != "" {
		t.end(ctx, protocol.TerminalUnavailable, unavailable)
		return nil
	}
	dctx, dcancel := context.WithTimeout(ctx, terminalDialTimeout)
	client, err := dial(dctx)
	dcancel()
	if err != nil {
		log.Info("terminal: cannot reach the workspace", "err", err)
		t.end(ctx, protocol.TerminalUnavailable, "Cannot reach workspace "+ref+": "+err.Error())
		return nil
	}
	defer client.Close()
	sess, err := client.NewSession()
	var stdin io.WriteCloser
	var stdout io.Reader
	if err == nil {
		stdin, err = sess.StdinPipe()
	}
	if err == nil {
		stdout, err = sess.StdoutPipe()
	}
	if err == nil {
		err = sess.RequestPty(terminalTERM, rows, cols, ssh.TerminalModes{ssh.ECHO: 1})
	}
	if err == nil {
		err = sess.Shell()
	}
	if err != nil {
		log.Info("terminal: cannot open a shell", "err", err)
		t.end(ctx, protocol.TerminalUnavailable, "Cannot open a shell in workspace "+ref+": "+err.Error())
		return nil
	}
	log.Info("terminal opened", "cols", cols, "rows", rows)
	s.recordActivity(ctx, ws.ID)

	// The shell's output to the page; then how it ended.
	exited := make(chan error, 1)
	go func() {
		buf := make([]byte, protocol.MaxTerminalDataBytes)
		for {
			n, err := stdout.Read(buf)
			if n > 0 {
				if werr := c.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					client.Close()
					break
				}
			}
			if err != nil {
				break
			}
		}
		exited <- sess.Wait()
	}()
	// The page's keys and resizes to the shell.
	input := make(chan error, 1)
	go func() {
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				input <- err
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := stdin.Write(b); err != nil {
					input <- err
					return
				}
				continue
			}
			ctl, err := protocol.DecodeTerminalControl(b)
			if err != nil {
				c.Close(websocket.StatusInvalidFramePayloadData, "bad control frame")
				input <- err
				return
			}
			if err := sess.WindowChange(ctl.Rows, ctl.Cols); err != nil {
				input <- err
				return
			}
		}
	}()

	revoked, unsubscribe := s.store.SubscribeRevocations()
	defer unsubscribe()
	for {
		select {
		case err := <-exited:
			var ee *ssh.ExitError
			switch {
			case err == nil:
				t.end(ctx, protocol.TerminalExit, "")
			case errors.As(err, &ee):
				t.endCode(ctx, ee.ExitStatus())
			default:
				// The connection to the workspace ended under the shell: the proxy, which rechecks
				// too, may have cut it for the same reason this server would.
				if why := s.stillAllowed(context.WithoutCancel(ctx), r, u, ws.ID); why != "" {
					t.end(ctx, protocol.TerminalEnded, accessEnded(why))
				} else {
					t.end(ctx, protocol.TerminalUnavailable, "The connection to workspace "+ref+" was lost (the workspace stopped, or its network failed).")
				}
			}
			log.Info("terminal closed", "err", err)
			s.recordActivity(context.WithoutCancel(ctx), ws.ID)
			return nil
		case err := <-input:
			log.Info("terminal closed by the page", "err", err)
			return nil
		case <-ctx.Done():
			t.end(context.Background(), protocol.TerminalUnavailable, "The server is stopping.")
			return nil
		case <-revoked:
			if why := s.stillAllowed(ctx, r, u, ws.ID); why != "" {
				log.Info("closing a terminal: access ended", "why", why)
				t.end(ctx, protocol.TerminalEnded, accessEnded(why))
				return nil
			}
		case <-s.recheckAfter(s.recheck):
			s.recordActivity(ctx, ws.ID)
			if why := s.stillAllowed(ctx, r, u, ws.ID); why != "" {
				log.Info("closing a terminal: access ended", "why", why)
				t.end(ctx, protocol.TerminalEnded, accessEnded(why))
				return nil
			}
		}
	}
}

func accessEnded(why string) string {
	return "Your access to this workspace ended: " + why + "."
}

// terminal is the page's side of one terminal: how it is told the end.
type terminal struct{ c *websocket.Conn }

func (t *terminal) end(ctx context.Context, typ, msg string) {
	t.send(ctx, protocol.TerminalEvent{Type: typ, Message: msg})
}

func (t *terminal) endCode(ctx context.Context, code int) {
	t.send(ctx, protocol.TerminalEvent{Type: protocol.TerminalExit, Code: code})
}

func (t *terminal) send(ctx context.Context, ev protocol.TerminalEvent) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := writeTerminalEvent(wctx, t.c, ev); err == nil {
		t.c.Close(websocket.StatusNormalClosure, ev.Type)
	}
}

func writeTerminalEvent(ctx context.Context, c *websocket.Conn, ev protocol.TerminalEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}

// proxyTerminalDialer connects to the proxy's SSH of the workspace's agent, as `hangar ssh` does,
// with the request's own credential as the password: the bearer token, or the session cookie's
// server session (which ssh-check takes for the same user). The proxy's host key must be the
// agent config's proxy_ssh_host_key. What is missing for it is told as unavailable.
func (s *Server) proxyTerminalDialer(r *http.Request, ws workspace.Workspace) (func(context.Context) (*ssh.Client, error), string, error) {
	agent, err := s.store.AgentByName(r.Context(), ws.AgentName)
	if err != nil {
		return nil, "", fmt.Errorf("read agent %s: %w", ws.AgentName, err)
	}
	cfg := agent.Config
	key, err := cfg.ParsedProxySSHHostKey()
	switch {
	case cfg.ProxySSHAddress == "":
		return nil, "Agent " + agent.Name + " has no proxy_ssh_address: its workspaces have no SSH, and no terminal (ask an admin).", nil
	case err != nil || key == nil:
		return nil, "Agent " + agent.Name + " has no proxy_ssh_host_key: the server cannot check the proxy it would connect to (ask an admin to set it).", nil
	}
	password, ok := bearer(r)
	if !ok {
		cookie, err := r.Cookie(sessionCookie(r))
		if err != nil {
			return nil, "", errUnauthorized("no credential")
		}
		password = cookie.Value
	}
	addr := cfg.ProxySSHAddress
	user := ws.OwnerName + "/" + ws.Name
	return func(ctx context.Context) (*ssh.Client, error) {
		d := net.Dialer{}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("connect to the access proxy's SSH: %w", err)
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = nc.SetDeadline(dl)
		}
		var banner strings.Builder
		sc, chans, reqs, err := ssh.NewClientConn(nc, addr, &ssh.ClientConfig{
			User: user, Auth: []ssh.AuthMethod{ssh.Password(password)}, HostKeyCallback: ssh.FixedHostKey(key),
			BannerCallback: func(m string) error { banner.WriteString(m); return nil },
		})
		if err != nil {
			nc.Close()
			if msg := strings.TrimSpace(banner.String()); msg != "" {
				return nil, errors.New(strings.TrimPrefix(msg, "hangar: "))
			}
			return nil, fmt.Errorf("ssh through the access proxy: %w", err)
		}
		_ = nc.SetDeadline(time.Time{})
		return ssh.NewClient(sc, chans, reqs), nil
	}, "", nil
}

// terminalClient opens an SSH connection to the helper on a new stream of its connection, in one
// of its slots (as a user's GET .../ssh takes one), given back when the connection ends. The
// stream is the helper's own token-authenticated connection: the helper asks nothing more (as
// for appsClient), and its host key is not checked for the same reason.
func (c *agentConn) terminalClient(ctx context.Context, ref string) (*ssh.Client, error) {
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, fmt.Errorf("the workspace has %d connections open, the most there may be", maxStreamsPerHelper)
	}
	release := func() { <-c.slots }
	stream, err := c.openStream(wsmux.StreamHeader{Kind: wsmux.KindSSH})
	if err != nil {
		release()
		return nil, fmt.Errorf("the workspace's helper is not connected: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = stream.SetDeadline(dl)
	}
	cc, chans, reqs, err := ssh.NewClientConn(stream, "workspace-helper", &ssh.ClientConfig{
		User:            ref,
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // the stream is the helper's own token-authenticated connection
	})
	if err != nil {
		stream.Close()
		release()
		return nil, fmt.Errorf("ssh to the workspace's helper: %w", err)
	}
	_ = stream.SetDeadline(time.Time{})
	client := ssh.NewClient(cc, chans, reqs)
	go func() { _ = client.Wait(); release() }()
	return client, nil
}
