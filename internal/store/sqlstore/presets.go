package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/prebuild"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The persistence of prebuilt pools (store.PresetStore).

// encodeParameters stores a parameter map as a JSON object ("{}" for none).
func encodeParameters(p map[string]string) (string, error) {
	if len(p) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode parameters: %w", err)
	}
	return string(b), nil
}

// decodeParameters reads what encodeParameters stored; an empty object is a nil map.
func decodeParameters(text string, dst *map[string]string) error {
	var m map[string]string
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return err
	}
	if len(m) == 0 {
		m = nil
	}
	*dst = m
	return nil
}

const presetCols = `p.id, p.template_id, t.name, p.name, COALESCE(p.version_id, ''), COALESCE(v.number, 0), p.parameters, p.instances,
	p.schedule, p.timezone, p.created_by, p.created_at, p.updated_at, p.deleted_at, p.reconciled_at`

const presetFrom = ` FROM template_presets p JOIN templates t ON t.id = p.template_id LEFT JOIN template_versions v ON v.id = p.version_id`

func scanPreset(row scanner) (store.Preset, error) {
	var p store.Preset
	var params, schedule string
	var created, updated int64
	var deleted, reconciled sql.NullInt64
	if err := row.Scan(&p.ID, &p.TemplateID, &p.TemplateName, &p.Name, &p.VersionID, &p.VersionNumber, &params, &p.Pool.Instances,
		&schedule, &p.Pool.Timezone, &p.CreatedBy, &created, &updated, &deleted, &reconciled); err != nil {
		return p, err
	}
	if err := decodeParameters(params, &p.Parameters); err != nil {
		return p, fmt.Errorf("decode parameters of preset %s: %w", p.Name, err)
	}
	if err := json.Unmarshal([]byte(schedule), &p.Pool.Schedule); err != nil {
		return p, fmt.Errorf("decode schedule of preset %s: %w", p.Name, err)
	}
	if len(p.Pool.Schedule) == 0 {
		p.Pool.Schedule = nil
	}
	p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
	p.DeletedAt, p.ReconciledAt = ptrTime(deleted), ptrTime(reconciled)
	return p, nil
}

func (s *Store) PutPreset(ctx context.Context, p store.Preset) (store.Preset, error) {
	params, err := encodeParameters(p.Parameters)
	if err != nil {
		return p, err
	}
	rules := p.Pool.Schedule
	if rules == nil {
		rules = []prebuild.ScheduleRule{}
	}
	schedule, err := json.Marshal(rules)
	if err != nil {
		return p, fmt.Errorf("encode schedule: %w", err)
	}
	var out store.Preset
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO template_presets (id, template_id, name, version_id, parameters, instances, schedule,
			timezone, created_by, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (template_id, name) DO UPDATE SET version_id = excluded.version_id, parameters = excluded.parameters,
			instances = excluded.instances, schedule = excluded.schedule, timezone = excluded.timezone, updated_at = excluded.updated_at,
			deleted_at = NULL`),
			p.ID, p.TemplateID, p.Name, nullID(p.VersionID), params, p.Pool.Instances, string(schedule), p.Pool.Timezone, p.CreatedBy,
			micros(p.CreatedAt), micros(p.UpdatedAt))
		if err != nil {
			return fmt.Errorf("put preset %q: %w", p.Name, s.wrapUnique(err, "preset "+p.Name))
		}
		out, err = scanPreset(tx.QueryRowContext(ctx, s.q(`SELECT `+presetCols+presetFrom+` WHERE p.template_id = ? AND p.name = ?`), p.TemplateID, p.Name))
		return notFound(err, fmt.Sprintf("preset %q", p.Name))
	})
	return out, err
}

func (s *Store) ListPresets(ctx context.Context, templateID string, deleted bool) ([]store.Preset, error) {
	cond, args := `(p.deleted_at IS NULL OR ?)`, []any{deleted}
	if templateID != "" {
		cond, args = cond+` AND p.template_id = ?`, append(args, templateID)
	}
	return queryAll(ctx, s, s.db, "presets", `SELECT `+presetCols+presetFrom+` WHERE `+cond+` ORDER BY t.name, p.name`, scanPreset, args...)
}

func (s *Store) PresetByName(ctx context.Context, templateID, name string) (store.Preset, error) {
	p, err := scanPreset(s.db.QueryRowContext(ctx, s.q(`SELECT `+presetCols+presetFrom+` WHERE p.template_id = ? AND p.name = ? AND p.deleted_at IS NULL`),
		templateID, name))
	return p, notFound(err, fmt.Sprintf("preset %q", name))
}

func (s *Store) DeletePreset(ctx context.Context, templateID, name string, now time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE template_presets SET deleted_at = ?, updated_at = ? WHERE template_id = ? AND name = ? AND deleted_at IS NULL`),
		micros(now), micros(now), templateID, name)
	if err != nil {
		return fmt.Errorf("delete preset %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("preset %q: %w", name, store.ErrNotFound)
	}
	return err
}

func (s *Store) PurgePreset(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM template_presets WHERE id = ? AND deleted_at IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.preset_id = ? AND w.owner_id = ? AND w.actual_state <> 'Terminated')`),
		id, id, store.PrebuildsUserID)
	if err != nil {
		return false, fmt.Errorf("purge preset %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *Store) LeasePreset(ctx context.Context, id, owner string, now, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE template_presets SET lease_owner = ?, lease_until = ?
		WHERE id = ? AND (lease_until IS NULL OR lease_until <= ? OR lease_owner = ?)`), owner, micros(until), id, micros(now), owner)
	if err != nil {
		return false, fmt.Errorf("lease preset %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *Store) ReleasePreset(ctx context.Context, id, owner string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE template_presets SET lease_owner = '', lease_until = NULL, reconciled_at = ?
		WHERE id = ? AND lease_owner = ?`), micros(now), id, owner)
	if err != nil {
		return fmt.Errorf("release preset %s: %w", id, err)
	}
	return nil
}

// latestBuildCond selects a workspace's latest build (b) in a query over workspaces w.
const latestBuildCond = `b.build_number = (SELECT MAX(b2.build_number) FROM workspace_builds b2 WHERE b2.workspace_id = b.workspace_id)`

func (s *Store) PrebuildInstances(ctx context.Context, presetID string) ([]store.PrebuildInstance, error) {
	cond, args := `w.owner_id = ? AND w.actual_state <> 'Terminated' AND w.preset_id IS NOT NULL`, []any{store.PrebuildsUserID}
	if presetID != "" {
		cond, args = cond+` AND w.preset_id = ?`, append(args, presetID)
	}
	ws, err := s.queryWorkspaces(ctx, s.db, `SELECT `+wsCols+wsFrom+` WHERE `+cond+` ORDER BY w.created_at, w.id`, args...)
	if err != nil {
		return nil, err
	}
	bs, err := s.queryBuilds(ctx, s.db, buildSelect(false)+` JOIN workspaces w ON w.id = b.workspace_id WHERE `+cond+` AND `+latestBuildCond, args...)
	if err != nil {
		return nil, err
	}
	latest := make(map[string]*build.Build, len(bs))
	for i := range bs {
		latest[bs[i].WorkspaceID] = &bs[i]
	}
	out := make([]store.PrebuildInstance, 0, len(ws))
	for _, w := range ws {
		out = append(out, store.PrebuildInstance{Workspace: w, Build: latest[w.ID]})
	}
	return out, nil
}

func (s *Store) PresetFailures(ctx context.Context, presetID string, limit int) ([]store.PresetFailure, error) {
	// The latest prebuild creates that ended, canceled ones aside (the reconciler cancels pending
	// creates it no longer wants: no failure of the template). Of creates that ended at the same
	// time, failures count as the later.
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT j.completed_at, j.error FROM workspace_builds b
		JOIN provisioner_jobs j ON j.build_id = b.id JOIN workspaces w ON w.id = b.workspace_id
		WHERE w.preset_id = ? AND b.is_prebuild AND j.completed_at IS NOT NULL AND j.canceled_at IS NULL
		ORDER BY j.completed_at DESC, CASE WHEN j.error <> '' THEN 0 ELSE 1 END, b.id LIMIT ?`), presetID, limit)
	if err != nil {
		return nil, fmt.Errorf("read failures of preset %s: %w", presetID, err)
	}
	defer rows.Close()
	var out []store.PresetFailure
	for rows.Next() {
		var at int64
		var msg string
		if err := rows.Scan(&at, &msg); err != nil {
			return nil, fmt.Errorf("read failures of preset %s: %w", presetID, err)
		}
		if msg == "" {
			break
		}
		out = append([]store.PresetFailure{{At: fromMicros(at), Error: msg}}, out...)
	}
	return out, rows.Err()
}

var errNoneReady = errors.New("no ready prebuilt instance")

func (s *Store) ClaimPrebuild(ctx context.Context, presetID, versionID string, fn func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error)) (workspace.Workspace, *build.Build, bool, error) {
	var outW workspace.Workspace
	var outB *build.Build
	var topics []string
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		// Postgres: concurrent claims skip the instances others hold, and a row whose owner changed
		// while this one waited is checked again, so no two claims take one instance. SQLite: the
		// transaction holds the single write lock.
		lock := ""
		if s.d.ForUpdate != "" {
			lock = s.d.ForUpdate + " OF w SKIP LOCKED"
		}
		var id string
		err := tx.QueryRowContext(ctx, s.q(`SELECT w.id FROM workspaces w
			JOIN workspace_builds b ON b.workspace_id = w.id JOIN provisioner_jobs j ON j.build_id = b.id
			WHERE w.preset_id = ? AND w.owner_id = ? AND w.desired_state = 'Running' AND w.actual_state = 'Running'
			AND `+latestBuildCond+` AND b.transition = 'start' AND b.template_version_id = ?
			AND j.completed_at IS NOT NULL AND j.canceled_at IS NULL AND j.error = ''
			ORDER BY w.created_at, w.id LIMIT 1`+lock), presetID, store.PrebuildsUserID, versionID).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoneReady
		}
		if err != nil {
			return fmt.Errorf("pick a prebuilt instance: %w", err)
		}
		w, err := s.lockWorkspace(ctx, tx, store.WorkspaceRef{ID: id})
		if err != nil {
			return err
		}
		last, err := s.latestBuild(ctx, tx, w.ID)
		if err != nil {
			return err
		}
		kept, err := s.workspaceUsage(ctx, tx, w.ID)
		if err != nil {
			return err
		}
		nw, nb, err := fn(store.BuildRecord{Workspace: w, Build: last, Kept: kept})
		if err != nil {
			return err
		}
		if nb == nil {
			return fmt.Errorf("claim %s: no build to write", w.Name)
		}
		// The new owner's name (the partial unique index refuses one in use, as for a create), and
		// the claim's time, from which the workspace is its owner's (created_at, claimed_at).
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspaces SET owner_id = ?, name = ?, created_at = ?, claimed_at = ? WHERE id = ?`),
			nw.OwnerID, nw.Name, micros(nw.CreatedAt), nullMicros(nw.ClaimedAt), w.ID); err != nil {
			return fmt.Errorf("claim: %w", s.wrapUnique(err, fmt.Sprintf("workspace %q of this owner", nw.Name)))
		}
		b := *nb
		b.WorkspaceID, b.Job.BuildID, b.HasState = w.ID, b.ID, nb.State != nil
		if err := s.insertBuild(ctx, tx, w.ID, b); err != nil {
			return err
		}
		if err := s.pruneStates(ctx, tx, w.ID, b.Number); err != nil {
			return err
		}
		if err := s.writeBuildWorkspace(ctx, tx, w.ID, nw); err != nil {
			return err
		}
		if b.InitiatorName, err = s.initiatorName(ctx, tx, b.InitiatorID); err != nil {
			return fmt.Errorf("read initiator of build #%d: %w", b.Number, err)
		}
		outW, outB, topics = nw, &b, newJobTopics(b)
		return s.notifyTx(ctx, tx, topics...)
	})
	if errors.Is(err, errNoneReady) {
		return workspace.Workspace{}, nil, false, nil
	}
	if err != nil {
		return workspace.Workspace{}, nil, false, err
	}
	s.committed(topics...)
	return outW, outB, true, nil
}
