package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// The proxy's benchmarks (docs/benchmarks.md, "The access proxy"): the real Handler in front of a
// workspace server on loopback, against the same server reached directly. Access decisions come
// from the cache (5 s), as they do for a user's successive requests.

func benchUpstream(b *testing.B) *httptest.Server {
	block := make([]byte, 64<<10)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<h1>hello</h1>\n"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(block)))
			if _, err := w.Write(block[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, data); err != nil {
				return
			}
		}
	})
	s := httptest.NewUnstartedServer(mux)
	s.Config.ErrorLog = nil
	s.Start()
	b.Cleanup(s.Close)
	return s
}

// benchProxy is the proxy in front of up; it returns the proxy's address.
func benchProxy(b *testing.B, up *httptest.Server) string {
	checker := &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{"hgu_alice": {Allowed: true, User: "alice", Workspace: "alice/dev", Status: "Running"}}}
	h := NewHandler(Options{
		Routes: staticRoutes{aliceHost: {Known: true, Addr: up.Listener.Addr().String()}},
		Auth:   &Auth{Checker: checker, Clock: clock.Real{}, AllowTTL: 5 * time.Second, DenyTTL: time.Second},
		Zone:   zone, MaxBodyBytes: DefaultMaxBodyBytes, WriteTimeout: 10 * time.Minute,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), // access logs as in production
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := NewServer(h, discardLogger())
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// clientTo sends every request to addr, keeping connections alive.
func clientTo(addr string, conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: conns, DisableCompression: true,
	}}
}

func fetch(b *testing.B, c *http.Client, url string) int64 {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer hgu_alice")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return n
}

// BenchmarkLatency: one small page per request over a kept-alive HTTP/1.1 connection, one client
// at a time; p50 and p99 in microseconds.
func BenchmarkLatency(b *testing.B) {
	up := benchUpstream(b)
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			addr := up.Listener.Addr().String()
			if via == "proxy" {
				addr = benchProxy(b, up)
			}
			c := clientTo(addr, 1)
			url := "http://" + aliceHost + "/"
			fetch(b, c, url) // the connection, and the access decision, before timing
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				fetch(b, c, url)
				durations = append(durations, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkDownload: one large download (256 MiB) per iteration; MB/s.
func BenchmarkDownload(b *testing.B) {
	up := benchUpstream(b)
	const size = 256 << 20
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			addr := up.Listener.Addr().String()
			if via == "proxy" {
				addr = benchProxy(b, up)
			}
			c := clientTo(addr, 1)
			url := "http://" + aliceHost + "/big?bytes=" + strconv.Itoa(size)
			fetch(b, c, "http://"+aliceHost+"/")
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				if n := fetch(b, c, url); n != size {
					b.Fatalf("downloaded %d bytes", n)
				}
			}
		})
	}
}

// BenchmarkConnections holds HANGAR_BENCH_CONNS (default 2,000) WebSockets open at once, directly and
// through the proxy, each having echoed one message, and reports the proxy's memory per connection:
// the difference of the process's heap and stacks in use between the two, divided by their number.
func BenchmarkConnections(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("HANGAR_BENCH_CONNS")); err == nil && v > 0 {
		n = v
	}
	up := benchUpstream(b)
	paddr := benchProxy(b, up)
	inUse := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	hold := func(addr string) (uint64, func()) {
		ctx := context.Background()
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
		before := inUse()
		conns := make([]*websocket.Conn, 0, n)
		for i := range n {
			c, _, err := websocket.Dial(ctx, "ws://"+aliceHost+"/ws", &websocket.DialOptions{HTTPClient: hc,
				HTTPHeader: http.Header{"Authorization": {"Bearer hgu_alice"}}})
			if err != nil {
				b.Fatalf("connection %d: %v", i, err)
			}
			if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.Read(ctx); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		used := inUse() - before
		return used, func() {
			for _, c := range conns {
				c.CloseNow()
			}
		}
	}
	for i := range b.N {
		if i > 0 {
			continue // one measurement is the figure; -benchtime Nx does not multiply it
		}
		direct, closeDirect := hold(up.Listener.Addr().String())
		closeDirect()
		proxied, closeProxied := hold(paddr)
		goroutines := runtime.NumGoroutine()
		closeProxied()
		perConn := (float64(proxied) - float64(direct)) / float64(n)
		b.ReportMetric(float64(n), "conns")
		b.ReportMetric(perConn/1024, "proxy-KiB/conn")
		b.ReportMetric(float64(goroutines), "goroutines")
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "%d WebSockets: direct %.1f MiB, through the proxy %.1f MiB in use\n", n, float64(direct)/(1<<20), float64(proxied)/(1<<20))
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
