package server

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// Sign-out at the OIDC provider too (RP-initiated logout 1.0; docs/decisions.md, "Sign-in with
// OIDC"). Ending Hangar's session leaves the browser signed in at the provider, and the next "Sign
// in with …" would come straight back without asking anyone. So when the provider's discovery
// document has an end_session_endpoint, signing out of a session begun through the provider goes
// on to it:
//
//  1. POST /signout (same-origin only) ends Hangar's session and answers a page that moves on to
//     GET /oidc/logout (a meta refresh, and a link). Not a redirect: browsers apply the signing-out
//     page's CSP form-action to every redirect of a form's submission, and the web UI's allows
//     only its own origin.
//  2. GET /oidc/logout reads the ID token kept for it (OIDCLogoutCookie), clears it, and redirects
//     to the provider's end_session_endpoint with client_id, post_logout_redirect_uri (this
//     server's OIDCSignedOutPath) and id_token_hint (some providers require it, others ask the
//     person to confirm without it).
//  3. The provider ends its session and sends the browser to GET /oidc/signed-out: "Signed out".
//
// The ID token is kept in the browser, not in the database (which holds no secret but hashes):
// an HttpOnly cookie (no page script reads it), sent only to /oidc/logout, and only ever sent on
// to the provider, in step 2's redirect, which no script can read either (a fetch of it gets an
// opaque answer).

const (
	// OIDCLogoutPath continues a sign-out at the provider; OIDCSignedOutPath is where the provider
	// sends the browser back (register <access URL>/oidc/signed-out as a post-logout redirect URI
	// of the client).
	OIDCLogoutPath    = "/oidc/logout"
	OIDCSignedOutPath = "/oidc/signed-out"
	// OIDCLogoutCookie holds the ID token of the browser's last sign-in through the provider, for
	// the sign-out's id_token_hint (__Secure- prefixed over https).
	OIDCLogoutCookie = "hangar_oidc_logout"
	// maxIDTokenCookie bounds the ID token kept in the cookie (browsers keep 4096 bytes a cookie);
	// a larger one is not kept, and the sign-out names the client only.
	maxIDTokenCookie = 3500
	// noHint is the cookie's value when the ID token was too large to keep.
	noHint = "-"
)

func oidcLogoutCookie(r *http.Request) string {
	if secureRequest(r) {
		return "__Secure-" + OIDCLogoutCookie
	}
	return OIDCLogoutCookie
}

// keepIDToken sets the logout cookie at the end of a sign-in through the provider, for as long as
// its session lasts.
func (s *Server) keepIDToken(w http.ResponseWriter, r *http.Request, raw string) {
	if s.oidc == nil || s.oidc.opts.NoProviderLogout {
		return
	}
	if len(raw) > maxIDTokenCookie || strings.ContainsAny(raw, "; ,\"\\") {
		raw = noHint
	}
	http.SetCookie(w, &http.Cookie{Name: oidcLogoutCookie(r), Value: raw, Path: OIDCLogoutPath, MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode})
}

// forgetIDToken clears the logout cookie. A sign-out that does not go on to the provider (a session
// begun with a token, in a browser that signed in through the provider before) clears it too, so
// that no ID token is left behind in the browser; it cannot tell whether there is one (the cookie
// is sent to /oidc/logout only), so it always clears it when OIDC is on.
func (s *Server) forgetIDToken(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcLogoutCookie(r), Value: "", Path: OIDCLogoutPath, MaxAge: -1, HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode})
}

// signingOutAtProvider reports whether a sign-out of sess (ok: it was found) goes on to the
// provider: provider logout is on, the provider (if discovered already) has an
// end_session_endpoint, and the session was not begun with a token (an OIDC sign-in, or one that
// ended already: GET /oidc/logout then decides by the browser's logout cookie).
func (s *Server) signingOutAtProvider(sess store.Session, ok bool) bool {
	if s.oidc == nil || s.oidc.opts.NoProviderLogout || (ok && sess.TokenID != "") {
		return false
	}
	end, known := s.oidc.knownEndSession()
	return !known || end != ""
}

// signedOutPage is the sign-out's answer when it goes on to the provider: a page that moves on to
// OIDCLogoutPath by itself.
func (s *Server) signedOutPage(w http.ResponseWriter) {
	writePage(w, http.StatusOK, page{Title: "Signed out", Message: "You are signed out of Hangar. Signing you out of " + s.oidc.opts.Name + " too…",
		Refresh: OIDCLogoutPath, Continue: "Continue signing out of " + s.oidc.opts.Name})
}

// oidcLogout serves GET /oidc/logout: on to the provider's end_session_endpoint, when this browser
// signed in through the provider (its logout cookie), the provider has one, and the request comes
// from this server's own page; else the signed-out page.
func (s *Server) oidcLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	plain := page{Title: "Signed out", Message: "You are signed out of Hangar."}
	if s.oidc == nil || s.oidc.opts.NoProviderLogout {
		writePage(w, http.StatusOK, plain)
		return
	}
	// Another site's link must not sign the browser out of its provider (a nuisance, not a leak):
	// only a navigation from this origin, or typed, goes on.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		writePage(w, http.StatusOK, plain)
		return
	}
	c, err := r.Cookie(oidcLogoutCookie(r))
	if err != nil || c.Value == "" {
		writePage(w, http.StatusOK, plain)
		return
	}
	s.forgetIDToken(w, r)
	end, err := s.oidc.endSessionEndpoint()
	if err != nil {
		s.log.Warn("OIDC sign-out: the provider could not be reached; signed out of Hangar only", "err", err)
		writePage(w, http.StatusOK, plain)
		return
	}
	if end == "" {
		writePage(w, http.StatusOK, plain)
		return
	}
	u, err := url.Parse(end)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		s.log.Warn("OIDC sign-out: the provider's end_session_endpoint is not a URL; signed out of Hangar only", "end_session_endpoint", end)
		writePage(w, http.StatusOK, plain)
		return
	}
	q := u.Query()
	q.Set("client_id", s.oidc.opts.ClientID)
	q.Set("post_logout_redirect_uri", s.oidc.postLogoutURL())
	if c.Value != noHint {
		q.Set("id_token_hint", c.Value)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// oidcSignedOut serves GET /oidc/signed-out: where the provider sends the browser back.
func (s *Server) oidcSignedOut(w http.ResponseWriter, r *http.Request) {
	name := "the sign-in provider"
	if s.oidc != nil {
		name = s.oidc.opts.Name
	}
	writePage(w, http.StatusOK, s.oidcButton(page{Title: "Signed out", Message: "You are signed out of Hangar and of " + name + "."}))
}

// endSessionEndpoint is the provider's end_session_endpoint ("" when its discovery document has
// none), discovering the provider if need be.
func (o *oidcSignIn) endSessionEndpoint() (string, error) {
	if _, _, err := o.discover(); err != nil {
		return "", err
	}
	end, _ := o.knownEndSession()
	return end, nil
}

// knownEndSession is the end_session_endpoint of a provider discovered already (known false when
// it was not: finding out would make the sign-out wait for the provider).
func (o *oidcSignIn) knownEndSession() (end string, known bool) {
	o.mu.Lock()
	p := o.provider
	o.mu.Unlock()
	if p == nil {
		return "", false
	}
	var doc struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&doc); err != nil {
		return "", false
	}
	return doc.EndSession, true
}

// postLogoutURL is <the server's URL as browsers reach it>/oidc/signed-out.
func (o *oidcSignIn) postLogoutURL() string {
	return strings.TrimSuffix(o.opts.RedirectURL, OIDCCallbackPath) + OIDCSignedOutPath
}
