package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
	"github.com/hangar-dev/hangar/internal/wsmux"
)

// Terraform workspaces' helpers connect out to the server (docs/decisions.md, "Terraform
// workspaces: the helper connects out"): GET protocol.WorkspaceAgentConnectPath with the helper's
// token opens a WebSocket the server multiplexes with yamux; GET /api/v1/workspaces/{name}/ssh
// (a user's token, owner or admin) opens a WebSocket whose bytes the server relays to a new stream
// of that workspace's helper, which speaks SSH on it. The live helpers are kept in memory, per
// server process (agentRegistry): with several replicas, a user must reach the replica the helper
// is connected to.

const (
	// DefaultConnRecheckInterval is how often open helper and user connections are checked again
	// (the token still valid, the workspace not deleted, the user still allowed), and how often an
	// open user connection records activity.
	DefaultConnRecheckInterval = 30 * time.Second
	// maxStreamsPerHelper bounds the user connections relayed to one helper at once.
	maxStreamsPerHelper = 64
	// maxAgentTokenLen bounds a helper token (they are 47 characters).
	maxAgentTokenLen = 200
)

// agentConn is one connected helper.
type agentConn struct {
	workspaceID string
	ref         string // owner/name, which a workspace keeps for life
	sess        *yamux.Session
	v2          bool          // protocol.WorkspaceAgentSubprotocolV2: streams begin with a wsmux.StreamHeader
	slots       chan struct{} // one per relayed user connection, and one for apps over SSH (version 1)

	appsMu   sync.Mutex
	apps     *ssh.Client   // the server's own SSH connection for the workspace's apps (apps.go)
	appConns chan struct{} // one per connection to an app (appsConnsPerWorkspace)
}

// agentRegistry is the helpers connected to this process, by workspace id (and by owner/name). A
// helper connecting again replaces (and closes) its older connection.
type agentRegistry struct {
	mu   sync.Mutex
	live map[string]*agentConn
	refs map[string]*agentConn
}

func (g *agentRegistry) put(c *agentConn) {
	g.mu.Lock()
	old := g.live[c.workspaceID]
	g.live[c.workspaceID] = c
	if g.refs == nil {
		g.refs = map[string]*agentConn{}
	}
	g.refs[c.ref] = c
	g.mu.Unlock()
	if old != nil {
		old.sess.Close()
	}
}

// remove forgets c unless a newer connection replaced it, and tells whether it did.
func (g *agentRegistry) remove(c *agentConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.live[c.workspaceID] != c {
		return false
	}
	delete(g.live, c.workspaceID)
	if g.refs[c.ref] == c {
		delete(g.refs, c.ref)
	}
	return true
}

// byRef returns the live connection of the workspace owner/name, nil if none.
func (g *agentRegistry) byRef(owner, name string) *agentConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.refs[owner+"/"+name]
	if c == nil || c.sess.IsClosed() {
		return nil
	}
	return c
}

func (g *agentRegistry) get(workspaceID string) *agentConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.live[workspaceID]
	if c != nil && c.sess.IsClosed() {
		return nil
	}
	return c
}

// helperOf is the workspace whose helper sent r (its bearer token), or why r admits none; the token
// is returned for the callers that check it again later.
func (s *Server) helperOf(r *http.Request) (workspace.Workspace, string, error) {
	token, ok := bearer(r)
	if !ok {
		return workspace.Workspace{}, "", errUnauthorized("missing bearer token: send Authorization: Bearer <helper token>")
	}
	ws, err := s.helperWorkspace(r.Context(), token)
	return ws, token, err
}

// helperWorkspace is the workspace a helper token admits, or why it admits none.
func (s *Server) helperWorkspace(ctx context.Context, token string) (workspace.Workspace, error) {
	if strings.HasPrefix(token, workspace.KubeHelperTokenPrefix) {
		ws, verified, err := s.kubeHelperWorkspace(ctx, token)
		if verified {
			return ws, err
		}
		// A Terraform helper's random token may begin so too (one in 2^18): its hash decides.
		if tws, terr := s.terraformHelperWorkspace(ctx, token); terr == nil {
			return tws, nil
		}
		return workspace.Workspace{}, err
	}
	return s.terraformHelperWorkspace(ctx, token)
}

// terraformHelperWorkspace is the Terraform workspace a hangar_agent token admits, or why it
// admits none.
func (s *Server) terraformHelperWorkspace(ctx context.Context, token string) (workspace.Workspace, error) {
	if !strings.HasPrefix(token, protocol.WorkspaceAgentTokenPrefix) || len(token) > maxAgentTokenLen {
		return workspace.Workspace{}, errUnauthorized("invalid helper token: want the token of a hangar_agent resource (" + protocol.WorkspaceAgentTokenPrefix + "...)")
	}
	t, err := s.store.WorkspaceAgentTokenByHash(ctx, tfbackend.HashAgentToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return workspace.Workspace{}, errUnauthorized("invalid helper token: unknown, or no longer in the workspace's Terraform state")
	} else if err != nil {
		return workspace.Workspace{}, err
	}
	ws, err := s.store.WorkspaceByID(ctx, t.WorkspaceID)
	if errors.Is(err, store.ErrNotFound) {
		return workspace.Workspace{}, errUnauthorized("invalid helper token: its workspace is gone")
	} else if err != nil {
		return workspace.Workspace{}, err
	}
	if ws.Backend != workspace.KindTerraform || ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return workspace.Workspace{}, errUnauthorized("invalid helper token: its workspace is deleted")
	}
	return ws, nil
}

// kubeHelperWorkspace is the Kubernetes workspace a helper token made by
// workspace.KubeHelperToken admits, or why it admits none.
// verified says the token was made under the server's keys (else err says why not, and the token
// may still be a Terraform helper's).
func (s *Server) kubeHelperWorkspace(ctx context.Context, token string) (ws workspace.Workspace, verified bool, err error) {
	if len(s.helperTokenKeys) == 0 {
		return workspace.Workspace{}, false, errUnauthorized("invalid helper token: this server gives Kubernetes workspaces' helpers no tokens (no key is configured)")
	}
	var id string
	ok := false
	for _, key := range s.helperTokenKeys {
		if id, ok = workspace.VerifyKubeHelperToken(key, token); ok {
			break
		}
	}
	if !ok {
		return workspace.Workspace{}, false, errUnauthorized("invalid helper token: not made by this server's key")
	}
	ws, err = s.store.WorkspaceByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return workspace.Workspace{}, true, errUnauthorized("invalid helper token: its workspace is gone")
	} else if err != nil {
		return workspace.Workspace{}, true, err
	}
	if ws.Backend != workspace.KindKubernetes || ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return workspace.Workspace{}, true, errUnauthorized("invalid helper token: its workspace is deleted")
	}
	return ws, true, nil
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func serverYamuxConfig() *yamux.Config {
	cfg := wsmux.Config()
	cfg.AcceptBacklog = 4 // the helper opens no streams (see workspaceAgentConnect)
	return cfg
}

// workspaceAgentConnect serves GET /api/v1/workspace-agent/connect: a helper connecting out.
func (s *Server) workspaceAgentConnect(w http.ResponseWriter, r *http.Request) {
	ws, token, err := s.helperOf(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ws.Backend != workspace.KindTerraform {
		// Its SSH and apps go through the access proxy, and its status is its pod's readiness.
		s.fail(w, r, errForbidden("a Kubernetes workspace's helper does not connect out: its token only asks for what the helper needs (git credentials)"))
		return
	}
	if !isWebSocket(r) {
		s.fail(w, r, errBadRequest("this endpoint takes a WebSocket: the helper's connection (hangar workspace-helper --connect-url)"))
		return
	}
	release, err := s.openStream(w, r, "helper:"+ws.ID, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer release()
	// Version 2 when the helper offers it (its streams carry a header: apps need no SSH), else 1.
	var cork *wsmux.CorkConn // the connection under the WebSocket, which wsmux.Conn corks
	c, err := websocket.Accept(wsmux.CorkingResponseWriter(w, &cork), r, &websocket.AcceptOptions{Subprotocols: []string{protocol.WorkspaceAgentSubprotocolV2, protocol.WorkspaceAgentSubprotocol}})
	if err != nil {
		return // Accept answered
	}
	v2 := c.Subprotocol() == protocol.WorkspaceAgentSubprotocolV2
	if !v2 && c.Subprotocol() != protocol.WorkspaceAgentSubprotocol {
		c.Close(websocket.StatusPolicyViolation, "want the subprotocol "+protocol.WorkspaceAgentSubprotocol)
		return
	}
	ctx, cancel := s.untilShutdown(r)
	defer cancel()
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	sess, err := yamux.Client(wsmux.Conn(nc, cork), serverYamuxConfig())
	if err != nil {
		nc.Close()
		return
	}
	defer sess.Close()
	// Streams are the server's to open: any the helper opens is closed at once, so that none waits
	// in the session's backlog holding a buffer.
	go func() {
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			_ = st.Close()
		}
	}()
	ac := &agentConn{workspaceID: ws.ID, ref: ws.OwnerName + "/" + ws.Name, sess: sess, v2: v2, slots: make(chan struct{}, maxStreamsPerHelper),
		appConns: make(chan struct{}, appsConnsPerWorkspace)}
	log := s.log.With("workspace", ws.OwnerName+"/"+ws.Name, "remote", r.RemoteAddr)
	// Other replicas learn where the helper is, to tell users (workspaceSSH); recorded before
	// this replica serves it, so that once it does, the others know.
	record := store.AgentConnection{WorkspaceID: ws.ID, Replica: s.replica, RelayURL: s.relayURL, ConnectedAt: s.clock.Now()}
	if err := s.store.SetWorkspaceAgentConnection(ctx, record); err != nil {
		log.Warn("cannot record which replica the helper is connected to", "err", err)
	}
	s.agents.put(ac)
	why := "the server replica holding the connection stopped"
	defer func() {
		if s.agents.remove(ac) {
			// Only this connection's record: a newer one's (recorded before it replaced this one in
			// the registry) stays, and its end is not this one's to report.
			bg := context.WithoutCancel(ctx)
			if err := s.store.ClearWorkspaceAgentConnection(bg, record); err != nil {
				log.Warn("cannot clear the record of the helper's connection", "err", err)
			}
			if err := s.store.RecordWorkspaceHelperDisconnect(bg, ws.ID, s.clock.Now(), why); err != nil && !errors.Is(err, store.ErrNotFound) {
				log.Warn("cannot record the end of the helper's connection", "err", err)
			}
		}
	}()
	log.Info("workspace helper connected")
	for {
		select {
		case <-sess.CloseChan():
			why = "the connection was lost (the machine stopped, its helper exited, or the network failed)"
			log.Info("workspace helper disconnected")
			return
		case <-ctx.Done():
			return
		case <-s.recheckAfter(s.recheck):
			if _, err := s.helperWorkspace(ctx, token); err != nil {
				why = "the server closed it: " + err.Error()
				log.Info("workspace helper's access ended; closing its connection", "why", err)
				return
			}
		}
	}
}

// openStream opens a stream to the helper, which carries what h says (on a version-1 connection
// every stream is SSH, and has no header).
func (c *agentConn) openStream(h wsmux.StreamHeader) (*yamux.Stream, error) {
	stream, err := c.sess.OpenStream()
	if err != nil || !c.v2 {
		return stream, err
	}
	if _, err := stream.Write(h.Marshal()); err != nil {
		stream.Close()
		return nil, err
	}
	return stream, nil
}

// workspaceSSH serves GET /api/v1/workspaces/{name}/ssh: a WebSocket relayed to a new stream of
// the workspace's helper, on which the client speaks SSH with the helper.
func (s *Server) workspaceSSH(w http.ResponseWriter, r *http.Request, u workspace.User) error {
	ws, err := s.readWorkspace(r, u)
	if err != nil {
		return err
	}
	ref := ws.OwnerName + "/" + ws.Name
	if ws.Backend != workspace.KindTerraform {
		return errConflict("workspace "+ref+" runs on Kubernetes", "its SSH is the access proxy's (hangar ssh finds it); this endpoint reaches Terraform workspaces' helpers")
	}
	if ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return errConflict("workspace "+ref+" is deleted", "")
	}
	release, err := s.openStream(w, r, "user:"+u.ID, 0) // relayed or served here, it stays open
	if err != nil {
		return err
	}
	defer release()
	ac := s.agents.get(ws.ID)
	if ac == nil {
		if c, ok := s.remoteHelper(r.Context(), r, ws.ID); ok {
			s.relay(w, r, c, false)
			return nil
		}
		if c, err := s.store.WorkspaceAgentConnection(r.Context(), ws.ID); err == nil && c.Replica != s.replica {
			return errCode(errs.Unavailable, "the workspace's helper is connected to another server replica",
				fmt.Sprintf("it connected to replica %s at %s, which takes no relayed connections (hangar server --relay-url) or relayed this one: reach that replica, or wait for the helper to reconnect",
					c.Replica, c.ConnectedAt.Format(time.RFC3339)))
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return errConflict("the workspace's helper is not connected (is the machine running?)",
			fmt.Sprintf("workspace %s is %s; its machine runs hangar_agent's init script, which connects out to the server", ref, ws.ActualState))
	}
	if !isWebSocket(r) {
		return errBadRequest("this endpoint takes a WebSocket: an SSH connection to the workspace's helper (hangar ssh)")
	}
	select {
	case ac.slots <- struct{}{}:
		defer func() { <-ac.slots }()
	default:
		return errCode(errs.LimitReached, fmt.Sprintf("workspace %s has %d connections open, the most there may be", ref, maxStreamsPerHelper), "")
	}
	stream, err := ac.openStream(wsmux.StreamHeader{Kind: wsmux.KindSSH})
	if err != nil {
		return errConflict("the workspace's helper is not connected (is the machine running?)", "opening a connection to it failed: "+err.Error())
	}
	defer stream.Close()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.WorkspaceSSHSubprotocol}})
	if err != nil {
		return nil // Accept answered
	}
	ctx, cancel := s.untilShutdown(r)
	defer cancel()
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	defer nc.Close()
	log := s.log.With("workspace", ref, "user", u.Username)
	log.Info("ssh connection to a workspace's helper opened")
	s.recordActivity(ctx, ws.ID)

	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(stream, nc); _ = stream.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(nc, stream); _ = nc.Close(); done <- struct{}{} }()
	ended := ctx.Done()
	// A revocation anywhere makes the connection's access be asked again at once, not at the next
	// recheck.
	revoked, unsubscribe := s.store.SubscribeRevocations()
	defer unsubscribe()
	recheck := func() {
		if why := s.stillAllowed(ctx, r, u, ws.ID); why != "" {
			log.Info("closing an ssh connection: access ended", "why", why)
			nc.Close()
			stream.Close()
		}
	}
	for {
		select {
		case <-done:
			// One direction ended: the other ends once both ends are closed.
			nc.Close()
			stream.Close()
			<-done
			log.Info("ssh connection to a workspace's helper closed")
			s.recordActivity(context.WithoutCancel(ctx), ws.ID)
			return nil
		case <-ended:
			ended = nil
			nc.Close()
			stream.Close()
		case <-revoked:
			recheck()
		case <-s.recheckAfter(s.recheck):
			s.recordActivity(ctx, ws.ID)
			recheck()
		}
	}
}

// stillAllowed tells why the user of an open connection may no longer use the workspace ("": they
// may): the credential that opened it (a bearer token, or a browser's session cookie) was revoked
// or expired or signed out, they were suspended, or the workspace deleted.
func (s *Server) stillAllowed(ctx context.Context, r *http.Request, u workspace.User, workspaceID string) string {
	now, err := s.credentialUser(ctx, r)
	if errs.Is(err, errs.Unauthorized) {
		return "the credential may no longer be used: " + err.Error()
	} else if err == nil && now.ID != u.ID {
		return "the credential is another user's"
	} else if err != nil {
		return "" // the database is unavailable: leave the connection alone until the next check
	}
	ws, err := s.store.WorkspaceByID(ctx, workspaceID)
	if errors.Is(err, store.ErrNotFound) {
		return "the workspace is gone"
	} else if err != nil {
		return ""
	}
	if !workspace.Visible(now, ws) {
		return "the workspace is no longer the user's"
	}
	if ws.ActualState == workspace.Terminated || ws.DesiredState == workspace.Terminated {
		return "the workspace is deleted"
	}
	return ""
}

func (s *Server) recordActivity(ctx context.Context, workspaceID string) {
	if err := s.store.RecordWorkspaceActivity(ctx, workspaceID, s.clock.Now()); err != nil && ctx.Err() == nil {
		s.log.Warn("cannot record a workspace's activity", "workspace_id", workspaceID, "err", err)
	}
}
