package forgetest_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/oauth2"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
)

// gitUser is a person running the real git CLI with a home of their own: an empty global
// configuration, no terminal prompts, a credential helper that prints the token in their token
// file (changed with SetToken), and an SSH key of their own.
type gitUser struct {
	t       *testing.T
	dir     string
	env     []string
	tokFile string
	pubKey  string
}

func newGitUser(t *testing.T, f *forgetest.Forge, name string) *gitUser {
	t.Helper()
	dir := t.TempDir()
	u := &gitUser{t: t, dir: dir, tokFile: filepath.Join(dir, "token")}
	helper := filepath.Join(dir, "credential-helper")
	// git calls the helper with "get" (and "store"/"erase" after a success or refusal).
	script := "#!/bin/sh\n[ \"$1\" = get ] || exit 0\necho username=oauth2\necho password=$(cat " + u.tokFile + ")\n"
	write(t, helper, script, 0o755)
	write(t, u.tokFile, "", 0o600)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	write(t, keyFile, string(pem.EncodeToMemory(block)), 0o600)
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	u.pubKey = string(ssh.MarshalAuthorizedKey(pub))
	known := filepath.Join(dir, "known_hosts")
	write(t, known, f.KnownHosts(), 0o600)
	cfg := filepath.Join(dir, "gitconfig")
	write(t, cfg, "[user]\n\tname = "+name+"\n\temail = "+name+"@example.com\n[credential]\n\thelper = "+helper+"\n[init]\n\tdefaultBranch = main\n", 0o600)
	u.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_GLOBAL=" + cfg, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "LANG=C",
		"GIT_SSH_COMMAND=ssh -F none -i " + keyFile + " -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=" + known +
			" -o StrictHostKeyChecking=yes"}
	return u
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (u *gitUser) SetToken(tok string) { write(u.t, u.tokFile, tok, 0o600) }

// git runs git in dir and returns its combined output and error.
func (u *gitUser) git(dir string, args ...string) (string, error) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = u.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (u *gitUser) mustGit(dir string, args ...string) string {
	u.t.Helper()
	out, err := u.git(dir, args...)
	if err != nil {
		u.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// clone clones url into a new directory and returns it (or the error and git's output).
func (u *gitUser) clone(url string) (string, string, error) {
	u.t.Helper()
	dst := filepath.Join(u.t.TempDir(), "clone")
	out, err := u.git(u.dir, "clone", "-q", url, dst)
	return dst, out, err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// world is a forge with two users, alice (who owns the private repository alice/app) and bob, and
// an OAuth2 application "hangar" whose redirect URI the test's client uses.
type world struct {
	f     *forgetest.Forge
	clock *clock.Fake
	cfg   oauth2.Config
}

const redirectURI = "http://127.0.0.1:1/callback" // never followed: Approve stops at the redirect

func newWorld(t *testing.T) *world {
	t.Helper()
	c := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f := forgetest.New(t, forgetest.Options{Clock: c, AccessTokenLifetime: 10 * time.Minute})
	f.AddUser(forgetest.User{Login: "alice", FullName: "Alice Liddell", Email: "alice@example.com"})
	f.AddUser(forgetest.User{Login: "bob", FullName: "Bob", Email: "bob@example.com"})
	f.CreateRepo("alice", "app", true, map[string]string{"README.md": "# app\n", ".devcontainer/devcontainer.json": `{"image": "debian"}`})
	f.AddClient("hangar", "hangar-secret", []string{redirectURI})
	return &world{f: f, clock: c, cfg: oauth2.Config{ClientID: "hangar", ClientSecret: "hangar-secret", RedirectURL: redirectURI,
		Endpoint: oauth2.Endpoint{AuthURL: f.HTTPURL() + "/login/oauth/authorize", TokenURL: f.HTTPURL() + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInHeader}}}
}

// link runs the code flow with PKCE as login and returns the token.
func (w *world) link(t *testing.T, login string) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	loc, err := w.f.Approve(http.DefaultClient, w.cfg.AuthCodeURL("st-"+login, oauth2.S256ChallengeOption(verifier)), login)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got := loc.Query().Get("state"); got != "st-"+login {
		t.Fatalf("state back %q", got)
	}
	tok, err := w.cfg.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok
}

func apiUser(t *testing.T, f *forgetest.Forge, auth string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.HTTPURL()+"/api/v1/user", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("user API: %v", err)
	}
	return resp.StatusCode, m
}

func TestHTTPGitWithOAuthTokens(t *testing.T) {
	w := newWorld(t)
	f := w.f
	alice, bob := newGitUser(t, f, "alice"), newGitUser(t, f, "bob")
	url := f.CloneURL("alice", "app")

	// Without a token git asks its credential helper (401 with WWW-Authenticate), gets nothing
	// usable and fails.
	if _, out, err := alice.clone(url); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("clone without a token: %v\n%s", err, out)
	}
	// With bob's own (valid) token: the repository is not his to read.
	bob.SetToken(w.link(t, "bob").AccessToken)
	if _, out, err := bob.clone(url); err == nil || !strings.Contains(out, "not found") {
		t.Fatalf("bob cloned alice's private repository: %v\n%s", err, out)
	}
	// A token that is not one: refused as bad credentials.
	alice.SetToken("gto_0123456789")
	if _, out, err := alice.clone(url); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("clone with a made-up token: %v\n%s", err, out)
	}

	alice.SetToken(w.link(t, "alice").AccessToken)
	dir, out, err := alice.clone(url)
	if err != nil {
		t.Fatalf("alice's clone: %v\n%s", err, out)
	}
	if got := readFile(t, filepath.Join(dir, ".devcontainer/devcontainer.json")); got != `{"image": "debian"}` {
		t.Fatalf("cloned devcontainer.json = %q", got)
	}
	if branch := strings.TrimSpace(alice.mustGit(dir, "rev-parse", "--abbrev-ref", "HEAD")); branch != "main" {
		t.Fatalf("default branch %q", branch)
	}

	// Alice pushes; the forge's main moves to her commit.
	write(t, filepath.Join(dir, "NOTES"), "pushed\n", 0o644)
	alice.mustGit(dir, "add", "NOTES")
	alice.mustGit(dir, "commit", "-q", "-m", "notes")
	alice.mustGit(dir, "push", "-q", "origin", "main")
	head := strings.TrimSpace(alice.mustGit(dir, "rev-parse", "HEAD"))
	if got := f.Head("alice", "app"); got != head {
		t.Fatalf("forge's main = %s, pushed %s", got, head)
	}
	if got := f.ReadFile("alice", "app", "NOTES"); got != "pushed\n" {
		t.Fatalf("pushed NOTES = %q", got)
	}

	// A read-only collaborator clones and cannot push (403); a personal access token works as a
	// password too.
	f.AddCollaborator("alice", "app", "bob", false)
	bob.SetToken(f.AddToken("bob"))
	bdir, out, err := bob.clone(url)
	if err != nil {
		t.Fatalf("collaborator's clone: %v\n%s", err, out)
	}
	write(t, filepath.Join(bdir, "BOB"), "x\n", 0o644)
	bob.mustGit(bdir, "add", "BOB")
	bob.mustGit(bdir, "commit", "-q", "-m", "bob")
	if out, err := bob.git(bdir, "push", "-q", "origin", "main"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("read-only collaborator pushed: %v\n%s", err, out)
	}
	if got := f.Head("alice", "app"); got != head {
		t.Fatalf("main moved to %s after a refused push", got)
	}
}

func TestPublicRepository(t *testing.T) {
	w := newWorld(t)
	f := w.f
	f.CreateRepo("alice", "dotfiles", false, map[string]string{"install.sh": "#!/bin/sh\necho installed\n"})
	anon := newGitUser(t, f, "anon")
	dir, out, err := anon.clone(f.CloneURL("alice", "dotfiles"))
	if err != nil {
		t.Fatalf("anonymous clone of a public repository: %v\n%s", err, out)
	}
	st, err := os.Stat(filepath.Join(dir, "install.sh"))
	if err != nil || st.Mode()&0o100 == 0 {
		t.Fatalf("install.sh: %v, %v (executable expected)", st, err)
	}
	write(t, filepath.Join(dir, "x"), "x", 0o644)
	anon.mustGit(dir, "add", "x")
	anon.mustGit(dir, "commit", "-q", "-m", "x")
	if out, err := anon.git(dir, "push", "-q", "origin", "main"); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("anonymous push: %v\n%s", err, out)
	}
	// The Commit helper adds to what is there.
	f.Commit("alice", "dotfiles", "more", map[string]string{".bashrc": "export A=1\n"})
	anon.mustGit(dir, "pull", "-q", "--rebase=false", "--no-edit", "origin", "main")
	if got := readFile(t, filepath.Join(dir, ".bashrc")); got != "export A=1\n" {
		t.Fatalf(".bashrc after pull = %q", got)
	}
}

func TestSSHGit(t *testing.T) {
	w := newWorld(t)
	f := w.f
	alice, bob := newGitUser(t, f, "alice"), newGitUser(t, f, "bob")
	f.AddSSHKey("alice", alice.pubKey)
	f.AddSSHKey("bob", bob.pubKey)
	url := f.SSHCloneURL("alice", "app")

	if _, out, err := bob.clone(url); err == nil || !strings.Contains(out, "do not have access") {
		t.Fatalf("bob cloned over SSH: %v\n%s", err, out)
	}
	stranger := newGitUser(t, f, "stranger") // a key the forge does not know
	if _, out, err := stranger.clone(url); err == nil || !strings.Contains(out, "Permission denied (publickey)") {
		t.Fatalf("unknown key cloned over SSH: %v\n%s", err, out)
	}
	dir, out, err := alice.clone(url)
	if err != nil {
		t.Fatalf("alice's SSH clone: %v\n%s", err, out)
	}
	if got := readFile(t, filepath.Join(dir, "README.md")); got != "# app\n" {
		t.Fatalf("README.md = %q", got)
	}
	write(t, filepath.Join(dir, "SSH"), "over ssh\n", 0o644)
	alice.mustGit(dir, "add", "SSH")
	alice.mustGit(dir, "commit", "-q", "-m", "ssh")
	alice.mustGit(dir, "push", "-q", "origin", "main")
	if got := f.ReadFile("alice", "app", "SSH"); got != "over ssh\n" {
		t.Fatalf("pushed over SSH: %q", got)
	}
	// The scp-like form git@host:owner/repo.git reaches the same repository (its port set in the
	// SSH command, as a user's ~/.ssh/config would).
	host, port, _ := strings.Cut(f.SSHAddr(), ":")
	alice.env = append(alice.env, "GIT_SSH_COMMAND="+envValue(alice.env, "GIT_SSH_COMMAND")+" -p "+port)
	if _, out, err := alice.clone("git@" + host + ":alice/app.git"); err != nil {
		t.Fatalf("scp-like clone: %v\n%s", err, out)
	}

	f.SetSuspended("alice", true)
	if _, out, err := alice.clone(url); err == nil {
		t.Fatalf("a suspended user cloned over SSH:\n%s", out)
	}
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func TestOAuthCodeFlowRefreshAndRotation(t *testing.T) {
	w := newWorld(t)
	f := w.f
	tok := w.link(t, "alice")
	if tok.RefreshToken == "" || tok.TokenType != "bearer" {
		t.Fatalf("token %+v", tok)
	}
	if d := tok.Expiry.Sub(time.Now()); d < 9*time.Minute || d > 11*time.Minute {
		t.Fatalf("expires_in gave expiry in %v, want the 10 minutes set", d)
	}
	status, u := apiUser(t, f, "token "+tok.AccessToken)
	if status != 200 || u["login"] != "alice" || u["full_name"] != "Alice Liddell" || u["email"] != "alice@example.com" || u["id"] != float64(1) {
		t.Fatalf("GET /api/v1/user = %d %v", status, u)
	}
	if status, u = apiUser(t, f, "Bearer "+tok.AccessToken); status != 200 || u["login"] != "alice" {
		t.Fatalf("with Bearer: %d %v", status, u)
	}
	if status, u = apiUser(t, f, ""); status != 401 || u["message"] == nil {
		t.Fatalf("without a token: %d %v", status, u)
	}

	// The clock passes the access token's lifetime: the API refuses it, and a refresh gives a new
	// pair; the used refresh token is then dead.
	w.clock.Advance(10*time.Minute + time.Second)
	if status, _ = apiUser(t, f, "token "+tok.AccessToken); status != 401 {
		t.Fatalf("expired access token: %d", status)
	}
	expired := *tok
	expired.Expiry = time.Now().Add(-time.Minute) // the oauth2 package's own clock is the real one
	fresh, err := w.cfg.TokenSource(context.Background(), &expired).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == tok.RefreshToken {
		t.Fatal("refresh gave the same tokens")
	}
	if status, u = apiUser(t, f, "token "+fresh.AccessToken); status != 200 || u["login"] != "alice" {
		t.Fatalf("refreshed token: %d %v", status, u)
	}
	_, err = w.cfg.TokenSource(context.Background(), &expired).Token()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || re.Response.StatusCode != 400 {
		t.Fatalf("reused refresh token: %v", err)
	}

	reqs := f.TokenRequests()
	var grants []string
	for _, r := range reqs {
		grants = append(grants, r.GrantType+"/"+r.User+"/"+http.StatusText(r.Status)+"/"+r.Error)
	}
	want := []string{"authorization_code/alice/OK/", "refresh_token/alice/OK/", "refresh_token/alice/Bad Request/invalid_grant"}
	if strings.Join(grants, " ") != strings.Join(want, " ") || !reqs[0].PKCE {
		t.Fatalf("token requests %v (PKCE %v), want %v", grants, reqs[0].PKCE, want)
	}
}

// postToken posts a token request by hand and returns the status and the JSON answer.
func postToken(t *testing.T, f *forgetest.Forge, form url.Values, basic [2]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.HTTPURL()+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic[0] != "" {
		req.SetBasicAuth(basic[0], basic[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("token answer %q: %v", body, err)
	}
	return resp.StatusCode, m
}

func TestOAuthRefusals(t *testing.T) {
	w := newWorld(t)
	f := w.f
	verifier := oauth2.GenerateVerifier()
	code := func() string {
		loc, err := f.Approve(http.DefaultClient, w.cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), "alice")
		if err != nil {
			t.Fatal(err)
		}
		return loc.Query().Get("code")
	}
	good := [2]string{"hangar", "hangar-secret"}
	form := func(c, v string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirectURI}, "code_verifier": {v}}
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		basic  [2]string
		status int
		err    string
	}{
		{"wrong secret", form(code(), verifier), [2]string{"hangar", "nope"}, 401, "invalid_client"},
		{"unknown client", form(code(), verifier), [2]string{"other", "x"}, 401, "invalid_client"},
		{"wrong verifier", form(code(), oauth2.GenerateVerifier()), good, 400, "invalid_grant"},
		{"no verifier", form(code(), ""), good, 400, "invalid_grant"},
		{"wrong redirect", func() url.Values {
			v := form(code(), verifier)
			v.Set("redirect_uri", "http://127.0.0.1:1/x")
			return v
		}(), good, 400, "invalid_grant"},
		{"unknown code", form("nope", verifier), good, 400, "invalid_grant"},
		{"bad grant type", url.Values{"grant_type": {"password"}}, good, 400, "unsupported_grant_type"},
		{"client in the form", func() url.Values {
			v := form(code(), verifier)
			v.Set("client_id", "hangar")
			v.Set("client_secret", "hangar-secret")
			return v
		}(), [2]string{}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := postToken(t, f, tc.form, tc.basic)
			if status != tc.status || (tc.err != "" && m["error"] != tc.err) || (tc.err == "" && m["access_token"] == nil) {
				t.Fatalf("got %d %v, want %d %s", status, m, tc.status, tc.err)
			}
		})
	}

	// A code is used once; its second use also revokes the token it gave (RFC 6749 4.1.2).
	c := code()
	status, m := postToken(t, f, form(c, verifier), good)
	if status != 200 {
		t.Fatalf("exchange: %d %v", status, m)
	}
	access := m["access_token"].(string)
	if status, m = postToken(t, f, form(c, verifier), good); status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("second use of a code: %d %v", status, m)
	}
	if status, _ := apiUser(t, f, "token "+access); status != 401 {
		t.Fatalf("token of a code used twice still works: %d", status)
	}
	// A code expires with the clock.
	c = code()
	w.clock.Advance(11 * time.Minute)
	if status, m = postToken(t, f, form(c, verifier), good); status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("expired code: %d %v", status, m)
	}

	// The authorization endpoint never redirects to a URI it does not know.
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(
		f.HTTPURL() + "/login/oauth/authorize?client_id=hangar&response_type=code&redirect_uri=" + url.QueryEscape("http://evil.invalid/cb"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Fatalf("unregistered redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestRevocationEndsGitAndAPI(t *testing.T) {
	w := newWorld(t)
	f := w.f
	alice := newGitUser(t, f, "alice")
	tok := w.link(t, "alice")
	alice.SetToken(tok.AccessToken)
	dir, out, err := alice.clone(f.CloneURL("alice", "app"))
	if err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}

	f.RevokeTokens("alice")
	if out, err := alice.git(dir, "pull", "-q", "--no-edit", "origin", "main"); err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("pull after revocation: %v\n%s", err, out)
	}
	if status, _ := apiUser(t, f, "token "+tok.AccessToken); status != 401 {
		t.Fatalf("API after revocation: %d", status)
	}
	status, m := postToken(t, f, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}, [2]string{"hangar", "hangar-secret"})
	if status != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("refresh after revocation: %d %v", status, m)
	}

	// Linked again, then suspended: the same within the next request.
	tok = w.link(t, "alice")
	alice.SetToken(tok.AccessToken)
	alice.mustGit(dir, "pull", "-q", "--no-edit", "origin", "main")
	f.SetSuspended("alice", true)
	if out, err := alice.git(dir, "pull", "-q", "--no-edit", "origin", "main"); err == nil {
		t.Fatalf("pull while suspended:\n%s", out)
	}
	if status, _ := apiUser(t, f, "token "+tok.AccessToken); status != 401 {
		t.Fatalf("API while suspended: %d", status)
	}
}

// TestBounds: git sends a pack over 1 MiB in a chunked body (net/http/cgi refuses those), which the
// forge spools within its bound; a larger one is refused with 413 and main stays.
func TestBounds(t *testing.T) {
	f := forgetest.New(t, forgetest.Options{MaxRequestBody: 4 << 20})
	f.AddUser(forgetest.User{Login: "alice"})
	f.CreateRepo("alice", "app", true, map[string]string{"a": "a"})
	alice := newGitUser(t, f, "alice")
	alice.SetToken(f.AddToken("alice"))
	dir, out, err := alice.clone(f.CloneURL("alice", "app"))
	if err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	commitRandom := func(name string, size int) {
		b := make([]byte, size)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name), string(b), 0o644)
		alice.mustGit(dir, "add", name)
		alice.mustGit(dir, "commit", "-q", "-m", name)
	}
	commitRandom("medium", 3<<19) // 1.5 MiB: chunked, within the bound
	alice.mustGit(dir, "push", "-q", "origin", "main")
	if got := len(f.ReadFile("alice", "app", "medium")); got != 3<<19 {
		t.Fatalf("pushed medium has %d bytes", got)
	}
	head := f.Head("alice", "app")
	commitRandom("big", 5<<20)
	if out, err := alice.git(dir, "push", "-q", "origin", "main"); err == nil || !strings.Contains(out, "413") {
		t.Fatalf("a push over the body limit: %v\n%s", err, out)
	}
	if got := f.Head("alice", "app"); got != head {
		t.Fatalf("main moved to %s", got)
	}
}

// TestRepoAPI: Gitea's repository and raw-file API answer the owner, hide a private repository
// from others (404) and refuse a bad token (401).
func TestRepoAPI(t *testing.T) {
	w := newWorld(t)
	f := w.f
	alice, bob := w.link(t, "alice").AccessToken, f.AddToken("bob")
	get := func(path, auth string) (int, string) {
		req, _ := http.NewRequest("GET", f.HTTPURL()+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := get("/api/v1/repos/alice/app", "token "+alice)
	var repo map[string]any
	if err := json.Unmarshal([]byte(body), &repo); status != 200 || err != nil || repo["full_name"] != "alice/app" || repo["private"] != true ||
		repo["default_branch"] != "main" || repo["clone_url"] != f.CloneURL("alice", "app") {
		t.Fatalf("repo: %d %s", status, body)
	}
	if status, body = get("/api/v1/repos/alice/app/raw/.devcontainer/devcontainer.json", "Bearer "+alice); status != 200 || body != `{"image": "debian"}` {
		t.Fatalf("raw: %d %q", status, body)
	}
	f.Commit("alice", "app", "v2", map[string]string{"README.md": "# v2\n"})
	if status, body = get("/api/v1/repos/alice/app/raw/README.md?ref=main", "token "+alice); status != 200 || body != "# v2\n" {
		t.Fatalf("raw at main: %d %q", status, body)
	}
	// Gitea's contents API: a directory lists its entries, a file comes in base64.
	f.Commit("alice", "app", "two definitions", map[string]string{".devcontainer/py/devcontainer.json": "{}", ".devcontainer/go/devcontainer.json": "{}"})
	status, body = get("/api/v1/repos/alice/app/contents/.devcontainer?ref=main", "token "+alice)
	var entries []struct{ Name, Path, Type string }
	if err := json.Unmarshal([]byte(body), &entries); status != 200 || err != nil {
		t.Fatalf("contents of a directory: %d %s", status, body)
	}
	got := []string{}
	for _, e := range entries {
		got = append(got, e.Type+" "+e.Path)
	}
	if strings.Join(got, ",") != "file .devcontainer/devcontainer.json,dir .devcontainer/go,dir .devcontainer/py" {
		t.Fatalf("contents of .devcontainer: %v", got)
	}
	status, body = get("/api/v1/repos/alice/app/contents/README.md", "token "+alice)
	var file struct{ Type, Encoding, Content string }
	if err := json.Unmarshal([]byte(body), &file); status != 200 || err != nil || file.Type != "file" || file.Encoding != "base64" || file.Content != "IyB2Mgo=" {
		t.Fatalf("contents of a file: %d %s", status, body)
	}
	for _, tc := range []struct{ path, auth string }{
		{"/api/v1/repos/alice/app", "token " + bob},
		{"/api/v1/repos/alice/app/raw/README.md", "token " + bob},
		{"/api/v1/repos/alice/app/raw/README.md", ""},
		{"/api/v1/repos/alice/app/raw/NOPE", "token " + alice},
		{"/api/v1/repos/alice/app/raw/README.md?ref=--output=x", "token " + alice},
		{"/api/v1/repos/alice/app/contents/.devcontainer", "token " + bob},
		{"/api/v1/repos/alice/app/contents/NOPE", "token " + alice},
	} {
		if status, body := get(tc.path, tc.auth); status != 404 || !strings.Contains(body, `"message"`) {
			t.Errorf("%s as %q: %d %s", tc.path, tc.auth, status, body)
		}
	}
	if status, _ := get("/api/v1/repos/alice/app", "token nope"); status != 401 {
		t.Errorf("bad token: %d", status)
	}
}
