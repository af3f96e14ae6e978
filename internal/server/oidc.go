package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Sign-in with OpenID Connect (docs/decisions.md, "Sign-in with OIDC"): the authorization code
// flow with PKCE (S256). GET /oidc/login sends the browser to the provider with a state, a nonce
// and a code challenge derived from a random secret that only a short-lived HttpOnly cookie of
// that browser holds; GET /oidc/callback checks the state against that cookie, exchanges the code
// with the verifier, verifies the ID token (signature, issuer, audience, expiry, nonce), finds or
// creates the user linked to (issuer, subject), and begins a server session as the token form
// does.

const (
	// OIDCLoginPath and OIDCCallbackPath are the flow's two endpoints; the provider must have
	// <access URL>/oidc/callback as a redirect URI of the client.
	OIDCLoginPath    = "/oidc/login"
	OIDCCallbackPath = "/oidc/callback"
	// OIDCLoginCookie holds a sign-in in progress (__Host- prefixed over https).
	OIDCLoginCookie = "hangar_oidc"
	// OIDCLoginLifetime bounds the time from GET /oidc/login to the callback.
	OIDCLoginLifetime = 10 * time.Minute
	// DefaultOIDCGroupsClaim is the claim read for groups unless configured otherwise.
	DefaultOIDCGroupsClaim = "groups"

	maxReturnToBytes   = 2048
	oidcProviderTimout = 15 * time.Second
	oidcSignInTries    = 3
)

// DefaultOIDCScopes are requested unless configured otherwise.
var DefaultOIDCScopes = []string{oidc.ScopeOpenID, "email", "profile"}

// OIDCOptions configure sign-in through an OpenID Connect provider.
type OIDCOptions struct {
	IssuerURL, ClientID, ClientSecret string
	// RedirectURL is <the server's URL as browsers reach it>/oidc/callback.
	RedirectURL string
	// Scopes requested (default DefaultOIDCScopes; openid is added when missing).
	Scopes []string
	// Name is the provider's name on the sign-in page: "Sign in with <Name>" (default: the
	// issuer's host).
	Name string
	// AdminGroup makes admins of the users whose GroupsClaim (default "groups") contains it ("":
	// none by group); AdminEmails of those whose verified email is listed. Both are evaluated
	// again at every sign-in.
	AdminGroup, GroupsClaim string
	AdminEmails             []string
	// AllowedDomains, when not empty, admits only users whose email is in one of these domains.
	AllowedDomains []string
	// HTTPClient reaches the provider (default: one with a 15 s timeout).
	HTTPClient *http.Client
	// NoProviderLogout keeps a sign-out from going on to the provider's end_session_endpoint
	// (oidclogout.go): for a provider that has one but where <access URL>/oidc/signed-out cannot
	// be registered.
	NoProviderLogout bool
}

// oidcSignIn is the configured provider; its discovery happens at the first sign-in (and again
// until it succeeds), so that a provider down at start does not keep the server from starting.
type oidcSignIn struct {
	opts OIDCOptions

	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDCSignIn(opts *OIDCOptions) *oidcSignIn {
	if opts == nil {
		return nil
	}
	o := *opts
	if len(o.Scopes) == 0 {
		o.Scopes = DefaultOIDCScopes
	}
	if !slices.Contains(o.Scopes, oidc.ScopeOpenID) {
		o.Scopes = append([]string{oidc.ScopeOpenID}, o.Scopes...)
	} else {
		o.Scopes = slices.Clone(o.Scopes)
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim = DefaultOIDCGroupsClaim
	}
	if o.Name == "" {
		if u, err := url.Parse(o.IssuerURL); err == nil && u.Host != "" {
			o.Name = u.Host
		} else {
			o.Name = "single sign-on"
		}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: oidcProviderTimout}
	}
	o.AdminEmails, o.AllowedDomains = nil, nil
	for _, e := range opts.AdminEmails {
		o.AdminEmails = append(o.AdminEmails, strings.ToLower(strings.TrimSpace(e)))
	}
	for _, d := range opts.AllowedDomains {
		o.AllowedDomains = append(o.AllowedDomains, strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@")))
	}
	return &oidcSignIn{opts: o}
}

// discover returns the provider and the OAuth2 configuration, discovering the provider the first
// time. The provider keeps the background context (with the HTTP client) to fetch its keys later.
func (o *oidcSignIn) discover() (*oidc.Provider, *oauth2.Config, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider == nil {
		p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), o.opts.HTTPClient), o.opts.IssuerURL)
		if err != nil {
			return nil, nil, fmt.Errorf("discover the OIDC provider %s: %w", o.opts.IssuerURL, err)
		}
		o.provider = p
	}
	return o.provider, &oauth2.Config{ClientID: o.opts.ClientID, ClientSecret: o.opts.ClientSecret, Endpoint: o.provider.Endpoint(),
		RedirectURL: o.opts.RedirectURL, Scopes: o.opts.Scopes}, nil
}

// oidcButton adds the "Sign in with <name>" link to a sign-in page, when OIDC is configured.
func (s *Server) oidcButton(p page) page {
	if s.oidc == nil {
		return p
	}
	p.OIDCName, p.OIDCLink = s.oidc.opts.Name, OIDCLoginPath
	if p.ReturnTo != "" {
		p.OIDCLink += "?" + url.Values{"return_to": {p.ReturnTo}}.Encode()
	}
	return p
}

// oidcLoginCookie is the name of the sign-in-in-progress cookie for r.
func oidcLoginCookie(r *http.Request) string {
	if secureRequest(r) {
		return "__Host-" + OIDCLoginCookie
	}
	return OIDCLoginCookie
}

// oidcLogin is a sign-in in progress, as its cookie holds it: a random secret, when it began and
// where to go back to. The state, nonce and PKCE verifier are derived from all three, so that none
// can be changed alone.
type oidcLogin struct {
	secret   []byte
	started  int64 // Unix seconds
	returnTo string
}

func (l oidcLogin) encode() string {
	return base64.RawURLEncoding.EncodeToString(l.secret) + "." + strconv.FormatInt(l.started, 10) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(l.returnTo))
}

// parseOIDCLogin reads the cookie's value (outside input: FuzzParseOIDCLogin).
func parseOIDCLogin(v string) (oidcLogin, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return oidcLogin{}, errors.New("not a sign-in cookie")
	}
	secret, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(secret) != 32 {
		return oidcLogin{}, errors.New("bad secret")
	}
	started, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || started <= 0 {
		return oidcLogin{}, errors.New("bad start time")
	}
	rt, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(rt) > maxReturnToBytes || !SafeReturnPath(string(rt)) {
		return oidcLogin{}, errors.New("bad return_to")
	}
	return oidcLogin{secret: secret, started: started, returnTo: string(rt)}, nil
}

// derive is HMAC-SHA256(secret, purpose ‖ started ‖ returnTo) in base64url (43 characters: a
// valid PKCE verifier too).
func (l oidcLogin) derive(purpose string) string {
	m := hmac.New(sha256.New, l.secret)
	m.Write([]byte(purpose + "\x00" + strconv.FormatInt(l.started, 10) + "\x00" + l.returnTo))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (l oidcLogin) state() string    { return l.derive("state") }
func (l oidcLogin) nonce() string    { return l.derive("nonce") }
func (l oidcLogin) verifier() string { return l.derive("pkce") }

func equalStrings(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// oidcLogin serves GET /oidc/login?return_to=P: to the provider, with a fresh sign-in cookie.
func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		writePage(w, http.StatusNotFound, page{Title: "Cannot sign in", Message: "This server has no OIDC provider configured: sign in with a token."})
		return
	}
	returnTo := r.URL.Query().Get("return_to")
	if returnTo == "" {
		returnTo = DefaultReturnTo
	}
	if len(returnTo) > maxReturnToBytes || !SafeReturnPath(returnTo) {
		writePage(w, http.StatusBadRequest, page{Title: "Cannot sign in", Message: "return_to must be a path on this server."})
		return
	}
	_, cfg, err := s.oidc.discover()
	if err != nil {
		s.log.Error("OIDC sign-in", "err", err)
		writePage(w, http.StatusBadGateway, page{Title: "Cannot sign in", Message: "The sign-in provider could not be reached; the server's log has the details."})
		return
	}
	l := oidcLogin{secret: make([]byte, 32), started: s.clock.Now().Unix(), returnTo: returnTo}
	_, _ = rand.Read(l.secret)
	http.SetCookie(w, &http.Cookie{Name: oidcLoginCookie(r), Value: l.encode(), Path: "/", MaxAge: int(OIDCLoginLifetime / time.Second),
		HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, cfg.AuthCodeURL(l.state(), oidc.Nonce(l.nonce()), oauth2.S256ChallengeOption(l.verifier())), http.StatusFound)
}

// oidcRefusal is a sign-in refused for a reason the person should read (the page's message);
// err, for the log and the audit entry, says more.
type oidcRefusal struct {
	status  int
	message string
	err     error
}

func (e *oidcRefusal) Error() string { return e.err.Error() }

func oidcRefuse(status int, message string, err error) error {
	return &oidcRefusal{status: status, message: message, err: err}
}

// oidcCallback serves GET /oidc/callback?code=C&state=S (or error=E): the provider's answer.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		writePage(w, http.StatusNotFound, page{Title: "Cannot sign in", Message: "This server has no OIDC provider configured: sign in with a token."})
		return
	}
	ctx, entry := s.auditor.Begin(r.Context(), audit.Actor{}, audit.SignIn, audit.Target{})
	entry.Set("method", "oidc")
	entry.Set("issuer", s.oidc.opts.IssuerURL)
	entry.Set("remote", r.RemoteAddr)
	var failed error
	defer func() { s.auditor.End(ctx, entry, failed) }()
	// The cookie serves one callback, whatever its outcome.
	http.SetCookie(w, &http.Cookie{Name: oidcLoginCookie(r), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secureRequest(r), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")

	u, created, returnTo, idToken, err := s.oidcFinish(ctx, r)
	if err != nil {
		failed = err
		var ref *oidcRefusal
		if errors.As(err, &ref) {
			s.log.Info("OIDC sign-in refused", "reason", ref.err, "remote", r.RemoteAddr)
			writePage(w, ref.status, s.oidcButton(page{Title: "Cannot sign in", Message: ref.message}))
			return
		}
		s.log.Error("OIDC sign-in", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot sign in", Message: "The server failed; its log has the details."})
		return
	}
	entry.SetActor(actorOf(u))
	entry.SetTarget(audit.Target{Kind: audit.KindUser, ID: u.ID, Name: u.Username})
	entry.Set("created", created)
	entry.Set("admin", u.Admin)
	if err := s.beginServerSession(ctx, w, r, u, nil); err != nil {
		failed = err
		s.log.Error("OIDC sign-in: create session", "err", err)
		writePage(w, http.StatusInternalServerError, page{Title: "Cannot sign in", Message: "The server failed; its log has the details."})
		return
	}
	s.keepIDToken(w, r, idToken) // for the sign-out at the provider (oidclogout.go)
	s.log.Info("signed in", "user", u.Username, "method", "oidc", "created", created, "admin", u.Admin)
	http.Redirect(w, r, returnTo, http.StatusSeeOther)
}

// oidcFinish checks the callback against the browser's sign-in cookie, redeems the code, verifies
// the ID token and signs the user in at the store; it returns the raw ID token too (for the
// sign-out's id_token_hint).
func (s *Server) oidcFinish(ctx context.Context, r *http.Request) (workspace.User, bool, string, string, error) {
	again := "Start again from the sign-in page."
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		what := clip(e)
		if d := q.Get("error_description"); d != "" {
			what += " (" + clip(d) + ")"
		}
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusUnauthorized, "The sign-in provider refused: "+what+". "+again,
			fmt.Errorf("the provider answered %s", what))
	}
	c, err := r.Cookie(oidcLoginCookie(r))
	if err != nil {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadRequest, "This sign-in was not begun in this browser, or it took longer than 10 minutes. "+again,
			errors.New("no sign-in cookie"))
	}
	l, err := parseOIDCLogin(c.Value)
	if err != nil {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadRequest, "This browser's sign-in cookie is not valid. "+again, fmt.Errorf("sign-in cookie: %w", err))
	}
	if age := s.clock.Now().Sub(time.Unix(l.started, 0)); age > OIDCLoginLifetime || age < -time.Minute {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadRequest, "This sign-in took longer than 10 minutes. "+again, fmt.Errorf("sign-in begun %s ago", age))
	}
	if !equalStrings(q.Get("state"), l.state()) {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadRequest, "This answer of the sign-in provider is not for the sign-in this browser began. "+again,
			errors.New("state does not match the browser's sign-in cookie"))
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadRequest, "The sign-in provider sent no code. "+again, errors.New("no code"))
	}
	provider, cfg, err := s.oidc.discover()
	if err != nil {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadGateway, "The sign-in provider could not be reached. "+again, err)
	}
	xctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, s.oidc.opts.HTTPClient), oidcProviderTimout)
	defer cancel()
	tok, err := cfg.Exchange(xctx, code, oauth2.VerifierOption(l.verifier()))
	if err != nil {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadGateway, "The sign-in provider did not accept the sign-in's code. "+again, fmt.Errorf("exchange the code: %w", err))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusBadGateway, "The sign-in provider sent no ID token. "+again, errors.New("no id_token in the token response"))
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: s.oidc.opts.ClientID, Now: s.clock.Now}).Verify(xctx, raw)
	if err != nil {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusUnauthorized, "The sign-in provider's ID token is not valid for this server. "+again, fmt.Errorf("verify the ID token: %w", err))
	}
	if !equalStrings(idt.Nonce, l.nonce()) {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusUnauthorized, "The sign-in provider's ID token is not for the sign-in this browser began. "+again,
			errors.New("the ID token's nonce does not match the browser's sign-in cookie"))
	}
	var payload json.RawMessage
	if err := idt.Claims(&payload); err != nil {
		return workspace.User{}, false, "", "", fmt.Errorf("read the ID token's claims: %w", err)
	}
	claims, err := parseOIDCClaims(payload, s.oidc.opts.GroupsClaim)
	if err != nil {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusUnauthorized, "The sign-in provider's ID token could not be read: "+err.Error()+".", err)
	}
	if claims.EmailVerified != nil && !*claims.EmailVerified {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusForbidden, fmt.Sprintf("Your sign-in provider says your email address %s is not verified. Verify it there, then sign in again.", claims.Email),
			fmt.Errorf("email %q not verified", claims.Email))
	}
	if len(s.oidc.opts.AllowedDomains) > 0 && !slices.Contains(s.oidc.opts.AllowedDomains, emailDomain(claims.Email)) {
		return workspace.User{}, false, "", "", oidcRefuse(http.StatusForbidden, fmt.Sprintf("Only users with an email address in %s may sign in to this server.", strings.Join(s.oidc.opts.AllowedDomains, ", ")),
			fmt.Errorf("email %q not in an allowed domain", claims.Email))
	}
	admin := (s.oidc.opts.AdminGroup != "" && slices.Contains(claims.Groups, s.oidc.opts.AdminGroup)) ||
		// The allow-list names admins by email: only an email the provider vouches for
		// (email_verified true), or whoever could set that address at the provider would be one.
		(claims.Email != "" && claims.EmailVerified != nil && *claims.EmailVerified && slices.Contains(s.oidc.opts.AdminEmails, strings.ToLower(claims.Email)))
	in := store.OIDCSignIn{Issuer: idt.Issuer, Subject: idt.Subject, Email: claims.Email, Admin: admin,
		Username: oidcUsername(claims.PreferredUsername, claims.Email), At: s.clock.Now()}
	in.FullName, in.ProfileEmail = profileClaims(claims)
	for try := 1; ; try++ {
		// Each try a new id and a random token nobody knows: an OIDC user has no API token.
		in.UserID, in.TokenHash = uuid.NewString(), HashToken(NewToken(userTokenPrefix))
		u, created, err := s.store.SignInOIDC(ctx, in)
		if errors.Is(err, store.ErrConflict) && try < oidcSignInTries {
			continue // another first sign-in took the name (or linked this identity) meanwhile
		}
		if errors.Is(err, store.ErrNotFound) {
			return workspace.User{}, false, "", "", oidcRefuse(http.StatusForbidden, "Your Hangar user was deleted: ask an admin.", err)
		}
		if err != nil {
			return workspace.User{}, false, "", "", fmt.Errorf("sign in %s at %s: %w", idt.Subject, idt.Issuer, err)
		}
		if u.SuspendedAt != nil {
			// As a token of a suspended user is refused (usable): no session, and the page says why
			// instead of a session that every page then finds ended.
			return workspace.User{}, false, "", "", oidcRefuse(http.StatusForbidden,
				fmt.Sprintf("Your Hangar user %s is suspended (since %s): ask an admin.", u.Username, u.SuspendedAt.Format(time.RFC3339)),
				fmt.Errorf("user %s is suspended", u.Username))
		}
		return u, created, l.returnTo, raw, nil
	}
}

// profileClaims are the full name and email a sign-in gives the user's profile (unless the user
// set them: store.OIDCSignIn): the name and email claims, the email only when the provider did
// not say it is unverified (such a sign-in is refused anyway). A claim the profile's rules refuse
// (a '<' in a name, a control character, too long) is left out rather than refusing the sign-in.
func profileClaims(c oidcClaims) (fullName, email string) {
	if workspace.CheckFullName(c.Name) == "" {
		fullName = c.Name
	}
	if (c.EmailVerified == nil || *c.EmailVerified) && workspace.CheckEmail(c.Email) == "" {
		email = c.Email
	}
	return fullName, email
}

// oidcClaims are the claims of an ID token that Hangar reads besides the registered ones.
type oidcClaims struct {
	Name              string // the full name (OIDC Core 5.1 "name")
	Email             string
	EmailVerified     *bool // nil: the provider did not say
	PreferredUsername string
	Groups            []string
}

// parseOIDCClaims reads an ID token's payload (outside input: FuzzOIDCClaims). email_verified may
// be a boolean or the string "true"/"false" (some providers send strings); groups an array of
// strings or one string. A claim of another type is an error naming it.
func parseOIDCClaims(payload []byte, groupsClaim string) (oidcClaims, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return oidcClaims{}, fmt.Errorf("claims: not a JSON object")
	}
	var c oidcClaims
	str := func(name string, dst *string) error {
		if v, ok := m[name]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, dst); err != nil {
				return fmt.Errorf("claim %s: want a string", name)
			}
		}
		return nil
	}
	if err := str("email", &c.Email); err != nil {
		return oidcClaims{}, err
	}
	if err := str("preferred_username", &c.PreferredUsername); err != nil {
		return oidcClaims{}, err
	}
	if err := str("name", &c.Name); err != nil {
		return oidcClaims{}, err
	}
	if v, ok := m["email_verified"]; ok && string(v) != "null" {
		var b bool
		var s string
		switch {
		case json.Unmarshal(v, &b) == nil:
		case json.Unmarshal(v, &s) == nil && (s == "true" || s == "false"):
			b = s == "true"
		default:
			return oidcClaims{}, errors.New("claim email_verified: want true or false")
		}
		c.EmailVerified = &b
	}
	if v, ok := m[groupsClaim]; ok && string(v) != "null" {
		var one string
		if json.Unmarshal(v, &c.Groups) != nil {
			if json.Unmarshal(v, &one) != nil {
				return oidcClaims{}, fmt.Errorf("claim %s: want an array of strings", groupsClaim)
			}
			c.Groups = []string{one}
		}
	}
	return c, nil
}

func emailDomain(email string) string {
	i := strings.LastIndexByte(email, '@')
	if i < 0 {
		return ""
	}
	return strings.ToLower(email[i+1:])
}

// oidcUsername is the username a new OIDC user asks for: its preferred_username (the part before
// '@' when it is an address), else its email's local part, made to follow the username rules
// (workspace.CheckUsername) with room for a "-NNN" suffix; "user" when nothing is left.
func oidcUsername(preferred, email string) string {
	for _, c := range []string{preferred, email} {
		if i := strings.IndexByte(c, '@'); i >= 0 {
			c = c[:i]
		}
		if n := sanitizeUsername(c); n != "" {
			return n
		}
	}
	return "user"
}

func sanitizeUsername(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= workspace.MaxUsernameLength-len("-100") {
			break
		}
	}
	return strings.TrimRight(b.String(), "-")
}
