package proxy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"net/netip"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// Checker asks the server (POST /api/v1/proxy/check).
type Checker interface {
	Check(ctx context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error)
}

// checkTimeout bounds one question to the server, which may outlive the request that asked it
// (others may be waiting for the same answer).
const checkTimeout = 10 * time.Second

// Auth asks the server, caching its decisions: an allowed answer for AllowTTL (default 0: never,
// so that a revoked token, a suspended user or a signed-out session is refused from the next
// request on; docs/decisions.md, "Revocation takes effect at once"), a refusal for DenyTTL
// (shorter: a user who just signed in or was just made admin should not wait). Errors are never
// cached, and the caller refuses on them (fail closed). With AllowTTL set, Flush (called when the
// server announces a revocation) drops what is cached. Concurrent requests with the same
// credential for the same host wait for one question to the server (a page's burst of requests is
// one check). A token's decisions are its client address's only (Credential.From), and a
// rate_limited answer is never cached.
type Auth struct {
	Checker  Checker
	Clock    clock.Clock
	AllowTTL time.Duration
	DenyTTL  time.Duration
	// MaxEntries bounds the cache (0: no bound); when it is full, the entry used least recently
	// goes, so entries in use stay.
	MaxEntries int

	mu      sync.Mutex
	entries map[authKey]*list.Element // of *authEntry, in lru
	lru     list.List                 // front: used most recently
	flights map[authKey]*flight       // questions to the server under way
}

type authKey struct {
	host string
	kind byte // 's' session, 't' token
	hash [32]byte
	// from is a token's client address: the server's answer to a token depends on it (the rate
	// limit of failed authentications), so one address's decision is never another's.
	from netip.Addr
}

type authEntry struct {
	key     authKey
	resp    protocol.ProxyCheckResponse
	expires time.Time
}

// flight is a question to the server that other callers wait for.
type flight struct {
	done chan struct{}
	resp protocol.ProxyCheckResponse
	err  error
}

// Credential is what a request carries: a workspace session (the proxy's cookie) or a user token,
// and, with a token, the address of the client that sent it.
type Credential struct {
	Session, Token string
	// From is the client's IP address, which the server counts a refused token against and
	// refuses every token from once too many were refused (protocol.ProxyRateLimited); the zero
	// Addr says none (nothing is counted).
	From netip.Addr
}

func keyOf(host string, cred Credential) authKey {
	if cred.Session == "" {
		return authKey{host: host, kind: 't', hash: sha256.Sum256([]byte(cred.Token)), from: cred.From}
	}
	return authKey{host: host, kind: 's', hash: sha256.Sum256([]byte(cred.Session))}
}

// Check returns the decision for cred on host (NormalizeHost's withPort form), and whether it was
// had without a question of this caller's own to the server (from the cache, or from another
// caller's question under way).
func (a *Auth) Check(ctx context.Context, host string, cred Credential) (protocol.ProxyCheckResponse, bool, error) {
	key := keyOf(host, cred)
	now := a.Clock.Now()
	a.mu.Lock()
	if el, ok := a.entries[key]; ok {
		e := el.Value.(*authEntry)
		if now.Before(e.expires) {
			a.lru.MoveToFront(el)
			a.mu.Unlock()
			return e.resp, true, nil
		}
		a.remove(el)
	}
	if f, ok := a.flights[key]; ok {
		a.mu.Unlock()
		select {
		case <-f.done:
			return f.resp, true, f.err
		case <-ctx.Done():
			return protocol.ProxyCheckResponse{}, false, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	if a.flights == nil {
		a.flights = map[authKey]*flight{}
	}
	a.flights[key] = f
	a.mu.Unlock()

	// Not this request's context alone: others wait for the answer even if its client goes away.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	req := protocol.ProxyCheckRequest{Host: host, Session: cred.Session, Token: cred.Token}
	if cred.Token != "" && cred.From.IsValid() {
		req.ClientAddress = cred.From.String()
	}
	f.resp, f.err = a.Checker.Check(cctx, req)
	cancel()
	ttl := a.DenyTTL
	if f.resp.Allowed {
		ttl = a.AllowTTL
	}
	if f.resp.Reason == protocol.ProxyRateLimited {
		ttl = 0 // its time is the server's to say, at every question
	}
	a.mu.Lock()
	delete(a.flights, key)
	if f.err == nil && ttl > 0 {
		a.add(&authEntry{key: key, resp: f.resp, expires: now.Add(ttl)})
	}
	a.mu.Unlock()
	close(f.done)
	if f.err != nil {
		return protocol.ProxyCheckResponse{}, false, f.err
	}
	return f.resp, false, nil
}

// add caches e, making room by removing the entries used least recently. a.mu is held.
func (a *Auth) add(e *authEntry) {
	if a.entries == nil {
		a.entries = map[authKey]*list.Element{}
	}
	if el, ok := a.entries[e.key]; ok {
		a.remove(el)
	}
	for a.MaxEntries > 0 && len(a.entries) >= a.MaxEntries {
		a.remove(a.lru.Back())
	}
	a.entries[e.key] = a.lru.PushFront(e)
}

// remove drops a cached entry. a.mu is held.
func (a *Auth) remove(el *list.Element) {
	delete(a.entries, el.Value.(*authEntry).key)
	a.lru.Remove(el)
}

// Flush drops every cached decision (the server said that access was taken away somewhere:
// Revocations). Questions under way are answered as they come.
func (a *Auth) Flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.entries)
	a.lru.Init()
}

// Forget drops what is cached for cred on host (a session the server refused).
func (a *Auth) Forget(host string, cred Credential) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.entries[keyOf(host, cred)]; ok {
		a.remove(el)
	}
}
