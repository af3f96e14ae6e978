package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// fakeChecker answers from a table and counts calls.
type fakeChecker struct {
	mu      sync.Mutex
	answers map[string]protocol.ProxyCheckResponse // by token or session
	err     error
	calls   int
}

func (f *fakeChecker) Check(_ context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return protocol.ProxyCheckResponse{}, f.err
	}
	// As the server: a token is looked up among users' tokens, a session among sessions, so a
	// session sent as a token (or the other way round) is nobody's.
	if req.Token != "" && !strings.HasPrefix(req.Token, "hgu_") || req.Session != "" && !strings.HasPrefix(req.Session, "hgw_") {
		return protocol.ProxyCheckResponse{Reason: protocol.ProxyUnauthenticated}, nil
	}
	key := req.Token + req.Session
	if a, ok := f.answers[key]; ok {
		return a, nil
	}
	return protocol.ProxyCheckResponse{Reason: protocol.ProxyUnauthenticated}, nil
}

func (f *fakeChecker) set(key string, a protocol.ProxyCheckResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[key] = a
}

func TestAuthCache(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	fc := &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{"hgu_alice": {Allowed: true, User: "alice"}}}
	a := &Auth{Checker: fc, Clock: clk, AllowTTL: 5 * time.Second, DenyTTL: time.Second, MaxEntries: 100}
	const host = "8080-dev--alice.ws.example.com"
	alice := Credential{Token: "hgu_alice"}

	check := func(cred Credential, wantAllowed, wantCached bool, wantCalls int) {
		t.Helper()
		d, cached, err := a.Check(ctx, host, cred)
		if err != nil || d.Allowed != wantAllowed || cached != wantCached || fc.calls != wantCalls {
			t.Fatalf("Check(%+v) = %+v cached=%v err=%v after %d calls; want allowed=%v cached=%v after %d", cred, d, cached, err, fc.calls, wantAllowed, wantCached, wantCalls)
		}
	}
	check(alice, true, false, 1)
	check(alice, true, true, 1)
	// A session and a token of the same text are different credentials (the token's allowance is
	// not the session's: the server refuses a token sent as a session); another host too.
	check(Credential{Session: "hgu_alice"}, false, false, 2)
	if _, cached, _ := a.Check(ctx, host+":8443", alice); cached {
		t.Error("another host shares the cache entry")
	}
	calls := fc.calls

	// Revoked: noticed once the entry expires (5 s), not before.
	fc.set("hgu_alice", protocol.ProxyCheckResponse{Reason: protocol.ProxyUnauthenticated})
	clk.Advance(5*time.Second - time.Microsecond)
	check(alice, true, true, calls)
	clk.Advance(time.Microsecond)
	check(alice, false, false, calls+1)
	// A refusal is cached 1 s only: allowed again (a new admin, say) is seen a second later.
	fc.set("hgu_alice", protocol.ProxyCheckResponse{Allowed: true})
	check(alice, false, true, calls+1)
	clk.Advance(time.Second)
	check(alice, true, false, calls+2)

	// Errors are never cached, and say nothing is allowed.
	fc.err = errors.New("server down")
	clk.Advance(time.Minute)
	for i := range 2 {
		if d, _, err := a.Check(ctx, host, alice); err == nil || d.Allowed {
			t.Fatalf("with the server down (%d): %+v, %v", i, d, err)
		}
	}
	if fc.calls != calls+4 {
		t.Errorf("errors were cached: %d calls", fc.calls)
	}
	fc.err = nil
	a.Forget(host, alice)
	check(alice, true, false, calls+5)

	// The cache is bounded.
	for i := range 250 {
		_, _, _ = a.Check(ctx, host, Credential{Token: string(rune('a' + i))})
	}
	if n := len(a.entries); n > 100 {
		t.Errorf("%d cache entries, max 100", n)
	}
}

// blockingChecker answers allowed once released, counting calls.
type blockingChecker struct {
	release chan struct{}
	calls   atomic.Int64
}

func (b *blockingChecker) Check(ctx context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error) {
	b.calls.Add(1)
	select {
	case <-b.release:
		return protocol.ProxyCheckResponse{Allowed: true, User: req.Token}, nil
	case <-ctx.Done():
		return protocol.ProxyCheckResponse{}, ctx.Err()
	}
}

// Many requests at once with one credential (a page's burst, or all of them after the entry
// expired) make one question to the server; the others wait for its answer.
func TestAuthAsksOncePerCredential(t *testing.T) {
	bc := &blockingChecker{release: make(chan struct{})}
	a := &Auth{Checker: bc, Clock: clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)), AllowTTL: 5 * time.Second, DenyTTL: time.Second}
	const host = "8080-dev--alice.ws.example.com"
	const n = 32
	var wg sync.WaitGroup
	results := make(chan protocol.ProxyCheckResponse, 2*n)
	for i := range 2 * n {
		token := []string{"hgu_alice", "hgu_carol"}[i%2]
		wg.Go(func() {
			d, _, err := a.Check(context.Background(), host, Credential{Token: token})
			if err != nil {
				t.Errorf("Check: %v", err)
			}
			results <- d
		})
	}
	// Wait until both questions are under way and every caller waits (as far as a test can see:
	// no third question comes), then answer.
	deadline := time.Now().Add(10 * time.Second)
	for bc.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(bc.release)
	wg.Wait()
	close(results)
	for d := range results {
		if !d.Allowed {
			t.Errorf("decision %+v", d)
		}
	}
	if got := bc.calls.Load(); got != 2 {
		t.Errorf("%d concurrent checks of 2 credentials asked the server %d times, want 2", 2*n, got)
	}

	// A waiting caller whose request ends stops waiting; the question goes on for the others.
	a.Forget(host, Credential{Token: "hgu_alice"})
	bc.release = make(chan struct{})
	first := make(chan error, 1)
	go func() { _, _, err := a.Check(context.Background(), host, Credential{Token: "hgu_alice"}); first <- err }()
	for bc.calls.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := a.Check(ctx, host, Credential{Token: "hgu_alice"}); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiting caller whose request ended: %v", err)
	}
	close(bc.release)
	if err := <-first; err != nil {
		t.Errorf("the caller that asked: %v", err)
	}
	if got := bc.calls.Load(); got != 3 {
		t.Errorf("%d calls, want 3", got)
	}
}

// A full cache makes room by dropping the entry used least recently, not everything: an entry in
// use stays.
func TestAuthCacheKeepsEntriesInUse(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	fc := &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{}}
	a := &Auth{Checker: fc, Clock: clk, AllowTTL: time.Minute, DenyTTL: time.Minute, MaxEntries: 3}
	const host = "8080-dev--alice.ws.example.com"
	hot := Credential{Token: "hgu_hot"}
	fc.set("hgu_hot", protocol.ProxyCheckResponse{Allowed: true})
	if _, cached, _ := a.Check(ctx, host, hot); cached {
		t.Fatal("cached before any check")
	}
	for i := range 50 {
		_, _, _ = a.Check(ctx, host, Credential{Token: fmt.Sprintf("hgu_cold%d", i)})
		if _, cached, _ := a.Check(ctx, host, hot); !cached {
			t.Fatalf("the entry in use was dropped after %d others", i+1)
		}
		if n := len(a.entries); n > 3 {
			t.Fatalf("%d entries, max 3", n)
		}
	}
	// The coldest went first: of the last two cold ones, both are still there.
	calls := fc.calls
	for _, tok := range []string{"hgu_cold48", "hgu_cold49"} {
		if _, cached, _ := a.Check(ctx, host, Credential{Token: tok}); !cached {
			t.Errorf("%s is not cached", tok)
		}
	}
	if fc.calls != calls {
		t.Errorf("cached entries were asked again")
	}
}

// Without AllowTTL every check asks the server (a revocation is refused from the next request on);
// with it, Flush drops what is cached, so that a revocation the server announces is seen at once.
func TestAuthWithoutCacheAndFlush(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	fc := &fakeChecker{answers: map[string]protocol.ProxyCheckResponse{"hgu_alice": {Allowed: true, User: "alice"}}}
	const host = "8080-dev--alice.ws.example.com"
	alice := Credential{Token: "hgu_alice"}

	none := &Auth{Checker: fc, Clock: clk, DenyTTL: time.Second}
	for i := range 3 {
		if d, cached, err := none.Check(ctx, host, alice); err != nil || !d.Allowed || cached || fc.calls != i+1 {
			t.Fatalf("check %d without a cache: %+v cached=%v err=%v calls=%d", i, d, cached, err, fc.calls)
		}
	}
	fc.set("hgu_alice", protocol.ProxyCheckResponse{Reason: protocol.ProxyUnauthenticated})
	if d, _, _ := none.Check(ctx, host, alice); d.Allowed {
		t.Fatal("a revoked token allowed by a proxy without a cache")
	}

	fc.set("hgu_alice", protocol.ProxyCheckResponse{Allowed: true})
	cache := &Auth{Checker: fc, Clock: clk, AllowTTL: time.Hour, DenyTTL: time.Second}
	if d, _, _ := cache.Check(ctx, host, alice); !d.Allowed {
		t.Fatal("refused")
	}
	fc.set("hgu_alice", protocol.ProxyCheckResponse{Reason: protocol.ProxyUnauthenticated})
	if d, cached, _ := cache.Check(ctx, host, alice); !d.Allowed || !cached {
		t.Fatal("the cached decision was not used")
	}
	cache.Flush()
	if d, cached, _ := cache.Check(ctx, host, alice); d.Allowed || cached {
		t.Fatalf("after Flush: %+v cached=%v, want a fresh refusal", d, cached)
	}
}

// addrChecker answers like the server's limit: rate_limited to a token from a limited address,
// unauthenticated to any other; it keeps the requests.
type addrChecker struct {
	mu      sync.Mutex
	limited map[string]bool
	reqs    []protocol.ProxyCheckRequest
}

func (c *addrChecker) Check(_ context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	if req.Token != "" && c.limited[req.ClientAddress] {
		return protocol.ProxyCheckResponse{Reason: protocol.ProxyRateLimited, RetryAfter: 4}, nil
	}
	return protocol.ProxyCheckResponse{Reason: protocol.ProxyUnauthenticated}, nil
}

// A token's check carries its client's address, and its decision is that address's only (a
// refusal cached for one client is not another's); a rate_limited answer is never cached; a
// session's check carries no address (sessions are not limited) and is shared.
func TestAuthClientAddress(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	c := &addrChecker{limited: map[string]bool{"203.0.113.7": true}}
	a := &Auth{Checker: c, Clock: clk, AllowTTL: time.Minute, DenyTTL: time.Minute}
	const host = "8080-dev--alice.ws.example.com"
	limited, other := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::1")
	ask := func(cred Credential) (protocol.ProxyCheckResponse, bool) {
		t.Helper()
		d, cached, err := a.Check(ctx, host, cred)
		if err != nil {
			t.Fatal(err)
		}
		return d, cached
	}
	for i := range 3 {
		if d, cached := ask(Credential{Token: "hgu_x", From: limited}); d.Reason != protocol.ProxyRateLimited || d.RetryAfter != 4 || cached {
			t.Fatalf("try %d from the limited address: %+v cached=%v, want rate_limited, asked each time", i+1, d, cached)
		}
	}
	if d, cached := ask(Credential{Token: "hgu_x", From: other}); d.Reason != protocol.ProxyUnauthenticated || cached {
		t.Errorf("the same token from another address: %+v cached=%v, want its own answer", d, cached)
	}
	if d, cached := ask(Credential{Token: "hgu_x", From: other}); d.Reason != protocol.ProxyUnauthenticated || !cached {
		t.Errorf("again from that address: %+v cached=%v, want its cached refusal", d, cached)
	}
	ask(Credential{Token: "hgu_x"})
	ask(Credential{Session: "hgw_s", From: limited})
	if d, cached := ask(Credential{Session: "hgw_s", From: other}); d.Reason != protocol.ProxyUnauthenticated || !cached {
		t.Errorf("a session from another address: %+v cached=%v, want the cached refusal", d, cached)
	}
	var sent []string
	for _, r := range c.reqs {
		sent = append(sent, r.Token+r.Session+"@"+r.ClientAddress)
	}
	if got, want := strings.Join(sent, " "), "hgu_x@203.0.113.7 hgu_x@203.0.113.7 hgu_x@203.0.113.7 hgu_x@2001:db8::1 hgu_x@ hgw_s@"; got != want {
		t.Errorf("asked the server %q, want %q", got, want)
	}
}

// The client's address is the TCP peer's, without its port, IPv4-mapped addresses as IPv4; a
// RemoteAddr that is no address gives none.
func TestClientAddr(t *testing.T) {
	for remote, want := range map[string]string{
		"203.0.113.7:40000":        "203.0.113.7",
		"[2001:db8::7]:40000":      "2001:db8::7",
		"[::ffff:192.0.2.1]:40000": "192.0.2.1",
		"[fe80::1%eth0]:40000":     "fe80::1",
		"198.51.100.9":             "198.51.100.9",
		"pipe":                     "invalid IP",
		"":                         "invalid IP",
	} {
		r := &http.Request{RemoteAddr: remote}
		if got := ClientAddr(r).String(); got != want {
			t.Errorf("ClientAddr(%q) = %s, want %s", remote, got, want)
		}
	}
}
