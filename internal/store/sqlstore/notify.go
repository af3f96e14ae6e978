package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// broker fans change notifications out to the subscribers of an agent, without blocking: each
// subscriber has a buffer of one, and a notification finding it full is dropped (the subscriber is
// already due to look).
type broker struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func (b *broker) subscribe(agentID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[string]map[chan struct{}]struct{}{}
	}
	if b.subs[agentID] == nil {
		b.subs[agentID] = map[chan struct{}]struct{}{}
	}
	b.subs[agentID][ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs[agentID], ch)
		if len(b.subs[agentID]) == 0 {
			delete(b.subs, agentID)
		}
	}
}

// publish wakes the subscribers of agentID; "" wakes everyone (after notifications may have been
// lost).
func (b *broker) publish(agentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, subs := range b.subs {
		if agentID != "" && id != agentID {
			continue
		}
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// SubscribeAgent returns a channel that receives a value whenever a workspace of the agent may have
// become pending (created, or its desired state changed) — through this store or, on Postgres,
// through any store on the same database — and a function to unsubscribe. A wake-up is a hint to
// look (HasPending), not a promise that something is pending.
func (s *Store) SubscribeAgent(agentID string) (<-chan struct{}, func()) {
	return s.changes.subscribe(agentID)
}

// Publish wakes the subscribers of agentID in this process; "" wakes all. The Postgres listener
// calls it for notifications from every replica.
func (s *Store) Publish(agentID string) { s.changes.publish(agentID) }

// OnClose registers fn to run when the store closes (the Postgres listener).
func (s *Store) OnClose(fn func()) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.closers = append(s.closers, fn)
}

// Subscribers counts the subscriptions in this process (tests: a finished wait leaves none).
func (s *Store) Subscribers() int {
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	n := 0
	for _, subs := range s.changes.subs {
		n += len(subs)
	}
	return n
}

// notifyTx announces, inside tx, that a workspace of agentID may have become pending: on Postgres a
// NOTIFY that every replica's listener, this one's included, receives when tx commits.
func (s *Store) notifyTx(ctx context.Context, tx *sql.Tx, agentID string) error {
	if s.d.Notify == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.q(s.d.Notify), agentID); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// committed wakes this process's subscribers of agentID after a commit, when no listener does:
// with a Notify statement (Postgres) every wake-up, this replica's own included, comes through the
// database, in commit order, so that one path serves every replica and a lost connection is covered
// by the listener's wake-all on reconnect.
func (s *Store) committed(agentID string) {
	if s.d.Notify == "" {
		s.changes.publish(agentID)
	}
}

// HasPending reports whether a workspace of the agent was never answered or changed its desired
// state since its last answer: what a partial reconcile would pick up.
func (s *Store) HasPending(ctx context.Context, agentID string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT 1 FROM workspaces WHERE agent_id = ?
		AND (responded_to_agent_at IS NULL OR desired_state_updated_at > responded_to_agent_at) LIMIT 1`), agentID).Scan(&one)
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check pending workspaces: %w", err)
	}
	return true, nil
}
