package servercmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/testca"
)

// deadline bounds every wait of these tests for a failure; a passing test never reaches it.
const deadline = 10 * time.Second

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// logBuffer is a log sink the test reads while the server writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runServer runs `hangar server` (Run) with cfg on a free loopback port until the test ends, and
// returns the URL it prints.
func runServer(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	cfg.Provisioners, cfg.HeartbeatTimeout, cfg.PendingTimeout, cfg.PollInterval = "0", "5m", "30m", "30s"
	cfg.LifecycleInterval, cfg.PrebuildInterval, cfg.AuditRetention, cfg.AppsZone = "0", "0", "0", "none"
	cfg.LogLevel, cfg.LogFormat = "warn", "text"
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, cfg, pw); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "Hangar server listening on "); ok {
				urls <- strings.Fields(rest)[0]
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("the server ended: %v", <-ran)
		}
		return u
	case err := <-ran:
		t.Fatalf("the server ended: %v", err)
	case <-time.After(deadline):
		t.Fatal("the server did not start")
	}
	return ""
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// `hangar server --tls-cert-file --tls-key-file` serves HTTPS only, TLS 1.2 at least, with HSTS;
// a client that trusts the CA reaches the API with the admin token; the data directory is 0700 and
// the database files 0600.
func TestServeTLS(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	certPEM, keyPEM := ca.Issue(t, "127.0.0.1", "localhost")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	data := filepath.Join(dir, "data")
	url := runServer(t, Config{DataDir: data, Hardening: HardeningConfig{TLSCertFile: certFile, TLSKeyFile: keyFile}})
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("the server says it listens on %s, want https://127.0.0.1:<port>", url)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}}
	resp, err := client.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 ||
		resp.Header.Get("Strict-Transport-Security") != server.HSTS || resp.Header.Get("Content-Security-Policy") != server.ContentSecurityPolicy {
		t.Errorf("GET /healthz over TLS: %d %s, headers %v", resp.StatusCode, resp.Proto, resp.Header)
	}
	if resp.Proto != "HTTP/2.0" {
		t.Errorf("protocol %s, want HTTP/2.0 offered", resp.Proto)
	}

	// The SDK (the CLI's, the agent's and the provisioner's client) with the admin token.
	token, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sdk.New(url, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}
	c.HTTP = client
	if u, err := c.Me(t.Context()); err != nil || u.Username != "admin" {
		t.Errorf("whoami over TLS: %+v, %v", u, err)
	}

	// Refused: TLS 1.1, a client that does not trust the CA, plain http.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	if _, err := old.Get(url + "/healthz"); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.1: %v, want a protocol version error", err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := http.Get(url + "/healthz"); !errors.As(err, &unknown) {
		t.Errorf("a client without the CA: %v, want an unknown authority", err)
	}
	if resp, err := http.Get("http" + strings.TrimPrefix(url, "https") + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain http: %d, want 400", resp.StatusCode)
		}
	}

	// The data directory and the database files are the owner's only.
	for name, want := range map[string]os.FileMode{"": 0o700 | os.ModeDir, "hangar.db": 0o600, "hangar.db-wal": 0o600, "hangar.db-shm": 0o600, "admin-token": 0o600} {
		fi, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Join("data", name), fi.Mode(), want)
		}
	}
}

func TestTLSFlags(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	certPEM, keyPEM := ca.Issue(t, "127.0.0.1")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	other := filepath.Join(dir, "other.key")
	_, otherKey := ca.Issue(t, "127.0.0.1")
	writeFile(t, other, otherKey)
	for _, c := range []struct{ cert, key, want string }{
		{certFile, "", "--tls-key-file: required with --tls-cert-file"},
		{"", keyFile, "--tls-cert-file: required with --tls-key-file"},
		{filepath.Join(dir, "nope.crt"), keyFile, "--tls-cert-file: stat"},
		{certFile, filepath.Join(dir, "nope.key"), "--tls-key-file: stat"},
		{certFile, other, "private key does not match public key"},
		{keyFile, certFile, "--tls-cert-file"},
	} {
		err := Run(t.Context(), Config{Hardening: HardeningConfig{TLSCertFile: c.cert, TLSKeyFile: c.key}, LogLevel: "info", LogFormat: "text"}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cert %q key %q: %v, want an error saying %q", filepath.Base(c.cert), filepath.Base(c.key), err, c.want)
		}
	}
	for _, c := range []struct {
		cfg  HardeningConfig
		want string
	}{
		{HardeningConfig{TrustedProxies: "10.0.0.0/8,example.com"}, "--trusted-proxies: \"example.com\""},
		{HardeningConfig{MaxConnsPerAddress: "0"}, "--max-conns-per-address: want a whole number"},
		{HardeningConfig{MaxStreamsPerClient: "many"}, "--max-streams-per-client: want a whole number"},
		{HardeningConfig{MaxStreamsPerAddress: "-3"}, "--max-streams-per-address: want a whole number"},
	} {
		if _, err := readHardening(c.cfg, clock.Real{}, discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
}

// The certificate is loaded again when its files change (looked at every certCheckInterval at
// most); a pair that does not load keeps the one in use.
func TestCertificateReload(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issue := func() *x509.Certificate {
		certPEM, keyPEM := ca.Issue(t, "127.0.0.1")
		writeFile(t, certFile, certPEM)
		writeFile(t, keyFile, keyPEM)
		block, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	serving := func(cr *certReloader) string {
		c, err := cr.certificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.String()
	}
	first := issue()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &logBuffer{}
	cr, err := tlsFlags(certFile, keyFile, clk, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := serving(cr); got != first.SerialNumber.String() {
		t.Fatalf("serving %s, want %s", got, first.SerialNumber)
	}
	second := issue()
	// Make the change visible whatever the file system's time resolution.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(certFile, future, future); err != nil {
		t.Fatal(err)
	}
	if got := serving(cr); got != first.SerialNumber.String() {
		t.Errorf("before the interval: serving %s, want the first %s still", got, first.SerialNumber)
	}
	clk.Advance(certCheckInterval)
	if got := serving(cr); got != second.SerialNumber.String() {
		t.Errorf("after a change: serving %s, want the second %s", got, second.SerialNumber)
	}
	// Half-written: a certificate without its key.
	writeFile(t, keyFile, []byte("not a key"))
	clk.Advance(certCheckInterval)
	if got := serving(cr); got != second.SerialNumber.String() {
		t.Errorf("files that do not load: serving %s, want the second %s kept", got, second.SerialNumber)
	}
	if !strings.Contains(logs.String(), "do not load") {
		t.Errorf("the log does not say the files do not load:\n%s", logs)
	}
}

// testServer serves the real server's handler on a real loopback listener through h's http.Server
// (the serve path of Run) and returns its address.
func testServer(t *testing.T, h hardening) (string, *connLimiter) {
	t.Helper()
	env := servertest.New(t)
	hs := h.httpServer(env.Server.Handler(), discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.serve(hs, ln) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String(), h.conns
}

func defaultHardening(t *testing.T) hardening {
	t.Helper()
	h, err := readHardening(HardeningConfig{}, clock.Real{}, discard)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// closedByServer waits until the server closes c (a read ends in EOF or a reset).
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(deadline))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the server did not close the connection", what)
	}
}

// A client holding thousands of idle connections (and connections that never send a request)
// holds at most --max-conns-per-address of them: its oldest idle ones are closed, and /healthz
// answers at once.
func TestIdleConnectionsBounded(t *testing.T) {
	h := defaultHardening(t)
	h.readHeaderTimeout = time.Hour // only the cap may close them here
	addr, conns := testServer(t, h)
	const n = 2100
	held := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if i%2 == 1 {
			// A slow client: half a request line, then nothing.
			if _, err := c.Write([]byte("GET /healthz HT")); err != nil {
				t.Fatal(err)
			}
		}
		held = append(held, c)
	}
	client := &http.Client{Timeout: deadline}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d idle connections open: %v", n, err)
	}
	// Read the body to its end: closing an unread body closes the connection, and the count
	// below would race with the server seeing it go.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	if got := conns.open(netip.MustParseAddr("127.0.0.1")); got != DefaultMaxConnsPerAddress {
		t.Errorf("%d connections open from 127.0.0.1, want the most, %d", got, DefaultMaxConnsPerAddress)
	}
	closedByServer(t, held[0], "the oldest idle connection")
	closedByServer(t, held[1], "the oldest slow connection")
}

// Slow request headers, slow bodies and idle keep-alive connections are closed after the
// timeouts (shortened here).
func TestSlowClientsTimedOut(t *testing.T) {
	h := defaultHardening(t)
	h.readHeaderTimeout, h.readTimeout, h.idleTimeout = 100*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	addr, _ := testServer(t, h)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial()
	_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
	closedByServer(t, c, "slow headers")

	c = dial()
	_, _ = c.Write([]byte("POST /signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ntoken="))
	closedByServer(t, c, "a slow body")

	c = dial()
	_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a request: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	closedByServer(t, c, "an idle keep-alive connection")
}

// fakeConn is a connection from an address, for the connection cap's unit test.
type fakeConn struct {
	net.Conn
	addr   string
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.addr))
}
func (c *fakeConn) Close() error { c.closed = true; return nil }

// At the cap, the oldest idle connection goes; when none is idle, the new one is refused; trusted
// proxies are not capped.
func TestConnCap(t *testing.T) {
	l := newConnLimiter(2, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, discard)
	admit := func(addr string) (*fakeConn, net.Conn, bool) {
		fc := &fakeConn{addr: addr}
		c, ok := l.admit(fc)
		return fc, c, ok
	}
	a := netip.MustParseAddr("192.0.2.1")
	f1, c1, _ := admit("192.0.2.1:1")
	f2, c2, _ := admit("192.0.2.1:2")
	l.connState(c1, http.StateActive)
	l.connState(c2, http.StateIdle)
	f3, c3, ok := admit("192.0.2.1:3")
	if !ok || !f2.closed || f1.closed || l.open(a) != 2 {
		t.Fatalf("at the cap: admitted %v, idle closed %v, active closed %v, open %d; want the idle one closed", ok, f2.closed, f1.closed, l.open(a))
	}
	l.connState(c3, http.StateHijacked) // a WebSocket: busy
	if f4, _, ok := admit("192.0.2.1:4"); ok || !f4.closed || f1.closed || f3.closed {
		t.Errorf("all busy: admitted %v; want the new one refused and closed", ok)
	}
	if _, _, ok := admit("198.51.100.1:1"); !ok {
		t.Error("another address refused")
	}
	for i := range 5 {
		if fc, _, ok := admit("10.1.1.1:" + string(rune('1'+i))); !ok || fc.closed {
			t.Error("a trusted proxy's connection refused")
		}
	}
	l.connState(c1, http.StateClosed)
	_ = c3.Close()
	if got := l.open(a); got != 0 {
		t.Errorf("%d open after both closed, want 0", got)
	}
}

// A data directory others may read is warned about.
func TestWarnOpenDataDir(t *testing.T) {
	dir := t.TempDir()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	warnOpenDataDir(dir, log)
	if logs.String() != "" {
		t.Errorf("a private directory warned about: %s", logs)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	warnOpenDataDir(dir, log)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "open to other users") || !strings.Contains(logs.String(), dir) {
		t.Errorf("a directory open to others: %q", logs)
	}
}
