package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
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
