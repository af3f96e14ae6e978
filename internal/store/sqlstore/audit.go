package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/audit"
)

// actionTx is inTx for the audited write methods (store.AuditStore): the entry pending in ctx, if
// any, is inserted as a success in the same transaction, after fn succeeded.
func (s *Store) actionTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	p := audit.From(ctx)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if e, ok := p.Take(); ok {
			return s.insertAudit(ctx, tx, e)
		}
		return nil
	})
	if err == nil {
		p.Written()
	}
	return err
}

func (s *Store) InsertAudit(ctx context.Context, e audit.Entry) error {
	return s.insertAudit(ctx, s.db, e)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) insertAudit(ctx context.Context, db execer, e audit.Entry) error {
	details := []byte("{}")
	if len(e.Details) > 0 {
		var err error
		if details, err = json.Marshal(e.Details); err != nil {
			return fmt.Errorf("audit entry %s: details: %w", e.Action, err)
		}
	}
	_, err := db.ExecContext(ctx, s.q(`INSERT INTO audit_log (created_at, actor_id, actor_name, action, target_kind, target_id, target_name,
		outcome, error, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		micros(e.Time), e.Actor.ID, e.Actor.Name, string(e.Action), e.Target.Kind, e.Target.ID, e.Target.Name, string(e.Outcome),
		noNUL(e.Error), string(details))
	if err != nil {
		return fmt.Errorf("write audit entry %s: %w", e.Action, err)
	}
	return nil
}

// noNUL replaces NUL characters, which Postgres text cannot hold (an error message may quote input).
func noNUL(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

func (s *Store) ListAudit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	var where []string
	var args []any
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	if f.ActorName != "" {
		add(`actor_name = ?`, f.ActorName)
	}
	if f.Action != "" {
		add(`action = ?`, string(f.Action))
	}
	if f.TargetKind != "" {
		add(`target_kind = ?`, f.TargetKind)
	}
	if f.TargetName != "" {
		if strings.Contains(f.TargetName, "/") {
			add(`target_name = ?`, f.TargetName)
		} else {
			add(`(target_name = ? OR target_name LIKE ? ESCAPE '\')`, f.TargetName, "%/"+escapeLike(f.TargetName))
		}
	}
	if f.Outcome != "" {
		add(`outcome = ?`, string(f.Outcome))
	}
	if !f.Since.IsZero() {
		add(`created_at >= ?`, micros(f.Since))
	}
	if !f.Until.IsZero() {
		add(`created_at < ?`, micros(f.Until))
	}
	if f.BeforeID > 0 {
		add(`id < ?`, f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	limit = min(limit, audit.MaxLimit)
	q := `SELECT id, created_at, actor_id, actor_name, action, target_kind, target_id, target_name, outcome, error, details FROM audit_log`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	defer rows.Close()
	out := []audit.Entry{}
	for rows.Next() {
		var e audit.Entry
		var at int64
		var action, outcome, details string
		if err := rows.Scan(&e.ID, &at, &e.Actor.ID, &e.Actor.Name, &action, &e.Target.Kind, &e.Target.ID, &e.Target.Name, &outcome, &e.Error, &details); err != nil {
			return nil, fmt.Errorf("list audit entries: %w", err)
		}
		e.Time, e.Action, e.Outcome = fromMicros(at), audit.Action(action), audit.Outcome(outcome)
		if details != "" && details != "{}" {
			if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
				return nil, fmt.Errorf("audit entry %d: details: %w", e.ID, err)
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// escapeLike escapes LIKE's wildcards (and its escape character, '\').
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE created_at < ? ORDER BY id LIMIT ?)`),
		micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("prune audit entries: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
