// Package forgetest runs a real git forge in process for tests, compatible with Gitea (and Forgejo)
// in its URLs and JSON, so that Hangar's `gitea` forge type is tested against what such a forge
// answers. It composes real parts:
//
//   - an OAuth2 authorization server on Gitea's paths (GET /login/oauth/authorize, POST
//     /login/oauth/grant from its consent page, POST /login/oauth/access_token): the authorization
//     code grant with PKCE (S256 and plain) honoured when sent, the refresh_token grant with refresh
//     tokens that rotate (a used one is dead), client authentication by HTTP Basic or in the form,
//     RFC 6749's JSON errors (the shape Gitea answers), lifetimes the test sets, time from an
//     injected clock;
//   - Gitea's user API, GET /api/v1/user with "Authorization: token X" or "Bearer X";
//   - git's smart HTTP on /{owner}/{repo}.git/..., served by Debian's real `git http-backend`
//     through net/http/cgi, behind HTTP Basic authentication whose password is an OAuth2 access
//     token or a personal access token (any username, as Gitea);
//   - git over SSH (golang.org/x/crypto/ssh) running the real `git-upload-pack` and
//     `git-receive-pack` for git@HOST:owner/repo.git, with per-user public keys.
//
// Access rules, the same on both transports: a public repository is readable by anyone; a
// private one by its owner and its collaborators only; only the owner (and collaborators given
// write access) may push. A suspended user, or a revoked token, is refused at the next request.
//
// Addresses: HTTPURL and SSHAddr are on 127.0.0.1, for the test process and a Hangar server on the
// host (OAuth2 endpoints, user API, git). With Options.ListenInside (kubetest.Cluster.ListenInside)
// the forge also listens inside the test cluster's network namespace, on Options.InsideHost
// (kubetest.NodeIP): pods clone from InsideHTTPURL / InsideSSHAddr, which the host cannot reach.
package forgetest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/clock"
)

// Options configure a Forge. The zero value is usable.
type Options struct {
	// Clock tells the time for codes and tokens (default clock.Real).
	Clock clock.Clock
	// AccessTokenLifetime is how long OAuth2 access tokens are valid (default 1h, Gitea's).
	AccessTokenLifetime time.Duration
	// RefreshTokenLifetime is how long refresh tokens are valid (default 730h, Gitea's).
	RefreshTokenLifetime time.Duration
	// CodeLifetime is how long an authorization code may be exchanged (default 10 minutes).
	CodeLifetime time.Duration
	// ListenInside opens a listener inside the test cluster's network namespace (pass
	// kubetest.Cluster.ListenInside); nil: the forge is on loopback only.
	ListenInside func(addr string) (net.Listener, error)
	// InsideHost is the address to listen on inside the namespace (kubetest.NodeIP). Required
	// with ListenInside.
	InsideHost string
	// InsideOnly serves git only inside the namespace: no loopback listeners at all (HTTPURL and
	// SSHAddr then fail the test).
	InsideOnly bool
	// MaxRequestBody bounds a request's body (a push's pack included; default 64 MiB).
	MaxRequestBody int64
	// MaxConns bounds the connections each listener serves at once (default 64).
	MaxConns int
	// GitTimeout bounds one git process (http-backend, upload-pack, receive-pack; default 2 min).
	GitTimeout time.Duration
}

// User is an account at the forge.
type User struct {
	ID       int64 // set by AddUser
	Login    string
	FullName string
	Email    string
}

// Forge is a running forge. Its methods are safe for concurrent use.
type Forge struct {
	t     testing.TB
	opts  Options
	clock clock.Clock
	root  string // bare repositories: root/owner/name.git
	home  string // HOME of the git processes (an empty config)

	httpURL, sshAddr             string
	insideHTTPURL, insideSSHAddr string
	hostKey                      ssh.Signer

	seedMu sync.Mutex // one seeding git command sequence at a time

	mu       sync.Mutex
	nextID   int64
	users    map[string]*userState // by login
	repos    map[string]*repo      // by "owner/name"
	clients  map[string]Client
	pending  map[string]*authRequest // by id
	codes    map[string]*authCode
	tokens   map[string]*token // access tokens and PATs, by value
	refresh  map[string]*refreshToken
	sshKeys  map[string]string // authorized key (ssh.MarshalAuthorizedKey, trimmed) → login
	tokenLog []TokenRequest
	gitLog   []GitAccess
}

type userState struct {
	User
	suspended bool
}

type repo struct {
	owner, name string
	private     bool
	collab      map[string]bool // login → may write
}

// GitAccess is one git request the forge decided on (HTTP or SSH).
type GitAccess struct {
	Time      time.Time
	Transport string // "http" or "ssh"
	User      string // "" when anonymous
	Repo      string // owner/name
	Write     bool   // receive-pack
	Status    int    // the HTTP status decided (200 when let through; SSH uses the same codes)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

func validName(s string) bool {
	return nameRE.MatchString(s) && !strings.Contains(s, "..") && !strings.HasSuffix(s, ".git")
}

// New starts a forge; it stops when the test ends. It needs `git` (and git-http-backend) on PATH or
// in git's exec path.
func New(t testing.TB, opts Options) *Forge {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.AccessTokenLifetime <= 0 {
		opts.AccessTokenLifetime = time.Hour
	}
	if opts.RefreshTokenLifetime <= 0 {
		opts.RefreshTokenLifetime = 730 * time.Hour
	}
	if opts.CodeLifetime <= 0 {
		opts.CodeLifetime = 10 * time.Minute
	}
	if opts.MaxRequestBody <= 0 {
		opts.MaxRequestBody = 64 << 20
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.GitTimeout <= 0 {
		opts.GitTimeout = 2 * time.Minute
	}
	if opts.InsideOnly && opts.ListenInside == nil {
		t.Fatal("forgetest: InsideOnly without ListenInside")
	}
	if opts.ListenInside != nil && opts.InsideHost == "" {
		t.Fatal("forgetest: ListenInside without InsideHost (kubetest.NodeIP)")
	}
	dir := t.TempDir()
	f := &Forge{t: t, opts: opts, clock: opts.Clock, root: filepath.Join(dir, "repos"), home: filepath.Join(dir, "home"),
		users: map[string]*userState{}, repos: map[string]*repo{}, clients: map[string]Client{},
		pending: map[string]*authRequest{}, codes: map[string]*authCode{}, tokens: map[string]*token{},
		refresh: map[string]*refreshToken{}, sshKeys: map[string]string{}}
	for _, d := range []string{f.root, f.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("forgetest: git is not installed (scripts/install-deps): %v", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if f.hostKey, err = ssh.NewSignerFromKey(key); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	httpSrv := &http.Server{Handler: f.handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		MaxHeaderBytes: 64 << 10}
	sshSrv := f.newSSHServer(ctx, &wg)
	serve := func(l net.Listener) (httpAddr string) {
		l = limitListener(l, opts.MaxConns)
		go func() { _ = httpSrv.Serve(l) }()
		return l.Addr().String()
	}
	serveSSH := func(l net.Listener) string {
		l = limitListener(l, opts.MaxConns)
		wg.Add(1)
		go func() { defer wg.Done(); sshSrv.serve(l) }()
		return l.Addr().String()
	}
	var listeners []net.Listener
	listen := func(fn func(string) (net.Listener, error), addr string) net.Listener {
		l, err := fn(addr)
		if err != nil {
			cancel()
			for _, l := range listeners {
				_ = l.Close()
			}
			t.Fatalf("forgetest: listen on %s: %v", addr, err)
		}
		listeners = append(listeners, l)
		return l
	}
	loopback := func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	if !opts.InsideOnly {
		f.httpURL = "http://" + serve(listen(loopback, "127.0.0.1:0"))
		f.sshAddr = serveSSH(listen(loopback, "127.0.0.1:0"))
	}
	if opts.ListenInside != nil {
		hp := net.JoinHostPort(opts.InsideHost, "0")
		f.insideHTTPURL = "http://" + serve(listen(opts.ListenInside, hp))
		f.insideSSHAddr = serveSSH(listen(opts.ListenInside, hp))
	}
	t.Cleanup(func() {
		cancel()
		for _, l := range listeners {
			_ = l.Close()
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = httpSrv.Shutdown(sctx)
		sshSrv.closeAll()
		wg.Wait()
	})
	return f
}

// HTTPURL is the forge's base URL on loopback (http://127.0.0.1:PORT): its OAuth2 endpoints, its
// API and git over HTTP, for the test and a Hangar server on the host.
func (f *Forge) HTTPURL() string {
	if f.httpURL == "" {
		f.t.Fatal("forgetest: HTTPURL: the forge listens only inside the cluster (Options.InsideOnly)")
	}
	return f.httpURL
}

// SSHAddr is the forge's SSH address on loopback (127.0.0.1:PORT).
func (f *Forge) SSHAddr() string {
	if f.sshAddr == "" {
		f.t.Fatal("forgetest: SSHAddr: the forge listens only inside the cluster (Options.InsideOnly)")
	}
	return f.sshAddr
}

// InsideHTTPURL is the forge's base URL inside the cluster's network namespace
// (http://10.99.0.2:PORT), for pods; "" without Options.ListenInside.
func (f *Forge) InsideHTTPURL() string { return f.insideHTTPURL }

// InsideSSHAddr is the forge's SSH address inside the cluster's network namespace, for pods; ""
// without Options.ListenInside.
func (f *Forge) InsideSSHAddr() string { return f.insideSSHAddr }

// CloneURL is the repository's HTTP clone URL on loopback.
func (f *Forge) CloneURL(owner, name string) string {
	return f.HTTPURL() + "/" + owner + "/" + name + ".git"
}

// SSHCloneURL is the repository's SSH clone URL on loopback (ssh://git@127.0.0.1:PORT/owner/name.git:
// the scp-like form cannot carry a port).
func (f *Forge) SSHCloneURL(owner, name string) string {
	return "ssh://git@" + f.SSHAddr() + "/" + owner + "/" + name + ".git"
}

// HostKey is the SSH server's host key.
func (f *Forge) HostKey() ssh.PublicKey { return f.hostKey.PublicKey() }

// KnownHosts is a known_hosts file's content that trusts the forge's SSH host key at each address
// it listens on (loopback and inside).
func (f *Forge) KnownHosts() string {
	var b strings.Builder
	for _, a := range []string{f.sshAddr, f.insideSSHAddr} {
		if a == "" {
			continue
		}
		host, port, _ := net.SplitHostPort(a)
		b.WriteString("[" + host + "]:" + port + " " + string(ssh.MarshalAuthorizedKey(f.hostKey.PublicKey())))
	}
	return b.String()
}

// AddUser adds an account (login, full name, email) and returns it with its ID.
func (f *Forge) AddUser(u User) User {
	f.t.Helper()
	if !validName(u.Login) {
		f.t.Fatalf("forgetest: AddUser: bad login %q", u.Login)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.users[u.Login]; ok {
		f.t.Fatalf("forgetest: AddUser: %q exists", u.Login)
	}
	f.nextID++
	u.ID = f.nextID
	f.users[u.Login] = &userState{User: u}
	return u
}

// SetSuspended suspends a user (or lets them in again): while suspended, every request of theirs
// is refused (sign-in, tokens, API, git over HTTP and SSH), as Gitea's "prohibit login" does.
func (f *Forge) SetSuspended(login string, suspended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.mustUser(login)
	u.suspended = suspended
}

func (f *Forge) mustUser(login string) *userState {
	f.t.Helper()
	u, ok := f.users[login]
	if !ok {
		f.t.Fatalf("forgetest: no user %q", login)
	}
	return u
}

// AddToken makes a personal access token for the user (40 hex digits, as Gitea's); it does not
// expire.
func (f *Forge) AddToken(login string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustUser(login)
	v := randomHex(20)
	f.tokens[v] = &token{user: login, pat: true}
	return v
}

// RevokeTokens ends every token of the user: OAuth2 access and refresh tokens, unexchanged codes
// and personal access tokens. What the user's "rotate their token" or an admin's revocation does;
// their next request with any of them is refused.
func (f *Forge) RevokeTokens(login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustUser(login)
	for k, v := range f.tokens {
		if v.user == login {
			delete(f.tokens, k)
		}
	}
	for k, v := range f.refresh {
		if v.user == login {
			delete(f.refresh, k)
		}
	}
	for k, v := range f.codes {
		if v.user == login {
			delete(f.codes, k)
		}
	}
}

// AddSSHKey lets the user in over SSH with key (an authorized_keys line). A key belongs to one
// user only, as at Gitea.
func (f *Forge) AddSSHKey(login string, key string) {
	f.t.Helper()
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(key))
	if err != nil {
		f.t.Fatalf("forgetest: AddSSHKey: %v", err)
	}
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustUser(login)
	if other, ok := f.sshKeys[k]; ok && other != login {
		f.t.Fatalf("forgetest: AddSSHKey: the key is %q's", other)
	}
	f.sshKeys[k] = login
}

// GitAccesses returns the git requests the forge decided on, oldest first.
func (f *Forge) GitAccesses() []GitAccess {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.gitLog)
}

// CreateRepo creates owner/name with one commit on its default branch main holding files
// (path → content), and returns that commit's hash. With no files the repository is empty.
func (f *Forge) CreateRepo(owner, name string, private bool, files map[string]string) string {
	f.t.Helper()
	if !validName(name) {
		f.t.Fatalf("forgetest: CreateRepo: bad name %q", name)
	}
	key := owner + "/" + name
	f.mu.Lock()
	f.mustUser(owner)
	if _, ok := f.repos[key]; ok {
		f.mu.Unlock()
		f.t.Fatalf("forgetest: CreateRepo: %s exists", key)
	}
	f.mu.Unlock()
	dir := f.repoDir(owner, name)
	f.seedMu.Lock()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		f.t.Fatal(err)
	}
	f.git("", "init", "-q", "--bare", "--initial-branch=main", dir)
	// Force pushes are allowed, as on a Gitea branch that is not protected.
	f.git(dir, "config", "receive.denyNonFastForwards", "false")
	f.seedMu.Unlock()
	f.mu.Lock()
	f.repos[key] = &repo{owner: owner, name: name, private: private, collab: map[string]bool{}}
	f.mu.Unlock()
	if len(files) == 0 {
		return ""
	}
	return f.Commit(owner, name, "Initial commit", files)
}

// SymlinkPrefix makes a file of Commit a symlink: "symlink -> target".
const SymlinkPrefix = "symlink -> "

// Commit adds a commit on main that sets files (path → content; other files stay), authored by
// the repository's owner, and returns its hash. A file ending in .sh or starting with #! is
// executable; one whose content starts with SymlinkPrefix is a symlink to the rest.
func (f *Forge) Commit(owner, name, message string, files map[string]string) string {
	f.t.Helper()
	return f.commit(owner, name, message, files, nil)
}

// Remove adds a commit on main that removes paths (files), as Commit does, and returns its hash.
func (f *Forge) Remove(owner, name, message string, paths ...string) string {
	f.t.Helper()
	return f.commit(owner, name, message, nil, paths)
}

func (f *Forge) commit(owner, name, message string, files map[string]string, remove []string) string {
	f.t.Helper()
	f.mu.Lock()
	_, ok := f.repos[owner+"/"+name]
	u := f.users[owner]
	f.mu.Unlock()
	if !ok || u == nil {
		f.t.Fatalf("forgetest: Commit: no repository %s/%s", owner, name)
	}
	f.seedMu.Lock()
	defer f.seedMu.Unlock()
	dir := f.repoDir(owner, name)
	index := filepath.Join(f.t.TempDir(), "index")
	env := []string{"GIT_INDEX_FILE=" + index}
	parent := strings.TrimSpace(f.gitEnv(dir, env, nil, true, "rev-parse", "-q", "--verify", "refs/heads/main"))
	if parent != "" {
		f.gitEnv(dir, env, nil, false, "read-tree", "refs/heads/main")
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if p == "" || strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
			f.t.Fatalf("forgetest: Commit: bad path %q", p)
		}
		content, link := strings.CutPrefix(files[p], SymlinkPrefix)
		blob := strings.TrimSpace(f.gitEnv(dir, env, strings.NewReader(content), false, "hash-object", "-w", "--stdin"))
		mode := "100644"
		switch {
		case link:
			mode = "120000"
		case strings.HasSuffix(p, ".sh") || strings.HasPrefix(files[p], "#!"):
			mode = "100755"
		}
		f.gitEnv(dir, env, nil, false, "update-index", "--add", "--cacheinfo", mode+","+blob+","+p)
	}
	for _, p := range remove {
		// Mode 0 removes the entry (git update-index --index-info; --force-remove needs a work tree).
		f.gitEnv(dir, env, strings.NewReader("0 "+strings.Repeat("0", 40)+"\t"+p+"\n"), false, "update-index", "--index-info")
	}
	tree := strings.TrimSpace(f.gitEnv(dir, env, nil, false, "write-tree"))
	args := []string{"commit-tree", tree, "-m", message}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	email := u.Email
	if email == "" {
		email = owner + "@forgetest.invalid"
	}
	who := []string{"GIT_AUTHOR_NAME=" + owner, "GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_NAME=" + owner, "GIT_COMMITTER_EMAIL=" + email}
	commit := strings.TrimSpace(f.gitEnv(dir, append(env, who...), nil, false, args...))
	f.gitEnv(dir, env, nil, false, "update-ref", "refs/heads/main", commit)
	return commit
}

// Head returns the hash main points at in owner/name ("" when the repository is empty): what a
// push changed.
func (f *Forge) Head(owner, name string) string {
	f.t.Helper()
	f.seedMu.Lock()
	defer f.seedMu.Unlock()
	return strings.TrimSpace(f.gitEnv(f.repoDir(owner, name), nil, nil, true, "rev-parse", "-q", "--verify", "refs/heads/main"))
}

// ReadFile returns a file's content at main in owner/name.
func (f *Forge) ReadFile(owner, name, path string) string {
	f.t.Helper()
	f.seedMu.Lock()
	defer f.seedMu.Unlock()
	return f.gitEnv(f.repoDir(owner, name), nil, nil, false, "show", "refs/heads/main:"+path)
}

// AddCollaborator lets login read the private repository owner/name (and push, with write).
func (f *Forge) AddCollaborator(owner, name, login string, write bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustUser(login)
	r, ok := f.repos[owner+"/"+name]
	if !ok {
		f.t.Fatalf("forgetest: AddCollaborator: no repository %s/%s", owner, name)
	}
	r.collab[login] = write
}

func (f *Forge) repoDir(owner, name string) string {
	return filepath.Join(f.root, owner, name+".git")
}

// gitEnvBase is the environment of every git process the forge runs: no user or system
// configuration of the machine.
func (f *Forge) gitEnvBase() []string {
	return append([]string{"PATH=" + os.Getenv("PATH")}, f.gitConfigEnv()...)
}

// gitConfigEnv is gitEnvBase without PATH (net/http/cgi passes PATH itself: InheritEnv).
func (f *Forge) gitConfigEnv() []string {
	return []string{"HOME=" + f.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "LANG=C"}
}

func (f *Forge) git(dir string, args ...string) string {
	f.t.Helper()
	return f.gitEnv(dir, nil, nil, false, args...)
}

func (f *Forge) gitEnv(dir string, env []string, stdin *strings.Reader, mayFail bool, args ...string) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.GitTimeout)
	defer cancel()
	if dir != "" {
		args = append([]string{"--git-dir=" + dir}, args...)
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(f.gitEnvBase(), env...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil && !mayFail {
		f.t.Fatalf("forgetest: git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// limitListener serves at most n connections at once; the next waits in Accept.
func limitListener(l net.Listener, n int) net.Listener {
	return &limited{Listener: l, sem: make(chan struct{}, n)}
}

type limited struct {
	net.Listener
	sem chan struct{}
}

func (l *limited) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.sem })}, nil
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// access decides a git request and logs it: the HTTP status (200: go on). login "" is anonymous.
func (f *Forge) access(transport, login, owner, name string, write bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	status := f.decide(login, owner, name, write)
	f.gitLog = append(f.gitLog, GitAccess{Time: f.clock.Now(), Transport: transport, User: login,
		Repo: owner + "/" + name, Write: write, Status: status})
	return status
}

func (f *Forge) decide(login, owner, name string, write bool) int {
	r, ok := f.repos[owner+"/"+name]
	if !ok || (r.private && login == "") {
		if login == "" {
			return http.StatusUnauthorized // ask for credentials before saying whether it exists
		}
		return http.StatusNotFound
	}
	mayWrite, collab := r.collab[login]
	owns := login != "" && login == r.owner
	if r.private && !owns && !collab {
		return http.StatusNotFound // Gitea hides a private repository from who cannot read it
	}
	if !write {
		return http.StatusOK
	}
	if login == "" {
		return http.StatusUnauthorized
	}
	if owns || mayWrite {
		return http.StatusOK
	}
	return http.StatusForbidden
}

func (f *Forge) String() string { return fmt.Sprintf("forgetest(%s, %s)", f.httpURL, f.sshAddr) }
