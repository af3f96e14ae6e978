package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// Topics of change notifications. An agent's topic is its id (a uuid, and the payload older
// replicas send), so it never collides with the job topics.
const (
	// TopicJobs: a job was queued or canceled (provisioners waiting for work look again).
	TopicJobs = "jobs"
	// topicJobPrefix + job id: a change to the job (log lines, cancel, heartbeat, start, end).
	topicJobPrefix = "job:"
)

// TopicJob is the topic of one job's changes.
func TopicJob(jobID string) string { return topicJobPrefix + jobID }

// broker fans change notifications out to the subscribers of a topic, without blocking: each
// subscriber has a buffer of one, and a notification finding it full is dropped (the subscriber is
// already due to look).
type broker struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func (b *broker) subscribe(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[string]map[chan struct{}]struct{}{}
	}
	if b.subs[topic] == nil {
		b.subs[topic] = map[chan struct{}]struct{}{}
	}
	b.subs[topic][ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs[topic], ch)
		if len(b.subs[topic]) == 0 {
			delete(b.subs, topic)
		}
	}
}

// publish wakes the subscribers of topic; "" wakes everyone (after notifications may have been
// lost).
func (b *broker) publish(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if topic != "" {
		wake(b.subs[topic])
		return
	}
	for _, subs := range b.subs {
		wake(subs)
	}
}

// has reports whether topic has subscribers.
func (b *broker) has(topic string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[topic]) > 0
}

func wake(subs map[chan struct{}]struct{}) {
	for ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
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

// SubscribeJobs returns a channel that receives a value after a job was queued or canceled
// (through any store on the same database, on Postgres): a hint for provisioners to AcquireJob.
func (s *Store) SubscribeJobs() (<-chan struct{}, func()) {
	return s.changes.subscribe(TopicJobs)
}

// SubscribeJob returns a channel that receives a value after a change to the job: log lines
// appended, claimed, heartbeat, cancel, end.
func (s *Store) SubscribeJob(jobID string) (<-chan struct{}, func()) {
	return s.changes.subscribe(TopicJob(jobID))
}

// Publish wakes the subscribers of topic (an agent id, TopicJobs or TopicJob(id)) in this
// process; "" wakes all. The Postgres listener calls it for notifications from every replica.
func (s *Store) Publish(topic string) { s.changes.publish(topic) }

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

// notifyTx announces, inside tx, changes on topics (an agent id whose workspace may have become
// pending, TopicJobs, TopicJob(id)): on Postgres a NOTIFY per topic that every replica's listener,
// this one's included, receives when tx commits. Empty topics are skipped (an empty payload would
// wake everyone).
func (s *Store) notifyTx(ctx context.Context, tx *sql.Tx, topics ...string) error {
	if s.d.Notify == "" {
		return nil
	}
	for _, topic := range topics {
		if topic == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.q(s.d.Notify), topic); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return nil
}

// committed wakes this process's subscribers of topics after a commit, when no listener does:
// with a Notify statement (Postgres) every wake-up, this replica's own included, comes through the
// database, in commit order, so that one path serves every replica and a lost connection is covered
// by the listener's wake-all on reconnect.
func (s *Store) committed(topics ...string) {
	if s.d.Notify != "" {
		return
	}
	for _, topic := range topics {
		if topic != "" {
			s.changes.publish(topic)
		}
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
