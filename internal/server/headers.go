package server

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/web"
)

// What every answer of the server's own (not the apps zone's, whose pages are the workspaces')
// carries, and the answers given before any handler runs (docs/decisions.md, "Server hardening").

// ContentSecurityPolicy is the default policy of the server's answers: everything from the server's
// own origin only, no inline script or style, no plugin, no framing. Pages that need less set their
// own, stricter one (writePage). The web UI's scripts and styles are files under /ui/, so 'self'
// is all they need.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// HSTS is the Strict-Transport-Security of answers over TLS: a year, this host only (a subdomain
// may be a workspace's app served over plain http).
const HSTS = "max-age=31536000"

// securityHeaders sets the headers every answer of the server carries; handlers may replace the
// policy with a stricter one.
func securityHeaders(h http.Header, r *http.Request) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", HSTS)
	}
}

// isPreflight reports whether r is a CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// carriesCredentials reports whether r tries to authenticate with a secret the limiter counts: a
// bearer (or any Authorization) header, or the sign-in form. (A session cookie is not counted: a
// browser holding an expired one is no guesser, and a session id is as unguessable as a token.)
func carriesCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || (r.Method == http.MethodPost && r.URL.Path == "/signin")
}

// harden runs before the server's routes: it sets the security headers, refuses CORS preflights
// (no origin but the server's own may call the API from a browser: no Access-Control-Allow-*
// header is ever sent), and refuses credentials from an address that failed to authenticate too
// often (429, Retry-After). It returns the writer the routes are to use, which counts a 401 answer
// to a request carrying credentials as a failed authentication, or nil when it answered itself.
func (s *Server) harden(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	securityHeaders(w.Header(), r)
	if isPreflight(r) {
		s.fail(w, r, errCode(errs.Forbidden, "cross-origin requests are not allowed",
			"the server answers browsers on its own origin only (no CORS); call the API from a server, a script or the CLI"))
		return nil
	}
	if !carriesCredentials(r) {
		return w
	}
	addr := s.clientAddr(r)
	if wait, blocked := s.authFailures.blocked(addr); blocked {
		w.Header().Set("Retry-After", retryAfter(wait))
		s.fail(w, r, errCode(errs.LimitReached, "too many failed authentications from your address",
			"try again in "+retryAfter(wait)+" s; requests with credentials from "+addr.String()+" are refused until then"))
		return nil
	}
	return &authWatch{ResponseWriter: w, s: s, addr: addr}
}

// authWatch counts a 401 answer as a failed authentication of addr.
type authWatch struct {
	http.ResponseWriter
	s     *Server
	addr  netip.Addr
	wrote bool
}

func (w *authWatch) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if code == http.StatusUnauthorized {
			w.s.authFailures.failed(w.addr)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *authWatch) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (deadlines, hijacking) and coder/websocket reach the
// connection.
func (w *authWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush serves handlers that assert http.Flusher (build logs).
func (w *authWatch) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Hijack serves callers that assert http.Hijacker.
func (w *authWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// pageStyle is the style of the server's own pages (writePage): the UI's look (web.PageStyle),
// allowed by its hash (pageStyleSource) rather than by allowing inline styles.
const pageStyle = web.PageStyle

var pageStyleSource = web.PageStyleSource
