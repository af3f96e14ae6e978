package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// ActivitySender sends a report (POST /api/v1/proxy/activity).
type ActivitySender interface {
	Activity(ctx context.Context, req protocol.ProxyActivityRequest) error
}

// Activity collects the latest use of each workspace (an SSH channel, a proxied request) and sends
// it to the server in batches: one entry per workspace however busy it is, so a report costs the
// server one write per workspace used since the last one, not one per request.
type Activity struct {
	Sender ActivitySender
	Clock  clock.Clock
	Logger *slog.Logger

	mu      sync.Mutex
	pending map[string]protocol.ProxyActivity
}

// Record notes that workspaceID was used now.
func (a *Activity) Record(workspaceID, kind string) {
	if workspaceID == "" {
		return
	}
	now := a.Clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[string]protocol.ProxyActivity{}
	}
	if p, ok := a.pending[workspaceID]; !ok || !p.At.After(now) {
		a.pending[workspaceID] = protocol.ProxyActivity{WorkspaceID: workspaceID, Kind: kind, At: now}
	}
}

// Pending returns how many workspaces wait to be reported.
func (a *Activity) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

// Flush sends what is pending, in requests of at most protocol.MaxActivityItems. What could not be
// sent is kept for the next flush (unless newer use replaced it meanwhile).
func (a *Activity) Flush(ctx context.Context) error {
	a.mu.Lock()
	batch := make([]protocol.ProxyActivity, 0, len(a.pending))
	for _, p := range a.pending {
		batch = append(batch, p)
	}
	a.pending = nil
	a.mu.Unlock()
	for len(batch) > 0 {
		n := min(len(batch), protocol.MaxActivityItems)
		if err := a.Sender.Activity(ctx, protocol.ProxyActivityRequest{Activity: batch[:n]}); err != nil {
			a.mu.Lock()
			if a.pending == nil {
				a.pending = map[string]protocol.ProxyActivity{}
			}
			for _, p := range batch {
				if q, ok := a.pending[p.WorkspaceID]; !ok || q.At.Before(p.At) {
					a.pending[p.WorkspaceID] = p
				}
			}
			a.mu.Unlock()
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// Run flushes at every tick until ctx ends, then once more.
func (a *Activity) Run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = a.Flush(final)
			cancel()
			return
		case <-ticks:
			if err := a.Flush(ctx); err != nil && a.Logger != nil {
				a.Logger.Warn("cannot report activity to the server; keeping it for the next report", "err", err, "workspaces", a.Pending())
			}
		}
	}
}
