package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TopicWorkspaces: a workspace was created, or something the workspace list shows changed (the
// live list's streams look again). On Postgres the trigger of migration 18 sends it.
const TopicWorkspaces = "workspaces"

// The live workspace list (docs/decisions.md, "The live workspace stream"). Migration 18 marks
// every row whose shown columns change, in the writing transaction, by triggers: whatever code path
// wrote it, the mark cannot be forgotten. SQLite marks with a sequence (writers are serialized, so
// sequence order is commit order) and the cursor is the last number read; Postgres marks with the
// writing transaction's id, and the cursor is a snapshot: the next read returns the rows written by
// transactions that snapshot did not see.

const seqCursorPrefix = "s:"

// WorkspaceCursor returns the cursor of now: WorkspaceChanges(cursor) returns the workspaces
// changed by the transactions committed after it (and, rarely, some committed just before it).
func (s *Store) WorkspaceCursor(ctx context.Context) (string, error) {
	if s.d.Name == "postgres" {
		var snap string
		if err := s.db.QueryRowContext(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap); err != nil {
			return "", fmt.Errorf("read the workspaces' cursor: %w", err)
		}
		return snap, nil
	}
	var seq int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(change_seq), 0) FROM workspaces`).Scan(&seq); err != nil {
		return "", fmt.Errorf("read the workspaces' cursor: %w", err)
	}
	return seqCursorPrefix + strconv.FormatInt(seq, 10), nil
}

// WorkspaceChanges returns the workspaces f selects that changed after cursor (a cursor of
// WorkspaceCursor or of an earlier WorkspaceChanges), Terminated ones included (f.Terminated is
// ignored: a deletion is a change), and the cursor to ask from next time. It reads through the
// index of migration 18 only the rows changed since cursor.
func (s *Store) WorkspaceChanges(ctx context.Context, cursor string, f store.ListFilter) ([]workspace.Workspace, string, error) {
	var conds []string
	var args []any
	if f.OwnerID != "" {
		conds, args = append(conds, `w.owner_id = ?`), append(args, f.OwnerID)
	}
	if !f.Prebuilds {
		conds, args = append(conds, `w.owner_id <> ?`), append(args, store.PrebuildsUserID)
	}
	if s.d.Name == "postgres" {
		// The next cursor first: a transaction it does not see is read next time; one it sees was
		// committed before this read, which then sees it too (read committed).
		next, err := s.WorkspaceCursor(ctx)
		if err != nil {
			return nil, "", err
		}
		conds = append([]string{`w.change_xid >= pg_snapshot_xmin(?::pg_snapshot)`, `NOT pg_visible_in_snapshot(w.change_xid, ?::pg_snapshot)`}, conds...)
		args = append([]any{cursor, cursor}, args...)
		rows, err := s.queryWorkspaces(ctx, s.db, `SELECT `+wsCols+wsFrom+` WHERE `+strings.Join(conds, ` AND `)+` ORDER BY w.change_xid, w.id`, args...)
		if err != nil {
			return nil, "", fmt.Errorf("read changed workspaces: %w", err)
		}
		return rows, next, nil
	}
	after, err := parseSeqCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	// Sequence numbers are taken under SQLite's write lock, so once number M is committed every
	// lower one is: the rows in (cursor, M] are then all readable, and M is the next cursor
	// (a row changed again since has a number above M, and is read next time).
	var upTo int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(change_seq), 0) FROM workspaces`).Scan(&upTo); err != nil {
		return nil, "", fmt.Errorf("read changed workspaces: %w", err)
	}
	conds = append([]string{`w.change_seq > ?`, `w.change_seq <= ?`}, conds...)
	args = append([]any{after, upTo}, args...)
	rows, err := s.queryWorkspaces(ctx, s.db, `SELECT `+wsCols+wsFrom+` WHERE `+strings.Join(conds, ` AND `)+` ORDER BY w.change_seq`, args...)
	if err != nil {
		return nil, "", fmt.Errorf("read changed workspaces: %w", err)
	}
	return rows, seqCursorPrefix + strconv.FormatInt(max(after, upTo), 10), nil
}

func parseSeqCursor(cursor string) (int64, error) {
	v, ok := strings.CutPrefix(cursor, seqCursorPrefix)
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("invalid workspace cursor %q", cursor)
	}
	return n, nil
}

// SubscribeWorkspaces returns a channel that receives a value after a commit that may have changed
// what the workspace list shows (through this store or, on Postgres, any store on the same
// database), and a function to unsubscribe. As SubscribeAgent's, wake-ups coalesce and may be
// spurious: subscribe, take a cursor, read, then wait and call WorkspaceChanges.
func (s *Store) SubscribeWorkspaces() (<-chan struct{}, func()) {
	return s.changes.subscribe(TopicWorkspaces)
}

// seqWatch is SQLite's source of workspace wake-ups: after each committed write transaction, while
// anyone listens, one read of the highest change_seq (the index's last entry) says whether a
// workspace changed; no write path has to remember to announce it.
type seqWatch struct {
	mu   sync.Mutex
	seen int64
}

// workspacesCommitted wakes the streams of this process after a write transaction committed, if it
// (or one committed meanwhile) changed a workspace. Postgres's trigger notifies instead.
func (s *Store) workspacesCommitted() {
	if s.d.Notify != "" || !s.changes.has(TopicWorkspaces) {
		return
	}
	var max int64
	if err := s.db.QueryRow(`SELECT COALESCE(MAX(change_seq), 0) FROM workspaces`).Scan(&max); err != nil {
		s.changes.publish(TopicWorkspaces) // cannot tell: let the streams look
		return
	}
	s.seq.mu.Lock()
	grew := max > s.seq.seen
	if grew {
		s.seq.seen = max
	}
	s.seq.mu.Unlock()
	if grew {
		s.changes.publish(TopicWorkspaces)
	}
}

func (s *Store) TouchAgent(ctx context.Context, agentID string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE agents SET last_seen_at = ? WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at < ?)`),
		micros(at), agentID, micros(at)); err != nil {
		return fmt.Errorf("record the agent's call: %w", err)
	}
	return nil
}

func (s *Store) AgentsLastSeen(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, last_seen_at FROM agents WHERE last_seen_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read the agents' last calls: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("read the agents' last calls: %w", err)
		}
		out[id] = fromMicros(at)
	}
	return out, rows.Err()
}
