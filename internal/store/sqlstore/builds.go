package sqlstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The Terraform backend's persistence (store.BuildStore). Terraform state is stored, read and
// compared here, but never formatted into an error or a log line.

type scanner interface{ Scan(...any) error }

// queryAll runs query and scans every row with scan; what names the rows in errors.
func queryAll[T any](ctx context.Context, s *Store, db querier, what, query string, scan func(scanner) (T, error), args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanString(row scanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// nullBytes stores nil as NULL (no state) whatever the driver does with a nil slice.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// --- templates

const templateCols = `t.id, t.name, t.kind, COALESCE(t.active_version_id, ''), COALESCE(v.number, 0), t.created_by,
	t.created_at, t.updated_at, t.lifecycle`

const templateFrom = ` FROM templates t LEFT JOIN template_versions v ON v.id = t.active_version_id`

func scanTemplate(row scanner) (store.Template, error) {
	var t store.Template
	var created, updated int64
	var lifecycle string
	if err := row.Scan(&t.ID, &t.Name, &t.Kind, &t.ActiveVersionID, &t.ActiveVersion, &t.CreatedBy, &created, &updated, &lifecycle); err != nil {
		return t, err
	}
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	if err := json.Unmarshal([]byte(lifecycle), &t.Lifecycle); err != nil {
		return t, fmt.Errorf("decode lifecycle of template %s: %w", t.Name, err)
	}
	return t, nil
}

func (s *Store) SetTemplateLifecycle(ctx context.Context, name string, l workspace.Lifecycle) (store.Template, error) {
	text, err := json.Marshal(l)
	if err != nil {
		return store.Template{}, err
	}
	err = s.actionTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE templates SET lifecycle = ? WHERE name = ?`), string(text), name)
		if err != nil {
			return fmt.Errorf("set lifecycle of template %q: %w", name, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("template %q: %w", name, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return store.Template{}, err
	}
	return s.TemplateByName(ctx, name)
}

func (s *Store) CreateTemplateVersion(ctx context.Context, t store.Template, v store.TemplateVersion) (store.Template, store.TemplateVersion, error) {
	if t.Kind != workspace.KindKubernetes && t.Kind != workspace.KindTerraform {
		return t, v, fmt.Errorf("create template %q: unknown kind %q", t.Name, t.Kind)
	}
	if t.ID == "" || v.ID == "" {
		return t, v, fmt.Errorf("create template %q: the template and the version need ids", t.Name)
	}
	if v.Archive == nil {
		v.Archive = []byte{}
	}
	if v.Hash == "" {
		sum := sha256.Sum256(v.Archive)
		v.Hash = hex.EncodeToString(sum[:])
	}
	if v.Variables == nil {
		v.Variables = []string{}
	}
	vars, err := json.Marshal(v.Variables)
	if err != nil {
		return t, v, fmt.Errorf("encode variables: %w", err)
	}
	if v.Parameters == nil {
		v.Parameters = []parameter.Parameter{}
	}
	params, err := json.Marshal(v.Parameters)
	if err != nil {
		return t, v, fmt.Errorf("encode parameters: %w", err)
	}
	created := t.CreatedAt
	if created.IsZero() {
		created = v.CreatedAt
	}
	var out store.Template
	err = s.actionTx(ctx, func(tx *sql.Tx) error {
		// Two first pushes of one name at once: one inserts, the other waits for it and adds a
		// version to the same template.
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO templates (id, name, kind, active_version_id, created_by, created_at, updated_at)
			VALUES (?, ?, ?, NULL, ?, ?, ?) ON CONFLICT (name) DO NOTHING`),
			t.ID, t.Name, t.Kind, t.CreatedBy, micros(created), micros(v.CreatedAt))
		if err = s.wrapUnique(err, fmt.Sprintf("template id %s", t.ID)); err != nil {
			return fmt.Errorf("create template %q: %w", t.Name, err)
		}
		lock := ""
		if s.d.ForUpdate != "" {
			// NO KEY: workspaces created meanwhile still reference the template without waiting.
			lock = " FOR NO KEY UPDATE OF t"
		}
		out, err = scanTemplate(tx.QueryRowContext(ctx, s.q(`SELECT `+templateCols+templateFrom+` WHERE t.name = ?`+lock), t.Name))
		if err != nil {
			return fmt.Errorf("read template %q: %w", t.Name, notFound(err, "template"))
		}
		if out.Kind != t.Kind {
			return fmt.Errorf("template %q is a %s template, not %s: %w", t.Name, out.Kind, t.Kind, store.ErrConflict)
		}
		var last int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(number), 0) FROM template_versions WHERE template_id = ?`), out.ID).Scan(&last); err != nil {
			return fmt.Errorf("number the version of template %q: %w", t.Name, err)
		}
		v.TemplateID, v.Number = out.ID, last+1
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO template_versions (id, template_id, number, archive, hash, variables, parameters, created_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			v.ID, v.TemplateID, v.Number, v.Archive, v.Hash, string(vars), string(params), v.CreatedBy, micros(v.CreatedAt))
		if err = s.wrapUnique(err, fmt.Sprintf("version %d of template %q", v.Number, t.Name)); err != nil {
			return fmt.Errorf("create template version: %w", err)
		}
		if v.Inactive && out.ActiveVersionID != "" {
			return nil // stored; the active version stays
		}
		v.Inactive = false
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE templates SET active_version_id = ?, updated_at = ? WHERE id = ?`),
			v.ID, micros(v.CreatedAt), out.ID); err != nil {
			return fmt.Errorf("activate version %d of template %q: %w", v.Number, t.Name, err)
		}
		out.ActiveVersionID, out.ActiveVersion, out.UpdatedAt = v.ID, v.Number, fromMicros(micros(v.CreatedAt))
		return nil
	})
	if err != nil {
		return store.Template{}, store.TemplateVersion{}, err
	}
	return out, v, nil
}

func (s *Store) TemplateByName(ctx context.Context, name string) (store.Template, error) {
	t, err := scanTemplate(s.db.QueryRowContext(ctx, s.q(`SELECT `+templateCols+templateFrom+` WHERE t.name = ?`), name))
	return t, notFound(err, fmt.Sprintf("template %q", name))
}

func (s *Store) ListTemplates(ctx context.Context) ([]store.Template, error) {
	return queryAll(ctx, s, s.db, "templates", `SELECT `+templateCols+templateFrom+` WHERE t.deleted_at IS NULL ORDER BY t.name`, scanTemplate)
}

// DeleteTemplate marks the template deleted and frees its name: name becomes 'deleted:' || id,
// which no template's name can be (TemplateByName never finds it), deleted_name keeps the name
// for the workspaces that show it.
func (s *Store) DeleteTemplate(ctx context.Context, name string, now time.Time, inUse func(workspaces []string, count int, presets []string) error) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		lock := ""
		if s.d.ForUpdate != "" {
			lock = " " + s.d.ForUpdate
		}
		var id string
		err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM templates WHERE name = ? AND deleted_at IS NULL`+lock), name).Scan(&id)
		if err != nil {
			return fmt.Errorf("template %q: %w", name, notFound(err, "template"))
		}
		var count int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM workspaces WHERE template_id = ? AND actual_state <> 'Terminated'`), id).Scan(&count); err != nil {
			return fmt.Errorf("count the workspaces of template %q: %w", name, err)
		}
		var workspaces, presets []string
		if count > 0 {
			rows, err := tx.QueryContext(ctx, s.q(`SELECT u.username || '/' || w.name FROM workspaces w JOIN users u ON u.id = w.owner_id
				WHERE w.template_id = ? AND w.actual_state <> 'Terminated' ORDER BY u.username, w.name LIMIT ?`), id, store.MaxInUseNames)
			if err != nil {
				return fmt.Errorf("list the workspaces of template %q: %w", name, err)
			}
			if workspaces, err = scanStrings(rows); err != nil {
				return fmt.Errorf("list the workspaces of template %q: %w", name, err)
			}
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT name FROM template_presets WHERE template_id = ? AND deleted_at IS NULL ORDER BY name`), id)
		if err != nil {
			return fmt.Errorf("list the presets of template %q: %w", name, err)
		}
		if presets, err = scanStrings(rows); err != nil {
			return fmt.Errorf("list the presets of template %q: %w", name, err)
		}
		if err := inUse(workspaces, count, presets); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE templates SET deleted_at = ?, deleted_name = name, name = ?, updated_at = ? WHERE id = ?`),
			micros(now), "deleted:"+id, micros(now), id); err != nil {
			return fmt.Errorf("delete template %q: %w", name, err)
		}
		return nil
	})
}

// scanStrings reads rows of one text column, and closes them.
func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanTemplateVersion(row scanner, archive bool) (store.TemplateVersion, error) {
	var v store.TemplateVersion
	var vars, params string
	var created int64
	dest := []any{&v.ID, &v.TemplateID, &v.Number, &v.Hash, &vars, &params, &v.CreatedBy, &created}
	if archive {
		dest = append(dest, &v.Archive)
	}
	if err := row.Scan(dest...); err != nil {
		return v, err
	}
	if err := json.Unmarshal([]byte(vars), &v.Variables); err != nil {
		return v, fmt.Errorf("decode variables of template version %s: %w", v.ID, err)
	}
	if err := json.Unmarshal([]byte(params), &v.Parameters); err != nil {
		return v, fmt.Errorf("decode parameters of template version %s: %w", v.ID, err)
	}
	v.CreatedAt = fromMicros(created)
	return v, nil
}

const versionCols = `id, template_id, number, hash, variables, parameters, created_by, created_at`

func (s *Store) ListTemplateVersions(ctx context.Context, templateID string) ([]store.TemplateVersion, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+versionCols+` FROM template_versions WHERE template_id = ? ORDER BY number DESC`), templateID)
	if err != nil {
		return nil, fmt.Errorf("list template versions: %w", err)
	}
	defer rows.Close()
	out := []store.TemplateVersion{}
	for rows.Next() {
		v, err := scanTemplateVersion(rows, false)
		if err != nil {
			return nil, fmt.Errorf("read template version: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *Store) TemplateVersionByID(ctx context.Context, id string) (store.TemplateVersion, error) {
	v, err := scanTemplateVersion(s.db.QueryRowContext(ctx, s.q(`SELECT `+versionCols+`, archive FROM template_versions WHERE id = ?`), id), true)
	return v, notFound(err, "template version "+id)
}

func (s *Store) TemplateVersionInfo(ctx context.Context, id string) (store.TemplateVersion, error) {
	v, err := scanTemplateVersion(s.db.QueryRowContext(ctx, s.q(`SELECT `+versionCols+` FROM template_versions WHERE id = ?`), id), false)
	return v, notFound(err, "template version "+id)
}

func (s *Store) TemplateVersionByNumber(ctx context.Context, templateID string, number int, withArchive bool) (store.TemplateVersion, error) {
	cols := versionCols
	if withArchive {
		cols += ", archive"
	}
	v, err := scanTemplateVersion(s.db.QueryRowContext(ctx, s.q(`SELECT `+cols+` FROM template_versions WHERE template_id = ? AND number = ?`),
		templateID, number), withArchive)
	return v, notFound(err, fmt.Sprintf("version %d", number))
}

func (s *Store) PromoteTemplateVersion(ctx context.Context, name string, number int, now time.Time) (store.Template, error) {
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		var templateID, versionID string
		err := tx.QueryRowContext(ctx, s.q(`SELECT t.id, COALESCE(v.id, '') FROM templates t
			LEFT JOIN template_versions v ON v.template_id = t.id AND v.number = ? WHERE t.name = ?`), number, name).Scan(&templateID, &versionID)
		if err != nil {
			return fmt.Errorf("template %q: %w", name, notFound(err, "template"))
		}
		if versionID == "" {
			return fmt.Errorf("template %q has no version %d: %w", name, number, store.ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE templates SET active_version_id = ?, updated_at = ? WHERE id = ?`),
			versionID, micros(now), templateID); err != nil {
			return fmt.Errorf("promote version %d of template %q: %w", number, name, err)
		}
		return nil
	})
	if err != nil {
		return store.Template{}, err
	}
	return s.TemplateByName(ctx, name)
}

// --- builds and their jobs

// buildSelect returns the SELECT of builds joined with their job and initiator; without state, the
// state column reads NULL (lists never carry Terraform state).
func buildSelect(withState bool) string {
	state := "NULL"
	if withState {
		state = "b.state"
	}
	return `SELECT b.id, b.workspace_id, b.build_number, b.transition, b.reason, b.initiator_id, COALESCE(u.username, ''),
	b.template_version_id, ` + state + `, b.state IS NOT NULL, b.state_source, b.state_captured_on_cancel, b.state_pruned, b.orphan, b.created_at, b.log_level,
	b.is_prebuild, b.is_prebuild_claim, b.start_parameters,
	j.id, j.build_id, j.worker_id, j.created_at, j.started_at, j.heartbeat_at, j.canceled_at, j.completed_at, j.error
	FROM workspace_builds b JOIN provisioner_jobs j ON j.build_id = b.id LEFT JOIN users u ON u.id = b.initiator_id`
}

func scanBuild(row scanner) (build.Build, error) {
	var b build.Build
	var transition, reason, source string
	var created int64
	var startParams sql.NullString
	dest := append([]any{&b.ID, &b.WorkspaceID, &b.Number, &transition, &reason, &b.InitiatorID, &b.InitiatorName,
		&b.TemplateVersionID, &b.State, &b.HasState, &source, &b.StateCapturedOnCancel, &b.StatePruned, &b.Orphan, &created, &b.LogLevel,
		&b.IsPrebuild, &b.IsPrebuildClaim, &startParams}, jobDest(&b.Job)...)
	if err := row.Scan(dest...); err != nil {
		return b, err
	}
	if startParams.Valid {
		if err := json.Unmarshal([]byte(startParams.String), &b.StartParameters); err != nil {
			return b, fmt.Errorf("decode the start parameters of build %s: %w", b.ID, err)
		}
		if b.StartParameters == nil {
			b.StartParameters = []workspace.ParameterValue{}
		}
	}
	b.Transition, b.Reason, b.StateSource = build.Transition(transition), build.Reason(reason), build.StateSource(source)
	b.CreatedAt = fromMicros(created)
	return b, nil
}

// jobDest returns scan destinations for the job columns (as in jobCols) that fill j once scanned.
func jobDest(j *build.Job) []any {
	return []any{&j.ID, &j.BuildID, &j.WorkerID, timeDest{&j.CreatedAt}, ptrTimeDest{&j.StartedAt}, ptrTimeDest{&j.HeartbeatAt},
		ptrTimeDest{&j.CanceledAt}, ptrTimeDest{&j.CompletedAt}, &j.Error}
}

const jobCols = `id, build_id, worker_id, created_at, started_at, heartbeat_at, canceled_at, completed_at, error`

// timeDest scans Unix microseconds into a time.
type timeDest struct{ t *time.Time }

func (d timeDest) Scan(src any) error {
	var v sql.NullInt64
	if err := v.Scan(src); err != nil {
		return err
	}
	if !v.Valid {
		return errors.New("NULL time")
	}
	*d.t = fromMicros(v.Int64)
	return nil
}

// ptrTimeDest scans nullable Unix microseconds into a *time.Time (nil for NULL).
type ptrTimeDest struct{ t **time.Time }

func (d ptrTimeDest) Scan(src any) error {
	var v sql.NullInt64
	if err := v.Scan(src); err != nil {
		return err
	}
	*d.t = ptrTime(v)
	return nil
}

func (s *Store) queryBuilds(ctx context.Context, db querier, query string, args ...any) ([]build.Build, error) {
	return queryAll(ctx, s, db, "builds", query, scanBuild, args...)
}

// latestBuild reads the workspace's latest build with its state, nil if it has none.
func (s *Store) latestBuild(ctx context.Context, db querier, workspaceID string) (*build.Build, error) {
	bs, err := s.queryBuilds(ctx, db, buildSelect(true)+` WHERE b.workspace_id = ? ORDER BY b.build_number DESC LIMIT 1`, workspaceID)
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	return &bs[0], nil
}

// insertBuild inserts b, of workspace w, with its job.
func (s *Store) insertBuild(ctx context.Context, tx *sql.Tx, workspaceID string, b build.Build) error {
	if b.ID == "" || b.Job.ID == "" {
		return errors.New("create build: the build and its job need ids")
	}
	if b.WorkspaceID != "" && b.WorkspaceID != workspaceID {
		return fmt.Errorf("create build: it belongs to workspace %s, not %s", b.WorkspaceID, workspaceID)
	}
	var startParams sql.NullString
	if b.StartParameters != nil {
		text, err := encodeValues(b.StartParameters)
		if err != nil {
			return fmt.Errorf("create build: %w", err)
		}
		startParams = sql.NullString{String: text, Valid: true}
	}
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO workspace_builds (id, workspace_id, build_number, transition, reason, initiator_id,
		template_version_id, state, state_source, state_captured_on_cancel, orphan, created_at, log_level, is_prebuild, is_prebuild_claim,
		start_parameters)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		b.ID, workspaceID, b.Number, string(b.Transition), string(b.Reason), b.InitiatorID, b.TemplateVersionID,
		nullBytes(b.State), string(b.StateSource), b.StateCapturedOnCancel, b.Orphan, micros(b.CreatedAt), b.LogLevel, b.IsPrebuild, b.IsPrebuildClaim,
		startParams)
	if err = s.wrapUnique(err, fmt.Sprintf("build #%d", b.Number)); err != nil {
		return fmt.Errorf("create build: %w", err)
	}
	j := b.Job
	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO provisioner_jobs (id, build_id, worker_id, created_at, started_at, heartbeat_at,
		canceled_at, completed_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		j.ID, b.ID, j.WorkerID, micros(j.CreatedAt), nullMicros(j.StartedAt), nullMicros(j.HeartbeatAt),
		nullMicros(j.CanceledAt), nullMicros(j.CompletedAt), j.Error)
	if err = s.wrapUnique(err, "job "+j.ID); err != nil {
		return fmt.Errorf("create job of build #%d: %w", b.Number, err)
	}
	return nil
}

// pruneStates removes the Terraform state of the workspace's builds older than the
// store.KeptBuildStates latest, now that build newest exists, and marks them state_pruned. The
// latest build keeps its state (the next build's source, and what state pull and push act on), as
// do the few before it (to pull an earlier state back by number); every build no longer copies
// the state into storage that grows without bound.
func (s *Store) pruneStates(ctx context.Context, tx *sql.Tx, workspaceID string, newest int) error {
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspace_builds SET state = NULL, state_pruned = ?
		WHERE workspace_id = ? AND build_number <= ? AND state IS NOT NULL`), true, workspaceID, newest-store.KeptBuildStates); err != nil {
		return fmt.Errorf("prune the states of builds before #%d: %w", newest-store.KeptBuildStates+1, err)
	}
	return nil
}

// newJobTopics are the topics a new build's job announces: TopicJobs while it waits for a
// provisioner.
func newJobTopics(b build.Build) []string {
	if b.Job.Status() == build.Pending {
		return []string{TopicJobs}
	}
	return nil
}

// writeBuildWorkspace writes the columns of a terraform workspace that builds change.
func (s *Store) writeBuildWorkspace(ctx context.Context, tx *sql.Tx, id string, w workspace.Workspace) error {
	params, err := encodeValues(w.Parameters)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, s.q(`UPDATE workspaces SET desired_state = ?, actual_state = ?, desired_state_updated_at = ?,
		actual_state_updated_at = ?, error_type = ?, error_message = ?, template_version_id = ?, parameters = ? WHERE id = ?`),
		string(w.DesiredState), string(w.ActualState), micros(w.DesiredStateUpdatedAt), nullMicros(w.ActualStateUpdatedAt),
		w.ErrorType, w.ErrorMessage, nullID(w.TemplateVersionID), params, id)
	if err != nil {
		return fmt.Errorf("update workspace %q: %w", w.Name, err)
	}
	w.ID = id
	return s.writeLifecycle(ctx, tx, w)
}

// encodeValues is a workspace's parameter values as stored.
func encodeValues(vs []workspace.ParameterValue) (string, error) {
	if vs == nil {
		vs = []workspace.ParameterValue{}
	}
	b, err := json.Marshal(vs)
	if err != nil {
		return "", fmt.Errorf("encode parameters: %w", err)
	}
	return string(b), nil
}

func (s *Store) initiatorName(ctx context.Context, tx *sql.Tx, id string) (string, error) {
	var name string
	err := tx.QueryRowContext(ctx, s.q(`SELECT username FROM users WHERE id = ?`), id).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return name, err
}

func (s *Store) CreateBuildWorkspace(ctx context.Context, w workspace.Workspace, b build.Build) error {
	if w.Backend == "" {
		w.Backend = workspace.KindTerraform
	}
	if w.Backend != workspace.KindTerraform || w.AgentID != "" {
		return fmt.Errorf("create workspace %q: a workspace with builds is a terraform workspace, without agent", w.Name)
	}
	var topics []string
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		if err := s.insertWorkspace(ctx, tx, w); err != nil {
			return err
		}
		if err := s.insertBuild(ctx, tx, w.ID, b); err != nil {
			return err
		}
		params, err := encodeValues(w.Parameters)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspaces SET template_version_id = ?, parameters = ? WHERE id = ?`),
			nullID(b.TemplateVersionID), params, w.ID); err != nil {
			return fmt.Errorf("create workspace %q: %w", w.Name, err)
		}
		topics = newJobTopics(b)
		return s.notifyTx(ctx, tx, topics...)
	})
	if err == nil {
		s.committed(topics...)
	}
	return err
}

func (s *Store) NewBuild(ctx context.Context, ref store.WorkspaceRef, fn func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error)) (workspace.Workspace, *build.Build, error) {
	var outW workspace.Workspace
	var outB *build.Build
	var topics []string
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		w, err := s.lockWorkspace(ctx, tx, ref)
		if err != nil {
			return err
		}
		last, err := s.latestBuild(ctx, tx, w.ID)
		if err != nil {
			return err
		}
		var active store.TemplateVersion
		if w.TemplateID != "" {
			active, err = scanTemplateVersion(tx.QueryRowContext(ctx, s.q(`SELECT `+versionCols+` FROM template_versions
				WHERE id = (SELECT active_version_id FROM templates WHERE id = ?)`), w.TemplateID), false)
			if errors.Is(err, sql.ErrNoRows) {
				active, err = store.TemplateVersion{}, nil // no active version: fn says what that means
			}
			if err != nil {
				return fmt.Errorf("read the active version of workspace %q's template: %w", w.Name, err)
			}
		}
		nw, nb, err := fn(store.BuildRecord{Workspace: w, Build: last, ActiveVersion: active})
		if err != nil {
			return err
		}
		if nb == nil { // nothing to build: nothing is written
			outW, outB = w, nil
			return nil
		}
		// fn decides what to refuse first (a workspace the caller may not see, ...); a build of a
		// workspace an agent runs is refused here whatever fn says.
		if w.Backend != workspace.KindTerraform {
			return fmt.Errorf("workspace %q is a %s workspace, which has no builds: %w", w.Name, w.Backend, store.ErrConflict)
		}
		b := *nb
		b.WorkspaceID, b.Job.BuildID, b.HasState = w.ID, b.ID, nb.State != nil
		if err := s.insertBuild(ctx, tx, w.ID, b); err != nil {
			return err
		}
		if err := s.pruneStates(ctx, tx, w.ID, b.Number); err != nil {
			return err
		}
		nw.TemplateVersionID = b.TemplateVersionID // a workspace's version is its latest build's
		if err := s.writeBuildWorkspace(ctx, tx, w.ID, nw); err != nil {
			return err
		}
		if err := s.trackStart(ctx, tx, &w, nw); err != nil {
			return err
		}
		if again, err := s.queryWorkspaces(ctx, tx, `SELECT `+wsCols+wsFrom+` WHERE w.id = ?`, w.ID); err != nil {
			return err
		} else if len(again) == 1 {
			nw.TemplateVersion, nw.TemplateActiveVersionID = again[0].TemplateVersion, again[0].TemplateActiveVersionID
		}
		if b.InitiatorName, err = s.initiatorName(ctx, tx, b.InitiatorID); err != nil {
			return fmt.Errorf("read initiator of build #%d: %w", b.Number, err)
		}
		outW, outB, topics = nw, &b, newJobTopics(b)
		return s.notifyTx(ctx, tx, topics...)
	})
	if err != nil {
		return workspace.Workspace{}, nil, err
	}
	s.committed(topics...)
	return outW, outB, nil
}

func (s *Store) UpdateBuild(ctx context.Context, jobID string, fn func(rec store.BuildRecord) (store.BuildRecord, error)) (store.BuildRecord, error) {
	var out store.BuildRecord
	var topics []string
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		// Lock order (Postgres), as NewBuild and PutBuildState: the workspace row, then the job's.
		// A build never moves to another workspace, so its workspace is found unlocked first.
		var workspaceID string
		if err := tx.QueryRowContext(ctx, s.q(`SELECT b.workspace_id FROM provisioner_jobs j JOIN workspace_builds b ON b.id = j.build_id
			WHERE j.id = ?`), jobID).Scan(&workspaceID); err != nil {
			return fmt.Errorf("read job %s: %w", jobID, notFound(err, "job "+jobID))
		}
		w, err := s.lockWorkspace(ctx, tx, store.WorkspaceRef{ID: workspaceID})
		if err != nil {
			return err
		}
		lock := ""
		if s.d.ForUpdate != "" {
			// The job row too: AcquireJob, Heartbeat and AppendLogs change it without the workspace's.
			lock = s.d.ForUpdate + " OF b, j"
		}
		bs, err := s.queryBuilds(ctx, tx, buildSelect(true)+` WHERE j.id = ?`+lock, jobID)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			return fmt.Errorf("job %s: %w", jobID, store.ErrNotFound)
		}
		before := bs[0]
		in := before
		in.State = bytes.Clone(before.State)
		next, err := fn(store.BuildRecord{Workspace: w, Build: &in})
		if err != nil {
			return err
		}
		if next.Build == nil {
			return fmt.Errorf("update build of job %s: no build to write", jobID)
		}
		b := *next.Build
		if !bytes.Equal(b.State, before.State) || (b.State == nil) != (before.State == nil) || b.StateCapturedOnCancel != before.StateCapturedOnCancel {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspace_builds SET state = ?, state_captured_on_cancel = ? WHERE id = ?`),
				nullBytes(b.State), b.StateCapturedOnCancel, before.ID); err != nil {
				return fmt.Errorf("write the state of build #%d: %w", before.Number, err)
			}
		}
		j := b.Job
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE provisioner_jobs SET worker_id = ?, started_at = ?, heartbeat_at = ?, canceled_at = ?,
			completed_at = ?, error = ? WHERE id = ?`),
			j.WorkerID, nullMicros(j.StartedAt), nullMicros(j.HeartbeatAt), nullMicros(j.CanceledAt), nullMicros(j.CompletedAt),
			j.Error, jobID); err != nil {
			return fmt.Errorf("write job of build #%d: %w", before.Number, err)
		}
		if err := s.writeBuildWorkspace(ctx, tx, w.ID, next.Workspace); err != nil {
			return err
		}
		if err := s.trackStart(ctx, tx, &w, next.Workspace); err != nil {
			return err
		}
		b.HasState = b.State != nil
		out = store.BuildRecord{Workspace: next.Workspace, Build: &b}
		topics = []string{TopicJob(jobID)}
		if before.Job.CanceledAt == nil && j.CanceledAt != nil || before.Job.StartedAt != nil && j.StartedAt == nil {
			topics = append(topics, TopicJobs) // canceled, or queued again: the provisioners look
		}
		return s.notifyTx(ctx, tx, topics...)
	})
	if err != nil {
		return store.BuildRecord{}, err
	}
	s.committed(topics...)
	return out, nil
}

func (s *Store) ListBuilds(ctx context.Context, workspaceID string) ([]build.Build, error) {
	return s.queryBuilds(ctx, s.db, buildSelect(false)+` WHERE b.workspace_id = ? ORDER BY b.build_number DESC`, workspaceID)
}

func (s *Store) BuildByNumber(ctx context.Context, workspaceID string, number int) (build.Build, error) {
	var bs []build.Build
	var err error
	if number == 0 {
		bs, err = s.queryBuilds(ctx, s.db, buildSelect(true)+` WHERE b.workspace_id = ? ORDER BY b.build_number DESC LIMIT 1`, workspaceID)
	} else {
		bs, err = s.queryBuilds(ctx, s.db, buildSelect(true)+` WHERE b.workspace_id = ? AND b.build_number = ?`, workspaceID, number)
	}
	if err != nil {
		return build.Build{}, err
	}
	if len(bs) == 0 {
		what := fmt.Sprintf("build #%d", number)
		if number == 0 {
			what = "build"
		}
		return build.Build{}, fmt.Errorf("%s of workspace %s: %w", what, workspaceID, store.ErrNotFound)
	}
	return bs[0], nil
}

func (s *Store) BuildByJob(ctx context.Context, jobID string) (build.Build, error) {
	bs, err := s.queryBuilds(ctx, s.db, buildSelect(true)+` WHERE j.id = ?`, jobID)
	if err != nil {
		return build.Build{}, err
	}
	if len(bs) == 0 {
		return build.Build{}, fmt.Errorf("build of job %s: %w", jobID, store.ErrNotFound)
	}
	return bs[0], nil
}

func (s *Store) PutBuildState(ctx context.Context, workspaceID string, state []byte, check func(current []byte) error) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		// The workspace's lock keeps a new build from starting meanwhile; the latest build's job, if
		// it has ended, cannot become active again.
		w, err := s.lockWorkspace(ctx, tx, store.WorkspaceRef{ID: workspaceID})
		if err != nil {
			return err
		}
		bs, err := s.queryBuilds(ctx, tx, buildSelect(true)+` WHERE b.workspace_id = ? ORDER BY b.build_number DESC LIMIT 1`, w.ID)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			return fmt.Errorf("workspace %q has no build: %w", w.Name, store.ErrNotFound)
		}
		last := bs[0]
		if st := last.Job.Status(); st.Active() {
			return fmt.Errorf("build #%d (%s) is %s: %w", last.Number, last.Transition, st, build.ErrBuildActive)
		}
		if check != nil {
			if err := check(last.State); err != nil {
				return err
			}
		}
		// The mark of state captured on a cancel no longer describes the new state.
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspace_builds SET state = ?, state_captured_on_cancel = ? WHERE id = ?`),
			nullBytes(state), false, last.ID); err != nil {
			return fmt.Errorf("write the state of build #%d: %w", last.Number, err)
		}
		return nil
	})
}

// --- the job queue

func (s *Store) AcquireJob(ctx context.Context, workerID string, now time.Time) (build.Build, bool, error) {
	if workerID == "" {
		return build.Build{}, false, errors.New("acquire job: no worker id")
	}
	var b build.Build
	found := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// Postgres: concurrent claimers skip the rows others have locked, so each claims another job
		// (or none). SQLite: the transaction holds the single write lock.
		skip := ""
		if s.d.ForUpdate != "" {
			skip = s.d.ForUpdate + " SKIP LOCKED"
		}
		var id string
		err := tx.QueryRowContext(ctx, s.q(`UPDATE provisioner_jobs SET worker_id = ?, started_at = ?, heartbeat_at = ?
			WHERE id = (SELECT id FROM provisioner_jobs WHERE started_at IS NULL AND canceled_at IS NULL AND completed_at IS NULL
				ORDER BY created_at, id LIMIT 1`+skip+`)
			AND started_at IS NULL AND canceled_at IS NULL AND completed_at IS NULL
			RETURNING id`), workerID, micros(now), micros(now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim a job: %w", err)
		}
		bs, err := s.queryBuilds(ctx, tx, buildSelect(true)+` WHERE j.id = ?`, id)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			return fmt.Errorf("job %s has no build", id)
		}
		b, found = bs[0], true
		return s.notifyTx(ctx, tx, TopicJob(id))
	})
	if err != nil || !found {
		return build.Build{}, false, err
	}
	s.committed(TopicJob(b.Job.ID))
	return b, true, nil
}

func (s *Store) JobByID(ctx context.Context, jobID string) (build.Job, error) {
	return s.readJob(ctx, s.db, jobID)
}

func (s *Store) readJob(ctx context.Context, db querier, jobID string) (build.Job, error) {
	rows, err := db.QueryContext(ctx, s.q(`SELECT `+jobCols+` FROM provisioner_jobs WHERE id = ?`), jobID)
	if err != nil {
		return build.Job{}, fmt.Errorf("read job %s: %w", jobID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return build.Job{}, fmt.Errorf("read job %s: %w", jobID, err)
		}
		return build.Job{}, fmt.Errorf("job %s: %w", jobID, store.ErrNotFound)
	}
	var j build.Job
	if err := rows.Scan(jobDest(&j)...); err != nil {
		return build.Job{}, fmt.Errorf("read job %s: %w", jobID, err)
	}
	return j, rows.Close()
}

func (s *Store) Heartbeat(ctx context.Context, jobID, workerID string, now time.Time) (build.Job, error) {
	var j build.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE provisioner_jobs SET heartbeat_at = ?
			WHERE id = ? AND worker_id = ? AND worker_id <> '' AND started_at IS NOT NULL AND completed_at IS NULL`), micros(now), jobID, workerID)
		if err != nil {
			return fmt.Errorf("heartbeat of job %s: %w", jobID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("heartbeat of job %s: %w", jobID, err)
		}
		if j, err = s.readJob(ctx, tx, jobID); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("heartbeat of job %s by %s (%s): %w", jobID, workerID, j.Status(), store.ErrNotOwner)
		}
		return s.notifyTx(ctx, tx, TopicJob(jobID))
	})
	if err != nil {
		return build.Job{}, err
	}
	s.committed(TopicJob(jobID))
	return j, nil
}

func (s *Store) AppendLogs(ctx context.Context, jobID string, lines []store.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	kept := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// The job row's lock (Postgres) makes the count and the insert one step for concurrent
		// appenders of one job, and so a job's line ids increase in commit order: a follower
		// reading after the last id it saw misses none.
		var have int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT log_lines FROM provisioner_jobs WHERE id = ?`+s.d.ForUpdate), jobID).Scan(&have); err != nil {
			return fmt.Errorf("append logs of job %s: %w", jobID, notFound(err, "job "+jobID))
		}
		kept = max(0, min(len(lines), store.MaxLogLinesPerJob-have))
		if kept == 0 {
			return nil // the log is full: later lines are dropped
		}
		keep := lines[:kept]
		for start := 0; start < len(keep); start += s.d.BatchSize {
			chunk := keep[start:min(start+s.d.BatchSize, len(keep))]
			var q strings.Builder
			q.WriteString(`INSERT INTO provisioner_job_logs (job_id, created_at, stage, level, output) VALUES `)
			args := make([]any, 0, 5*len(chunk))
			for i, l := range chunk {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?)")
				args = append(args, jobID, micros(l.CreatedAt), l.Stage, l.Level, l.Output)
			}
			if _, err := tx.ExecContext(ctx, s.q(q.String()), args...); err != nil {
				return fmt.Errorf("append %d log lines to job %s: %w", len(chunk), jobID, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE provisioner_jobs SET log_lines = ? WHERE id = ?`), have+kept, jobID); err != nil {
			return fmt.Errorf("count the log lines of job %s: %w", jobID, err)
		}
		return s.notifyTx(ctx, tx, TopicJob(jobID))
	})
	if err == nil && kept > 0 {
		s.committed(TopicJob(jobID))
	}
	return err
}

func (s *Store) JobLogs(ctx context.Context, jobID string, after int64, limit int) ([]store.LogLine, error) {
	if limit <= 0 || limit > store.MaxLogLinesPerJob {
		limit = store.MaxLogLinesPerJob
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, job_id, created_at, stage, level, output FROM provisioner_job_logs
		WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?`), jobID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read logs of job %s: %w", jobID, err)
	}
	defer rows.Close()
	out := []store.LogLine{}
	for rows.Next() {
		var l store.LogLine
		var created int64
		if err := rows.Scan(&l.ID, &l.JobID, &created, &l.Stage, &l.Level, &l.Output); err != nil {
			return nil, fmt.Errorf("read log line of job %s: %w", jobID, err)
		}
		l.CreatedAt = fromMicros(created)
		out = append(out, l)
	}
	return out, rows.Err()
}

func (s *Store) StalledRestarts(ctx context.Context) ([]string, error) {
	return queryAll(ctx, s, s.db, "stalled restarts", `SELECT w.id FROM workspaces w
		JOIN workspace_builds b ON b.workspace_id = w.id
		JOIN provisioner_jobs j ON j.build_id = b.id
		WHERE w.backend = 'terraform' AND w.desired_state = 'RestartRequested'
		AND b.build_number = (SELECT MAX(b2.build_number) FROM workspace_builds b2 WHERE b2.workspace_id = w.id)
		AND b.transition = 'stop' AND j.completed_at IS NOT NULL AND j.canceled_at IS NULL AND j.error = ''
		ORDER BY w.created_at, w.id`, scanString)
}

func (s *Store) StaleJobs(ctx context.Context, heartbeatBefore, createdBefore time.Time) ([]string, error) {
	return queryAll(ctx, s, s.db, "stale jobs", `SELECT id FROM provisioner_jobs WHERE completed_at IS NULL
		AND ((started_at IS NOT NULL AND COALESCE(heartbeat_at, started_at) < ?) OR (started_at IS NULL AND created_at < ?))
		ORDER BY created_at, id`, scanString, micros(heartbeatBefore), micros(createdBefore))
}

func (s *Store) ActiveJobsOf(ctx context.Context, workerID string) ([]string, error) {
	return queryAll(ctx, s, s.db, "jobs of a worker", `SELECT id FROM provisioner_jobs WHERE completed_at IS NULL AND started_at IS NOT NULL
		AND worker_id = ? ORDER BY created_at, id`, scanString, workerID)
}

func (s *Store) CountJobs(ctx context.Context) (map[build.JobStatus]int, error) {
	// The same derivation as build.Job.Status.
	rows, err := s.db.QueryContext(ctx, `SELECT CASE
			WHEN canceled_at IS NOT NULL AND completed_at IS NOT NULL THEN 'canceled'
			WHEN canceled_at IS NOT NULL THEN 'canceling'
			WHEN completed_at IS NOT NULL AND error <> '' THEN 'failed'
			WHEN completed_at IS NOT NULL THEN 'succeeded'
			WHEN started_at IS NOT NULL THEN 'running'
			ELSE 'pending' END AS status, COUNT(*)
		FROM provisioner_jobs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[build.JobStatus]int{}
	for _, st := range []build.JobStatus{build.Pending, build.Running, build.Succeeded, build.Canceling, build.Canceled, build.Failed} {
		out[st] = 0
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[build.JobStatus(st)] = n
	}
	return out, rows.Err()
}

// --- provisioners

func (s *Store) CreateProvisioner(ctx context.Context, p store.Provisioner) error {
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO provisioners (id, name, token_hash, created_at, last_seen_at) VALUES (?, ?, ?, ?, ?)`),
			p.ID, p.Name, p.TokenHash, micros(p.CreatedAt), nullMicros(p.LastSeenAt))
		if err = s.wrapUnique(err, fmt.Sprintf("provisioner %q", p.Name)); err != nil {
			return fmt.Errorf("create provisioner: %w", err)
		}
		return nil
	})
}

const provisionerCols = `id, name, token_hash, created_at, last_seen_at`

func scanProvisioner(row scanner) (store.Provisioner, error) {
	var p store.Provisioner
	var created int64
	var seen sql.NullInt64
	if err := row.Scan(&p.ID, &p.Name, &p.TokenHash, &created, &seen); err != nil {
		return p, err
	}
	p.CreatedAt, p.LastSeenAt = fromMicros(created), ptrTime(seen)
	return p, nil
}

func (s *Store) ProvisionerByTokenHash(ctx context.Context, hash []byte) (store.Provisioner, error) {
	p, err := scanProvisioner(s.db.QueryRowContext(ctx, s.q(`SELECT `+provisionerCols+` FROM provisioners WHERE token_hash = ?`), hash))
	return p, notFound(err, "provisioner")
}

func (s *Store) ListProvisioners(ctx context.Context) ([]store.Provisioner, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+provisionerCols+` FROM provisioners ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list provisioners: %w", err)
	}
	defer rows.Close()
	out := []store.Provisioner{}
	for rows.Next() {
		p, err := scanProvisioner(rows)
		if err != nil {
			return nil, fmt.Errorf("read provisioner: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *Store) TouchProvisioner(ctx context.Context, id string, now time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE provisioners SET last_seen_at = ? WHERE id = ?`), micros(now), id)
	if err != nil {
		return fmt.Errorf("touch provisioner %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("touch provisioner %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("provisioner %s: %w", id, store.ErrNotFound)
	}
	return nil
}
