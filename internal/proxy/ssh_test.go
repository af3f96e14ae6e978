package proxy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/wshelper"
)

func newSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authorizedLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// fakeSSHChecker answers as the server would: alice's key and token enter "dev" (id ws-1); bob's
// key is known but dev is not his.
type fakeSSHChecker struct {
	mu       sync.Mutex
	alice    string // alice's key line
	bob      string
	token    string
	revoked  bool
	stopped  bool
	down     bool
	requests []protocol.ProxySSHCheckRequest
}

func (f *fakeSSHChecker) SSHCheck(_ context.Context, req protocol.ProxySSHCheckRequest) (protocol.ProxySSHCheckResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.down {
		return protocol.ProxySSHCheckResponse{}, errors.New("server unreachable")
	}
	var user string
	switch {
	case req.PublicKey != "" && req.PublicKey == f.alice && !f.revoked, req.Token != "" && req.Token == f.token && !f.revoked:
		user = "alice"
	case req.PublicKey != "" && req.PublicKey == f.bob:
		user = "bob"
	default:
		return protocol.ProxySSHCheckResponse{Reason: protocol.ProxyUnauthenticated}, nil
	}
	if req.Workspace != "dev" && req.Workspace != "alice/dev" {
		return protocol.ProxySSHCheckResponse{Reason: protocol.ProxyNotFound, User: user}, nil
	}
	if user != "alice" {
		return protocol.ProxySSHCheckResponse{Reason: protocol.ProxyForbidden, User: user}, nil
	}
	status := "Running"
	if f.stopped {
		status = "Stopped"
	}
	return protocol.ProxySSHCheckResponse{Allowed: true, User: user, Workspace: "alice/dev", WorkspaceID: "ws-1", Status: status}, nil
}

type fakeSSHRoutes struct {
	mu   sync.Mutex
	addr map[string]string
}

func (f *fakeSSHRoutes) SSHAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addr[id]
}

type sshFixture struct {
	proxyAddr string
	checker   *fakeSSHChecker
	routes    *fakeSSHRoutes
	alice     ssh.Signer
	bob       ssh.Signer
	hostKey   ssh.PublicKey
	ticks     chan time.Time
	server    *SSHServer
	// helperAddr and upstreamKey reach the helper directly, as the proxy does.
	helperAddr  string
	upstreamKey ssh.Signer

	mu           sync.Mutex
	activity     []string
	wrongHostKey bool // the proxy expects another key than the helper's
}

// newSSHFixture runs the real workspace helper's SSH server (as in the pod) and the proxy's SSH
// side in front of it, both on loopback.
func newSSHFixture(t testing.TB, helperOpts ...func(*wshelper.ServerOptions)) *sshFixture {
	t.Helper()
	upstreamKey := newSigner(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(upstreamKey.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	helperHostKey := newSigner(t)
	hopts := wshelper.ServerOptions{HostKey: helperHostKey, AuthorizedKeysFile: keys, Shell: "/bin/sh", Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}}
	for _, o := range helperOpts {
		o(&hopts)
	}
	helper, err := wshelper.NewServer(hopts)
	if err != nil {
		t.Fatal(err)
	}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = helper.Serve(hln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		helper.Shutdown(ctx)
	})

	newSignerPub := newSigner(t).PublicKey()
	f := &sshFixture{alice: newSigner(t), bob: newSigner(t), ticks: make(chan time.Time), helperAddr: hln.Addr().String(), upstreamKey: upstreamKey}
	f.checker = &fakeSSHChecker{alice: authorizedLine(f.alice.PublicKey()), bob: authorizedLine(f.bob.PublicKey()), token: "hgu_alicetoken"}
	f.routes = &fakeSSHRoutes{addr: map[string]string{"ws-1": hln.Addr().String()}}
	host := newSigner(t)
	f.hostKey = host.PublicKey()
	f.server, err = NewSSHServer(SSHOptions{
		HostKeys: []ssh.Signer{host}, Checker: f.checker, Routes: f.routes, UpstreamKey: upstreamKey,
		Activity: func(id, kind string) {
			f.mu.Lock()
			f.activity = append(f.activity, id+" "+kind)
			f.mu.Unlock()
		},
		NewTicker: func(time.Duration) (<-chan time.Time, func()) { return f.ticks, func() {} },
		HelperHostKey: func(id string) ssh.PublicKey {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.wrongHostKey || id != "ws-1" {
				return newSignerPub
			}
			return helperHostKey.PublicKey()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.proxyAddr = pln.Addr().String()
	go func() { _ = f.server.Serve(pln) }()
	t.Cleanup(f.server.Close)
	return f
}

func (f *sshFixture) dial(user string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
	var banner strings.Builder
	c, err := ssh.Dial("tcp", f.proxyAddr, &ssh.ClientConfig{User: user, Auth: auth, HostKeyCallback: ssh.FixedHostKey(f.hostKey),
		BannerCallback: func(m string) error { banner.WriteString(m); return nil }, Timeout: 10 * time.Second})
	if err != nil && banner.Len() > 0 {
		return nil, errors.New(banner.String() + err.Error())
	}
	return c, err
}

func (f *sshFixture) dialHelper() (*ssh.Client, error) {
	return ssh.Dial("tcp", f.helperAddr, &ssh.ClientConfig{User: "alice", Auth: []ssh.AuthMethod{ssh.PublicKeys(f.upstreamKey)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
}

func run(t *testing.T, c *ssh.Client, cmd string) (stdout, stderr string, err error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	defer s.Close()
	var o, e bytes.Buffer
	s.Stdout, s.Stderr = &o, &e
	err = s.Run(cmd)
	return o.String(), e.String(), err
}

func TestSSHExecThroughProxy(t *testing.T) {
	f := newSSHFixture(t)
	c, err := f.dial("dev", ssh.PublicKeys(f.alice))
	if err != nil {
		t.Fatalf("alice's key: %v", err)
	}
	defer c.Close()
	out, errOut, err := run(t, c, "echo hello; echo oops >&2; exit 3")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
	if out != "hello\n" || errOut != "oops\n" {
		t.Errorf("stdout %q stderr %q, want hello and oops", out, errOut)
	}
	// stdin reaches the command and its end is passed on.
	s, _ := c.NewSession()
	s.Stdin = strings.NewReader("line1\nline2\n")
	got, err := s.Output("wc -l")
	if err != nil || strings.TrimSpace(string(got)) != "2" {
		t.Errorf("wc -l of 2 lines through the proxy: %q %v", got, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.activity) == 0 || f.activity[0] != "ws-1 ssh" {
		t.Errorf("activity %q, want ws-1 ssh", f.activity)
	}
}

func TestSSHLargeOutputIsComplete(t *testing.T) {
	f := newSSHFixture(t)
	c, err := f.dial("alice/dev", ssh.Password("hgu_alicetoken"))
	if err != nil {
		t.Fatalf("alice's token: %v", err)
	}
	defer c.Close()
	out, _, err := run(t, c, "head -c 3000000 /dev/zero")
	if err != nil || len(out) != 3000000 {
		t.Fatalf("got %d bytes, err %v; want 3000000", len(out), err)
	}
}

func TestSSHSFTPAndPortForwardThroughProxy(t *testing.T) {
	f := newSSHFixture(t)
	c, err := f.dial("dev", ssh.PublicKeys(f.alice))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatalf("sftp: %v", err)
	}
	defer sc.Close()
	dir := t.TempDir()
	w, err := sc.Create(filepath.Join(dir, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("hangar "), 50000)
	if _, err := w.Write(payload); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := sc.Open(filepath.Join(dir, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(back, payload) {
		t.Errorf("sftp round trip: got %d bytes, want %d", len(back), len(payload))
	}

	// A port only the "workspace" listens on (no endpoint exposes it).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(conn, conn)
		conn.Close()
	}()
	conn, err := c.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("direct-tcpip through the proxy: %v", err)
	}
	_, _ = conn.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo through the forward: %q %v", buf, err)
	}
	conn.Close()
	if _, err := c.Dial("tcp", "127.0.0.1:1"); err == nil {
		t.Error("a forward to a closed port succeeded")
	}
}

func TestSSHRefusals(t *testing.T) {
	f := newSSHFixture(t)
	stranger := newSigner(t)
	if _, err := f.dial("dev", ssh.PublicKeys(stranger)); err == nil {
		t.Error("an unregistered key got in")
	}
	_, err := f.dial("dev", ssh.PublicKeys(f.bob))
	if err == nil || !strings.Contains(err.Error(), `bob has no workspace "dev"`) {
		t.Errorf("bob into alice's dev: %v, want refused with a banner", err)
	}
	_, err = f.dial("dev", ssh.Password("hgu_wrong"))
	if err == nil || !strings.Contains(err.Error(), "token is not valid") {
		t.Errorf("wrong token: %v", err)
	}
	_, err = f.dial("other", ssh.PublicKeys(f.alice))
	if err == nil || !strings.Contains(err.Error(), `alice has no workspace "other"`) {
		t.Errorf("no such workspace: %v", err)
	}
	// Oversized names and tokens are refused by the proxy itself, not taken for a server failure.
	calls := len(f.checker.requests)
	if _, err := f.dial(strings.Repeat("d", 201), ssh.PublicKeys(f.alice)); err == nil || !strings.Contains(err.Error(), "must name a workspace") {
		t.Errorf("a 201-byte user name: %v", err)
	}
	if _, err := f.dial("dev", ssh.Password(strings.Repeat("t", 513))); err == nil || !strings.Contains(err.Error(), "token is not valid") {
		t.Errorf("a 513-byte token: %v", err)
	}
	if len(f.checker.requests) != calls {
		t.Errorf("oversized credentials were sent to the server")
	}
	f.checker.mu.Lock()
	f.checker.down = true
	f.checker.mu.Unlock()
	_, err = f.dial("dev", ssh.PublicKeys(f.alice))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Hangar server") {
		t.Errorf("server down: %v, want refused (fail closed)", err)
	}
}

func TestSSHStoppedWorkspaceSaysSo(t *testing.T) {
	f := newSSHFixture(t)
	f.routes.mu.Lock()
	delete(f.routes.addr, "ws-1")
	f.routes.mu.Unlock()
	f.checker.mu.Lock()
	f.checker.stopped = true
	f.checker.mu.Unlock()
	c, err := f.dial("dev", ssh.PublicKeys(f.alice))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, errOut, err := run(t, c, "hostname")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 1 {
		t.Errorf("exit %v, want 1", err)
	}
	if !strings.Contains(errOut, "workspace alice/dev is not running (Stopped)") || !strings.Contains(errOut, "hangar start alice/dev") {
		t.Errorf("stderr %q, want the workspace's state and how to start it", errOut)
	}
	if _, err := c.Dial("tcp", "127.0.0.1:80"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("forward into a stopped workspace: %v", err)
	}
}

func TestSSHRevokedTokenEndsOpenConnection(t *testing.T) {
	f := newSSHFixture(t)
	c, err := f.dial("dev", ssh.Password("hgu_alicetoken"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := run(t, c, "true"); err != nil {
		t.Fatal(err)
	}
	f.ticks <- time.Now() // still allowed: the connection stays
	if _, _, err := run(t, c, "true"); err != nil {
		t.Fatalf("after an allowed recheck: %v", err)
	}
	f.checker.mu.Lock()
	f.checker.revoked = true
	f.checker.mu.Unlock()
	f.ticks <- time.Now()
	if err := c.Wait(); err == nil {
		t.Log("connection closed cleanly")
	}
	if _, err := c.NewSession(); err == nil {
		t.Error("a session opened after the token was revoked")
	}
	if _, err := f.dial("dev", ssh.Password("hgu_alicetoken")); err == nil {
		t.Error("a revoked token got in again")
	}
}

func TestSSHHelperWithAnotherHostKeyIsNotTrusted(t *testing.T) {
	f := newSSHFixture(t)
	f.mu.Lock()
	f.wrongHostKey = true
	f.mu.Unlock()
	c, err := f.dial("dev", ssh.PublicKeys(f.alice))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, errOut, err := run(t, c, "echo should-not-run")
	if err == nil || out != "" || !strings.Contains(errOut, "did not show the workspace's host key") {
		t.Errorf("through a helper with the wrong host key: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// RecheckNow (the server announced a revocation) asks about every open connection at once, without
// waiting for its ticker: one whose access ended is closed, the others stay.
func TestSSHRecheckNowClosesRevokedConnections(t *testing.T) {
	f := newSSHFixture(t)
	c, err := f.dial("dev", ssh.Password("hgu_alicetoken"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := run(t, c, "true"); err != nil {
		t.Fatal(err)
	}
	f.server.RecheckNow() // still allowed: the connection stays
	if _, _, err := run(t, c, "true"); err != nil {
		t.Fatalf("after an allowed recheck: %v", err)
	}
	f.checker.mu.Lock()
	f.checker.revoked = true
	f.checker.mu.Unlock()
	f.server.RecheckNow() // no tick: only the push can close it
	ended := make(chan struct{})
	go func() { _ = c.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("RecheckNow did not close the revoked connection")
	}
}
