package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/store"
)

// Relaying between replicas (docs/decisions.md, "Relaying between replicas"): a Terraform
// workspace's helper is connected to one server replica, whose memory holds the connection. A
// user's connection that reaches another replica (`hangar ssh`, port-forward, an app in the
// browser) is relayed as it came, credentials and all, to the replica holding the helper, at the
// URL that replica recorded (Options.RelayURL), which authenticates and authorizes it again itself.
// Relaying grants nothing: the relaying replica adds no credential, and the header it adds only
// stops the request from being relayed once more.

// RelayHeader marks a request a replica relayed (its value: that replica's id). A request that
// carries it is never relayed again, whoever set it.
const RelayHeader = "Hangar-Relayed-By"

// remoteHelper returns the record of the replica holding the workspace's helper when that is
// another replica that takes relayed connections and r was not relayed already.
func (s *Server) remoteHelper(ctx context.Context, r *http.Request, workspaceID string) (store.AgentConnection, bool) {
	if r.Header.Get(RelayHeader) != "" {
		return store.AgentConnection{}, false
	}
	c, err := s.store.WorkspaceAgentConnection(ctx, workspaceID)
	if err != nil || c.Replica == s.replica || c.RelayURL == "" {
		return store.AgentConnection{}, false
	}
	return c, true
}

// relay serves r by relaying it to the replica of c: plain requests and upgrades (WebSockets)
// alike, with the request's own Host and credentials. A failure is an API error, or for a browser
// (page) a page that names no replica: the details are in the log.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, c store.AgentConnection, asPage bool) {
	failed := func(w http.ResponseWriter, r *http.Request, detail string) {
		s.log.Warn("cannot relay to the replica holding a workspace's helper", "replica", c.Replica, "relay_url", c.RelayURL, "err", detail)
		if asPage {
			writePage(w, http.StatusBadGateway, page{Title: "Workspace not reachable",
				Message: "The Hangar server holding this workspace's connection cannot be reached right now. Try again in a moment."})
			return
		}
		s.fail(w, r, errCode(errs.Unreachable, "cannot reach the server replica holding the workspace's helper",
			"replica "+c.Replica+": "+detail))
	}
	target, err := url.Parse(c.RelayURL)
	if err != nil || target.Host == "" {
		failed(w, r, "its relay URL "+c.RelayURL+" is not a URL")
		return
	}
	s.log.Debug("relaying to the replica holding a workspace's helper", "replica", c.Replica, "relay_url", c.RelayURL, "path", r.URL.Path)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			if secureRequest(pr.In) {
				// SetXForwarded says http when this replica was reached over plain http, as it is
				// behind a proxy that ends TLS: the browser's request was https all the same, and the
				// name of its session cookie (__Host-) depends on it.
				pr.Out.Header.Set("X-Forwarded-Proto", "https")
			}
			pr.Out.Header.Set(RelayHeader, s.replica)
		},
		Transport:     s.relayTransport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			failed(w, r, err.Error())
		},
	}
	rp.ServeHTTP(w, r)
}

func newRelayTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // replicas reach each other directly
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // long polls and streams
		ForceAttemptHTTP2:     false,
	}
}
