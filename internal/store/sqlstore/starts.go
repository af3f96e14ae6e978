package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// startAction is what a write of a workspace row does to its pending start.
type startAction int

const (
	startNone      startAction = iota
	startRequested             // a create, start or restart: the wait begins (again)
	startSeen                  // Running, wanted Running: the wait ends and is measured
	startDropped               // stopped or deleted before it ran: the wait ends unmeasured
)

// startChange decides, from a workspace row before (nil: created) and after a write, what happens
// to its pending start. The second leg of a restart (RestartRequested → Running once the agent
// reported Stopped) keeps the wait the restart began. Prebuilt workspaces are not users' waits.
func startChange(prev *workspace.Workspace, next workspace.Workspace) startAction {
	if next.OwnerID == store.PrebuildsUserID {
		return startNone
	}
	running := func(w workspace.Workspace) bool {
		return w.DesiredState == workspace.Running && w.ActualState == workspace.Running
	}
	desiredChanged := prev == nil || prev.DesiredState != next.DesiredState
	switch {
	case running(next):
		if prev == nil || !running(*prev) {
			return startSeen
		}
	case !desiredChanged:
	case next.DesiredState == workspace.Running && prev != nil && prev.DesiredState == workspace.RestartRequested:
	case next.DesiredState == workspace.Running, next.DesiredState == workspace.RestartRequested:
		return startRequested
	case next.DesiredState == workspace.Stopped, next.DesiredState == workspace.Terminated:
		return startDropped
	}
	return startNone
}

// trackStart keeps the workspace_starts row of next as startChange says, in tx; a start seen is
// reported to the observer after the commit (inTx).
func (s *Store) trackStart(ctx context.Context, tx *sql.Tx, prev *workspace.Workspace, next workspace.Workspace) error {
	switch startChange(prev, next) {
	case startRequested:
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO workspace_starts (workspace_id, requested_at) VALUES (?, ?)
			ON CONFLICT (workspace_id) DO UPDATE SET requested_at = excluded.requested_at`), next.ID, micros(next.DesiredStateUpdatedAt)); err != nil {
			return fmt.Errorf("record the start of workspace %q: %w", next.Name, err)
		}
	case startSeen:
		var at int64
		err := tx.QueryRowContext(ctx, s.q(`DELETE FROM workspace_starts WHERE workspace_id = ? RETURNING requested_at`), next.ID).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // running without a start asked for since this store had the table
		}
		if err != nil {
			return fmt.Errorf("end the start of workspace %q: %w", next.Name, err)
		}
		s.startSeen(tx, next, at)
	case startDropped:
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM workspace_starts WHERE workspace_id = ?`), next.ID); err != nil {
			return fmt.Errorf("drop the start of workspace %q: %w", next.Name, err)
		}
	}
	return nil
}

// trackStarts is trackStart for the rows of a reconcile (before: the rows as read), with one
// statement per batch for the starts seen: a burst of workspaces turning Running together is one
// DELETE, not one each.
func (s *Store) trackStarts(ctx context.Context, tx *sql.Tx, before map[string]workspace.Workspace, rows []workspace.Workspace) error {
	seen := map[string]workspace.Workspace{}
	var ids []any
	for _, w := range rows {
		var prev *workspace.Workspace
		if b, ok := before[w.ID]; ok {
			prev = &b
		}
		if startChange(prev, w) == startSeen {
			seen[w.ID] = w
			ids = append(ids, w.ID)
			continue
		}
		if err := s.trackStart(ctx, tx, prev, w); err != nil {
			return err
		}
	}
	for start := 0; start < len(ids); start += s.d.BatchSize {
		chunk := ids[start:min(start+s.d.BatchSize, len(ids))]
		rs, err := tx.QueryContext(ctx, s.q(`DELETE FROM workspace_starts WHERE workspace_id IN (`+placeholders(len(chunk))+`) RETURNING workspace_id, requested_at`), chunk...)
		if err != nil {
			return fmt.Errorf("end the starts of %d workspaces: %w", len(chunk), err)
		}
		for rs.Next() {
			var id string
			var at int64
			if err := rs.Scan(&id, &at); err != nil {
				rs.Close()
				return fmt.Errorf("end the starts of %d workspaces: %w", len(chunk), err)
			}
			s.startSeen(tx, seen[id], at)
		}
		if err := rs.Close(); err != nil {
			return fmt.Errorf("end the starts of %d workspaces: %w", len(chunk), err)
		}
		if err := rs.Err(); err != nil {
			return fmt.Errorf("end the starts of %d workspaces: %w", len(chunk), err)
		}
	}
	return nil
}

// startSeen notes, in tx, that next is Running since its start requested at (microseconds).
func (s *Store) startSeen(tx *sql.Tx, next workspace.Workspace, at int64) {
	seen := store.StartSeen{WorkspaceID: next.ID, Backend: cmp.Or(next.Backend, workspace.KindKubernetes), RequestedAt: fromMicros(at),
		RunningAt: next.DesiredStateUpdatedAt}
	if next.ActualStateUpdatedAt != nil {
		seen.RunningAt = *next.ActualStateUpdatedAt
	}
	v, _ := s.startsSeen.LoadOrStore(tx, &[]store.StartSeen{})
	list := v.(*[]store.StartSeen)
	*list = append(*list, seen)
}

// ObserveStarts sets the function told of every start seen, after its commit.
func (s *Store) ObserveStarts(f func(store.StartSeen)) { s.startObserver.Store(&f) }

// startsCommitted tells the observer of the starts tx saw (committed: else they are dropped).
func (s *Store) startsCommitted(tx *sql.Tx, committed bool) {
	v, ok := s.startsSeen.LoadAndDelete(tx)
	if !ok || !committed {
		return
	}
	if f := s.startObserver.Load(); f != nil {
		for _, seen := range *v.(*[]store.StartSeen) {
			(*f)(seen)
		}
	}
}

var _ store.StartObserver = (*Store)(nil)
