package oidctest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

// rp is a relying party for the provider's own tests: a callback that records the code it gets.
type rp struct {
	cfg      oauth2.Config
	verifier *oidc.IDTokenVerifier
	codes    chan string
}

func newRP(t *testing.T, p *oidctest.Provider, scopes ...string) *rp {
	t.Helper()
	r := &rp{codes: make(chan string, 1)}
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.codes <- req.URL.Query().Get("code")
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(cb.Close)
	p.AddClient(oidctest.Client{ID: "rp", Secret: "rp-secret", RedirectURIs: []string{cb.URL + "/cb"}})
	prov, err := oidc.NewProvider(context.Background(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	ep := prov.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInHeader // one request per exchange, for TokenRequests
	r.cfg = oauth2.Config{ClientID: "rp", ClientSecret: "rp-secret", Endpoint: ep, RedirectURL: cb.URL + "/cb",
		Scopes: append([]string{oidc.ScopeOpenID}, scopes...)}
	r.verifier = prov.Verifier(&oidc.Config{ClientID: "rp"})
	return r
}

func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

// signIn goes through the provider's login page as subject and returns the code it gave.
func (r *rp) signIn(t *testing.T, p *oidctest.Provider, subject string, opts ...oauth2.AuthCodeOption) string {
	t.Helper()
	c := browser(t)
	page, err := c.Get(r.cfg.AuthCodeURL("st", opts...))
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Fatalf("authorize: %s", page.Status)
	}
	resp, err := p.LogIn(c, page, subject)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case code := <-r.codes:
		return code
	default:
		t.Fatalf("no code reached the callback (%s at %s)", resp.Status, resp.Request.URL)
		return ""
	}
}

func TestProviderIssuesVerifiableIDTokensWithPKCE(t *testing.T) {
	ctx := context.Background()
	p := oidctest.New(t, oidctest.Options{})
	no := false
	p.AddUser(oidctest.User{Subject: "u1", Email: "alice@example.com", EmailVerified: &no, PreferredUsername: "alice", Groups: []string{"devs", "ops"}})
	r := newRP(t, p, oidc.ScopeEmail, "profile", "groups")

	verifier := oauth2.GenerateVerifier()
	code := r.signIn(t, p, "u1", oidc.Nonce("n-1"), oauth2.S256ChallengeOption(verifier))
	if got := p.AuthRequests(); len(got) != 1 || got[0].CodeChallengeMethod != "S256" || got[0].Nonce != "n-1" || got[0].State != "st" {
		t.Fatalf("AuthRequests = %+v", got)
	}
	// A wrong verifier is refused (before the code is used up), the right one accepted, once.
	if _, err := r.cfg.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("a wrong code_verifier was accepted")
	}
	tok, err := r.cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange with the right verifier: %v", err)
	}
	if _, err := r.cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a code was exchanged twice")
	}
	if trs := p.TokenRequests(); len(trs) != 3 || trs[1].CodeVerifier != verifier || trs[1].Status != http.StatusOK || trs[0].Status == http.StatusOK {
		t.Fatalf("TokenRequests = %+v", trs)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := r.verifier.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("verify the ID token: %v", err)
	}
	var claims struct {
		Email         string   `json:"email"`
		EmailVerified *bool    `json:"email_verified"`
		Preferred     string   `json:"preferred_username"`
		Groups        []string `json:"groups"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if idt.Subject != "u1" || idt.Nonce != "n-1" || claims.Email != "alice@example.com" || claims.EmailVerified == nil || *claims.EmailVerified ||
		claims.Preferred != "alice" || !slices.Equal(claims.Groups, []string{"devs", "ops"}) {
		t.Fatalf("ID token: sub %q nonce %q claims %+v", idt.Subject, idt.Nonce, claims)
	}

	// Without a verifier, no token.
	code = r.signIn(t, p, "u1", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	if _, err := r.cfg.Exchange(ctx, code); err == nil {
		t.Fatal("an exchange without code_verifier was accepted")
	}
}

func TestProviderRequiresPKCEAndTampers(t *testing.T) {
	ctx := context.Background()
	p := oidctest.New(t, oidctest.Options{})
	p.AddUser(oidctest.User{Subject: "u1"})
	r := newRP(t, p)

	// No code challenge: the provider sends the browser back with an error, not a login page.
	c := browser(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(r.cfg.AuthCodeURL("st"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "error=invalid_request") {
		t.Fatalf("an authorization request without PKCE: %s, Location %q", resp.Status, loc)
	}

	// Tamper: the audience changed and the token signed again: the signature still holds (the
	// provider's key), the audience check refuses it.
	p.Tamper(func(claims map[string]any) { claims["aud"] = "someone-else" })
	verifier := oauth2.GenerateVerifier()
	code := r.signIn(t, p, "u1", oauth2.S256ChallengeOption(verifier))
	tok, err := r.cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if _, err := r.verifier.Verify(ctx, raw); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("a tampered audience: %v, want an audience error", err)
	}
	noAud := oidc.Config{SkipClientIDCheck: true}
	prov, _ := oidc.NewProvider(ctx, p.Issuer())
	if _, err := prov.Verifier(&noAud).Verify(ctx, raw); err != nil {
		t.Fatalf("the tampered token's signature does not verify: %v", err)
	}
}

// With offline_access the code gives a refresh token; a refresh gives a new one and kills the one
// used (a second use is invalid_grant); RevokeRefreshTokens kills the user's.
func TestRefreshTokensRotate(t *testing.T) {
	ctx := context.Background()
	p := oidctest.New(t, oidctest.Options{})
	p.AddUser(oidctest.User{Subject: "u1", PreferredUsername: "one"})
	r := newRP(t, p, oidc.ScopeOfflineAccess)
	verifier := oauth2.GenerateVerifier()
	tok, err := r.cfg.Exchange(ctx, r.signIn(t, p, "u1", oauth2.S256ChallengeOption(verifier)), oauth2.VerifierOption(verifier))
	if err != nil || tok.RefreshToken == "" || p.RefreshTokens("u1") != 1 {
		t.Fatalf("exchange: %+v, %v; %d refresh tokens", tok, err, p.RefreshTokens("u1"))
	}
	refresh := func(rt string) (*oauth2.Token, error) {
		return r.cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	}
	next, err := refresh(tok.RefreshToken)
	if err != nil || next.AccessToken == "" || next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken || p.RefreshTokens("u1") != 1 {
		t.Fatalf("refresh: %+v, %v; %d refresh tokens", next, err, p.RefreshTokens("u1"))
	}
	var re *oauth2.RetrieveError
	if _, err := refresh(tok.RefreshToken); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("the used refresh token again: %v, want invalid_grant", err)
	}
	p.RevokeRefreshTokens("u1")
	if _, err := refresh(next.RefreshToken); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || p.RefreshTokens("u1") != 0 {
		t.Fatalf("a revoked refresh token: %v, want invalid_grant", err)
	}
	// Without offline_access: no refresh token.
	plain := newRP(t, p)
	v2 := oauth2.GenerateVerifier()
	if tok, err := plain.cfg.Exchange(ctx, plain.signIn(t, p, "u1", oauth2.S256ChallengeOption(v2)), oauth2.VerifierOption(v2)); err != nil || tok.RefreshToken != "" {
		t.Fatalf("exchange without offline_access: %+v, %v", tok, err)
	}
}
