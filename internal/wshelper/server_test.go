package wshelper

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

func TestShellWithPty(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	sess, err := ts.mustDial(t).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.RequestPty("xterm-test", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	out, _ := sess.StdoutPipe()
	in, _ := sess.StdinPipe()
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	// The pty echoes the input: 'h''i' is in it, hi only in the output.
	if _, err := io.WriteString(in, `echo "h""i:$TERM:$FROM_CONTAINER"; exit 3`+"\n"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, out, "hi:xterm-test:yes")
	if got := exitStatus(t, sess.Wait()); got != 3 {
		t.Fatalf("exit status %d, want 3", got)
	}
}

func TestWindowChange(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	sess, err := ts.mustDial(t).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	out, _ := sess.StdoutPipe()
	in, _ := sess.StdinPipe()
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "stty size; echo do\"ne\"1\n")
	readUntil(t, out, "24 80")
	readUntil(t, out, "done1")
	if err := sess.WindowChange(40, 120); err != nil {
		t.Fatal(err)
	}
	// Requests are handled in order: once this one is answered, the size is set.
	if _, err := sess.SendRequest("env", true, ssh.Marshal(envRequest{"LATE", "x"})); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "stty size; exit 0\n")
	readUntil(t, out, "40 120")
	if got := exitStatus(t, sess.Wait()); got != 0 {
		t.Fatalf("exit status %d", got)
	}
}

// TestQuickCommandsNeverFail: a command that ends at once must not have its exit and close overtake
// the reply to its exec request (the client would report the request as failed).
func TestQuickCommandsNeverFail(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c := ts.mustDial(t)
	for i := range 50 {
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Run("true"); err != nil {
			t.Fatalf("run %d of true: %v", i, err)
		}
	}
}

func TestExecSeparateStderrAndExitCode(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	sess, err := ts.mustDial(t).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	err = sess.Run(`echo out; echo err >&2; pwd; exit 5`)
	if got := exitStatus(t, err); got != 5 {
		t.Fatalf("exit status %d, want 5", got)
	}
	if want := "out\n" + ts.home + "\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q (output, then the home directory it starts in)", stdout.String(), want)
	}
	if stderr.String() != "err\n" {
		t.Errorf("stderr %q", stderr.String())
	}
}

func TestExecEnvAndStdinEOF(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	client := ts.mustDial(t)
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Setenv("HANGAR_TEST_VAR", "a b=c"); err != nil {
		t.Fatalf("env request refused: %v", err)
	}
	if err := sess.Setenv("FROM_CONTAINER", "overridden"); err != nil {
		t.Fatal(err)
	}
	sess.Stdin = strings.NewReader("from stdin\n")
	out, err := sess.Output(`printf '%s|%s|' "$HANGAR_TEST_VAR" "$FROM_CONTAINER"; cat; echo end`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a b=c|overridden|from stdin\nend\n"; string(out) != want {
		t.Fatalf("output %q, want %q", out, want)
	}

	// Bad env requests are refused, and the session goes on.
	sess, err = client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := sess.SendRequest("env", true, ssh.Marshal(envRequest{"A=B", "x"})); ok {
		t.Error("env with '=' in the name accepted")
	}
	if out, err := sess.Output("echo ok"); err != nil || string(out) != "ok\n" {
		t.Fatalf("after a refused env: %q %v", out, err)
	}
}

func TestSignalAndExitSignal(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	sess, err := ts.mustDial(t).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := sess.StdoutPipe()
	if err := sess.Start("echo ready; exec sleep 1000"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, out, "ready")
	if err := sess.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *ssh.ExitError
	if err := sess.Wait(); !errors.As(err, &ee) || ee.Signal() != "TERM" {
		t.Fatalf("want exit-signal TERM, got %v", err)
	}
}

func TestSFTPRoundTrip(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c, err := sftp.NewClient(ts.mustDial(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := make([]byte, 5<<20)
	rand.Read(big)
	for name, data := range map[string][]byte{"small.txt": []byte("hello\n"), "big.bin": big} {
		f, err := c.Create(name) // relative: in the home directory
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		onDisk, err := os.ReadFile(filepath.Join(ts.home, name))
		if err != nil || !bytes.Equal(onDisk, data) {
			t.Fatalf("%s on disk: %d bytes, want %d (%v)", name, len(onDisk), len(data), err)
		}
		r, err := c.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var back bytes.Buffer
		if _, err := r.WriteTo(&back); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if !bytes.Equal(back.Bytes(), data) {
			t.Fatalf("%s read back: %d bytes, differ", name, back.Len())
		}
	}
	if wd, err := c.Getwd(); err != nil || wd != ts.home {
		t.Errorf("sftp starts in %q (%v), want %q", wd, err, ts.home)
	}
}

// echoServer serves TCP echo on 127.0.0.1 until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestDirectTCPIP(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	client := ts.mustDial(t)
	c, err := client.Dial("tcp", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "ping over ssh"); err != nil {
		t.Fatal(err)
	}
	// Half close: the echo server sees EOF, answers everything, then closes.
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "ping over ssh" {
		t.Fatalf("echo: %q %v", got, err)
	}
	c.Close()

	// A port nobody listens on is refused, and the connection goes on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	var oe *ssh.OpenChannelError
	if _, err := client.Dial("tcp", closed); !errors.As(err, &oe) || oe.Reason != ssh.ConnectionFailed {
		t.Fatalf("dial a closed port: %v", err)
	}
	if _, err := client.Dial("tcp", echoServer(t)); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteForward(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	client := ts.mustDial(t)
	ln, err := client.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String()) // inside the "workspace"
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "back to the client")
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "back to the client" {
		t.Fatalf("through the remote forward: %q", got)
	}
	<-accepted
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil { // cancel-tcpip-forward, answered
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the forwarded port still listens after cancel")
	}
}

func TestAuthentication(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	if _, err := ts.dial(newSigner(t)); err == nil {
		t.Fatal("an unknown key got in")
	}
	for name, auth := range map[string]ssh.AuthMethod{
		"password": ssh.Password("secret"),
		"keyboard-interactive": ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) {
			return nil, nil
		}),
	} {
		if c, err := ssh.Dial("tcp", ts.addr, ts.clientConfig(auth)); err == nil {
			c.Close()
			t.Errorf("%s got in", name)
		}
	}
	if c, err := ssh.Dial("tcp", ts.addr, ts.clientConfig()); err == nil { // "none"
		c.Close()
		t.Error(`"none" got in`)
	}
	// A key with options is not honoured half-way: it is ignored.
	restricted := newSigner(t)
	line := `command="true" ` + string(ssh.MarshalAuthorizedKey(restricted.PublicKey()))
	os.WriteFile(ts.authFile, []byte(line+string(ssh.MarshalAuthorizedKey(ts.client.PublicKey()))), 0o600)
	if _, err := ts.dial(restricted); err == nil {
		t.Error("a key with options got in")
	}
	c, err := ts.dial(nil)
	if err != nil {
		t.Fatalf("the authorized key: %v", err)
	}
	c.Close()
}

func TestAuthorizedKeysMissingOrEmpty(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	os.Remove(ts.authFile)
	if _, err := ts.dial(nil); err == nil {
		t.Fatal("got in with no authorized_keys file")
	}
	if !strings.Contains(ts.logs.String(), "authorized_keys file is missing: refusing every SSH client") {
		t.Errorf("no clear log line:\n%s", ts.logs.String())
	}
	os.WriteFile(ts.authFile, []byte("# nobody\n\n"), 0o600)
	if _, err := ts.dial(nil); err == nil {
		t.Fatal("got in with an empty authorized_keys file")
	}
	if !strings.Contains(ts.logs.String(), "authorized_keys holds no usable key: refusing every SSH client") {
		t.Errorf("no clear log line:\n%s", ts.logs.String())
	}
	writeAuthorizedKeys(t, ts.authFile, ts.client)
	c, err := ts.dial(nil)
	if err != nil {
		t.Fatalf("once the file is back: %v", err)
	}
	c.Close()

	noFile := startServer(t, ServerOptions{AuthorizedKeysFile: filepath.Join(t.TempDir(), "never")})
	if _, err := noFile.dial(noFile.client); err == nil {
		t.Fatal("got in with a missing file")
	}
}

// TestAuthorizedKeysRotation swaps the file the way the kubelet updates a mounted Secret: the
// file is a symlink through ..data, a symlink to a timestamped directory, replaced by rename.
func TestAuthorizedKeysRotation(t *testing.T) {
	mount := t.TempDir()
	oldKey, newKey := newSigner(t), newSigner(t)
	version := func(name string, key ssh.Signer) {
		os.Mkdir(filepath.Join(mount, name), 0o755)
		writeAuthorizedKeys(t, filepath.Join(mount, name, "authorized_keys"), key)
		os.Symlink(name, filepath.Join(mount, "..data_tmp"))
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_01_01", oldKey)
	os.Symlink("..data/authorized_keys", filepath.Join(mount, "authorized_keys"))
	ts := startServer(t, ServerOptions{AuthorizedKeysFile: filepath.Join(mount, "authorized_keys")})

	c, err := ts.dial(oldKey)
	if err != nil {
		t.Fatalf("old key before rotation: %v", err)
	}
	c.Close()
	if _, err := ts.dial(newKey); err == nil {
		t.Fatal("new key before rotation got in")
	}
	version("..2026_01_02", newKey)
	c, err = ts.dial(newKey)
	if err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	c.Close()
	if _, err := ts.dial(oldKey); err == nil {
		t.Fatal("old key after rotation got in")
	}
}

func TestConnectionLimit(t *testing.T) {
	ts := startServer(t, ServerOptions{MaxConnections: 2})
	a, b := ts.mustDial(t), ts.mustDial(t)
	if c, err := ts.dial(nil); err == nil {
		c.Close()
		t.Fatal("a third connection was served")
	}
	if !strings.Contains(ts.logs.String(), "too many connections") {
		t.Error("the refusal is not logged")
	}
	a.Close()
	eventually(t, "a free connection slot", func() bool { return ts.srv.Connections() < 2 })
	c, err := ts.dial(nil)
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	c.Close()
	b.Close()
}

func TestChannelLimit(t *testing.T) {
	ts := startServer(t, ServerOptions{MaxChannels: 2})
	client := ts.mustDial(t)
	s1, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NewSession(); err != nil {
		t.Fatal(err)
	}
	var oe *ssh.OpenChannelError
	if _, err := client.NewSession(); !errors.As(err, &oe) || oe.Reason != ssh.ResourceShortage {
		t.Fatalf("third session: %v", err)
	}
	if _, err := client.Dial("tcp", echoServer(t)); !errors.As(err, &oe) || oe.Reason != ssh.ResourceShortage {
		t.Fatalf("a forward beyond the limit: %v", err)
	}
	s1.Close()
	eventually(t, "a free channel", func() bool { return ts.srv.OpenChannels() < 2 })
	if _, err := client.NewSession(); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
}

// TestVanishingClient drops the TCP connection under a running command and a port forward: the
// server ends both (the command is hung up on) and keeps no goroutine (TestMain's goleak).
func TestVanishingClient(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, ts.addr, ts.clientConfig(ssh.PublicKeys(ts.client)))
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	sess, _ := client.NewSession()
	out, _ := sess.StdoutPipe()
	stdin1, _ := sess.StdinPipe() // typing nothing
	defer stdin1.Close()
	if err := sess.Start("echo ready; cat"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, out, "ready")
	pty, _ := client.NewSession()
	pty.RequestPty("xterm", 24, 80, nil)
	ptyOut, _ := pty.StdoutPipe()
	stdin2, _ := pty.StdinPipe()
	defer stdin2.Close()
	pty.Start("echo ready; exec sleep 1000")
	readUntil(t, ptyOut, "ready")
	fwd, err := client.Dial("tcp", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = fwd
	if ts.srv.OpenChannels() != 3 {
		t.Fatalf("%d channels open, want 3", ts.srv.OpenChannels())
	}
	nc.Close() // no goodbye
	eventually(t, "the server to drop the connection, its channels and commands", func() bool {
		ts.srv.mu.Lock()
		procs := len(ts.srv.procs)
		ts.srv.mu.Unlock()
		return ts.srv.Connections() == 0 && ts.srv.OpenChannels() == 0 && procs == 0
	})
	client.Close()
}

// frozenConn stops reading once frozen, as a client that vanished without closing its connection.
type frozenConn struct {
	net.Conn
	frozen, closed chan struct{}
	once           sync.Once
}

func (c *frozenConn) Read(p []byte) (int, error) {
	select {
	case <-c.frozen:
		<-c.closed
		return 0, net.ErrClosed
	default:
		return c.Conn.Read(p)
	}
}

func (c *frozenConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func TestKeepaliveDropsSilentClient(t *testing.T) {
	ts := startServer(t, ServerOptions{KeepaliveInterval: 20e6, KeepaliveCountMax: 2})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	fc := &frozenConn{Conn: nc, frozen: make(chan struct{}), closed: make(chan struct{})}
	sc, chans, reqs, err := ssh.NewClientConn(fc, ts.addr, ts.clientConfig(ssh.PublicKeys(ts.client)))
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()
	eventually(t, "the connection to be served", func() bool { return ts.srv.Connections() == 1 })
	// Keep the client's reader from answering anything from now on.
	close(fc.frozen)
	eventually(t, "the silent client to be dropped", func() bool { return ts.srv.Connections() == 0 })
	if !strings.Contains(ts.logs.String(), "stopped answering keepalives") {
		t.Errorf("not dropped for keepalives:\n%s", ts.logs.String())
	}
}

func TestActivity(t *testing.T) {
	kinds := make(chan string, 100)
	ticks := make(chan time.Time)
	ts := startServer(t, ServerOptions{Activity: func(k string) { kinds <- k }, ActivityTicks: ticks})
	tick := func() { ticks <- time.Time{}; ticks <- time.Time{} } // the second send returns once the first is handled
	expect := func(want string) {
		t.Helper()
		select {
		case k := <-kinds:
			if k != want {
				t.Fatalf("activity %q, want %q", k, want)
			}
		case <-time.After(testTimeout):
			t.Fatalf("no %q activity", want)
		}
	}
	none := func() {
		t.Helper()
		select {
		case k := <-kinds:
			t.Fatalf("unexpected activity %q", k)
		default:
		}
	}
	client := ts.mustDial(t)
	tick()
	none() // connected, nothing open
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	expect(ActivitySession)
	tick()
	expect(ActivityOpen)
	expect(ActivityOpen)
	sess.Close()
	eventually(t, "the session to end", func() bool { return ts.srv.OpenChannels() == 0 })
	tick()
	none()
	c, err := client.Dial("tcp", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	expect(ActivityForward)
	c.Close()
}

func TestShutdownEndsSessions(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	client := ts.mustDial(t)
	start := func(script string) (*ssh.Session, io.Reader) {
		sess, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, _ := sess.StdoutPipe()
		if err := sess.Start(script); err != nil {
			t.Fatal(err)
		}
		readUntil(t, out, "ready")
		return sess, out
	}
	polite, _ := start("echo ready; exec sleep 1000")
	stubborn, _ := start("trap '' TERM; echo ready; exec sleep 1000")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ts.srv.Shutdown(ctx); close(done) }()
	var ee *ssh.ExitError
	if err := polite.Wait(); !errors.As(err, &ee) || ee.Signal() != "TERM" {
		t.Fatalf("polite command: %v, want exit-signal TERM", err)
	}
	cancel() // the grace period is over
	<-done
	if err := stubborn.Wait(); err == nil {
		t.Fatal("the command that ignores SIGTERM ended cleanly")
	}
	if _, err := ts.dial(nil); err == nil {
		t.Fatal("connected after shutdown")
	}
}

// TestHangupWhenStartedIgnoringIt: a helper started with SIGHUP ignored (an init script run under
// nohup) still hangs up on a dropped connection's commands: TestVanishingClient, run by this test
// binary with SIGHUP ignored, passes (its commands would otherwise never end).
func TestHangupWhenStartedIgnoringIt(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `trap "" HUP; exec "$0" -test.run '^TestVanishingClient$' -test.count=1`, self)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("TestVanishingClient with SIGHUP ignored: %v\n%s", err, out)
	}
}
