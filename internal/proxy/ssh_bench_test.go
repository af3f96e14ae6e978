package proxy

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/wshelper"
)

// The SSH side's benchmarks: the real workspace helper's SSH server (as in the pod) on 127.0.0.1,
// reached directly with the proxy's key and through SSHServer with a user's key, in one process.
// docs/benchmarks.md has the figures and the commands.

// BenchmarkSSHSetup measures a new connection up to a first command's output (`true`): TCP, key
// exchange, authentication (through the proxy: the server's decision from a fake checker, and the
// proxy's own handshake with the helper), a session and its exit. Reports p50 and p99.
func BenchmarkSSHSetup(b *testing.B) {
	f := newSSHFixture(b)
	for _, path := range []struct {
		name string
		dial func() (*ssh.Client, error)
	}{
		{"direct", f.dialHelper},
		{"proxy", func() (*ssh.Client, error) { return f.dial("dev", ssh.PublicKeys(f.alice)) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			times := make([]time.Duration, 0, b.N)
			for range b.N {
				start := time.Now()
				c, err := path.dial()
				if err != nil {
					b.Fatal(err)
				}
				s, err := c.NewSession()
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Run("true"); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
				c.Close()
			}
			reportPercentiles(b, times)
		})
	}
}

// BenchmarkSSHThroughput reads 256 MiB from `head -c` in the workspace over one session.
func BenchmarkSSHThroughput(b *testing.B) {
	f := newSSHFixture(b)
	const size = 256 << 20
	for _, path := range []struct {
		name string
		dial func() (*ssh.Client, error)
	}{
		{"direct", f.dialHelper},
		{"proxy", func() (*ssh.Client, error) { return f.dial("dev", ssh.PublicKeys(f.alice)) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			c, err := path.dial()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(size)
			for range b.N {
				s, err := c.NewSession()
				if err != nil {
					b.Fatal(err)
				}
				out, _ := s.StdoutPipe()
				if err := s.Start("head -c " + strconv.Itoa(size) + " /dev/zero"); err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, out)
				if err != nil || n != size {
					b.Fatalf("read %d bytes: %v", n, err)
				}
				_ = s.Wait()
			}
		})
	}
}

// BenchmarkSSHConnections holds HANGAR_BENCH_CONNS (default 1,000) SSH connections open through the
// proxy, each with one idle session, and reports the memory in use per connection: the process's
// heap and stacks with them, less the same connections made directly to the helper, over their
// number (the proxy's own share: its server side to the client and its client side to the helper).
func BenchmarkSSHConnections(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("HANGAR_BENCH_CONNS")); err == nil && v > 0 {
		n = v
	}
	// The helper serves at most 100 connections by default (one workspace); raised here to measure
	// the proxy with many.
	f := newSSHFixture(b, func(o *wshelper.ServerOptions) { o.MaxConnections = 2 * n })
	inUse := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	hold := func(dial func() (*ssh.Client, error)) (uint64, func()) {
		before := inUse()
		var clients []*ssh.Client
		var sessions []*ssh.Session
		for i := range n {
			c, err := dial()
			if err != nil {
				b.Fatalf("connection %d: %v", i, err)
			}
			s, err := c.NewSession()
			if err != nil {
				b.Fatal(err)
			}
			clients, sessions = append(clients, c), append(sessions, s)
		}
		used := inUse() - before
		return used, func() {
			for i := range clients {
				sessions[i].Close()
				clients[i].Close()
			}
		}
	}
	for i := range b.N {
		if i > 0 {
			continue // one measurement is the figure
		}
		direct, closeDirect := hold(f.dialHelper)
		closeDirect()
		proxied, closeProxied := hold(func() (*ssh.Client, error) { return f.dial("dev", ssh.PublicKeys(f.alice)) })
		goroutines := runtime.NumGoroutine()
		closeProxied()
		b.ReportMetric(float64(n), "conns")
		b.ReportMetric((float64(proxied)-float64(direct))/float64(n)/1024, "proxy-KiB/conn")
		b.ReportMetric(float64(goroutines), "goroutines")
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "%d SSH connections: direct %.1f MiB, through the proxy %.1f MiB in use\n", n, float64(direct)/(1<<20), float64(proxied)/(1<<20))
		}
	}
}

func reportPercentiles(b *testing.B, times []time.Duration) {
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	if len(times) == 0 {
		return
	}
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}
