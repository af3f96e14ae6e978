package server

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
)

// Limits per client (docs/decisions.md, "Server hardening"): failed authentications are
// rate-limited per client address, and long-polls and streams are capped per authenticated client
// and per address. Connections per address are capped by `hangar server`'s listener
// (servercmd/conns.go).

// AuthLimit is the rate limit of failed authentications per client address: a token bucket of Burst
// failures, one more allowed every Every. An address whose bucket is empty is answered 429, with
// Retry-After, on every request that carries credentials, until the bucket refills. Successful
// authentications take nothing from it.
type AuthLimit struct {
	Burst int
	Every time.Duration
	// Off turns the limit off.
	Off bool
}

// DefaultAuthLimit allows 20 failures at once, then one every 6 s (10 a minute).
var DefaultAuthLimit = AuthLimit{Burst: 20, Every: 6 * time.Second}

// StreamLimits cap the long-polls and streams (an agent's wait, a provisioner's acquire and
// heartbeat, a build log followed, a helper's or an SSH WebSocket, a workspace app's request) open
// at once, per authenticated client (one user, agent, provisioner or helper token) and per client
// address. Zero fields take the defaults.
type StreamLimits struct {
	PerClient, PerAddress int
}

// Default stream caps: an agent holds one wait, a provisioner daemon an acquire and a heartbeat, a
// user a few log streams, SSH sessions and pages; 100 is far above any of them. An address may hold
// more: several clients behind one NAT.
const (
	DefaultStreamsPerClient  = 100
	DefaultStreamsPerAddress = 500
)

// maxAuthEntries bounds the memory of the failed-authentication limiter: past it, the addresses
// whose buckets are full again are forgotten, then the longest quiet ones.
const maxAuthEntries = 10000

type authBucket struct {
	tokens float64
	at     time.Time
	logged bool // its refusal was logged since it last had room
}

// authLimiter is the failed-authentication rate limit (AuthLimit).
type authLimiter struct {
	limit AuthLimit
	now   func() time.Time
	log   *slog.Logger
	max   int

	mu      sync.Mutex
	buckets map[netip.Addr]*authBucket
}

func newAuthLimiter(l AuthLimit, now func() time.Time, log *slog.Logger) *authLimiter {
	if l.Burst <= 0 {
		l.Burst = DefaultAuthLimit.Burst
	}
	if l.Every <= 0 {
		l.Every = DefaultAuthLimit.Every
	}
	return &authLimiter{limit: l, now: now, log: log, max: maxAuthEntries, buckets: map[netip.Addr]*authBucket{}}
}

// refill brings b to now. Its caller holds mu.
func (l *authLimiter) refill(b *authBucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(float64(l.limit.Burst), b.tokens+float64(d)/float64(l.limit.Every))
		b.at = now
	}
}

// blocked reports whether addr may not try to authenticate now, and for how long more.
func (l *authLimiter) blocked(addr netip.Addr) (time.Duration, bool) {
	if l.limit.Off {
		return 0, false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addrKey(addr)]
	if b == nil {
		return 0, false
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.logged = false
		return 0, false
	}
	return time.Duration((1 - b.tokens) * float64(l.limit.Every)), true
}

// failed takes a failed authentication from addr's bucket; the first time it runs dry in a window
// it is logged, with the address.
func (l *authLimiter) failed(addr netip.Addr) {
	if l.limit.Off {
		return
	}
	now := l.now()
	key := addrKey(addr)
	l.mu.Lock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.max {
			l.evict(now)
		}
		b = &authBucket{tokens: float64(l.limit.Burst), at: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
	logNow := b.tokens < 1 && !b.logged
	if logNow {
		b.logged = true
	}
	l.mu.Unlock()
	if logNow {
		l.log.Warn("failed authentications rate-limited: refusing this client's credentials for a while", "client", addr.String(),
			"burst", l.limit.Burst, "one_more_every", l.limit.Every.String())
	}
}

// evict forgets the buckets that are full again (as good as none), then, if that is not enough, the
// quarter longest untouched. Its caller holds mu.
func (l *authLimiter) evict(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= float64(l.limit.Burst) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) < l.max {
		return
	}
	type entry struct {
		k  netip.Addr
		at time.Time
	}
	all := make([]entry, 0, len(l.buckets))
	for k, b := range l.buckets {
		all = append(all, entry{k, b.at})
	}
	slices.SortFunc(all, func(a, b entry) int { return a.at.Compare(b.at) })
	for _, e := range all[:len(all)/4+1] {
		delete(l.buckets, e.k)
	}
}

// streamLimiter counts the open long-polls and streams (StreamLimits).
type streamLimiter struct {
	limits   StreamLimits
	mu       sync.Mutex
	byClient map[string]int
	byAddr   map[netip.Addr]int
}

func newStreamLimiter(l StreamLimits) *streamLimiter {
	if l.PerClient <= 0 {
		l.PerClient = DefaultStreamsPerClient
	}
	if l.PerAddress <= 0 {
		l.PerAddress = DefaultStreamsPerAddress
	}
	return &streamLimiter{limits: l, byClient: map[string]int{}, byAddr: map[netip.Addr]int{}}
}

// acquire counts one more stream of client (none: "") at addr, or refuses it (errs.LimitReached)
// when either is at its cap. release is called once the stream ends.
func (l *streamLimiter) acquire(client string, addr netip.Addr) (release func(), err error) {
	key := addrKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if client != "" && l.byClient[client] >= l.limits.PerClient {
		return nil, errCode(errs.LimitReached, fmt.Sprintf("too many long-polls and streams open with these credentials: %d, the most there may be at once", l.limits.PerClient),
			"close some (log streams, SSH sessions, waits) or try again once they end")
	}
	if l.byAddr[key] >= l.limits.PerAddress {
		return nil, errCode(errs.LimitReached, fmt.Sprintf("too many long-polls and streams open from your address %s: %d, the most there may be at once", addr, l.limits.PerAddress),
			"close some or try again once they end")
	}
	if client != "" {
		l.byClient[client]++
	}
	l.byAddr[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if client != "" {
				if l.byClient[client]--; l.byClient[client] <= 0 {
					delete(l.byClient, client)
				}
			}
			if l.byAddr[key]--; l.byAddr[key] <= 0 {
				delete(l.byAddr, key)
			}
		})
	}, nil
}

// streamSlack is how long past its own timeout a long-poll's answer may take to write.
const streamSlack = 30 * time.Second

// openStream is called by every handler that holds its request open (a long-poll, a stream, a
// WebSocket, a relay) once it knows who asks (client: "user:<id>", "agent:<id>", ...; "" when
// nobody is authenticated yet) and before it blocks: it counts the stream against the caps
// (StreamLimits) and lifts the server's read and write timeouts for this request, which bound
// ordinary requests (servercmd), to lifetime from now (0: none; the stream ends on its own, with
// its client or with the server). The caller calls release when the stream ends. Deadlines of
// connections are wall-clock times: they come from time.Now, not from the server's clock.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, client string, lifetime time.Duration) (release func(), err error) {
	release, err = s.streams.acquire(client, s.clientAddr(r))
	if err != nil {
		s.log.Info("stream refused: at the cap", "client", client, "remote", s.clientAddr(r).String(), "path", r.URL.Path)
		return nil, err
	}
	var deadline time.Time
	if lifetime > 0 {
		deadline = time.Now().Add(lifetime)
	}
	rc := http.NewResponseController(w)
	// Not supported where there is no connection (a handler called directly): nothing to lift.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)
	return release, nil
}

// retryAfter is a Retry-After header's value for d: whole seconds, at least 1.
func retryAfter(d time.Duration) string { return strconv.Itoa(retrySeconds(d)) }

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }
