package externalauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

const (
	// LinkLifetime bounds the time from a link's start to the forge's callback.
	LinkLifetime = 10 * time.Minute
	// refreshClaim is how long a replica's claim to refresh a token holds: longer than a forge's
	// answer may take (forgeTimeout, twice), so that a claim lapses only when its replica died.
	refreshClaim = 45 * time.Second
	forgeTimeout = 15 * time.Second
	// waitInterval is how often Token reads a link again while another replica refreshes it;
	// maxReads bounds its reads of one link: a claim lapses before.
	waitInterval = 250 * time.Millisecond
	maxReads     = int(refreshClaim/waitInterval) + 10
	// maxUserAPIBytes bounds the forge's user API answer.
	maxUserAPIBytes = 1 << 20
)

// Errors Token and GitCredential return (wrapped, with the forge and what to do).
var (
	ErrUnknownProvider = errs.New(errs.NotFound, "no such forge")
	// ErrNotLinked is a conflict, not a not-found: git's credential helper lets git go on to other
	// helpers on a 404 (no forge serves the host) and stops it, with this message, otherwise.
	ErrNotLinked = errs.New(errs.Conflict, "not linked")
	// ErrNoLink is an unlink of a forge the user has no link to.
	ErrNoLink    = errs.New(errs.NotFound, "no link")
	ErrRelink    = errs.New(errs.Conflict, "must be linked again")
	ErrSuspended = errs.New(errs.Forbidden, "user suspended")
	ErrNoForge   = errs.New(errs.NotFound, "no forge for this host")
	ErrForge     = errs.New(errs.Unreachable, "the forge did not answer")
	ErrLinkState = errs.New(errs.Invalid, "invalid link")
)

// Options configure a Service.
type Options struct {
	Providers []Provider
	Keys      *Keyring
	Store     store.ExternalAuthStore
	Clock     clock.Clock
	// After makes the timers of a wait for another replica's refresh (default time.After).
	After func(time.Duration) <-chan time.Time
	// CallbackURL is <the server's URL as browsers reach it>/external-auth/{id}/callback for a
	// forge id: the redirect URI its OAuth2 application must allow.
	CallbackURL func(providerID string) string
	// HTTPClient reaches the forges (default: one with a 15 s timeout).
	HTTPClient *http.Client
	// RefreshMargin is DefaultRefreshMargin unless set.
	RefreshMargin time.Duration
	Log           *slog.Logger
}

// Service links users to forges and hands out their tokens.
type Service struct {
	o    Options
	byID map[string]Provider
}

// New returns a Service over o.
func New(o Options) *Service {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: forgeTimeout}
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.RefreshMargin <= 0 {
		o.RefreshMargin = DefaultRefreshMargin
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{o: o, byID: map[string]Provider{}}
	for _, p := range o.Providers {
		s.byID[p.ID] = p
	}
	return s
}

// Providers lists the configured forges, in the config's order.
func (s *Service) Providers() []Provider { return s.o.Providers }

// Provider returns the forge of that id.
func (s *Service) Provider(id string) (Provider, error) {
	p, ok := s.byID[id]
	if !ok {
		return Provider{}, fmt.Errorf("%w %q: the server's external auth config has none of that id", ErrUnknownProvider, id)
	}
	return p, nil
}

func (s *Service) oauth(p Provider) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if p.clientAuthInBody() {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, Scopes: p.Scopes, RedirectURL: s.o.CallbackURL(p.ID),
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthorizeURL, TokenURL: p.TokenURL, AuthStyle: style}}
}

func (s *Service) forgeCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.o.HTTPClient)
}

// BeginLink starts u's link to a forge: it records a single-use state, bound to u, with a PKCE
// verifier, and returns the forge's authorize URL to send the browser to.
func (s *Service) BeginLink(ctx context.Context, u workspace.User, providerID string) (string, error) {
	p, err := s.Provider(providerID)
	if err != nil {
		return "", err
	}
	state := rand.Text() + rand.Text()
	verifier := oauth2.GenerateVerifier()
	now := s.o.Clock.Now()
	if err := s.o.Store.CreateExternalAuthState(ctx, store.ExternalAuthState{StateHash: stateHash(state), UserID: u.ID, ProviderID: p.ID,
		CodeVerifier: verifier, ExpiresAt: now.Add(LinkLifetime)}, now); err != nil {
		return "", fmt.Errorf("begin the link to %s: %w", p.ID, err)
	}
	return s.oauth(p).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), nil
}

func stateHash(state string) []byte {
	sum := sha256.Sum256([]byte(state))
	return sum[:]
}

// LinkState is a link in progress, as the callback found it.
type LinkState struct {
	UserID   string
	Provider Provider
	verifier string
}

// TakeState takes the state the forge sent back to providerID's callback (once).
func (s *Service) TakeState(ctx context.Context, providerID, state string) (LinkState, error) {
	p, err := s.Provider(providerID)
	if err != nil {
		return LinkState{}, err
	}
	if state == "" || len(state) > 200 {
		return LinkState{}, fmt.Errorf("%w: the forge sent no state back", ErrLinkState)
	}
	st, err := s.o.Store.TakeExternalAuthState(ctx, stateHash(state), s.o.Clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return LinkState{}, fmt.Errorf("%w: this link was used already, or began more than %s ago: start it again", ErrLinkState, LinkLifetime)
	} else if err != nil {
		return LinkState{}, err
	}
	if st.ProviderID != p.ID {
		return LinkState{}, fmt.Errorf("%w: this link was begun for %s, not %s", ErrLinkState, st.ProviderID, p.ID)
	}
	return LinkState{UserID: st.UserID, Provider: p, verifier: st.CodeVerifier}, nil
}

// CompleteLink exchanges the forge's code (with the state's PKCE verifier), reads the account
// from the forge's user API, and stores the link, its tokens sealed.
func (s *Service) CompleteLink(ctx context.Context, st LinkState, code string) (store.ExternalAuthLink, error) {
	p := st.Provider
	if code == "" {
		return store.ExternalAuthLink{}, fmt.Errorf("%w: the forge sent no code back", ErrLinkState)
	}
	tok, err := s.oauth(p).Exchange(s.forgeCtx(ctx), code, oauth2.VerifierOption(st.verifier))
	if err != nil {
		return store.ExternalAuthLink{}, fmt.Errorf("%w: %s refused the code: %s", ErrForge, p.Name, forgeReason(err))
	}
	login, email, err := s.account(ctx, p, tok.AccessToken)
	if err != nil {
		return store.ExternalAuthLink{}, err
	}
	now := s.o.Clock.Now()
	l := store.ExternalAuthLink{UserID: st.UserID, ProviderID: p.ID, AccountLogin: login, AccountEmail: email, LinkedAt: now}
	s.seal(&l, tok, now)
	l, err = s.o.Store.PutExternalAuthLink(ctx, l)
	if err != nil {
		return store.ExternalAuthLink{}, err
	}
	s.o.Log.Info("external auth linked", "user", st.UserID, "forge", p.ID, "account", login)
	return l, nil
}

// seal puts tok's tokens, sealed, and its expiry (from expires_in, on the injected clock) in l.
func (s *Service) seal(l *store.ExternalAuthLink, tok *oauth2.Token, now time.Time) {
	l.KeyID, l.AccessToken = s.o.Keys.Seal([]byte(tok.AccessToken), tokenAAD(l.UserID, l.ProviderID, "access"))
	l.RefreshToken = nil
	if tok.RefreshToken != "" {
		_, l.RefreshToken = s.o.Keys.Seal([]byte(tok.RefreshToken), tokenAAD(l.UserID, l.ProviderID, "refresh"))
	}
	l.ExpiresAt = expiry(tok, now)
}

// expiry is when tok expires: expires_in from now on the injected clock (nil: never).
func expiry(tok *oauth2.Token, now time.Time) *time.Time {
	var e time.Time
	switch {
	case tok.ExpiresIn > 0:
		e = now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	case !tok.Expiry.IsZero():
		e = tok.Expiry.UTC()
	default:
		return nil
	}
	return &e
}

// account reads the forge account's login and email from its user API.
func (s *Service) account(ctx context.Context, p Provider, accessToken string) (login, email string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.UserURL, nil)
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := s.o.HTTPClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("%w: %s's user API: %v", ErrForge, p.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUserAPIBytes))
	if err != nil {
		return "", "", fmt.Errorf("%w: %s's user API: %v", ErrForge, p.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("%w: %s's user API answered %s", ErrForge, p.Name, resp.Status)
	}
	return DecodeAccount(body)
}

// DecodeAccount reads a forge's user API answer: the login is GitHub's and Gitea's login,
// GitLab's and Bitbucket's username, or an OpenID provider's preferred_username.
func DecodeAccount(body []byte) (login, email string, err error) {
	var a struct {
		Login             string `json:"login"`
		Username          string `json:"username"`
		PreferredUsername string `json:"preferred_username"`
		Nickname          string `json:"nickname"`
		Email             string `json:"email"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", "", fmt.Errorf("%w: its user API answered no JSON object: %v", ErrForge, err)
	}
	for _, l := range []string{a.Login, a.Username, a.PreferredUsername, a.Nickname} {
		if l = strings.TrimSpace(l); l != "" {
			return truncate(l, 200), truncate(strings.TrimSpace(a.Email), 320), nil
		}
	}
	return "", "", fmt.Errorf("%w: its user API named no account (login, username or preferred_username)", ErrForge)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Token is a usable access token of a user's link, and the user name git sends with it.
type Token struct {
	AccessToken string
	Username    string
	// ExpiresAt is when the access token expires (nil: not said).
	ExpiresAt *time.Time
	Provider  Provider
}

// Token returns u's valid access token at a forge: the stored one while it has more than the
// refresh margin to live, else a refreshed one. Only one replica refreshes a link at a time (a
// claim by compare-and-swap on the link's version); the others wait and use its result. When the
// forge refuses the refresh token, the link is marked to be linked again, with the forge's reason.
// A suspended user gets nothing.
func (s *Service) Token(ctx context.Context, u workspace.User, providerID string) (Token, error) {
	p, err := s.Provider(providerID)
	if err != nil {
		return Token{}, err
	}
	if u.SuspendedAt != nil {
		return Token{}, fmt.Errorf("%w: %s is suspended (since %s): no forge token is handed out", ErrSuspended, u.Username, u.SuspendedAt.Format(time.RFC3339))
	}
	for reads := 1; ; reads++ {
		if reads > maxReads {
			return Token{}, fmt.Errorf("%w: another server is still refreshing the token of %s", ErrForge, p.Name)
		}
		l, err := s.o.Store.ExternalAuthLink(ctx, u.ID, p.ID)
		if errors.Is(err, store.ErrNotFound) {
			return Token{}, fmt.Errorf("%w: %s has not linked %s: run `hangar external-auth link %s`", ErrNotLinked, u.Username, p.Name, p.ID)
		} else if err != nil {
			return Token{}, err
		}
		now := s.o.Clock.Now()
		d, reason := Decide(TokenState{ExpiresAt: l.ExpiresAt, CanRefresh: l.RefreshToken != nil, RelinkReason: l.RelinkReason}, now, s.o.RefreshMargin)
		switch d {
		case Use:
			return s.open(l, p)
		case Relink:
			return Token{}, relinkError(p, reason)
		}
		if l.RefreshClaimedUntil != nil && now.Before(*l.RefreshClaimedUntil) {
			// Another replica (or request) is refreshing: wait for its result.
			select {
			case <-ctx.Done():
				return Token{}, ctx.Err()
			case <-s.o.After(waitInterval):
			}
			continue
		}
		until := now.Add(refreshClaim)
		l.RefreshClaimedUntil = &until
		claimed, err := s.o.Store.UpdateExternalAuthLink(ctx, l)
		if errors.Is(err, store.ErrConflict) {
			continue // another request claimed it first, or finished: read again
		} else if errors.Is(err, store.ErrNotFound) {
			continue // unlinked meanwhile: read again, which says so
		} else if err != nil {
			return Token{}, err
		}
		return s.refresh(ctx, claimed, p)
	}
}

// refresh exchanges l's refresh token (l is claimed) and stores the outcome. It is finished within
// the claim even if the request that asked ends first: a forge that rotates refresh tokens makes
// the old one dead as it answers, so an outcome not stored would leave the link to be made again.
func (s *Service) refresh(ctx context.Context, l store.ExternalAuthLink, p Provider) (Token, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshClaim)
	defer cancel()
	rt, err := s.o.Keys.Open(l.KeyID, l.RefreshToken, tokenAAD(l.UserID, l.ProviderID, "refresh"))
	if err != nil {
		return Token{}, s.finishRefresh(ctx, l, p, nil, "the stored refresh token does not open (was the key file changed?)", true)
	}
	var tok *oauth2.Token
	for try := 0; try < 2; try++ {
		// A failure that is not the forge's refusal (a timeout, a 5xx) is tried once more.
		tok, err = s.oauth(p).TokenSource(s.forgeCtx(ctx), &oauth2.Token{RefreshToken: string(rt)}).Token()
		if err == nil || refused(err) {
			break
		}
	}
	if err != nil {
		return Token{}, s.finishRefresh(ctx, l, p, nil, forgeReason(err), refused(err))
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = string(rt) // the forge keeps it (no rotation): sealed again with the rest
	}
	if err := s.finishRefresh(ctx, l, p, tok, "", false); err != nil {
		return Token{}, err
	}
	return Token{AccessToken: tok.AccessToken, Username: p.GitUsername(), ExpiresAt: expiry(tok, s.o.Clock.Now()), Provider: p}, nil
}

// finishRefresh writes a refresh's outcome over the claimed link: the new tokens, or the error
// (and, when the forge refused, that the link must be redone). It returns the error Token returns.
func (s *Service) finishRefresh(ctx context.Context, l store.ExternalAuthLink, p Provider, tok *oauth2.Token, reason string, relink bool) error {
	now := s.o.Clock.Now()
	l.RefreshClaimedUntil = nil
	if tok != nil {
		s.seal(&l, tok, now) // under the current key, the refresh token too
		l.RefreshedAt, l.RefreshError, l.RelinkReason = &now, "", ""
	} else {
		l.RefreshError = reason
		if relink {
			l.RelinkReason = "the forge refused the refresh: " + reason
		}
	}
	if _, err := s.o.Store.UpdateExternalAuthLink(ctx, l); err != nil {
		// Unlinked (or linked again) while the forge answered: what was written since wins.
		return fmt.Errorf("store the refreshed token of %s: %w", p.ID, err)
	}
	switch {
	case tok != nil:
		s.o.Log.Info("external auth token refreshed", "user", l.UserID, "forge", p.ID)
		return nil
	case relink:
		s.o.Log.Warn("external auth link must be redone", "user", l.UserID, "forge", p.ID, "reason", reason)
		return relinkError(p, l.RelinkReason)
	}
	s.o.Log.Warn("external auth token refresh failed", "user", l.UserID, "forge", p.ID, "err", reason)
	return fmt.Errorf("%w: refreshing the token of %s: %s", ErrForge, p.Name, reason)
}

func relinkError(p Provider, reason string) error {
	return fmt.Errorf("%w: %s: %s; run `hangar external-auth link %s`", ErrRelink, p.Name, reason, p.ID)
}

// refused tells whether the forge refused a refresh (an OAuth2 error answer, RFC 6749 5.2) rather
// than failed to answer.
func refused(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500
}

// forgeReason is what the forge said, without any token: its error code and description.
func forgeReason(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			if re.ErrorDescription != "" {
				return re.ErrorCode + ": " + truncate(re.ErrorDescription, 300)
			}
			return re.ErrorCode
		}
		if re.Response != nil {
			return "the token endpoint answered " + re.Response.Status
		}
	}
	var ue interface{ Timeout() bool }
	if errors.As(err, &ue) && ue.Timeout() {
		return "the forge did not answer in time"
	}
	return "the forge could not be reached"
}

func (s *Service) open(l store.ExternalAuthLink, p Provider) (Token, error) {
	at, err := s.o.Keys.Open(l.KeyID, l.AccessToken, tokenAAD(l.UserID, l.ProviderID, "access"))
	if err != nil {
		return Token{}, fmt.Errorf("%w: %s: the stored token does not open (was the key file changed?); run `hangar external-auth link %s`", ErrRelink, p.Name, p.ID)
	}
	return Token{AccessToken: string(at), Username: p.GitUsername(), ExpiresAt: l.ExpiresAt, Provider: p}, nil
}

// GitCredential is the credential git gets for req in a workspace of owner: the owner's token at
// the forge that serves req's host and path.
func (s *Service) GitCredential(ctx context.Context, owner workspace.User, req CredentialRequest) (Token, error) {
	p, ok := Match(s.o.Providers, req)
	if !ok {
		return Token{}, fmt.Errorf("%w: no forge configured on this Hangar serves %s://%s", ErrNoForge, req.Protocol, req.Host)
	}
	return s.Token(ctx, owner, p.ID)
}

// Unlink forgets u's link to a forge (its tokens with it).
func (s *Service) Unlink(ctx context.Context, u workspace.User, providerID string) error {
	p, err := s.Provider(providerID)
	if err != nil {
		return err
	}
	if err := s.o.Store.DeleteExternalAuthLink(ctx, u.ID, p.ID); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s has no link to %s", ErrNoLink, u.Username, p.Name)
	} else if err != nil {
		return err
	}
	s.o.Log.Info("external auth unlinked", "user", u.ID, "forge", p.ID)
	return nil
}

// LinkStatus is a forge and u's link to it (Linked false: none).
type LinkStatus struct {
	Provider Provider
	Linked   bool
	Link     store.ExternalAuthLink
}

// Links lists every configured forge with u's link to it.
func (s *Service) Links(ctx context.Context, u workspace.User) ([]LinkStatus, error) {
	links, err := s.o.Store.ExternalAuthLinks(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	by := map[string]store.ExternalAuthLink{}
	for _, l := range links {
		by[l.ProviderID] = l
	}
	out := make([]LinkStatus, 0, len(s.o.Providers))
	for _, p := range s.o.Providers {
		l, ok := by[p.ID]
		out = append(out, LinkStatus{Provider: p, Linked: ok, Link: l})
	}
	return out, nil
}
