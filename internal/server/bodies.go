package server

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// Large request bodies (docs/decisions.md, "The first hour: memory of pushes"). A Terraform state
// push is read whole before it is checked and written in one transaction (the store keeps a state
// as one value, compared with the saved one), so each push in flight holds its body, up to
// protocol.MaxStateBytes, and the saved state. The bodies in flight are bounded instead: per user,
// and for the whole server. A push over either bound is refused before its body is read, with
// Retry-After: 429 when the user already has a large push in flight, 503 when the server's budget
// is spent.
const (
	// LargeBodyBytes is the size from which a body counts against its user's bound: one large
	// body in flight per user. Smaller bodies count only against the server's budget.
	LargeBodyBytes = 1 << 20
	// BodyBudgetBytes is what the bodies of state pushes in flight may add up to, server-wide: one
	// push of the largest state, or several smaller ones. Each push also holds the saved state it
	// replaces and the store driver's copies of both (measured: about 500 MB of resident memory for
	// one push of 60 MiB on Postgres), so one at a time is what a server can afford.
	BodyBudgetBytes = protocol.MaxStateBytes
	// bodyRetryAfter is the wait a refused push is told: about what a push of the largest state
	// takes.
	bodyRetryAfter = 5 * time.Second
)

// bodyLimiter admits request bodies under the bounds above.
type bodyLimiter struct {
	budget int64

	mu       sync.Mutex
	inFlight int64
	large    map[string]bool // users with a large body in flight
}

func newBodyLimiter(budget int64) *bodyLimiter {
	return &bodyLimiter{budget: budget, large: map[string]bool{}}
}

// admit reserves size bytes of the budget for a body of user, or refuses it (errs.LimitReached when
// the user has a large body in flight already, errs.Unavailable when the budget is spent). release
// gives the reservation back once the body is no longer held.
func (l *bodyLimiter) admit(user string, size int64) (release func(), err error) {
	large := size >= LargeBodyBytes
	l.mu.Lock()
	defer l.mu.Unlock()
	if large && l.large[user] {
		return nil, errCode(errs.LimitReached, "another large state push of yours is in progress",
			fmt.Sprintf("a user may push one state of %d MiB or more at a time: wait for the other push to end, then retry", LargeBodyBytes>>20))
	}
	if l.inFlight+size > l.budget {
		return nil, errCode(errs.Unavailable, "the server is busy with other state pushes",
			fmt.Sprintf("state pushes in progress hold %d MiB of the server's %d MiB for them: retry shortly", l.inFlight>>20, l.budget>>20))
	}
	l.inFlight += size
	if large {
		l.large[user] = true
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.inFlight -= size
			if large {
				delete(l.large, user)
			}
		})
	}, nil
}

// readBody reads a request body of at most limit bytes, admitted by l for user, and returns it
// with release, which gives the admission back once the caller no longer holds the body. The body
// is admitted at its declared length (Content-Length), or at limit when none is declared, before a
// byte of it is read; a refusal carries Retry-After. With a declared length the body is read into
// one buffer of that size (no growth, no copies).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, l *bodyLimiter, user string, limit int64) (body []byte, release func(), err error) {
	size := limit
	if r.ContentLength >= 0 && r.ContentLength <= limit {
		size = r.ContentLength
	}
	release, err = l.admit(user, size)
	if err != nil {
		w.Header().Set("Retry-After", retryAfter(bodyRetryAfter))
		s.log.Info("request body refused: over the bound of bodies in flight", "path", r.URL.Path, "user", user, "bytes", size)
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength < 0 || r.ContentLength > limit {
		body, err = io.ReadAll(rd)
		return body, release, err
	}
	body = make([]byte, r.ContentLength)
	if _, err = io.ReadFull(rd, body); err != nil {
		return nil, nil, err
	}
	return body, release, nil
}
