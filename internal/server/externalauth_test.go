package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/testutil/oidctest"
)

// forgeEnv is a Terraform server (a workspace tfw of user dev, with its helper's hwa_ token) with
// one forge configured: a real OAuth2 provider on loopback (oidctest: the code flow with PKCE,
// refresh tokens that rotate, a user API).
type forgeEnv struct {
	*agentEnv
	forge     *oidctest.Provider
	providers []externalauth.Provider
	keys      *externalauth.Keyring
}

const (
	forgeClient  = "hangar-forge"
	forgeSecret  = "forge-client-secret"
	forgeSubject = "forge-dev"
	forgeLogin   = "dev-at-forge"
	forgeHost    = "git.forge.test"
	testKeyFile  = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"
)

// forgeConfig is the external auth config of the test forge, as an admin writes it.
func forgeConfig(issuer string) string {
	return fmt.Sprintf(`providers:
  - id: forge
    name: Test Forge
    type: gitea
    client_id: %s
    client_secret_env: FORGE_SECRET
    base_url: %s
    authorize_url: %s/authorize
    token_url: %s/oauth/token
    user_url: %s/userinfo
    scopes: [openid, profile, email, offline_access]
    hosts: [%s]
`, forgeClient, issuer, issuer, issuer, issuer, forgeHost)
}

func newForgeEnv(t *testing.T, engine string) *forgeEnv {
	t.Helper()
	fe := &forgeEnv{forge: oidctest.New(t, oidctest.Options{})}
	fe.forge.AddUser(oidctest.User{Subject: forgeSubject, PreferredUsername: forgeLogin, Email: "dev@forge.test"})
	var err error
	fe.providers, err = externalauth.Decode([]byte(forgeConfig(fe.forge.Issuer())),
		func(k string) (string, bool) {
			return map[string]string{"FORGE_SECRET": forgeSecret}[k], k == "FORGE_SECRET"
		}, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if fe.keys, err = externalauth.ParseKeys([]byte(testKeyFile)); err != nil {
		t.Fatal(err)
	}
	var base string
	fe.agentEnv = newAgentEnv(t, engine, func(o *server.Options) {
		o.ExternalAuth = fe.service(o.Store, o, func() string { return base })
	})
	base = fe.URL
	fe.forge.AddClient(oidctest.Client{ID: forgeClient, Secret: forgeSecret, RedirectURIs: []string{server.ExternalAuthCallbackURL(base, "forge")}})
	return fe
}

// service is an externalauth.Service as a replica's: over its store and the shared fake clock.
func (fe *forgeEnv) service(st store.Store, o *server.Options, base func() string) *externalauth.Service {
	return externalauth.New(externalauth.Options{Providers: fe.providers, Keys: fe.keys, Store: st, Clock: o.Clock,
		CallbackURL:   func(id string) string { return server.ExternalAuthCallbackURL(base(), id) },
		RefreshMargin: time.Minute, Log: o.Logger,
		After: func(time.Duration) <-chan time.Time { return time.After(5 * time.Millisecond) }})
}

// link goes through the link flow as a browser signed in to Hangar with token would: POST link,
// the forge's login as subject, back to the callback. It returns the callback's answer and page.
func (fe *forgeEnv) link(t *testing.T, token, subject string) (*http.Response, string) {
	t.Helper()
	var start sdk.ExternalAuthLinkStart
	mustCall(t, fe.Env, token, "POST", "/api/v1/external-auth/forge/link", map[string]any{}, http.StatusOK, &start)
	u, err := url.Parse(start.AuthorizeURL)
	if err != nil || !strings.HasPrefix(start.AuthorizeURL, fe.forge.Issuer()+"/authorize?") || u.Query().Get("code_challenge_method") != "S256" ||
		u.Query().Get("state") == "" || u.Query().Get("redirect_uri") != server.ExternalAuthCallbackURL(fe.URL, "forge") {
		t.Fatalf("authorize URL %s", start.AuthorizeURL)
	}
	b := newOIDCBrowser(t)
	if resp, body := b.postForm(fe.URL+"/signin", url.Values{"token": {token}, "return_to": {"/ui/"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %s %s", resp.Status, body)
	}
	page, body := b.get(start.AuthorizeURL)
	if !strings.Contains(body, "Sign in to the test provider") {
		t.Fatalf("the authorize URL led to %s: %s", page.Request.URL, body)
	}
	resp, err := fe.forge.LogIn(b.c, page, subject)
	if err != nil {
		t.Fatal(err)
	}
	return b.read(resp)
}

func (b *oidcBrowser) postForm(u string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.PostForm(u, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.read(resp)
}

// gitCredential asks as a workspace helper would.
func gitCredential(t *testing.T, base, helperToken, host, path string) (int, sdk.GitCredential, sdk.Error) {
	t.Helper()
	body, _ := json.Marshal(sdk.GitCredentialRequest{Protocol: "https", Host: host, Path: path})
	req, _ := http.NewRequest("POST", base+protocol.GitCredentialsPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+helperToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var c sdk.GitCredential
	var e sdk.Error
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
	} else {
		_ = json.Unmarshal(data, &e)
	}
	return resp.StatusCode, c, e
}

// forgeUser is who the forge says an access token belongs to (its user API), or the status.
func (fe *forgeEnv) forgeUser(t *testing.T, accessToken string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", fe.forge.Issuer()+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+accessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Username string `json:"preferred_username"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return resp.Status
	}
	return info.Username
}

func listForges(t *testing.T, env *servertest.Env, token string) []sdk.ExternalAuth {
	t.Helper()
	var l sdk.ExternalAuthList
	mustCall(t, env, token, "GET", "/api/v1/external-auth", nil, http.StatusOK, &l)
	return l.Providers
}

func refreshGrants(p *oidctest.Provider) (ok, refused int) {
	for _, r := range p.TokenRequests() {
		if r.GrantType == "refresh_token" {
			if r.Status == http.StatusOK {
				ok++
			} else {
				refused++
			}
		}
	}
	return ok, refused
}

// TestExternalAuth: a user links a forge through the real code flow (state, PKCE), the workspace
// helper's git-credentials request gets the owner's token (which the forge accepts), the token is
// refreshed before it expires (and the used refresh token dies at the forge), two replicas
// refreshing at once send the refresh token once and hand out the same token, a refresh the forge
// refuses asks for a new link with its reason, a suspended owner and an unlinked forge get nothing.
func TestExternalAuth(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testExternalAuth(t, engine) })
	}
}

func testExternalAuth(t *testing.T, engine string) {
	ctx := context.Background()
	fe := newForgeEnv(t, engine)
	env, helper := fe.Env, fe.job.AgentToken

	if l := listForges(t, env, fe.dev); len(l) != 1 || l[0].ID != "forge" || l[0].Name != "Test Forge" || l[0].Type != "gitea" || l[0].Linked {
		t.Fatalf("forges before a link: %+v", l)
	}
	// Before the link: git hears how to link.
	status, _, e := gitCredential(t, env.URL, helper, forgeHost, "team/app.git")
	if status != http.StatusConflict || e.Message != "not linked: dev has not linked Test Forge: run `hangar external-auth link forge`" {
		t.Fatalf("git credential before a link: %d %+v", status, e)
	}
	// No forge serves this host.
	if status, _, e := gitCredential(t, env.URL, helper, "github.com", "o/r"); status != http.StatusNotFound ||
		e.Message != "no forge for this host: no forge configured on this Hangar serves https://github.com" {
		t.Fatalf("git credential for an unknown host: %d %+v", status, e)
	}
	// A user's token is not a helper's.
	if status, _, _ := gitCredential(t, env.URL, fe.dev, forgeHost, ""); status != http.StatusUnauthorized {
		t.Fatalf("git credential with a user token: %d, want 401", status)
	}

	resp, page := fe.link(t, fe.dev, forgeSubject)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "is linked to Test Forge as "+forgeLogin) || !strings.Contains(page, "You can close this page") {
		t.Fatalf("callback: %s %s", resp.Status, page)
	}
	l := listForges(t, env, fe.dev)
	if !l[0].Linked || l[0].AccountLogin != forgeLogin || l[0].AccountEmail != "dev@forge.test" || l[0].NeedsRelink || l[0].LinkedAt == nil || !l[0].LinkedAt.Equal(servertest.Start) {
		t.Fatalf("forges after the link: %+v", l)
	}
	// The token reaches git, and the forge takes it as the user's.
	status, cred, e := gitCredential(t, env.URL, helper, forgeHost, "team/app.git")
	if status != http.StatusOK || cred.Username != "oauth2" || cred.Password == "" {
		t.Fatalf("git credential: %d %+v %+v", status, cred, e)
	}
	if who := fe.forgeUser(t, cred.Password); who != forgeLogin {
		t.Fatalf("the forge says the handed-out token is %s's", who)
	}
	// At rest the tokens are sealed.
	row, err := env.Store.ExternalAuthLink(ctx, userNamed(t, env.Store, "dev").ID, "forge")
	if err != nil || bytes.Contains(row.AccessToken, []byte(cred.Password)) || row.RefreshToken == nil || row.KeyID != fe.keys.KeyID() {
		t.Fatalf("stored link: %+v, %v", row, err)
	}
	// Within the margin of its expiry (the forge gives 5 minutes), the token is refreshed; the
	// refresh token used is dead at the forge (rotation): one remains.
	env.Clock.Advance(4*time.Minute + 30*time.Second)
	status, cred2, e := gitCredential(t, env.URL, helper, forgeHost, "team/app.git")
	if status != http.StatusOK || cred2.Password == cred.Password || fe.forgeUser(t, cred2.Password) != forgeLogin {
		t.Fatalf("git credential after the refresh: %d %+v %+v", status, cred2, e)
	}
	if ok, refused := refreshGrants(fe.forge); ok != 1 || refused != 0 || fe.forge.RefreshTokens(forgeSubject) != 1 {
		t.Fatalf("refresh grants %d ok, %d refused, %d live refresh tokens; want 1, 0, 1", ok, refused, fe.forge.RefreshTokens(forgeSubject))
	}
	if l := listForges(t, env, fe.dev); l[0].RefreshedAt == nil || !l[0].RefreshedAt.Equal(env.Clock.Now()) {
		t.Fatalf("after the refresh: %+v", l)
	}

	// Two replicas asked at once when the token is due: one refresh at the forge, the same token.
	// On Postgres the second replica has a store (a connection pool) of its own.
	otherStore := env.Store
	if env.PostgresURL != "" {
		st, err := postgres.Open(ctx, env.PostgresURL)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		otherStore = st
	}
	other := server.New(server.Options{Store: otherStore, Clock: env.Clock, Logger: slog.New(slog.DiscardHandler), ReplicaID: "replica-b",
		ExternalAuth: fe.service(otherStore, &server.Options{Clock: env.Clock, Logger: slog.New(slog.DiscardHandler)}, func() string { return env.URL })})
	otherHS := httptest.NewServer(other.Handler())
	defer otherHS.Close()
	env.Clock.Advance(4*time.Minute + 30*time.Second)
	var wg sync.WaitGroup
	creds := make([]sdk.GitCredential, 4)
	for i := range creds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := []string{env.URL, otherHS.URL}[i%2]
			if status, c, e := gitCredential(t, base, helper, forgeHost, "team/app.git"); status != http.StatusOK {
				t.Errorf("concurrent git credential %d: %d %+v", i, status, e)
			} else {
				creds[i] = c
			}
		}()
	}
	wg.Wait()
	for _, c := range creds[1:] {
		if c.Password != creds[0].Password {
			t.Fatalf("concurrent refreshes handed out different tokens: %+v", creds)
		}
	}
	if ok, refused := refreshGrants(fe.forge); ok != 2 || refused != 0 {
		t.Fatalf("after concurrent requests: %d refreshes ok, %d refused; want 2 and 0 (one per due time)", ok, refused)
	}
	if fe.forgeUser(t, creds[0].Password) != forgeLogin {
		t.Fatal("the token of the concurrent refresh does not work at the forge")
	}

	// The forge revokes the grant: the next refresh is refused, the link must be redone, and
	// git hears why.
	fe.forge.RevokeRefreshTokens(forgeSubject)
	env.Clock.Advance(4*time.Minute + 30*time.Second)
	status, _, e = gitCredential(t, env.URL, helper, forgeHost, "team/app.git")
	if status != http.StatusConflict || !strings.HasPrefix(e.Message, "must be linked again: Test Forge: the forge refused the refresh: invalid_grant") ||
		!strings.HasSuffix(e.Message, "; run `hangar external-auth link forge`") {
		t.Fatalf("git credential after the forge refused the refresh: %d %+v", status, e)
	}
	if l := listForges(t, env, fe.dev); !l[0].NeedsRelink || !strings.Contains(l[0].RelinkReason, "the forge refused the refresh: invalid_grant") {
		t.Fatalf("after a refused refresh: %+v", l)
	}
	// Asked again, it does not go back to the forge with the dead token.
	_, refusedBefore := refreshGrants(fe.forge)
	if status, _, _ := gitCredential(t, env.URL, helper, forgeHost, ""); status != http.StatusConflict {
		t.Fatalf("git credential again: %d, want 409", status)
	}
	if _, refused := refreshGrants(fe.forge); refused != refusedBefore {
		t.Fatalf("the dead refresh token was sent again")
	}
	// Linking again mends it.
	if resp, page := fe.link(t, fe.dev, forgeSubject); resp.StatusCode != http.StatusOK {
		t.Fatalf("link again: %s %s", resp.Status, page)
	}
	if l := listForges(t, env, fe.dev); l[0].NeedsRelink || l[0].RelinkReason != "" {
		t.Fatalf("after linking again: %+v", l)
	}
	if status, _, e := gitCredential(t, env.URL, helper, forgeHost, ""); status != http.StatusOK {
		t.Fatalf("git credential after linking again: %d %+v", status, e)
	}

	// A suspended owner's workspace gets nothing; reinstated, it does again.
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/dev", map[string]any{"suspended": true}, http.StatusOK, nil)
	if status, _, e := gitCredential(t, env.URL, helper, forgeHost, ""); status != http.StatusForbidden || !strings.HasPrefix(e.Message, "user suspended: dev is suspended (since ") {
		t.Fatalf("git credential of a suspended owner: %d %+v", status, e)
	}
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/users/dev", map[string]any{"suspended": false}, http.StatusOK, nil)
	if status, _, e := gitCredential(t, env.URL, helper, forgeHost, ""); status != http.StatusOK {
		t.Fatalf("git credential after reinstating: %d %+v", status, e)
	}

	// Unlink: the next request of git is refused, and the entries are in the audit log.
	mustCall(t, env, fe.dev, "DELETE", "/api/v1/external-auth/forge", nil, http.StatusNoContent, nil)
	if status, _, e := gitCredential(t, env.URL, helper, forgeHost, ""); status != http.StatusConflict || !strings.HasPrefix(e.Message, "not linked: ") {
		t.Fatalf("git credential after the unlink: %d %+v", status, e)
	}
	if status, body := call(t, env, fe.dev, "DELETE", "/api/v1/external-auth/forge", nil); status != http.StatusNotFound {
		t.Fatalf("second unlink: %d %s", status, body)
	}
	links := auditEntries(t, env.Store, audit.Filter{Action: audit.ExternalAuthLink})
	unlinks := auditEntries(t, env.Store, audit.Filter{Action: audit.ExternalAuthUnlink})
	if len(links) != 2 || links[0].Actor.Name != "dev" || links[0].Target.ID != "forge" || links[0].Outcome != audit.Success || len(unlinks) != 2 {
		t.Fatalf("audit: links %+v, unlinks %+v", links, unlinks)
	}
	for _, e := range append(links, unlinks...) {
		if b, _ := json.Marshal(e); bytes.Contains(b, []byte(cred.Password)) {
			t.Fatalf("an audit entry holds a token: %s", b)
		}
	}
}

// TestExternalAuthCallbackBoundToUser: a link begun by one user cannot be completed in a browser
// signed in as another (who would link their forge account to the first's Hangar user), a state
// is used once, and a browser not signed in is sent to sign in first.
func TestExternalAuthCallbackBoundToUser(t *testing.T) {
	fe := newForgeEnv(t, "sqlite")
	env := fe.Env
	mallory := createUser(t, env, "mallory")
	var start sdk.ExternalAuthLinkStart
	mustCall(t, env, mallory, "POST", "/api/v1/external-auth/forge/link", map[string]any{}, http.StatusOK, &start)
	b := newOIDCBrowser(t)
	b.postForm(env.URL+"/signin", url.Values{"token": {fe.dev}, "return_to": {"/ui/"}})
	page, _ := b.get(start.AuthorizeURL)
	resp, err := fe.forge.LogIn(b.c, page, forgeSubject)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := b.read(resp)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "begun by another Hangar user") {
		t.Fatalf("callback of another user's link: %s %s", resp.Status, body)
	}
	if l := listForges(t, env, mallory); l[0].Linked {
		t.Fatalf("mallory got a link: %+v", l)
	}
	// The same callback again: the state was used.
	again, body := b.get(resp.Request.URL.String())
	if again.StatusCode != http.StatusBadRequest || !strings.Contains(body, "used already") {
		t.Fatalf("a used state: %s %s", again.Status, body)
	}
	// The user refuses at the forge: the forge's words, and an audited failure.
	mustCall(t, env, fe.dev, "POST", "/api/v1/external-auth/forge/link", nil, http.StatusOK, &start)
	au, _ := url.Parse(start.AuthorizeURL)
	denied, body := b.get(server.ExternalAuthCallbackURL(env.URL, "forge") + "?" + url.Values{"state": {au.Query().Get("state")},
		"error": {"access_denied"}, "error_description": {"the user said no"}}.Encode())
	if denied.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Test Forge refused the link: access_denied: the user said no") {
		t.Fatalf("a refusal at the forge: %s %s", denied.Status, body)
	}
	if es := auditEntries(t, env.Store, audit.Filter{Action: audit.ExternalAuthLink}); len(es) != 1 || es[0].Outcome != audit.Failure {
		t.Fatalf("audit of the refusal: %+v", es)
	}
	// Not signed in: sent to sign in, and back.
	anon := newOIDCBrowser(t)
	anon.stopAt = "/signin"
	cb := server.ExternalAuthCallbackURL(env.URL, "forge") + "?state=x&code=y"
	anon.get(cb)
	if r := anon.redirectFrom("/external-auth/forge/callback"); r == nil || !strings.HasPrefix(r.Header.Get("Location"), "/signin?return_to=%2Fexternal-auth%2Fforge%2Fcallback") {
		t.Fatalf("a browser not signed in was not sent to sign in: %v", r)
	}
}

// withForge configures p as the forge "forge" of a server whose URL *base will hold.
func withForge(t *testing.T, p *oidctest.Provider, base *string) servertest.Option {
	providers, err := externalauth.Decode([]byte(forgeConfig(p.Issuer())),
		func(k string) (string, bool) { return forgeSecret, k == "FORGE_SECRET" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := externalauth.ParseKeys([]byte(testKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	p.AddUser(oidctest.User{Subject: forgeSubject, PreferredUsername: forgeLogin, Email: "dev@forge.test"})
	return func(o *server.Options) {
		o.ExternalAuth = externalauth.New(externalauth.Options{Providers: providers, Keys: keys, Store: o.Store, Clock: o.Clock,
			CallbackURL: func(id string) string { return server.ExternalAuthCallbackURL(*base, id) }})
	}
}

// oaExternalAuth goes through the external auth endpoints with the document's checker: a link
// (the browser's part at the forge in a browser of its own), the helper's git credential, unlink.
func oaExternalAuth(t *testing.T, c *oaChecker, p *oidctest.Provider, dev string) {
	t.Helper()
	env := c.env
	p.AddClient(oidctest.Client{ID: forgeClient, Secret: forgeSecret, RedirectURIs: []string{server.ExternalAuthCallbackURL(env.URL, "forge")}})
	var ws struct {
		ID string `json:"id"`
	}
	c.decode(c.do(dev, "POST", "/api/v1/workspaces", map[string]any{"name": "tfgit", "template": "tf"}, 201, true), &ws)
	helper := protocol.WorkspaceAgentTokenPrefix + "openapi-git"
	if err := env.Store.CreateWorkspaceAgentToken(context.Background(), store.WorkspaceAgentToken{Hash: tfbackend.HashAgentToken(helper),
		WorkspaceID: ws.ID, BuildNumber: 1, CreatedAt: env.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	c.do(dev, "GET", "/api/v1/external-auth", nil, 200, true)
	c.do(dev, "POST", "/api/v1/external-auth/nope/link", nil, 404, true)
	c.do(helper, "POST", protocol.GitCredentialsPath, map[string]any{"protocol": "https", "host": forgeHost, "username": "someone"}, 409, true)
	var start sdk.ExternalAuthLinkStart
	c.decode(c.do(dev, "POST", "/api/v1/external-auth/forge/link", nil, 200, true), &start)
	b := newOIDCBrowser(t)
	b.stopAt = "/external-auth/forge/callback"
	b.postForm(env.URL+"/signin", url.Values{"token": {dev}, "return_to": {"/ui/"}})
	page, _ := b.get(start.AuthorizeURL)
	resp, err := p.LogIn(b.c, page, forgeSubject)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	c.do("", "GET", cb.RequestURI(), nil, 303, true) // not signed in: to /signin
	u, _ := url.Parse(env.URL)
	saved := c.cookie
	for _, ck := range b.c.Jar.Cookies(u) {
		if ck.Name == server.SessionCookie {
			c.cookie = ck.Name + "=" + ck.Value
		}
	}
	c.do("", "GET", cb.RequestURI(), nil, 200, true)
	c.do("", "GET", cb.RequestURI(), nil, 400, true) // the state was used
	c.cookie = saved
	c.do(helper, "POST", protocol.GitCredentialsPath, map[string]any{"protocol": "https", "host": forgeHost, "path": "team/app.git"}, 200, true)
	c.do(helper, "POST", protocol.GitCredentialsPath, map[string]any{"protocol": "https", "host": "github.com"}, 404, true)
	c.do(helper, "POST", protocol.GitCredentialsPath, map[string]any{"protocol": "ssh", "host": forgeHost}, 400, false)
	c.do(dev, "POST", protocol.GitCredentialsPath, map[string]any{"protocol": "https", "host": forgeHost}, 401, false)
	c.do(dev, "DELETE", "/api/v1/external-auth/forge", nil, 204, true)
	c.do(dev, "DELETE", "/api/v1/external-auth/forge", nil, 404, true)
}
