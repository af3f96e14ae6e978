package kube

import (
	"context"
	"sync"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// maxChangeTraces bounds the traces remembered: past it, an arbitrary one is forgotten (its
// workspace's apply then starts a trace of the agent's own).
const maxChangeTraces = 10000

// changeTraces remembers, per workspace (by cluster name), the traceparent of the request that last
// changed its desired state on this replica, so that the reconcile answer that sends the config
// can carry it and the agent's apply joins the trace of the change. It lives in memory: when
// another replica answers the agent, or this one restarted in between, the apply is traced under
// the agent's own reconcile instead (docs/decisions.md, "Tracing"). Off, it holds nothing.
type changeTraces struct {
	mu sync.Mutex
	m  map[string]string
}

// record remembers ctx's trace as the last change of the workspace; a change made outside a
// trace (the lifecycle executor's) forgets the previous one, which the config no longer reflects.
func (c *changeTraces) record(ctx context.Context, kubeName string) {
	if !tracing.Enabled() {
		return
	}
	tp := tracing.TraceParent(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tp == "" {
		delete(c.m, kubeName)
		return
	}
	if c.m == nil {
		c.m = map[string]string{}
	}
	if _, ok := c.m[kubeName]; !ok && len(c.m) >= maxChangeTraces {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[kubeName] = tp
}

// annotate sets the traceparent of each answer that sends a config.
func (c *changeTraces) annotate(resp *protocol.ReconcileResponse) {
	if !tracing.Enabled() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range resp.WorkspaceRailsInfos {
		w := &resp.WorkspaceRailsInfos[i]
		if w.ConfigToApply != "" {
			w.TraceParent = c.m[w.Name]
		}
	}
}
