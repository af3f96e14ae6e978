package forgetest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	pathpkg "path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client is an OAuth2 application registered at the forge.
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	// Public clients have no secret and must send PKCE (Gitea's "confidential client" unticked).
	Public bool
}

// AddClient registers (or replaces, by ID) an OAuth2 application.
func (f *Forge) AddClient(id, secret string, redirectURIs []string) {
	f.AddClientWith(Client{ID: id, Secret: secret, RedirectURIs: redirectURIs})
}

// AddClientWith registers (or replaces, by ID) an OAuth2 application, public ones included.
func (f *Forge) AddClientWith(c Client) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clients[c.ID] = c
}

// TokenRequest is what the forge saw of a request to its token endpoint, and what it answered.
type TokenRequest struct {
	Time      time.Time
	GrantType string
	ClientID  string // as authenticated ("" when client authentication failed)
	User      string // whose grant ("" when refused before that was known)
	PKCE      bool   // a code_verifier was sent
	Status    int
	Error     string // the RFC 6749 error code ("" on success)
}

// TokenRequests returns the requests to the token endpoint, oldest first.
func (f *Forge) TokenRequests() []TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokenLog)
}

type authRequest struct {
	id, clientID, redirectURI, state string
	challenge, method                string
	redirectGiven                    bool
	expires                          time.Time
}

type authCode struct {
	authRequest
	user    string
	expires time.Time
	used    bool
	issued  []string // access tokens issued for it (revoked if it is used again)
}

type token struct {
	user, client string
	pat          bool
	expires      time.Time // zero for personal access tokens
}

type refreshToken struct {
	user, client string
	expires      time.Time
	used         bool // rotated: kept to tell "already used" from "unknown"
}

func (f *Forge) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", f.authorize)
	mux.HandleFunc("POST /login/oauth/grant", f.grant)
	mux.HandleFunc("POST /login/oauth/access_token", f.accessToken)
	mux.HandleFunc("GET /api/v1/user", f.apiUser)
	mux.HandleFunc("GET /api/v1/repos/{owner}/{repo}", f.apiRepo)
	mux.HandleFunc("GET /api/v1/repos/{owner}/{repo}/raw/{path...}", f.apiRaw)
	mux.HandleFunc("GET /api/v1/repos/{owner}/{repo}/contents/{path...}", f.apiContents)
	mux.HandleFunc("GET /api/v1/repos/{owner}/{repo}/git/trees/{sha}", f.apiTree)

	mux.HandleFunc("GET /api/v1/repos/{owner}/{repo}/git/commits/{sha}", f.apiCommit)
	mux.HandleFunc("/", f.gitHTTP)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBody)
		mux.ServeHTTP(w, r)
	})
}

var consentTemplate = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize application · forgetest</title></head>
<body>
<h1>Authorize {{.Client}}</h1>
<p>The application {{.Client}} asks for access to your account and repositories.</p>
<form method="post" action="/login/oauth/grant">
<input type="hidden" name="request" value="{{.ID}}">
{{range .Users}}<p><button type="submit" name="user" value="{{.Login}}" id="grant-{{.Login}}">Authorize as {{.Login}}{{if .FullName}} ({{.FullName}}){{end}}</button></p>
{{end}}<p><button type="submit" name="deny" value="1" id="deny">Cancel</button></p>
</form>
</body></html>
`))

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Error · forgetest</title></head>
<body><h1>Authorization failed</h1><p role="alert">{{.}}</p></body></html>
`))

func renderError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = errorPage.Execute(w, msg)
}

// authorize is the authorization endpoint (RFC 6749 4.1.1): a request with an unknown client or a
// redirect URI not registered is answered with an error page (never redirected, 4.1.2.1); other
// errors go back to the client's redirect URI.
func (f *Forge) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k, v := range q {
		if len(v) > 1 {
			renderError(w, http.StatusBadRequest, "parameter "+k+" is repeated")
			return
		}
	}
	f.mu.Lock()
	c, ok := f.clients[q.Get("client_id")]
	f.mu.Unlock()
	if !ok {
		renderError(w, http.StatusBadRequest, "Client ID not registered")
		return
	}
	redirect, given := q.Get("redirect_uri"), q.Has("redirect_uri")
	if !given && len(c.RedirectURIs) == 1 {
		redirect = c.RedirectURIs[0]
	}
	if !slices.Contains(c.RedirectURIs, redirect) {
		renderError(w, http.StatusBadRequest, "Unregistered Redirect URI")
		return
	}
	state := q.Get("state")
	fail := func(code, desc string) {
		u, _ := url.Parse(redirect)
		v := u.Query()
		v.Set("error", code)
		v.Set("error_description", desc)
		if state != "" {
			v.Set("state", state)
		}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	if q.Get("response_type") != "code" {
		fail("unsupported_response_type", "Only code response type is supported.")
		return
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	switch {
	case challenge == "" && method != "":
		fail("invalid_request", "code_challenge_method without code_challenge")
		return
	case challenge == "" && c.Public:
		fail("invalid_request", "PKCE is required for public clients")
		return
	case challenge != "" && method == "":
		method = "plain" // RFC 7636 4.3
	}
	if method != "" && method != "S256" && method != "plain" {
		fail("invalid_request", "unsupported code challenge method")
		return
	}
	if challenge != "" && (len(challenge) < 43 || len(challenge) > 128) {
		fail("invalid_request", "code_challenge must be 43 to 128 characters")
		return
	}
	req := &authRequest{id: randomHex(16), clientID: c.ID, redirectURI: redirect, redirectGiven: given, state: state,
		challenge: challenge, method: method, expires: f.clock.Now().Add(f.opts.CodeLifetime)}
	f.mu.Lock()
	f.pending[req.id] = req
	users := make([]User, 0, len(f.users))
	for _, u := range f.users {
		if !u.suspended {
			users = append(users, u.User)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(users, func(a, b User) int { return strings.Compare(a.Login, b.Login) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = consentTemplate.Execute(w, struct {
		Client, ID string
		Users      []User
	}{c.ID, req.id, users})
}

// grant is the consent page's form: the user signs in and authorizes (or cancels), and the browser
// goes back to the client with a code (or access_denied).
func (f *Forge) grant(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		renderError(w, http.StatusBadRequest, "bad form")
		return
	}
	now := f.clock.Now()
	f.mu.Lock()
	req, ok := f.pending[r.PostForm.Get("request")]
	if ok {
		delete(f.pending, req.id)
	}
	u, okUser := f.users[r.PostForm.Get("user")]
	f.mu.Unlock()
	if !ok || !now.Before(req.expires) {
		renderError(w, http.StatusBadRequest, "Unknown or expired authorization request; start again.")
		return
	}
	out, _ := url.Parse(req.redirectURI)
	v := out.Query()
	if req.state != "" {
		v.Set("state", req.state)
	}
	switch {
	case r.PostForm.Get("deny") != "":
		v.Set("error", "access_denied")
		v.Set("error_description", "the request is denied")
	case !okUser || u.suspended:
		renderError(w, http.StatusForbidden, "This user may not sign in.")
		return
	default:
		code := randomHex(20)
		f.mu.Lock()
		f.codes[code] = &authCode{authRequest: *req, user: u.Login, expires: now.Add(f.opts.CodeLifetime)}
		f.mu.Unlock()
		v.Set("code", code)
	}
	out.RawQuery = v.Encode()
	http.Redirect(w, r, out.String(), http.StatusSeeOther)
}

// Approve runs the browser's part of the code flow from Go: it opens authURL (the client's
// authorization URL at this forge, or an address of the client that redirects there) with c,
// authorizes as login on the consent page, and returns the redirect the forge answered (the
// client's redirect URI with code and state, or with error=access_denied), without following it:
// a test that drives a real client (Hangar's callback) then GETs it with the same c.
func (f *Forge) Approve(c *http.Client, authURL, login string) (*url.URL, error) {
	resp, err := c.Get(authURL)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &httpError{resp.StatusCode, string(body)}
	}
	m := requestFieldRE.FindStringSubmatch(string(body))
	if m == nil {
		return nil, fmt.Errorf("forgetest: not the consent page: %.200s", body)
	}
	id := m[1]
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = nc.PostForm(f.HTTPURL()+"/login/oauth/grant", url.Values{"request": {id}, "user": {login}})
	if err != nil {
		return nil, err
	}
	body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, &httpError{resp.StatusCode, string(body)}
	}
	return resp.Location()
}

var requestFieldRE = regexp.MustCompile(`name="request" value="([0-9a-f]+)"`)

type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// tokenError is RFC 6749 5.2's error answer, the shape Gitea sends.
type tokenError struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
}

// accessToken is the token endpoint (RFC 6749 4.1.3 and 6).
func (f *Forge) accessToken(w http.ResponseWriter, r *http.Request) {
	rec := TokenRequest{Time: f.clock.Now()}
	answer := func(status int, v any) {
		rec.Status = status
		if e, ok := v.(tokenError); ok {
			rec.Error = e.Error
		}
		f.mu.Lock()
		f.tokenLog = append(f.tokenLog, rec)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(status int, code, desc string) { answer(status, tokenError{code, desc}) }

	form, err := readTokenForm(r)
	if err != nil {
		fail(http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	rec.GrantType = form.Get("grant_type")
	rec.PKCE = form.Get("code_verifier") != ""
	for k, v := range form {
		if len(v) > 1 {
			fail(http.StatusBadRequest, "invalid_request", "parameter "+k+" is repeated")
			return
		}
	}

	// Client authentication (2.3.1): Basic or the form, not both.
	basicID, basicSecret, basic := r.BasicAuth()
	if basic {
		var e1, e2 error
		basicID, e1 = url.QueryUnescape(basicID)
		basicSecret, e2 = url.QueryUnescape(basicSecret)
		if e1 != nil || e2 != nil {
			fail(http.StatusUnauthorized, "invalid_client", "malformed Basic credentials")
			return
		}
		if form.Has("client_secret") {
			fail(http.StatusBadRequest, "invalid_request", "client authenticated twice (Basic and client_secret)")
			return
		}
		if form.Has("client_id") && form.Get("client_id") != basicID {
			fail(http.StatusBadRequest, "invalid_request", "client_id differs from the Basic credentials")
			return
		}
	}
	id, secret := form.Get("client_id"), form.Get("client_secret")
	if basic {
		id, secret = basicID, basicSecret
	}
	f.mu.Lock()
	c, ok := f.clients[id]
	f.mu.Unlock()
	if !ok || (!c.Public && subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1) {
		if basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="forgetest"`)
		}
		fail(http.StatusUnauthorized, "invalid_client", "invalid client credentials")
		return
	}
	rec.ClientID = c.ID
	now := f.clock.Now()

	switch form.Get("grant_type") {
	case "authorization_code":
		f.mu.Lock()
		code, ok := f.codes[form.Get("code")]
		var status int
		var errCode, desc string
		switch {
		case !ok:
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "client is not authorized"
		case code.used:
			// RFC 6749 4.1.2: a code used twice revokes what it gave.
			for _, t := range code.issued {
				delete(f.tokens, t)
			}
			for k, rt := range f.refresh {
				if rt.user == code.user && rt.client == code.clientID {
					delete(f.refresh, k)
				}
			}
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "the code was already used"
		case code.clientID != c.ID:
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "the code was issued to another client"
		case !now.Before(code.expires):
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "the code has expired"
		case code.redirectGiven && form.Get("redirect_uri") != code.redirectURI:
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "unexpected redirect URI"
		case !pkceOK(code.challenge, code.method, form.Get("code_verifier")):
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "failed PKCE code challenge"
		case f.users[code.user] == nil || f.users[code.user].suspended:
			status, errCode, desc = http.StatusBadRequest, "invalid_grant", "the user is not allowed"
		}
		if ok {
			rec.User = code.user
			code.used = true
		}
		if status != 0 {
			f.mu.Unlock()
			fail(status, errCode, desc)
			return
		}
		resp := f.issueLocked(code.user, c.ID, now)
		code.issued = append(code.issued, resp.AccessToken)
		f.mu.Unlock()
		answer(http.StatusOK, resp)
	case "refresh_token":
		f.mu.Lock()
		rt, ok := f.refresh[form.Get("refresh_token")]
		var desc string
		switch {
		case !ok:
			desc = "the refresh token is invalid or revoked"
		case rt.used:
			desc = "the refresh token was already used"
		case rt.client != c.ID:
			desc = "the refresh token was issued to another client"
		case !now.Before(rt.expires):
			desc = "the refresh token has expired"
		case f.users[rt.user] == nil || f.users[rt.user].suspended:
			desc = "the user is not allowed"
		}
		if ok {
			rec.User = rt.user
		}
		if desc != "" {
			f.mu.Unlock()
			fail(http.StatusBadRequest, "invalid_grant", desc)
			return
		}
		rt.used = true // rotation: a used refresh token is dead
		resp := f.issueLocked(rt.user, c.ID, now)
		f.mu.Unlock()
		answer(http.StatusOK, resp)
	case "":
		fail(http.StatusBadRequest, "invalid_request", "grant_type is required")
	default:
		fail(http.StatusBadRequest, "unsupported_grant_type", "Only refresh_token or authorization_code grant type is supported")
	}
}

func (f *Forge) issueLocked(user, client string, now time.Time) tokenResponse {
	access, refresh := "gto_"+randomHex(20), "gtr_"+randomHex(20)
	f.tokens[access] = &token{user: user, client: client, expires: now.Add(f.opts.AccessTokenLifetime)}
	f.refresh[refresh] = &refreshToken{user: user, client: client, expires: now.Add(f.opts.RefreshTokenLifetime)}
	return tokenResponse{AccessToken: access, TokenType: "bearer", ExpiresIn: int64(f.opts.AccessTokenLifetime / time.Second),
		RefreshToken: refresh}
}

// readTokenForm reads the token request's parameters: a form (RFC 6749) or a JSON object, as
// Gitea also accepts.
func readTokenForm(r *http.Request) (url.Values, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		return r.PostForm, nil
	}
	var m map[string]any
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	v := url.Values{}
	for k, x := range m {
		if s, ok := x.(string); ok {
			v.Set(k, s)
		}
	}
	return v, nil
}

func pkceOK(challenge, method, verifier string) bool {
	if challenge == "" {
		return verifier == ""
	}
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	if method == "S256" {
		sum := sha256.Sum256([]byte(verifier))
		verifier = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return subtle.ConstantTimeCompare([]byte(challenge), []byte(verifier)) == 1
}

// userForToken returns the login a token (OAuth2 access or personal) belongs to, "" when it is
// unknown, expired, revoked or its user suspended.
func (f *Forge) userForToken(v string) string {
	if v == "" {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[v]
	if !ok {
		return ""
	}
	if !t.pat && !f.clock.Now().Before(t.expires) {
		return ""
	}
	if u := f.users[t.user]; u == nil || u.suspended {
		return ""
	}
	return t.user
}

// apiToken returns whose token an API request carries ("Authorization: token X" or "Bearer X"):
// given tells whether one was sent, login is "" when it is not valid.
func (f *Forge) apiToken(r *http.Request) (login string, given bool) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "token") && !strings.EqualFold(scheme, "bearer") {
		return "", r.Header.Get("Authorization") != ""
	}
	return f.userForToken(strings.TrimSpace(tok)), true
}

// apiError answers with Gitea's API error shape.
func (f *Forge) apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "url": f.httpURL + "/api/swagger"})
}

// apiUser is Gitea's GET /api/v1/user.
func (f *Forge) apiUser(w http.ResponseWriter, r *http.Request) {
	login, _ := f.apiToken(r)
	if login == "" {
		f.apiError(w, http.StatusUnauthorized, "token is required")
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	f.mu.Lock()
	u := f.users[login].User
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(apiUserJSON(u, f.httpURL))
}

// apiUserJSON is Gitea's api.User (the fields of swagger's "User" definition).
func apiUserJSON(u User, base string) map[string]any {
	return map[string]any{
		"id": u.ID, "login": u.Login, "login_name": "", "source_id": 0, "full_name": u.FullName, "email": u.Email,
		"avatar_url": base + "/avatars/" + u.Login, "html_url": base + "/" + u.Login, "language": "en-US",
		"is_admin": false, "last_login": "1970-01-01T00:00:00Z", "created": "1970-01-01T00:00:00Z",
		"restricted": false, "active": true, "prohibit_login": false, "location": "", "website": "",
		"description": "", "visibility": "public", "followers_count": 0, "following_count": 0,
		"starred_repos_count": 0, "username": u.Login,
	}
}

// apiRepoAccess decides an API read of owner/repo: a bad token is 401; a repository the caller
// cannot read is 404, as at Gitea.
func (f *Forge) apiRepoAccess(w http.ResponseWriter, r *http.Request) (owner, name string, ok bool) {
	login, given := f.apiToken(r)
	if given && login == "" {
		f.apiError(w, http.StatusUnauthorized, "invalid token")
		return "", "", false
	}
	owner, name = r.PathValue("owner"), r.PathValue("repo")
	f.mu.Lock()
	status := f.decide(login, owner, name, false)
	f.mu.Unlock()
	if status != http.StatusOK {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return "", "", false
	}
	return owner, name, true
}

// apiRepo is Gitea's GET /api/v1/repos/{owner}/{repo} (the fields a client reads of its
// swagger "Repository").
func (f *Forge) apiRepo(w http.ResponseWriter, r *http.Request) {
	owner, name, ok := f.apiRepoAccess(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	rp := f.repos[owner+"/"+name]
	u := f.users[owner].User
	f.mu.Unlock()
	host := strings.TrimPrefix(f.httpURL, "http://")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": 0, "owner": apiUserJSON(u, f.httpURL), "name": name, "full_name": owner + "/" + name, "private": rp.private,
		"default_branch": "main", "empty": f.Head(owner, name) == "", "html_url": f.httpURL + "/" + owner + "/" + name,
		"clone_url": f.httpURL + "/" + owner + "/" + name + ".git", "ssh_url": "git@" + host + ":" + owner + "/" + name + ".git",
	})
}

// apiRaw is Gitea's GET /api/v1/repos/{owner}/{repo}/raw/{filepath}?ref=REF (default main): a
// file's content.
func (f *Forge) apiRaw(w http.ResponseWriter, r *http.Request) {
	owner, name, ok := f.apiRepoAccess(w, r)
	if !ok {
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = "main"
	}
	path := r.PathValue("path")
	if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref+path, ":\x00") || path == "" {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.opts.GitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+f.repoDir(owner, name), "cat-file", "blob", ref+":"+path)
	cmd.Env = f.gitEnvBase()
	out, err := cmd.Output()
	if err != nil {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(out)
}

// apiCommit is Gitea's GET /api/v1/repos/{owner}/{repo}/git/commits/{sha}, whose sha is "a git
// ref or commit sha": the commit it names (the fields a client reads of swagger's "Commit").
func (f *Forge) apiCommit(w http.ResponseWriter, r *http.Request) {
	owner, name, ok := f.apiRepoAccess(w, r)
	if !ok {
		return
	}
	ref := r.PathValue("sha")
	if ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, ":^~@{\x00") {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.opts.GitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+f.repoDir(owner, name), "rev-parse", "--verify", "--end-of-options", ref+"^{commit}")
	cmd.Env = f.gitEnvBase()
	out, err := cmd.Output()
	if err != nil {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	sha := strings.TrimSpace(string(out))
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"sha": sha, "url": f.httpURL + "/api/v1/repos/" + owner + "/" + name + "/git/commits/" + sha,
		"html_url": f.httpURL + "/" + owner + "/" + name + "/commit/" + sha, "commit": map[string]any{"tree": map[string]any{}},
	})
}

// apiContents is Gitea's GET /api/v1/repos/{owner}/{repo}/contents/{filepath}?ref=REF (default
// main): a directory's entries as a list of ContentsResponse (name, path, type "file", "dir",
// "symlink" or "submodule", sha, size), or a file's as one, with its content in base64.
func (f *Forge) apiContents(w http.ResponseWriter, r *http.Request) {
	owner, name, ok := f.apiRepoAccess(w, r)
	if !ok {
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = "main"
	}
	path := strings.Trim(r.PathValue("path"), "/")
	if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref+path, ":\x00") {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.opts.GitTimeout)
	defer cancel()
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + f.repoDir(owner, name)}, args...)...)
		cmd.Env = f.gitEnvBase()
		return cmd.Output()
	}
	kind, err := git("cat-file", "-t", ref+":"+path)
	if err != nil {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	type entry struct {
		Name    string `json:"name"`
		Path    string `json:"path"`
		Type    string `json:"type"`
		SHA     string `json:"sha"`
		Size    int64  `json:"size"`
		Content string `json:"content,omitempty"`
		Enc     string `json:"encoding,omitempty"`
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	if strings.TrimSpace(string(kind)) == "blob" {
		b, err := git("cat-file", "blob", ref+":"+path)
		if err != nil {
			f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
			return
		}
		sha, _ := git("rev-parse", ref+":"+path)
		_ = json.NewEncoder(w).Encode(entry{Name: pathpkg.Base(path), Path: path, Type: "file", SHA: strings.TrimSpace(string(sha)),
			Size: int64(len(b)), Content: base64.StdEncoding.EncodeToString(b), Enc: "base64"})
		return
	}
	tree := ref + ":" + path
	if path == "" {
		tree = ref + ":"
	}
	out, err := git("ls-tree", "-l", "-z", tree)
	if err != nil {
		f.apiError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	list := []entry{}
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// <mode> SP <type> SP <object> SP+ <size> TAB <name>
		meta, file, ok := strings.Cut(rec, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 4 {
			continue
		}
		e := entry{Name: file, Path: strings.TrimPrefix(path+"/"+file, "/"), SHA: fields[2]}
		switch {
		case fields[0] == "120000":
			e.Type = "symlink"
		case fields[1] == "tree":
			e.Type = "dir"
		case fields[1] == "commit":
			e.Type = "submodule"
		default:
			e.Type = "file"
			e.Size, _ = strconv.ParseInt(fields[3], 10, 64)
		}
		list = append(list, e)
	}
	_ = json.NewEncoder(w).Encode(list)
}

// apiTree is Gitea's GET /api/v1/repos/{owner}/{repo}/git/trees/{sha} (not recursive): a tree's
// entries (path, mode, type "blob", "tree" or "commit", size, sha); sha is a tree's or commit's
// hash, or a branch or tag name.
func (f *Forge) apiTree(w http.ResponseWriter, r *http.Request) {
	owner, name, ok := f.apiRepoAccess(w, r)
	if !ok {
		return
	}
	sha := r.PathValue("sha")
	if sha == "" || strings.HasPrefix(sha, "-") || strings.ContainsAny(sha, ":\x00") {
		f.apiError(w, http.StatusNotFound, "sha not found")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.opts.GitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+f.repoDir(owner, name), "ls-tree", "-l", "-z", sha)
	cmd.Env = f.gitEnvBase()
	out, err := cmd.Output()
	if err != nil {
		f.apiError(w, http.StatusNotFound, "sha not found")
		return
	}
	type entry struct {
		Path string `json:"path"`
		Mode string `json:"mode"`
		Type string `json:"type"`
		Size int64  `json:"size"`
		SHA  string `json:"sha"`
	}
	tree := []entry{}
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		meta, file, ok := strings.Cut(rec, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 4 {
			continue
		}
		size, _ := strconv.ParseInt(fields[3], 10, 64)
		tree = append(tree, entry{Path: file, Mode: fields[0], Type: fields[1], Size: size, SHA: fields[2]})
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"sha": sha, "tree": tree, "truncated": false, "page": 1, "total_count": len(tree)})
}
