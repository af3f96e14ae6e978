package server

import (
	"context"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// When agents last called (the admin's agents page): each reconcile and wait records the time, at
// most every AgentSeenEvery per agent in this process, so that the reconcile's hot path writes
// rarely (1,000 agents: some 33 writes a second). An agent is connected when it called within
// AgentConnectedWithin: it calls at least after every wait (60 s at most) and every reconcile.
const (
	AgentSeenEvery       = 30 * time.Second
	AgentConnectedWithin = 2 * time.Minute
)

type seenThrottle struct {
	mu sync.Mutex
	at map[string]time.Time // agent id → the time last written by this process
}

// agentSeen records that the agent called now (throttled); a failure is logged, never the call's.
func (s *Server) agentSeen(ctx context.Context, a workspace.Agent) {
	now := s.clock.Now()
	s.seen.mu.Lock()
	if last, ok := s.seen.at[a.ID]; ok && now.Sub(last) < AgentSeenEvery && !now.Before(last) {
		s.seen.mu.Unlock()
		return
	}
	if s.seen.at == nil {
		s.seen.at = map[string]time.Time{}
	}
	s.seen.at[a.ID] = now
	s.seen.mu.Unlock()
	if err := s.store.TouchAgent(ctx, a.ID, now); err != nil && ctx.Err() == nil {
		s.log.Warn("record the agent's call", "agent", a.Name, "err", err)
	}
}

// withLastSeen fills the agents' last call and whether they are connected.
func (s *Server) withLastSeen(ctx context.Context, agents []sdk.Agent) error {
	seen, err := s.store.AgentsLastSeen(ctx)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for i := range agents {
		connected := false
		if at, ok := seen[agents[i].ID]; ok {
			agents[i].LastSeenAt = &at
			connected = now.Sub(at) < AgentConnectedWithin
		}
		agents[i].Connected = &connected
	}
	return nil
}
