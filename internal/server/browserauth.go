package server

import (
	"net/http"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// The web UI's authentication of the API (docs/decisions.md, "The web UI"): a request without a
// bearer token is the browser's, authenticated by the server session cookie that POST /signin
// sets. An unsafe method (anything but GET, HEAD, OPTIONS) with the cookie must also pass
// http.CrossOriginProtection (Sec-Fetch-Site same-origin or none, or an Origin of this host) and
// carry the CSRFHeader, which a page of another origin cannot send without a CORS preflight that
// the server never grants: two independent guards, so that neither an old browser without
// Sec-Fetch-Site nor a same-site host (a workspace's app on a sibling domain) can make a
// signed-in browser change anything.

// CSRFHeader must be sent, with the value "1", on the web UI's unsafe requests.
const CSRFHeader = "X-Hangar-CSRF"

// authBrowser serves a user request that came without a bearer token: through the server
// session cookie, or a 401 that tells how to authenticate.
func (s *Server) authBrowser(w http.ResponseWriter, r *http.Request, h userHandler) {
	if _, err := r.Cookie(sessionCookie(r)); err != nil {
		s.fail(w, r, errUnauthorized("missing bearer token: send Authorization: Bearer <token>, or sign in at /signin"))
		return
	}
	u, sess, ok, err := s.browserSession(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		s.fail(w, r, errUnauthorized("your session has ended: sign in again at /signin"))
		return
	}
	r = r.WithContext(withSession(r.Context(), sess))
	if !safeMethod(r.Method) {
		if err := s.csrf.Check(r); err != nil {
			s.fail(w, r, errForbidden("cross-origin request refused: "+err.Error()))
			return
		}
		if r.Header.Get(CSRFHeader) != "1" {
			s.fail(w, r, errForbidden("a request signed in by cookie must send the header "+CSRFHeader+": 1"))
			return
		}
	}
	if err := h(w, r, u); err != nil {
		s.fail(w, r, err)
	}
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sessionOf returns the user of the request's server session, if any (the UI's pages).
func (s *Server) sessionOf(r *http.Request) (workspace.User, bool, error) {
	u, _, ok, err := s.browserUser(r)
	return u, ok, err
}
