package wshelper

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/wsmux"
)

// fakeHangar is the server side of the helper's outbound connection: it checks the token, and hands
// each yamux session to the test.
type fakeHangar struct {
	t        *testing.T
	token    string
	sessions chan *yamux.Session
	mu       sync.Mutex
	refused  int
	// unavailable, when set, answers every attempt 503 (a server being restarted) instead.
	unavailable bool
	// v2 makes it a server that knows protocol.WorkspaceAgentSubprotocolV2 (else it knows 1 only,
	// as servers before it).
	v2 bool
}

func (f *fakeHangar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.unavailable {
		f.mu.Lock()
		f.refused++
		f.mu.Unlock()
		http.Error(w, "the database is unavailable", http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path != protocol.WorkspaceAgentConnectPath || r.Header.Get("Authorization") != "Bearer "+f.token {
		f.mu.Lock()
		f.refused++
		f.mu.Unlock()
		http.Error(w, "invalid helper token: its workspace is deleted", http.StatusUnauthorized)
		return
	}
	subprotocols := []string{protocol.WorkspaceAgentSubprotocol}
	if f.v2 {
		subprotocols = []string{protocol.WorkspaceAgentSubprotocolV2, protocol.WorkspaceAgentSubprotocol}
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: subprotocols})
	if err != nil {
		return
	}
	nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
	sess, err := yamux.Client(nc, wsmux.Config())
	if err != nil {
		nc.Close()
		return
	}
	f.sessions <- sess
	<-sess.CloseChan()
}

// sshOver opens an SSH connection over a new stream of sess, with no credentials at all.
func sshOver(t *testing.T, sess *yamux.Session, hostKey ssh.PublicKey) *ssh.Client {
	t.Helper()
	stream, err := sess.Open()
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(stream, "helper", &ssh.ClientConfig{User: "anyone", HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return ssh.NewClient(sc, chans, reqs)
}

// TestConnectServesTrustedStreams: the helper connects out with its token; each stream the server
// opens is an SSH connection that needs no key; when the connection drops the helper comes back
// after its backoff (an injected timer, fired by the test), and a wrong token is refused and
// retried.
func TestConnectServesTrustedStreams(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	fake := &fakeHangar{t: t, token: "hwa_good", sessions: make(chan *yamux.Session, 4)}
	hs := httptest.NewServer(fake)
	defer hs.Close()

	after, waits, _ := fakeAfter()
	defer runConnect(t, ConnectOptions{URL: hs.URL + "/", Token: "hwa_good", Server: ts.srv, After: after, Logger: ts.logs.logger()})()

	run := func(sess *yamux.Session) {
		t.Helper()
		client := sshOver(t, sess, ts.hostKey)
		defer client.Close()
		s, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.Output("echo over-the-server")
		if err != nil || strings.TrimSpace(string(out)) != "over-the-server" {
			t.Fatalf("exec over a trusted stream: %q, %v", out, err)
		}
	}
	first := recvSession(t, fake.sessions)
	run(first)

	// The server goes away: the helper waits its backoff, then connects again.
	first.Close()
	fire := recvWait(t, waits)
	fire <- time.Now()
	second := recvSession(t, fake.sessions)
	run(second)
}

// TestConnectTransientFailureRetries: a failure that may pass (here a 503) is retried after the
// backoff, which grows.
func TestConnectTransientFailureRetries(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	fake := &fakeHangar{t: t, token: "hwa_good", sessions: make(chan *yamux.Session, 1), unavailable: true}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	after, waits, delays := fakeAfter()
	stop := runConnect(t, ConnectOptions{URL: hs.URL, Token: "hwa_good", Server: ts.srv, After: after, Retry: DefaultRetry})
	recvWait(t, waits) <- time.Now()
	recvWait(t, waits) <- time.Now()
	recvWait(t, waits)
	stop()
	if d := delays(); len(d) != 3 || d[2] < d[0] || d[2] < DefaultRetry.Ceiling(2)/2 || d[2] > DefaultRetry.Max {
		t.Fatalf("backoff delays %v, want growing", d)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.refused != 3 {
		t.Fatalf("%d refused attempts, want 3", fake.refused)
	}
}

// TestConnectRefusedForGoodExits: a 401 (the server's answer for a deleted workspace or a token no
// longer in its state) is final: Connect returns ErrRefused after that one attempt, without waiting
// to retry, and says why in the log.
func TestConnectRefusedForGoodExits(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	fake := &fakeHangar{t: t, token: "hwa_other", sessions: make(chan *yamux.Session, 1)}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	after, waits, _ := fakeAfter()
	done := make(chan error, 1)
	go func() {
		done <- Connect(context.Background(), ConnectOptions{URL: hs.URL, Token: "hwa_good", Server: ts.srv, After: after, Logger: ts.logs.logger()})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "its workspace is deleted") {
			t.Fatalf("Connect = %v, want ErrRefused with the server's answer", err)
		}
	case <-waits:
		t.Fatal("the helper waits to retry a connection the server refused for good")
	case <-time.After(testTimeout):
		t.Fatal("Connect did not return")
	}
	if logs := ts.logs.String(); !strings.Contains(logs, "refused this helper for good") || !strings.Contains(logs, "exiting") {
		t.Fatalf("log does not say the helper exits:\n%s", logs)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.refused != 1 {
		t.Fatalf("%d attempts, want 1", fake.refused)
	}
}

// TestRunExitsWhenRefused: the helper process (Run, connecting out) ends with an error when the
// server refuses it for good, instead of running on unreachable.
func TestRunExitsWhenRefused(t *testing.T) {
	fake := &fakeHangar{t: t, token: "hwa_current", sessions: make(chan *yamux.Session, 1)}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Config{ConnectURL: hs.URL, Token: "hwa_revoked", StateDir: dir, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir},
			GracePeriod: testTimeout, Connect: ConnectOptions{After: func(time.Duration) <-chan time.Time { return nil }}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("Run = %v, want ErrRefused", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the helper runs on after the server refused it for good")
	}
}

// The listening side keeps its key check: a client with no key is refused there.
func TestListenerStillNeedsAKey(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	_, err := ssh.Dial("tcp", ts.addr, &ssh.ClientConfig{User: "anyone", HostKeyCallback: ssh.FixedHostKey(ts.hostKey), Timeout: testTimeout})
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("a client without a key on the listener: %v", err)
	}
}

// ServeTrusted after Shutdown closes the connection at once.
func TestServeTrustedAfterShutdown(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ts.srv.Shutdown(ctx)
	a, b := net.Pipe()
	defer b.Close()
	if err := ts.srv.ServeTrusted(a); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("ServeTrusted after Shutdown: %v", err)
	}
}

func TestHelperTokenOptions(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/token"
	if err := writeFileAtomic(file, []byte("hwa_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o       Options
		want    string
		wantErr string
	}{
		{Options{}, "", ""},
		{Options{Token: "hwa_x"}, "", "go with --connect-url"},
		{Options{ConnectURL: "ftp://x"}, "", "--connect-url"},
		{Options{ConnectURL: "http://h:1"}, "", "need the helper's token"},
		{Options{ServerURL: "http://h:1"}, "", "need the helper's token"},
		{Options{ServerURL: "h:1", Token: "hwa_a"}, "", "--server-url: want the Hangar server's http:// or https:// URL"},
		{Options{ServerURL: "http://h:1", TokenFile: file}, "hwa_fromfile", ""},
		{Options{ConnectURL: "http://h:1", Token: "hgu_user"}, "", "--token: want a helper token"},
		{Options{ConnectURL: "http://h:1", Token: "hwa_a", TokenFile: file}, "", "give one of them"},
		{Options{ConnectURL: "http://h:1", TokenFile: dir + "/none"}, "", "--token-file"},
		{Options{ConnectURL: "https://h", Token: "hwa_a"}, "hwa_a", ""},
		{Options{ConnectURL: "https://h/", TokenFile: file}, "hwa_fromfile", ""},
	} {
		got, err := helperToken(tc.o)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: %q, %v; want an error with %q", tc.o, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.o, got, err, tc.want)
		}
	}
}

func recvSession(t *testing.T, ch <-chan *yamux.Session) *yamux.Session {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(testTimeout):
		t.Fatal("the helper did not connect")
		return nil
	}
}

func recvWait(t *testing.T, ch <-chan chan time.Time) chan time.Time {
	t.Helper()
	select {
	case w := <-ch:
		return w
	case <-time.After(testTimeout):
		t.Fatal("the helper did not wait to retry")
		return nil
	}
}

// fakeAfter is an injected timer: each call hands the test a channel to fire, and records the
// delay asked for.
func fakeAfter() (after func(time.Duration) <-chan time.Time, waits chan chan time.Time, delays func() []time.Duration) {
	var mu sync.Mutex
	var ds []time.Duration
	waits = make(chan chan time.Time, 4)
	after = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		ds = append(ds, d)
		mu.Unlock()
		ch := make(chan time.Time, 1)
		waits <- ch
		return ch
	}
	delays = func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), ds...)
	}
	return after, waits, delays
}

// runConnect runs Connect until the returned function stops it (and checks it ended well).
func runConnect(t *testing.T, o ConnectOptions) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Connect(ctx, o) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Connect: %v", err)
		}
	}
}

// TestRunConnectsOut: Run with a connect URL and no SSH address listens nowhere, serves the
// server's streams, and stops on its context like the listening helper.
func TestRunConnectsOut(t *testing.T) {
	fake := &fakeHangar{t: t, token: "hwa_run", sessions: make(chan *yamux.Session, 1)}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	dir := t.TempDir()
	listened := false
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := Run(ctx, Config{ConnectURL: hs.URL, Token: "hwa_run", StateDir: dir, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir},
			Listening: func(net.Addr) { listened = true }, GracePeriod: testTimeout})
		done <- result{code, err}
	}()
	sess := recvSession(t, fake.sessions)
	hostKey, err := LoadHostKey("", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := sshOver(t, sess, hostKey.PublicKey())
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Output("echo run"); err != nil || strings.TrimSpace(string(out)) != "run" {
		t.Fatalf("exec: %q, %v", out, err)
	}
	client.Close()
	cancel()
	select {
	case r := <-done:
		if r.err != nil || r.code != 0 || listened {
			t.Fatalf("Run = %d, %v (listened: %v)", r.code, r.err, listened)
		}
	case <-time.After(testTimeout):
		t.Fatal("Run did not stop")
	}
}

// TestConnectVersion2Streams: with a server that knows version 2, each stream says what it
// carries: SSH (served as a trusted stream), or a TCP connection to a port of the machine's
// loopback address, relayed both ways with no SSH, its end passed on; a port nothing listens on
// is answered with why; a stream with a header the helper does not know is closed.
func TestConnectVersion2Streams(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	fake := &fakeHangar{t: t, token: "hwa_good", sessions: make(chan *yamux.Session, 1), v2: true}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	after, _, _ := fakeAfter()
	defer runConnect(t, ConnectOptions{URL: hs.URL, Token: "hwa_good", Server: ts.srv, After: after, Logger: ts.logs.logger()})()
	sess := recvSession(t, fake.sessions)

	// An app: it reads a message of a known length, answers it upper-cased and closes; then it
	// reads on, and tells when its peer's end comes.
	msg := bytes.Repeat([]byte("through the stream "), 10000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ended := make(chan error, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, len(msg))
				if _, err := io.ReadFull(c, b); err != nil {
					ended <- err
					return
				}
				_, _ = c.Write(bytes.ToUpper(b))
				_ = c.(*net.TCPConn).CloseWrite()
				_, err := c.Read(make([]byte, 1))
				ended <- err
			}()
		}
	}()
	open := func(h wsmux.StreamHeader) *yamux.Stream {
		t.Helper()
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(h.Marshal()); err != nil {
			t.Fatal(err)
		}
		_ = st.SetDeadline(time.Now().Add(testTimeout))
		return st
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	st := open(wsmux.StreamHeader{Kind: wsmux.KindTCP, Port: port})
	if err := wsmux.ReadReply(st); err != nil {
		t.Fatalf("the helper did not connect to the app: %v", err)
	}
	go func() { _, _ = st.Write(msg) }()
	got, err := io.ReadAll(st) // to the app's end of output, passed on
	if err != nil || !bytes.Equal(got, bytes.ToUpper(msg)) {
		t.Fatalf("the app's answer: %d bytes, %v", len(got), err)
	}
	st.Close() // the server's end: the app's connection is closed
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the app saw the stream's end as %v, want EOF", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the app's connection stayed open after the stream's end")
	}

	// A port nothing listens on.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := uint16(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	st = open(wsmux.StreamHeader{Kind: wsmux.KindTCP, Port: closedPort})
	if err := wsmux.ReadReply(st); !errors.Is(err, wsmux.ErrRefused) || !strings.Contains(err.Error(), "connect to localhost:") {
		t.Fatalf("a closed port: %v", err)
	}

	// SSH, as on version 1 but with its header.
	st = open(wsmux.StreamHeader{Kind: wsmux.KindSSH})
	_ = st.SetDeadline(time.Time{})
	sc, chans, reqs, err := ssh.NewClientConn(st, "helper", &ssh.ClientConfig{User: "anyone", HostKeyCallback: ssh.FixedHostKey(ts.hostKey), Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Output("echo over-v2"); err != nil || strings.TrimSpace(string(out)) != "over-v2" {
		t.Fatalf("ssh over a version-2 stream: %q %v", out, err)
	}

	// A header the helper does not know: the stream is closed unanswered.
	st, err = sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetDeadline(time.Now().Add(testTimeout))
	_, _ = st.Write([]byte{'X', 0, 80})
	if n, err := st.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a stream of an unknown kind was answered: %d, %v", n, err)
	}
}

// TestShutdownEndsTCPStreams: a TCP stream to an app that keeps its connection open (an idle
// keep-alive connection of the server's) does not hold Shutdown up: it ends as SSH connections do,
// and the helper's connection to the server (closed after Shutdown) with it.
func TestShutdownEndsTCPStreams(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	appEnded := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer close(appEnded)
		_, _ = io.Copy(io.Discard, c) // until the helper closes it
		c.Close()
	}()
	server, helper := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- ts.srv.ServeStream(helper) }()
	_ = server.SetDeadline(time.Now().Add(testTimeout))
	go func() {
		_, _ = server.Write(wsmux.StreamHeader{Kind: wsmux.KindTCP, Port: uint16(ln.Addr().(*net.TCPAddr).Port)}.Marshal())
	}()
	if err := wsmux.ReadReply(server); err != nil {
		t.Fatalf("the helper did not connect to the app: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ts.srv.Shutdown(ctx)
	if ctx.Err() != nil {
		t.Fatal("Shutdown waited for the TCP stream until its deadline")
	}
	if err := <-served; err != nil {
		t.Fatalf("ServeStream: %v", err)
	}
	select {
	case <-appEnded:
	case <-time.After(testTimeout):
		t.Fatal("the app's connection stayed open after Shutdown")
	}
	if _, err := server.Read(make([]byte, 1)); err == nil {
		t.Fatal("the stream stayed open after Shutdown")
	}
}
