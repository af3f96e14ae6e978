package server

import (
	"errors"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/errs"
)

// TestBodyLimiter: one large body per user, the server's budget shared by all, small bodies never
// refused for their user, every admission given back once; concurrent admissions never hold more
// than the budget.
func TestBodyLimiter(t *testing.T) {
	l := newBodyLimiter(100 << 20)
	code := func(err error) errs.Code {
		var c interface{ Code() errs.Code }
		if errors.As(err, &c) {
			return c.Code()
		}
		return ""
	}
	relA, err := l.admit("a", 60<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.admit("a", 2<<20); code(err) != errs.LimitReached {
		t.Errorf("a's second large body: %v, want limit_reached", err)
	}
	relSmall, err := l.admit("a", LargeBodyBytes-1)
	if err != nil {
		t.Errorf("a's small body: %v", err)
	}
	if _, err := l.admit("b", 50<<20); code(err) != errs.Unavailable {
		t.Errorf("b's body over the budget: %v, want unavailable", err)
	}
	relA()
	relA() // a second release gives nothing back twice
	relB, err := l.admit("b", 50<<20)
	if err != nil {
		t.Fatalf("b's body once a's ended: %v", err)
	}
	relB()
	relSmall()
	if l.inFlight != 0 || len(l.large) != 0 {
		t.Fatalf("after every release: %d bytes, %v", l.inFlight, l.large)
	}

	// Concurrent admissions: never more than the budget held.
	var mu sync.Mutex
	held, peak := int64(0), int64(0)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			user := string(rune('a' + i%10))
			release, err := l.admit(user, 30<<20)
			if err != nil {
				return
			}
			mu.Lock()
			held += 30 << 20
			peak = max(peak, held)
			mu.Unlock()
			mu.Lock()
			held -= 30 << 20
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	if peak > 100<<20 || l.inFlight != 0 {
		t.Errorf("peak %d held, %d in flight after, budget %d", peak, l.inFlight, 100<<20)
	}
}
