package wshelper

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv("WSHELPER_TEST_REAPER") == "1" {
		reaperProcess() // the subprocess of TestReap
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "git-credential" {
		// git runs this test binary as its credential helper (gitcred_test.go), as it runs
		// `hangar git-credential get` in a workspace.
		GitCredentialMain(context.Background(), os.Args[2], os.Getenv(GitCredentialSocketEnv), os.Stdin, os.Stdout, os.Stderr)
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "git-known-hosts" {
		// git's ssh runs this test binary as its KnownHostsCommand (gitssh_test.go), as it runs
		// `hangar git-known-hosts SOCKET` in a workspace.
		GitKnownHostsMain(os.Args[2], os.Stdout, os.Stderr)
		return
	}
	if os.Getenv("WSHELPER_BENCH_IDLE") != "" {
		idleHelperMain() // the helper measured by BenchmarkHelperIdle
		return
	}
	if port := os.Getenv("WSHELPER_TEST_EDITOR_PORT"); port != "" {
		fakeEditor(port) // the editor of the editor tests
		return
	}
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; nothing waits for it to pass.
const testTimeout = 20 * time.Second

// logBuffer is a log sink tests can read while the server writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// eventually polls cond until it holds, failing after testTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a timing assumption
	}
}

func newSigner(t *testing.T) ssh.Signer {
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

func writeAuthorizedKeys(t *testing.T, path string, keys ...ssh.Signer) {
	t.Helper()
	var b []byte
	for _, k := range keys {
		b = append(b, ssh.MarshalAuthorizedKey(k.PublicKey())...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// testServer is a Server on 127.0.0.1 with one authorized client key.
type testServer struct {
	srv      *Server
	addr     string
	hostKey  ssh.PublicKey
	client   ssh.Signer // authorized
	authFile string
	home     string
	logs     *logBuffer
}

func startServer(t *testing.T, opts ServerOptions) *testServer {
	t.Helper()
	dir := t.TempDir()
	ts := &testServer{client: newSigner(t), authFile: filepath.Join(dir, "authorized_keys"), home: filepath.Join(dir, "home"), logs: &logBuffer{}}
	if err := os.Mkdir(ts.home, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAuthorizedKeys(t, ts.authFile, ts.client)
	if opts.HostKey == nil {
		opts.HostKey = newSigner(t)
	}
	if opts.AuthorizedKeysFile == "" {
		opts.AuthorizedKeysFile = ts.authFile
	}
	if opts.Env == nil {
		opts.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ts.home, "SHELL=/bin/sh", "FROM_CONTAINER=yes"}
	}
	opts.Logger = ts.logs.logger()
	ts.hostKey = opts.HostKey.PublicKey()
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logs.String())
		}
	})
	return ts
}

func (ts *testServer) clientConfig(auth ...ssh.AuthMethod) *ssh.ClientConfig {
	return &ssh.ClientConfig{User: "proxy", Auth: auth, HostKeyCallback: ssh.FixedHostKey(ts.hostKey), Timeout: testTimeout}
}

// dial connects with key (the authorized one when nil).
func (ts *testServer) dial(key ssh.Signer) (*ssh.Client, error) {
	if key == nil {
		key = ts.client
	}
	return ssh.Dial("tcp", ts.addr, ts.clientConfig(ssh.PublicKeys(key)))
}

func (ts *testServer) mustDial(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ts.dial(nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntil reads r until it has seen want, failing after testTimeout. It reads a byte at a time,
// so that what follows want is left for the next call.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var buf bytes.Buffer
		b := make([]byte, 1)
		for !strings.Contains(buf.String(), want) {
			if _, err := io.ReadFull(r, b); err != nil {
				break
			}
			buf.WriteByte(b[0])
		}
		got <- buf.String()
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, want) {
			t.Fatalf("output ended without %q: %q", want, s)
		}
		return s
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %q", want)
		return ""
	}
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *ssh.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatalf("want an exit status, got %v", err)
	}
	return ee.ExitStatus()
}

// reaperProcess is TestReap's subprocess: a child subreaper (standing for PID 1) running Reap on
// the script of WSHELPER_TEST_SCRIPT, with fd 3 passed on.
func reaperProcess() {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl:", err)
		os.Exit(100)
	}
	cmd := exec.Command("/bin/sh", "-c", os.Getenv("WSHELPER_TEST_SCRIPT"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if f := os.NewFile(3, "fd3"); f != nil {
		cmd.ExtraFiles = []*os.File{f}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	code, err := Reap(cmd, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reap:", err)
		os.Exit(101)
	}
	os.Exit(code)
}
