package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// readiness is what /readyz answers (docs/decisions.md, "Agent readiness"): a replica is ready once
// it has reached the server; the replica that reconciles (the leader, or the only one) also needs
// its caches synced and its latest cycle answered by the server. A standby is ready: it has nothing
// to sync until it leads, and a Deployment's rolling update must be able to go past it.
type readiness struct {
	mu        sync.Mutex
	connected bool  // the server answered /agent/info
	leading   bool  // this replica runs the loop
	synced    bool  // the loop's informers have synced
	cycled    bool  // a cycle succeeded since the loop started
	lastErr   error // the latest cycle's error, if it failed
}

// Ready returns nil when the agent is ready, else why not. The /readyz probe of `hangar agent`
// answers with it.
func (a *Agent) Ready() error { return a.ready.check() }

func (r *readiness) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.connected:
		return errors.New("not connected to the server yet")
	case !r.leading:
		return nil // standby
	case !r.synced:
		return errors.New("leading: the informers' caches have not synced yet")
	case r.lastErr != nil:
		return fmt.Errorf("leading: the latest reconcile failed: %w", r.lastErr)
	case !r.cycled:
		return errors.New("leading: no reconcile has reached the server yet")
	}
	return nil
}

func (r *readiness) update(f func(*readiness)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// leading records that this replica starts or stops running the loop.
func (a *Agent) leading(on bool) {
	a.ready.update(func(r *readiness) { r.leading, r.synced, r.cycled, r.lastErr = on, false, false, nil })
	a.opts.Metrics.setLeader(on)
}

// cycled records the end of a cycle.
func (a *Agent) cycled(ut protocol.UpdateType, d time.Duration, err error) {
	a.opts.Metrics.observeCycle(ut, d, err)
	a.ready.update(func(r *readiness) {
		r.lastErr = err
		if err == nil {
			r.cycled = true
		}
	})
}
