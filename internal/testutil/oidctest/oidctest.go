// Package oidctest runs a real OpenID Connect provider in process, on loopback, for tests: zitadel's
// pkg/op (discovery, JWKS, RS256-signed ID tokens, the authorization code flow with PKCE checked)
// over an in-memory storage of users and clients that the test configures. Its login page is a
// plain HTML form (one button per user) that a browser submits; LogIn submits it from Go.
//
// With Options.RememberSessions the provider keeps a browser's sign-in (a cookie) as real providers
// do: a later authorization request from that browser is answered without the login form, until
// the browser's session is ended at the provider's end_session endpoint (RP-initiated logout).
//
// With the offline_access scope, the code flow also gives a refresh token; the refresh_token grant
// rotates it (a used refresh token is dead, as GitLab's and Gitea's are), and RevokeRefreshTokens
// kills a user's, as a forge does when the user revokes the application.
//
// A test may make the provider misbehave on purpose (Tamper: the ID token's claims changed and
// signed again with the provider's key), to check that the client refuses what it must.
package oidctest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is an account at the provider.
type User struct {
	Subject           string
	Email             string
	EmailVerified     *bool // nil: the claim is left out
	PreferredUsername string
	Name              string
	Groups            []string // the "groups" claim (left out when empty)
}

// Client is a relying party registered at the provider (a confidential web client).
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	// PostLogoutRedirectURIs are where end_session may send the browser back to.
	PostLogoutRedirectURIs []string
}

// Options configure a Provider.
type Options struct {
	// IDTokenLifetime is how long ID tokens are valid (default 1h).
	IDTokenLifetime time.Duration
	// AllowNoPKCE accepts authorization requests without a code challenge (by default they are
	// refused, as providers that require PKCE do).
	AllowNoPKCE bool
	// RememberSessions keeps a browser signed in at the provider after its login form (cookie
	// SessionCookie): its next authorization request is answered without the form, until
	// end_session ends that session.
	RememberSessions bool
}

// SessionCookie is the provider's browser session cookie (Options.RememberSessions).
const SessionCookie = "oidctest_session"

// EndSessionRequest is what the provider saw of a request to its end_session endpoint.
type EndSessionRequest struct {
	IDTokenHint, ClientID, PostLogoutRedirectURI, State string
	// Subject is the user the ID token hint names ("" without one, or when the request was
	// refused); HadSession tells whether the browser had a session at the provider then.
	Subject    string
	HadSession bool
}

// AuthRequest is what the provider saw of an authorization request.
type AuthRequest struct {
	ClientID, RedirectURI, State, Nonce string
	Scopes                              []string
	CodeChallenge                       string
	CodeChallengeMethod                 string
}

// TokenRequest is what the provider saw of a request to its token endpoint.
type TokenRequest struct {
	GrantType    string
	CodeVerifier string
	Status       int // the answer's
}

// Provider is a running OpenID provider.
type Provider struct {
	server *httptest.Server
	op     *op.Provider
	key    *rsa.PrivateKey
	keyID  string
	opts   Options

	mu       sync.Mutex
	users    map[string]User
	clients  map[string]Client
	requests map[string]*authRequest    // by id
	codes    map[string]string          // code → request id
	tokens   map[string]accessToken     // id → token
	refresh  map[string]*refreshRequest // refresh token → what it was issued for
	seenAuth []AuthRequest
	seenTok  []TokenRequest
	seenEnd  []EndSessionRequest
	sessions map[string]string // browser session cookie → subject
	tamper   func(claims map[string]any)
}

// New starts a provider on a loopback address; it stops when the test ends.
func New(t testing.TB, opts Options) *Provider {
	t.Helper()
	if opts.IDTokenLifetime <= 0 {
		opts.IDTokenLifetime = time.Hour
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{key: key, keyID: uuid.NewString(), opts: opts, users: map[string]User{}, clients: map[string]Client{},
		requests: map[string]*authRequest{}, codes: map[string]string{}, tokens: map[string]accessToken{}, refresh: map[string]*refreshRequest{}, sessions: map[string]string{}}
	p.server = httptest.NewUnstartedServer(nil)
	issuer := "http://" + p.server.Listener.Addr().String()
	cfg := &op.Config{
		CryptoKey:             sha256.Sum256([]byte(p.keyID)),
		CodeMethodS256:        true,
		AuthMethodPost:        true,
		GrantTypeRefreshToken: true,
	}
	p.op, err = op.NewProvider(cfg, &storage{p}, op.StaticIssuer(issuer), op.WithAllowInsecure(),
		op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("oidctest: %v", err)
	}
	mux := http.NewServeMux()
	interceptor := op.NewIssuerInterceptor(p.op.IssuerFromRequest)
	mux.HandleFunc("GET /login", p.loginPage)
	mux.Handle("POST /login", interceptor.HandlerFunc(p.login))
	mux.Handle(p.op.EndSessionEndpoint().Relative(), p.watchEndSession(p.op))
	mux.Handle("/", p.watchTokens(p.op))
	p.server.Config.Handler = mux
	p.server.Start()
	t.Cleanup(p.server.Close)
	return p
}

// Issuer is the provider's issuer URL (http://127.0.0.1:PORT).
func (p *Provider) Issuer() string { return p.server.URL }

// AddUser adds (or replaces, by subject) an account.
func (p *Provider) AddUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users[u.Subject] = u
}

// AddClient registers (or replaces, by ID) a relying party.
func (p *Provider) AddClient(c Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clients[c.ID] = c
}

// Tamper makes the token endpoint change the ID token's claims with fn and sign it again with
// the provider's own key (nil: stop). What a broken or hostile provider would send.
func (p *Provider) Tamper(fn func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = fn
}

// RevokeRefreshTokens kills every refresh token of the user subject: their next use is refused
// with invalid_grant.
func (p *Provider) RevokeRefreshTokens(subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for rt, r := range p.refresh {
		if r.subject == subject {
			delete(p.refresh, rt)
		}
	}
}

// RefreshTokens is the number of live refresh tokens of the user subject.
func (p *Provider) RefreshTokens(subject string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.refresh {
		if r.subject == subject {
			n++
		}
	}
	return n
}

// AuthRequests returns the authorization requests the provider accepted, oldest first.
func (p *Provider) AuthRequests() []AuthRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seenAuth)
}

// EndSessionRequests returns the requests to the end_session endpoint, oldest first.
func (p *Provider) EndSessionRequests() []EndSessionRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seenEnd)
}

// Sessions is the number of browser sessions the provider keeps (Options.RememberSessions).
func (p *Provider) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// TokenRequests returns the requests to the token endpoint, oldest first.
func (p *Provider) TokenRequests() []TokenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seenTok)
}

// LogIn submits the login form of loginPage (the provider's page a client's redirects led to) as
// the user subject, as a person clicking that user's button would, and returns the answer (after
// c's redirects).
func (p *Provider) LogIn(c *http.Client, loginPage *http.Response, subject string) (*http.Response, error) {
	if loginPage.Request == nil || !strings.HasPrefix(loginPage.Request.URL.String(), p.server.URL+"/login?") {
		return nil, fmt.Errorf("oidctest: not the provider's login page: %v", loginPage.Request.URL)
	}
	id := loginPage.Request.URL.Query().Get("authRequestID")
	return c.PostForm(p.server.URL+"/login", url.Values{"id": {id}, "subject": {subject}})
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · oidctest</title></head>
<body>
<h1>Sign in to the test provider</h1>
{{if .Error}}<p role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
{{range .Users}}<p><button type="submit" name="subject" value="{{.Subject}}" id="user-{{.Subject}}">Sign in as {{if .PreferredUsername}}{{.PreferredUsername}}{{else}}{{.Subject}}{{end}}{{if .Email}} ({{.Email}}){{end}}</button></p>
{{end}}</form>
</body></html>
`))

type loginData struct {
	ID, Error string
	Users     []User
}

func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("authRequestID")
	// A browser signed in at the provider is not asked again (single sign-on).
	if c, err := r.Cookie(SessionCookie); err == nil && p.opts.RememberSessions {
		p.mu.Lock()
		subject, okSession := p.sessions[c.Value]
		req, okReq := p.requests[id]
		if okSession && okReq {
			req.subject, req.done, req.authTime = subject, true, time.Now()
		}
		p.mu.Unlock()
		if okSession && okReq {
			http.Redirect(w, r, op.AuthCallbackURL(p.op)(r.Context(), id), http.StatusFound)
			return
		}
	}
	p.renderLogin(w, http.StatusOK, id, "")
}

func (p *Provider) renderLogin(w http.ResponseWriter, status int, id, msg string) {
	p.mu.Lock()
	users := make([]User, 0, len(p.users))
	for _, u := range p.users {
		users = append(users, u)
	}
	p.mu.Unlock()
	slices.SortFunc(users, func(a, b User) int { return strings.Compare(a.Subject, b.Subject) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, loginData{ID: id, Error: msg, Users: users})
}

func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id, subject := r.PostForm.Get("id"), r.PostForm.Get("subject")
	p.mu.Lock()
	req, okReq := p.requests[id]
	_, okUser := p.users[subject]
	if okReq && okUser {
		req.subject, req.done, req.authTime = subject, true, time.Now()
	}
	p.mu.Unlock()
	if !okReq || !okUser {
		p.renderLogin(w, http.StatusBadRequest, id, "Unknown sign-in request or user.")
		return
	}
	if p.opts.RememberSessions {
		sid := uuid.NewString()
		p.mu.Lock()
		p.sessions[sid] = subject
		p.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(r.Context(), id), http.StatusFound)
}

// endSessionCall is what watchEndSession hands TerminateSession: the browser's session cookie and
// the index of the request in seenEnd.
type endSessionCall struct {
	sid string
	idx int
}

type endSessionKey struct{}

// watchEndSession records the end_session endpoint's requests and hands zitadel's handler the
// browser's session cookie (TerminateSession ends that session).
func (p *Provider) watchEndSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		req := EndSessionRequest{IDTokenHint: r.Form.Get("id_token_hint"), ClientID: r.Form.Get("client_id"),
			PostLogoutRedirectURI: r.Form.Get("post_logout_redirect_uri"), State: r.Form.Get("state")}
		sid := ""
		if c, err := r.Cookie(SessionCookie); err == nil {
			sid = c.Value
		}
		p.mu.Lock()
		_, req.HadSession = p.sessions[sid]
		p.seenEnd = append(p.seenEnd, req)
		call := endSessionCall{sid: sid, idx: len(p.seenEnd) - 1}
		p.mu.Unlock()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), endSessionKey{}, call)))
	})
}

// watchTokens records the token endpoint's requests and applies Tamper to its answers.
func (p *Provider) watchTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != p.op.TokenEndpoint().Relative() {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		out := rec.Body.Bytes()
		p.mu.Lock()
		p.seenTok = append(p.seenTok, TokenRequest{GrantType: form.Get("grant_type"), CodeVerifier: form.Get("code_verifier"), Status: rec.Code})
		tamper := p.tamper
		p.mu.Unlock()
		if tamper != nil && rec.Code == http.StatusOK {
			if out, err = p.tamperResponse(out, tamper); err != nil {
				http.Error(w, "oidctest: tamper: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
	})
}

func (p *Provider) tamperResponse(body []byte, fn func(map[string]any)) ([]byte, error) {
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	raw, _ := resp["id_token"].(string)
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, err
	}
	claims := map[string]any{}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &claims); err != nil {
		return nil, err
	}
	fn(claims)
	payload, err := json.Marshal(claims)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", p.keyID))
	if err != nil {
		return nil, err
	}
	signed, err := signer.Sign(payload)
	if err != nil {
		return nil, err
	}
	if resp["id_token"], err = signed.CompactSerialize(); err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

// authRequest is an authorization request in progress (op.AuthRequest).
type authRequest struct {
	id                string
	clientID          string
	redirectURI       string
	state, nonce      string
	scopes            []string
	responseType      oidc.ResponseType
	responseMode      oidc.ResponseMode
	challenge, method string
	subject           string
	done              bool
	authTime          time.Time
}

func (a *authRequest) GetID() string          { return a.id }
func (a *authRequest) GetACR() string         { return "" }
func (a *authRequest) GetAMR() []string       { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string  { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time { return a.authTime }
func (a *authRequest) GetClientID() string    { return a.clientID }
func (a *authRequest) GetNonce() string       { return a.nonce }
func (a *authRequest) GetRedirectURI() string { return a.redirectURI }
func (a *authRequest) GetScopes() []string    { return a.scopes }
func (a *authRequest) GetState() string       { return a.state }
func (a *authRequest) GetSubject() string     { return a.subject }
func (a *authRequest) Done() bool             { return a.done }
func (a *authRequest) GetResponseType() oidc.ResponseType {
	return a.responseType
}
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.responseMode }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.challenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.challenge, Method: oidc.CodeChallengeMethod(a.method)}
}

type accessToken struct {
	subject, clientID string
	scopes            []string
	expires           time.Time
}

// client is a registered Client (op.Client).
type client struct {
	Client
	idTokenLifetime time.Duration
}

func (c client) GetID() string                       { return c.ID }
func (c client) RedirectURIs() []string              { return c.Client.RedirectURIs }
func (c client) PostLogoutRedirectURIs() []string    { return c.Client.PostLogoutRedirectURIs }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c client) LoginURL(id string) string            { return "/login?authRequestID=" + url.QueryEscape(id) }
func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c client) IDTokenLifetime() time.Duration       { return c.idTokenLifetime }
func (c client) DevMode() bool                        { return true } // http redirect URIs on loopback
func (c client) IsScopeAllowed(scope string) bool     { return scope == "groups" }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c client) ClockSkew() time.Duration             { return 0 }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// signingKey is the provider's RSA key (op.SigningKey and op.Key).
type signingKey struct{ p *Provider }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.p.key }
func (k signingKey) ID() string                                  { return k.p.keyID }
func (k signingKey) Use() string                                 { return "sig" }

type publicKey struct{ signingKey }

func (k publicKey) Key() any { return &k.p.key.PublicKey }

var errNotSupported = errors.New("oidctest: not supported")

// storage is op.Storage over the Provider's maps.
type storage struct{ p *Provider }

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if r.CodeChallenge == "" && !s.p.opts.AllowNoPKCE {
		return nil, oidc.ErrInvalidRequest().WithDescription("this provider requires PKCE (code_challenge)")
	}
	req := &authRequest{id: uuid.NewString(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State, nonce: r.Nonce,
		scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode, challenge: r.CodeChallenge, method: string(r.CodeChallengeMethod)}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.requests[req.id] = req
	s.p.seenAuth = append(s.p.seenAuth, AuthRequest{ClientID: r.ClientID, RedirectURI: r.RedirectURI, State: r.State, Nonce: r.Nonce,
		Scopes: slices.Clone(r.Scopes), CodeChallenge: r.CodeChallenge, CodeChallengeMethod: string(r.CodeChallengeMethod)})
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if r, ok := s.p.requests[id]; ok {
		return r, nil
	}
	return nil, errors.New("oidctest: no such auth request")
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	id, ok := s.p.codes[code]
	s.p.mu.Unlock()
	if !ok {
		return nil, errors.New("oidctest: invalid or used code")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.requests, id)
	for code, rid := range s.p.codes {
		if rid == id {
			delete(s.p.codes, code) // a code is used once
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, exp := uuid.NewString(), time.Now().Add(5*time.Minute)
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.tokens[id] = accessToken{subject: r.GetSubject(), clientID: clientOf(r), scopes: r.GetScopes(), expires: exp}
	return id, exp, nil
}

func clientOf(r op.TokenRequest) string {
	switch r := r.(type) {
	case *authRequest:
		return r.clientID
	case *refreshRequest:
		return r.clientID
	}
	return ""
}

// refreshRequest is what a refresh token was issued for (op.RefreshTokenRequest).
type refreshRequest struct {
	subject, clientID string
	scopes            []string
	authTime          time.Time
}

func (r *refreshRequest) GetAMR() []string             { return []string{"pwd"} }
func (r *refreshRequest) GetAudience() []string        { return []string{r.clientID} }
func (r *refreshRequest) GetAuthTime() time.Time       { return r.authTime }
func (r *refreshRequest) GetClientID() string          { return r.clientID }
func (r *refreshRequest) GetScopes() []string          { return r.scopes }
func (r *refreshRequest) GetSubject() string           { return r.subject }
func (r *refreshRequest) SetCurrentScopes(sc []string) { r.scopes = sc }

// CreateAccessAndRefreshTokens issues an access token and a new refresh token; a refresh
// (current set) kills the refresh token it used.
func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	if current != "" {
		s.p.mu.Lock()
		_, ok := s.p.refresh[current]
		delete(s.p.refresh, current)
		s.p.mu.Unlock()
		if !ok {
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("the refresh token was used already")
		}
	}
	id, exp, err := s.CreateAccessToken(ctx, r)
	if err != nil {
		return "", "", time.Time{}, err
	}
	rt := rand.Text()
	req := &refreshRequest{subject: r.GetSubject(), clientID: clientOf(r), scopes: slices.Clone(r.GetScopes()), authTime: time.Now()}
	s.p.mu.Lock()
	s.p.refresh[rt] = req
	s.p.mu.Unlock()
	return id, rt, exp, nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, rt string) (op.RefreshTokenRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	r, ok := s.p.refresh[rt]
	if !ok {
		return nil, oidc.ErrInvalidGrant().WithDescription("the refresh token is unknown, used or revoked")
	}
	c := *r
	return &c, nil
}

// TerminateSession ends the browser's session at the provider (its cookie, put in ctx by
// watchEndSession) and every session of userID (the ID token hint's subject, when there was one).
func (s *storage) TerminateSession(ctx context.Context, userID, _ string) error {
	call, ok := ctx.Value(endSessionKey{}).(endSessionCall)
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if ok {
		s.p.seenEnd[call.idx].Subject = userID
		delete(s.p.sessions, call.sid)
	}
	for k, sub := range s.p.sessions {
		if userID != "" && sub == userID {
			delete(s.p.sessions, k)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, id, _, _ string) *oidc.Error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.tokens, id)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return signingKey{s.p}, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{signingKey{s.p}}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	c, ok := s.p.clients[id]
	if !ok {
		return nil, errors.New("oidctest: unknown client")
	}
	return client{Client: c, idTokenLifetime: s.p.opts.IDTokenLifetime}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if c, ok := s.p.clients[id]; !ok || c.Secret != secret {
		return errors.New("oidctest: unknown client or wrong secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest (op.CanSetUserinfoFromRequest) fills the ID token's claims.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, r.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.p.mu.Lock()
	tok, ok := s.p.tokens[tokenID]
	s.p.mu.Unlock()
	if !ok || time.Now().After(tok.expires) {
		return errors.New("oidctest: invalid or expired access token")
	}
	return s.setUserinfo(info, tok.subject, tok.scopes)
}

func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	s.p.mu.Lock()
	u, ok := s.p.users[subject]
	s.p.mu.Unlock()
	if !ok {
		return errors.New("oidctest: unknown user")
	}
	info.Subject = u.Subject
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeEmail:
			info.Email = u.Email
			if u.EmailVerified != nil {
				// The struct's field leaves false out; a claim says it.
				info.AppendClaims("email_verified", *u.EmailVerified)
			}
		case oidc.ScopeProfile:
			info.PreferredUsername, info.Name = u.PreferredUsername, u.Name
		case "groups":
			if len(u.Groups) > 0 {
				info.AppendClaims("groups", slices.Clone(u.Groups))
			}
		}
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errNotSupported
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotSupported
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errNotSupported
}

func (s *storage) Health(context.Context) error { return nil }
