package proxy

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// Checker asks the server (POST /api/v1/proxy/check).
type Checker interface {
	Check(ctx context.Context, req protocol.ProxyCheckRequest) (protocol.ProxyCheckResponse, error)
}

// Auth caches the server's decisions briefly: an allowed answer for AllowTTL, a refusal for
// DenyTTL (shorter: a user who just signed in or was just made admin should not wait). Errors are
// never cached, and the caller refuses on them (fail closed). A revoked token, a removed user or a
// deleted workspace is therefore noticed within AllowTTL.
type Auth struct {
	Checker  Checker
	Clock    clock.Clock
	AllowTTL time.Duration
	DenyTTL  time.Duration
	// MaxEntries bounds the cache; when full it is emptied (entries are cheap to get back).
	MaxEntries int

	mu      sync.Mutex
	entries map[authKey]authEntry
}

type authKey struct {
	host string
	kind byte // 's' session, 't' token
	hash [32]byte
}

type authEntry struct {
	resp    protocol.ProxyCheckResponse
	expires time.Time
}

// Credential is what a request carries: a workspace session (the proxy's cookie) or a user token.
type Credential struct {
	Session, Token string
}

// Check returns the decision for cred on host (NormalizeHost's withPort form), and whether it came
// from the cache.
func (a *Auth) Check(ctx context.Context, host string, cred Credential) (protocol.ProxyCheckResponse, bool, error) {
	key := authKey{host: host, kind: 's', hash: sha256.Sum256([]byte(cred.Session))}
	if cred.Session == "" {
		key.kind, key.hash = 't', sha256.Sum256([]byte(cred.Token))
	}
	now := a.Clock.Now()
	a.mu.Lock()
	e, ok := a.entries[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.resp, true, nil
	}
	resp, err := a.Checker.Check(ctx, protocol.ProxyCheckRequest{Host: host, Session: cred.Session, Token: cred.Token})
	if err != nil {
		return protocol.ProxyCheckResponse{}, false, err
	}
	ttl := a.DenyTTL
	if resp.Allowed {
		ttl = a.AllowTTL
	}
	if ttl > 0 {
		a.mu.Lock()
		if a.entries == nil || (a.MaxEntries > 0 && len(a.entries) >= a.MaxEntries) {
			a.entries = map[authKey]authEntry{}
		}
		a.entries[key] = authEntry{resp: resp, expires: now.Add(ttl)}
		a.mu.Unlock()
	}
	return resp, false, nil
}

// Forget drops what is cached for cred on host (a session the server refused).
func (a *Auth) Forget(host string, cred Credential) {
	key := authKey{host: host, kind: 's', hash: sha256.Sum256([]byte(cred.Session))}
	if cred.Session == "" {
		key.kind, key.hash = 't', sha256.Sum256([]byte(cred.Token))
	}
	a.mu.Lock()
	delete(a.entries, key)
	a.mu.Unlock()
}
