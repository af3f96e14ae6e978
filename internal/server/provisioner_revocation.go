package server

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/hangar-dev/hangar/internal/store"
)

// A provisioner's blocked acquire (up to 60 s) ends when its token is rotated or revoked, as an
// agent's wait does (docs/decisions.md, "Revocation takes effect at once"): otherwise the build
// queued next would be claimed by, and its job (its variables, sensitive ones too) handed to, the
// holder of a token an admin just took away.

// untilProvisionerRevoked returns ctx canceled once the request's provisioner token no longer names
// p (the revocation counter moved and a read of the token says so); gone reports whether that
// happened; stop ends the watch.
func (s *Server) untilProvisionerRevoked(ctx context.Context, r *http.Request, p store.Provisioner) (_ context.Context, gone func() bool, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	revoked, unsubscribe := s.store.SubscribeRevocations()
	token, _ := bearer(r)
	var ended atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-revoked:
				got, err := s.store.ProvisionerByTokenHash(ctx, HashToken(token))
				if errors.Is(err, store.ErrNotFound) || (err == nil && got.ID != p.ID) {
					ended.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return ctx, ended.Load, func() { cancel(); <-done; unsubscribe() }
}
