//go:build unix

package wshelper

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/hangar-dev/hangar/internal/gitcred"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/gitcredtest"
)

// signingServer answers the git SSH endpoints as the Hangar server does, with a key of its own,
// counting the requests and their tokens.
type signingServer struct {
	signer ssh.Signer
	mu     sync.Mutex
	asked  []string // "METHOD path token"
	refuse string   // set: every answer is a 403 with this message
}

func newSigningServer(t *testing.T) *signingServer {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &signingServer{signer: s}
}

func (h *signingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.asked = append(h.asked, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	refuse := h.refuse
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if refuse != "" {
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(sdk.Error{Code: "forbidden", Message: refuse})
		return
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /api/v1/workspace-agent/gitssh":
		_ = json.NewEncoder(w).Encode(sdk.GitSSHKey{PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(h.signer.PublicKey()))) + " hangar:alice"})
	case "POST /api/v1/workspace-agent/gitssh/sign":
		var req sdk.GitSSHSignRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || string(req.PublicKey) != string(h.signer.PublicKey().Marshal()) {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(sdk.Error{Code: "conflict", Message: "not the user's current git SSH key"})
			return
		}
		sig, err := h.signer.Sign(rand.Reader, req.Data)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		_ = json.NewEncoder(w).Encode(sdk.GitSSHSignature{Format: sig.Format, Blob: sig.Blob})
	default:
		http.NotFound(w, r)
	}
}

// startTestAgent serves the git SSH agent on a socket in a new state directory, asking h.
func startTestAgent(t *testing.T, h *signingServer) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	path, stop, err := startGitSSHAgent(Config{StateDir: t.TempDir() + "/state", ServerURL: srv.URL, Token: "hwa_test", Connect: ConnectOptions{HTTPClient: srv.Client()}},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return path
}

func dialAgent(t *testing.T, path string) agent.ExtendedAgent {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return agent.NewClient(c)
}

// The agent lists the owner's key and signs with it through the server (the signature verifies
// with that key); it refuses every other operation, and the server's refusals reach the client.
func TestGitSSHAgent(t *testing.T) {
	h := newSigningServer(t)
	path := startTestAgent(t, h)
	ag := dialAgent(t, path)
	keys, err := ag.List()
	if err != nil || len(keys) != 1 || keys[0].Comment != "hangar:alice" || string(keys[0].Blob) != string(h.signer.PublicKey().Marshal()) {
		t.Fatalf("List = %v, %v; want the owner's key", keys, err)
	}
	data := []byte("to sign")
	sig, err := ag.Sign(keys[0], data)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.signer.PublicKey().Verify(data, sig); err != nil {
		t.Fatalf("the signature does not verify: %v", err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	otherSigner, _ := ssh.NewSignerFromKey(other)
	if _, err := ag.Sign(otherSigner.PublicKey(), data); err == nil {
		t.Fatal("signed with a key that is not the owner's")
	}
	for name, op := range map[string]func() error{
		"Add":       func() error { return ag.Add(agent.AddedKey{PrivateKey: other}) },
		"Remove":    func() error { return ag.Remove(otherSigner.PublicKey()) },
		"RemoveAll": func() error { return ag.RemoveAll() },
		"Lock":      func() error { return ag.Lock([]byte("x")) },
		"Unlock":    func() error { return ag.Unlock([]byte("x")) },
		"Extension": func() error { _, err := ag.Extension("session-bind@openssh.com", nil); return err },
	} {
		if err := op(); err == nil {
			t.Errorf("%s succeeded; want it refused", name)
		}
	}
	if keys, err := ag.List(); err != nil || len(keys) != 1 {
		t.Fatalf("after the refused operations, List = %v, %v; want the one key still", keys, err)
	}
	h.mu.Lock()
	for _, a := range h.asked {
		if !strings.HasSuffix(a, " Bearer hwa_test") {
			t.Errorf("the server was asked %q; want the helper's token", a)
		}
	}
	h.refuse = "alice is suspended"
	h.mu.Unlock()
	if _, err := ag.Sign(keys[0], data); err == nil {
		t.Fatal("signed for a suspended owner")
	}
	if keys, err := ag.List(); err == nil || len(keys) != 0 {
		t.Fatalf("List for a suspended owner = %v, %v; want a failure", keys, err)
	}
}

// A request over maxGitSSHAgentRequest ends the connection before anything is read into memory
// or asked of the server; the agent goes on serving others.
func TestGitSSHAgentBoundsRequests(t *testing.T) {
	h := newSigningServer(t)
	path := startTestAgent(t, h)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 8<<20)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 16)); err != io.EOF {
		t.Fatalf("after an 8 MiB request's length, read %d bytes, %v; want the connection closed", n, err)
	}
	if keys, err := dialAgent(t, path).List(); err != nil || len(keys) != 1 {
		t.Fatalf("another connection: %v, %v", keys, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.asked) != 1 {
		t.Fatalf("the server was asked %v; want only the second connection's List", h.asked)
	}
}

// git's ssh uses the agent unless the container chose its own ssh.
func TestGitCredentialEnvPointsSSHAtTheAgent(t *testing.T) {
	env := strings.Join(gitCredentialEnv([]string{"PATH=/bin"}, "/hangar/bin/hangar", "/s/git-credential.sock", "/s/git ssh.sock", true), "\n")
	for _, want := range []string{"GIT_CONFIG_KEY_2=core.sshCommand",
		`GIT_CONFIG_VALUE_2=ssh -o IdentityAgent='/s/git ssh.sock' -o 'KnownHostsCommand="/hangar/bin/hangar" git-known-hosts "/s/git ssh.sock"'`, "GIT_CONFIG_COUNT=3"} {
		if !strings.Contains(env, want) {
			t.Errorf("environment\n%s\nlacks %q", env, want)
		}
	}
	for _, own := range []string{"GIT_SSH_COMMAND=ssh -i /home/me/key", "GIT_SSH=/usr/bin/plink"} {
		env := strings.Join(gitCredentialEnv([]string{own}, "/hangar/bin/hangar", "/s/git-credential.sock", "/s/a.sock", true), "\n")
		if strings.Contains(env, "core.sshCommand") || !strings.Contains(env, "GIT_CONFIG_COUNT=2") || !strings.Contains(env, own) {
			t.Errorf("with %s, environment\n%s\nwants the container's ssh kept", own, env)
		}
	}
	// An ssh before OpenSSH 8.5 would refuse KnownHostsCommand, and git over SSH with it.
	old := strings.Join(gitCredentialEnv([]string{"PATH=/bin"}, "/hangar/bin/hangar", "/s/git-credential.sock", "/s/a.sock", false), "\n")
	if !strings.Contains(old, "GIT_CONFIG_VALUE_2=ssh -o IdentityAgent='/s/a.sock'\n") {
		t.Errorf("for an older ssh, environment\n%s\nwants IdentityAgent alone", old)
	}
}

// The version of ssh decides whether KnownHostsCommand is given to it; this machine's ssh
// (Debian 12's, 9.2) has it.
func TestOpenSSHVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"OpenSSH_9.2p1 Debian-2+deb12u6, OpenSSL 3.0.19 27 Jan 2026": true,
		"OpenSSH_8.5p1, OpenSSL 1.1.1k":                              true,
		"OpenSSH_10.0p2":                                             true,
		"OpenSSH_8.4p1 Debian-5+deb11u3, OpenSSL 1.1.1w":             false,
		"OpenSSH_8.2p1 Ubuntu-4ubuntu0.11, OpenSSL 1.1.1f":           false,
		"OpenSSH_for_Windows_8.6p1":                                  false,
		"Dropbear v2022.83":                                          false,
		"":                                                           false,
	} {
		if got := openSSHAtLeast(v, 8, 5); got != want {
			t.Errorf("openSSHAtLeast(%q, 8, 5) = %v, want %v", v, got, want)
		}
	}
	if !sshHasKnownHostsCommand([]string{"PATH=/nonexistent:" + os.Getenv("PATH")}) {
		t.Error("this machine's ssh (OpenSSH 9.2) was not found to have KnownHostsCommand")
	}
	if sshHasKnownHostsCommand([]string{"PATH=/nonexistent"}) {
		t.Error("no ssh on PATH was found to have KnownHostsCommand")
	}
}

// FuzzGitSSHAgentConn feeds the agent's socket arbitrary bytes through the request bound and the
// agent protocol (with an agent that asks no server): nothing panics, what passes the bound is a
// prefix of the input made of requests of at most maxGitSSHAgentRequest bytes.
func FuzzGitSSHAgentConn(f *testing.F) {
	req := func(body []byte) []byte { return binary.BigEndian.AppendUint32(nil, uint32(len(body))) }
	f.Add(append(req([]byte{11}), 11))                      // list
	f.Add(append(req(make([]byte, 9)), make([]byte, 9)...)) // a short garbage request
	f.Add([]byte{0, 0x10, 0, 0, 13})                        // a 1 MiB request's length
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		b, done := feedPipe(in)
		bc := &boundedAgentConn{Conn: b}
		passed, _ := io.ReadAll(bc)
		b.Close()
		<-done
		if !strings.HasPrefix(string(in), string(passed)) {
			t.Fatalf("passed %x, not a prefix of %x", passed, in)
		}
		for rest := passed; len(rest) >= 4; {
			l := binary.BigEndian.Uint32(rest[:4])
			if l > maxGitSSHAgentRequest {
				t.Fatalf("a request of %d bytes passed", l)
			}
			rest = rest[min(len(rest), 4+int(l)):]
		}
		// The whole protocol over the bound, with an agent whose server never answers.
		b, done = feedPipe(in)
		_ = agent.ServeAgent(&gitSSHAgent{ctx: t.Context(), server: gitcred.SSHServer{HTTP: &http.Client{Transport: refuseTransport{}}, BaseURL: "http://127.0.0.1:1"},
			log: slog.New(slog.DiscardHandler)}, &boundedAgentConn{Conn: b})
		b.Close()
		<-done
	})
}

// feedPipe returns one end of a pipe whose other end writes in, then closes, and drains what
// comes back; done is closed once that end is done.
func feedPipe(in []byte) (net.Conn, <-chan struct{}) {
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		drained := make(chan struct{})
		go func() { defer close(drained); _, _ = io.Copy(io.Discard, a) }() // the answers
		_, _ = a.Write(in)
		a.Close()
		<-drained
	}()
	return b, done
}

// refuseTransport answers no request (no network in the fuzz test).
type refuseTransport struct{}

func (refuseTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, io.ErrUnexpectedEOF
}

// The real git and OpenSSH in a workspace's environment clone over SSH from the test forge with
// no known_hosts of their own: ssh asks `hangar git-known-hosts` (its KnownHostsCommand) for the
// forges' host keys, which the helper's agent asks of the server each time. A forge key other than
// the one the server gives is refused by ssh.
func TestGitSSHChecksTheForgesHostKeys(t *testing.T) {
	for _, tool := range []string{"git", "ssh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (scripts/install-deps): %v", tool, err)
		}
	}
	forge := forgetest.New(t, forgetest.Options{})
	forge.AddUser(forgetest.User{Login: "alice"})
	forge.CreateRepo("alice", "app", true, map[string]string{"README.md": "# app\n"})
	owner := newSigningServer(t).signer
	forge.AddSSHKey("alice", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(owner.PublicKey()))))
	srv := gitcredtest.New(t, func(gitcred.Request) (int, any) { return http.StatusNotFound, map[string]string{"message": "no forge"} })
	agentPath, stop, err := startGitSSHAgent(Config{StateDir: filepath.Join(t.TempDir(), "state"), ServerURL: srv.URL, Token: "hwa_test"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sshPath, _ := exec.LookPath("ssh")
	// This machine's ssh without its config files; no prompt, unknown hosts refused.
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "ssh"), []byte("#!/bin/sh\nexec "+sshPath+` -F none -o BatchMode=yes -o StrictHostKeyChecking=yes "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH")
	env := gitCredentialEnv([]string{"HOME=" + dir, path, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LANG=C"},
		self, filepath.Join(dir, "unused.sock"), agentPath, sshHasKnownHostsCommand([]string{path}))
	clone := func(dest string) (string, error) {
		cmd := exec.Command("git", "clone", "-q", forge.SSHCloneURL("alice", "app"), filepath.Join(dir, dest))
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	srv.SetGitSSH(owner, forge.KnownHosts(), "")
	if out, err := clone("one"); err != nil {
		t.Fatalf("git clone over SSH with the forges' known hosts: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "one", "README.md")); err != nil || string(b) != "# app\n" {
		t.Fatalf("the clone's README.md: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".ssh", "known_hosts")); !os.IsNotExist(err) {
		t.Fatalf("ssh wrote ~/.ssh/known_hosts (%v): the forges' keys are asked each time, not recorded", err)
	}

	host, _, _ := strings.Cut(forge.KnownHosts(), " ")
	srv.SetGitSSH(owner, host+" "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(newSigningServer(t).signer.PublicKey())))+"\n", "")
	if out, err := clone("two"); err == nil || !strings.Contains(out, "Host key verification failed") {
		t.Fatalf("git clone with another host key known for the forge: %v\n%s", err, out)
	}
	asked := 0
	for _, a := range srv.SSHAsked() {
		if a == "GET /api/v1/workspace-agent/gitssh Bearer hwa_test" {
			asked++
		}
	}
	if asked < 2 {
		t.Fatalf("the server was asked for the key and known hosts %d times over two clones; want each time: %q", asked, srv.SSHAsked())
	}
}
