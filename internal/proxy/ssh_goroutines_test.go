package proxy

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// settledGoroutines waits until the number of goroutines has stayed the same for a while (the
// goroutines of connections just made have started) and returns it.
func settledGoroutines(t *testing.T) int {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	last, same := runtime.NumGoroutine(), 0
	for same < 10 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the number of goroutines did not settle (last %d)", last)
		}
		if n := runtime.NumGoroutine(); n == last {
			same++
		} else {
			last, same = n, 0
		}
	}
	return last
}

// TestSSHProxyGoroutinesPerConnection: an idle connection through the proxy with one session (no
// command) costs the proxy 10 goroutines: x/crypto/ssh's three for each of its two SSH connections
// (to the client, to the helper), the connection's own relay of requests and channel openings, and
// the session's three (its two data copies and its request relay; a session's stderr copy starts
// with its command). The recheck loop is one for all connections. Counted as the difference between
// the same connections made through the proxy and directly to the helper; one more goroutine per
// connection or per channel fails it (docs/benchmarks.md, "SSH through the proxy": each costs
// memory for every idle connection).
func TestSSHProxyGoroutinesPerConnection(t *testing.T) {
	const conns, perConn, shared = 10, 10, 1
	f := newSSHFixture(t)
	hold := func(dial func() (*ssh.Client, error)) (int, func()) {
		t.Helper()
		before := settledGoroutines(t)
		var closers []func()
		for range conns {
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			closers = append(closers, func() { s.Close(); c.Close() })
		}
		return settledGoroutines(t) - before, func() {
			for _, c := range closers {
				c()
			}
		}
	}
	direct, closeDirect := hold(f.dialHelper)
	closeDirect()
	proxied, closeProxied := hold(func() (*ssh.Client, error) { return f.dial("dev", ssh.PublicKeys(f.alice)) })
	defer closeProxied()
	if got, want := proxied-direct, conns*perConn+shared; got != want {
		t.Errorf("%d idle connections through the proxy run %d goroutines more than made directly (%.1f each), want %d (%d each and %d for all)",
			conns, got, float64(got-shared)/conns, want, perConn, shared)
	}
}
