// Package sqlstore implements store.Store over database/sql for the two dialects Hangar supports.
// The queries are written once with `?` placeholders; Dialect says how each engine differs
// (placeholders, row locks, batch-update casts). Packages sqlite and postgres open the connection and
// pick the dialect.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

//go:embed migrations
var migrations embed.FS

// Dialect is what differs between the engines.
type Dialect struct {
	// Name is "sqlite" or "postgres", also the folder of its migrations.
	Name string
	// Goose is the migration tool's name for the engine.
	Goose goose.Dialect
	// Dollar rewrites `?` placeholders to `$1, $2, ...`.
	Dollar bool
	// ForUpdate and ForShare are appended to SELECTs that lock rows ("" on SQLite, whose
	// transactions take the single write lock when they begin).
	ForUpdate, ForShare string
	// IsUniqueViolation recognizes a unique-constraint error.
	IsUniqueViolation func(error) bool
	// BatchSize caps the rows per batched statement (parameter limits).
	BatchSize int
	// Casts are the type casts of a VALUES list's columns in a batched UPDATE, by column type.
	TextCast, BigintCast string
	// MigrationLocker, when set, returns a new lock that serializes migrations between processes
	// opening the same database at once (Postgres: several replicas starting together on an empty
	// database would otherwise both create the tables, and one fail). SQLite needs none: one process
	// owns the file.
	MigrationLocker func() (lock.SessionLocker, error)
	// Notify is the statement, with the topic (notify.go) as its one parameter, that announces a
	// change to the other replicas when the transaction commits ("" when there are none: SQLite).
	Notify string
}

// Store is a store.Store over a *sql.DB.
type Store struct {
	db      *sql.DB
	d       Dialect
	changes broker
	seq     seqWatch // workspacechanges.go

	closeMu sync.Mutex
	closers []func()

	// stmts are the prepared statements of queryRow, by query text (SQLite only).
	stmts sync.Map // string -> *sql.Stmt

	// The start-latency SLI (starts.go): starts seen by each open transaction, reported to the
	// observer once it commits.
	startsSeen    sync.Map // *sql.Tx -> *[]store.StartSeen
	startObserver atomic.Pointer[func(store.StartSeen)]
}

// Open wraps db, runs the embedded migrations of the dialect, and returns the store.
func Open(ctx context.Context, db *sql.DB, d Dialect) (*Store, error) {
	p, err := provider(db, d)
	if err != nil {
		return nil, err
	}
	if _, err := p.Up(ctx); err != nil {
		return nil, fmt.Errorf("run migrations: %w", err)
	}
	return &Store{db: db, d: d}, nil
}

// MigrateTo runs the embedded migrations of the dialect up to version (inclusive) and no further:
// tests of an upgrade write rows of an older schema, then Open the store.
func MigrateTo(ctx context.Context, db *sql.DB, d Dialect, version int64) error {
	p, err := provider(db, d)
	if err != nil {
		return err
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("run migrations up to %d: %w", version, err)
	}
	return nil
}

func provider(db *sql.DB, d Dialect) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations/"+d.Name)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", d.Name, err)
	}
	var opts []goose.ProviderOption
	if d.MigrationLocker != nil {
		l, err := d.MigrationLocker()
		if err != nil {
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(l))
	}
	p, err := goose.NewProvider(d.Goose, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("prepare migrations: %w", err)
	}
	return p, nil
}

// DB returns the underlying database, for tests and benchmarks.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error {
	s.closeMu.Lock()
	closers := s.closers
	s.closers = nil
	s.closeMu.Unlock()
	for _, fn := range closers {
		fn()
	}
	s.stmts.Range(func(_, v any) bool {
		_ = v.(*sql.Stmt).Close()
		return true
	})
	return s.db.Close()
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// q rewrites placeholders for the dialect.
func (s *Store) q(query string) string { return s.d.Rebind(query) }

// queryRow runs a read of one row outside any transaction, on SQLite with the statement prepared
// once (database/sql prepares it again on each connection of the pool that runs it). It is for the
// reads every request through a workspace's apps, and most API calls, make: SQLite otherwise
// compiles the statement at each query, which was most of an apps request's cost
// (docs/benchmarks.md, "Terraform workspaces' apps through the server"). Postgres' driver keeps a
// statement cache of its own, so there the query runs as it is.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	query = s.q(query)
	if s.d.Name != "sqlite" {
		return s.db.QueryRowContext(ctx, query, args...)
	}
	st, ok := s.stmts.Load(query)
	if !ok {
		prepared, err := s.db.PrepareContext(ctx, query)
		if err != nil {
			return s.db.QueryRowContext(ctx, query, args...) // which fails the same way, as a Row
		}
		if st, ok = s.stmts.LoadOrStore(query, prepared); ok {
			prepared.Close() // another caller's came first
		}
	}
	return st.(*sql.Stmt).QueryRowContext(ctx, args...)
}

// Rebind rewrites the `?` placeholders of query for the dialect.
func (d Dialect) Rebind(query string) string {
	if !d.Dollar {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		s.startsCommitted(tx, false)
		return err
	}
	if err := tx.Commit(); err != nil {
		s.startsCommitted(tx, false)
		return fmt.Errorf("commit: %w", err)
	}
	s.startsCommitted(tx, true)
	s.workspacesCommitted()
	return nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func ptrTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func (s *Store) wrapUnique(err error, what string) error {
	if err != nil && s.d.IsUniqueViolation(err) {
		return fmt.Errorf("%s: %w", what, store.ErrConflict)
	}
	return err
}

// --- users (and tokens.go)

func (s *Store) CreateUser(ctx context.Context, u workspace.User) error {
	if len(u.TokenHash) == 0 {
		return s.actionTx(ctx, func(tx *sql.Tx) error { return s.insertUser(ctx, tx, u) })
	}
	return s.CreateUserWithToken(ctx, u, store.APIToken{ID: u.ID, Name: "initial", Hash: u.TokenHash, CreatedAt: u.CreatedAt})
}

// insertUser inserts u. users.token_hash (NOT NULL UNIQUE, from before migration 16) gets a value
// no token hashes to: tokens are api_tokens rows.
func (s *Store) insertUser(ctx context.Context, tx *sql.Tx, u workspace.User) error {
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO users (id, username, admin, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`),
		u.ID, u.Username, u.Admin, []byte("retired:"+u.ID), micros(u.CreatedAt))
	if err = s.wrapUnique(err, fmt.Sprintf("user %q", u.Username)); err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	return nil
}

// userCols are a user's columns, the users table named u; scanUser reads them.
const userCols = `u.id, u.username, u.admin, u.created_at, u.suspended_at, ` + userProfileCols

// userProfileCols are the profile's columns (migration 24), read into profileDest's.
const userProfileCols = `u.full_name, u.email, u.dotfiles_repo, u.full_name_set, u.email_set`

func profileDest(u *workspace.User) []any {
	return []any{&u.FullName, &u.Email, &u.DotfilesRepo, &u.FullNameSet, &u.EmailSet}
}

func scanUser(row interface{ Scan(...any) error }, more ...any) (workspace.User, error) {
	var u workspace.User
	var created int64
	var suspended sql.NullInt64
	dest := append([]any{&u.ID, &u.Username, &u.Admin, &created, &suspended}, profileDest(&u)...)
	if err := row.Scan(append(dest, more...)...); err != nil {
		return u, err
	}
	u.CreatedAt, u.SuspendedAt = fromMicros(created), ptrTime(suspended)
	return u, nil
}

func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return err
}

func (s *Store) UserByUsername(ctx context.Context, username string) (workspace.User, error) {
	u, err := scanUser(s.queryRow(ctx, `SELECT `+userCols+` FROM users u WHERE username = ? AND NOT system AND deleted_at IS NULL`, username))
	return u, notFound(err, fmt.Sprintf("user %q", username))
}

func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE NOT system`).Scan(&n)
	return n, err
}

// --- agents

func (s *Store) CreateAgent(ctx context.Context, a workspace.Agent) error {
	cfg, err := json.Marshal(a.Config)
	if err != nil {
		return fmt.Errorf("encode agent config: %w", err)
	}
	return s.actionTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO agents (id, name, token_hash, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`),
			a.ID, a.Name, a.TokenHash, string(cfg), micros(a.CreatedAt), micros(a.UpdatedAt))
		if err = s.wrapUnique(err, fmt.Sprintf("agent %q", a.Name)); err != nil {
			return fmt.Errorf("create agent: %w", err)
		}
		return nil
	})
}

const agentCols = `id, name, token_hash, config, created_at, updated_at`

func scanAgent(row interface{ Scan(...any) error }) (workspace.Agent, error) {
	var a workspace.Agent
	var cfg string
	var created, updated int64
	if err := row.Scan(&a.ID, &a.Name, &a.TokenHash, &cfg, &created, &updated); err != nil {
		return a, err
	}
	if err := json.Unmarshal([]byte(cfg), &a.Config); err != nil {
		return a, fmt.Errorf("decode config of agent %q: %w", a.Name, err)
	}
	a.Config = a.Config.WithDefaults()
	a.CreatedAt, a.UpdatedAt = fromMicros(created), fromMicros(updated)
	return a, nil
}

func (s *Store) AgentByTokenHash(ctx context.Context, hash []byte) (workspace.Agent, error) {
	a, err := scanAgent(s.db.QueryRowContext(ctx, s.q(`SELECT `+agentCols+` FROM agents WHERE token_hash = ?`), hash))
	return a, notFound(err, "agent")
}

func (s *Store) AgentByName(ctx context.Context, name string) (workspace.Agent, error) {
	a, err := scanAgent(s.db.QueryRowContext(ctx, s.q(`SELECT `+agentCols+` FROM agents WHERE name = ?`), name))
	return a, notFound(err, fmt.Sprintf("agent %q", name))
}

func (s *Store) ListAgents(ctx context.Context) ([]workspace.Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+agentCols+` FROM agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	out := []workspace.Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// --- workspaces

const wsCols = `w.id, w.name, w.kube_name, w.owner_id, u.username, u.full_name, u.email, u.dotfiles_repo, COALESCE(w.agent_id, ''), COALESCE(a.name, ''), w.namespace,
	w.desired_state, w.actual_state, w.desired_state_updated_at, w.actual_state_updated_at, w.responded_to_agent_at,
	w.deployment_resource_version, w.error_type, w.error_message, w.url, w.created_at, w.backend,
	COALESCE(w.template_id, ''), COALESCE(t.deleted_name, t.name, ''), w.last_activity_at,
	w.autostart_schedule, w.autostart_timezone, w.ttl_ms, w.dormant_at, w.desired_state_reason,
	COALESCE(w.template_version_id, ''), COALESCE(tv.number, 0), COALESCE(t.active_version_id, ''), w.parameters,
	COALESCE(w.preset_id, ''), COALESCE(pr.name, ''), w.claimed_at,
	ac.connected_at, hs.disconnected_at, COALESCE(hs.last_error, ''),
	EXISTS (SELECT 1 FROM workspace_agent_tokens wat WHERE wat.workspace_id = w.id),
	w.definition_generation, w.repo_url, w.repo_ref, w.repo_devcontainer_path, w.repo_commit, w.repo_definition_path, w.repo_read_at,
	ww.at, COALESCE(ww.reason, '')`

// wsFrom joins the owner, and the agent (kubernetes) or template and version (terraform) a
// workspace may have.
const wsFrom = ` FROM workspaces w JOIN users u ON u.id = w.owner_id LEFT JOIN agents a ON a.id = w.agent_id
	LEFT JOIN templates t ON t.id = w.template_id LEFT JOIN template_versions tv ON tv.id = w.template_version_id
	LEFT JOIN template_presets pr ON pr.id = w.preset_id
	LEFT JOIN workspace_agent_connections ac ON ac.workspace_id = w.id LEFT JOIN workspace_helper_status hs ON hs.workspace_id = w.id
	LEFT JOIN workspace_work ww ON ww.workspace_id = w.id`

func scanWorkspace(row interface{ Scan(...any) error }) (workspace.Workspace, error) {
	var w workspace.Workspace
	var desired, actual string
	var desiredAt, created int64
	var actualAt, respondedAt, activityAt, ttl, dormantAt, claimedAt, helperAt, helperEndedAt sql.NullInt64
	var rv sql.NullString
	var params string
	var repo workspace.RepositorySource
	var repoReadAt, workAt sql.NullInt64
	if err := row.Scan(&w.ID, &w.Name, &w.KubeName, &w.OwnerID, &w.OwnerName, &w.OwnerFullName, &w.OwnerEmail, &w.OwnerDotfilesRepo, &w.AgentID, &w.AgentName, &w.Namespace,
		&desired, &actual, &desiredAt, &actualAt, &respondedAt, &rv, &w.ErrorType, &w.ErrorMessage, &w.URL, &created,
		&w.Backend, &w.TemplateID, &w.TemplateName, &activityAt,
		&w.Schedule.Autostart, &w.Schedule.Timezone, &ttl, &dormantAt, &w.DesiredStateReason,
		&w.TemplateVersionID, &w.TemplateVersion, &w.TemplateActiveVersionID, &params,
		&w.PresetID, &w.PresetName, &claimedAt,
		&helperAt, &helperEndedAt, &w.Helper.LastError, &w.Helper.HasToken,
		&w.DefinitionGeneration, &repo.URL, &repo.Ref, &repo.DevcontainerPath, &repo.Commit, &repo.DefinitionPath, &repoReadAt,
		&workAt, &w.LastWorkReason); err != nil {
		return w, err
	}
	if repo.URL != "" {
		if repoReadAt.Valid {
			repo.ReadAt = fromMicros(repoReadAt.Int64)
		}
		w.Repository = &repo
	}
	if params != "[]" && params != "" {
		if err := json.Unmarshal([]byte(params), &w.Parameters); err != nil {
			return w, fmt.Errorf("decode parameters of workspace %s: %w", w.ID, err)
		}
	}
	if ttl.Valid {
		d := time.Duration(ttl.Int64) * time.Millisecond
		w.Schedule.TTL = &d
	}
	w.DormantAt = ptrTime(dormantAt)
	w.ClaimedAt = ptrTime(claimedAt)
	w.DesiredState, w.ActualState = workspace.State(desired), workspace.State(actual)
	w.DesiredStateUpdatedAt = fromMicros(desiredAt)
	w.ActualStateUpdatedAt = ptrTime(actualAt)
	w.RespondedToAgentAt = ptrTime(respondedAt)
	w.LastActivityAt = ptrTime(activityAt)
	w.LastWorkAt = ptrTime(workAt)
	w.Helper.ConnectedAt, w.Helper.DisconnectedAt = ptrTime(helperAt), ptrTime(helperEndedAt)
	if rv.Valid {
		w.DeploymentResourceVersion = &rv.String
	}
	w.CreatedAt = fromMicros(created)
	return w, nil
}

func nullString(p *string) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *p, Valid: true}
}

// nullID stores "" as NULL (a reference that is not there).
func nullID(id string) sql.NullString {
	return sql.NullString{String: id, Valid: id != ""}
}

// insertWorkspace inserts w (its backend "kubernetes" unless set).
func (s *Store) insertWorkspace(ctx context.Context, tx *sql.Tx, w workspace.Workspace) error {
	backend := w.Backend
	if backend == "" {
		backend = workspace.KindKubernetes
	}
	kubeName := w.KubeName
	if kubeName == "" {
		kubeName = workspace.KubeName(w.Name, w.ID)
	}
	params, err := encodeValues(w.Parameters)
	if err != nil {
		return fmt.Errorf("create workspace %q: %w", w.Name, err)
	}
	var repo workspace.RepositorySource
	var repoReadAt sql.NullInt64
	if w.Repository != nil {
		repo, repoReadAt = *w.Repository, sql.NullInt64{Int64: micros(w.Repository.ReadAt), Valid: true}
	}
	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO workspaces (id, name, kube_name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
		desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version, error_type, error_message, url, created_at,
		backend, template_id, autostart_schedule, autostart_timezone, ttl_ms, dormant_at, desired_state_reason, preset_id, parameters,
		definition_generation, repo_url, repo_ref, repo_devcontainer_path, repo_commit, repo_definition_path, repo_read_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		w.ID, w.Name, kubeName, w.OwnerID, nullID(w.AgentID), w.Namespace, w.Devfile, string(w.DesiredState), string(w.ActualState),
		micros(w.DesiredStateUpdatedAt), nullMicros(w.ActualStateUpdatedAt), nullMicros(w.RespondedToAgentAt),
		nullString(w.DeploymentResourceVersion), w.ErrorType, w.ErrorMessage, w.URL, micros(w.CreatedAt),
		backend, nullID(w.TemplateID), w.Schedule.Autostart, w.Schedule.Timezone, nullMillis(w.Schedule.TTL), nullMicros(w.DormantAt),
		w.DesiredStateReason, nullID(w.PresetID), params,
		max(w.DefinitionGeneration, 1), repo.URL, repo.Ref, repo.DevcontainerPath, repo.Commit, repo.DefinitionPath, repoReadAt)
	if err = s.wrapUnique(err, fmt.Sprintf("workspace %q of this owner", w.Name)); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	return s.trackStart(ctx, tx, nil, w)
}

// InsertWorkspaces inserts rows as insertWorkspace does, many to a statement, in one transaction,
// without CreateWorkspace's name and quota checks and without waking the agents: for seeding a
// store with many workspaces at once (the load generator, internal/loadgen).
func (s *Store) InsertWorkspaces(ctx context.Context, rows []workspace.Workspace) error {
	const cols = 19
	per := s.d.BatchSize * 9 / cols // BatchSize is sized for 9 parameters a row
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for start := 0; start < len(rows); start += per {
			chunk := rows[start:min(start+per, len(rows))]
			var b strings.Builder
			b.WriteString(`INSERT INTO workspaces (id, name, kube_name, owner_id, agent_id, namespace, devfile, desired_state, actual_state,
				desired_state_updated_at, actual_state_updated_at, responded_to_agent_at, deployment_resource_version, error_type, error_message, url, created_at,
				backend, template_id) VALUES `)
			args := make([]any, 0, len(chunk)*cols)
			row := "(" + placeholders(cols) + ")"
			for i, w := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(row)
				backend := cmp.Or(w.Backend, workspace.KindKubernetes)
				kubeName := cmp.Or(w.KubeName, workspace.KubeName(w.Name, w.ID))
				args = append(args, w.ID, w.Name, kubeName, w.OwnerID, nullID(w.AgentID), w.Namespace, w.Devfile, string(w.DesiredState), string(w.ActualState),
					micros(w.DesiredStateUpdatedAt), nullMicros(w.ActualStateUpdatedAt), nullMicros(w.RespondedToAgentAt),
					nullString(w.DeploymentResourceVersion), w.ErrorType, w.ErrorMessage, w.URL, micros(w.CreatedAt),
					backend, nullID(w.TemplateID))
			}
			if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
				return fmt.Errorf("insert %d workspaces: %w", len(chunk), s.wrapUnique(err, "workspace"))
			}
		}
		return nil
	})
}

func (s *Store) CreateWorkspace(ctx context.Context, w workspace.Workspace, agentQuota, perUserQuota int) error {
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		if agentQuota >= 0 || perUserQuota >= 0 {
			// Lock the agent row so that two creations cannot both pass the count (Postgres); SQLite's
			// transaction already holds the write lock.
			if s.d.ForUpdate != "" {
				var id string
				if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM agents WHERE id = ?`+s.d.ForUpdate), w.AgentID).Scan(&id); err != nil {
					return fmt.Errorf("lock agent: %w", notFound(err, "agent"))
				}
			}
			var onAgent, ofUser int
			err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN owner_id = ? THEN 1 ELSE 0 END), 0) FROM workspaces
				WHERE agent_id = ? AND desired_state <> 'Terminated'`), w.OwnerID, w.AgentID).Scan(&onAgent, &ofUser)
			if err != nil {
				return fmt.Errorf("count workspaces: %w", err)
			}
			if agentQuota >= 0 && onAgent >= agentQuota {
				return fmt.Errorf("agent %q allows %d workspaces and has %d: %w", w.AgentName, agentQuota, onAgent, store.ErrQuota)
			}
			if perUserQuota >= 0 && ofUser >= perUserQuota {
				return fmt.Errorf("agent %q allows %d workspaces per user and you have %d: %w", w.AgentName, perUserQuota, ofUser, store.ErrQuota)
			}
		}
		if err := s.insertWorkspace(ctx, tx, w); err != nil {
			return err
		}
		return s.notifyTx(ctx, tx, w.AgentID)
	})
	if err == nil {
		s.committed(w.AgentID)
	}
	return err
}

func (s *Store) Workspace(ctx context.Context, ref store.WorkspaceRef) (workspace.Workspace, error) {
	where, args, order := refQuery(ref)
	w, err := scanWorkspace(s.queryRow(ctx, `SELECT `+wsCols+wsFrom+` WHERE `+where+order, args...))
	return w, notFound(err, refString(ref))
}

func (s *Store) WorkspaceByID(ctx context.Context, id string) (workspace.Workspace, error) {
	w, err := scanWorkspace(s.queryRow(ctx, `SELECT `+wsCols+wsFrom+` WHERE w.id = ?`, id))
	return w, notFound(err, "workspace "+id)
}

func (s *Store) WorkspaceDevfile(ctx context.Context, id string) (string, error) {
	return s.workspaceDevfile(ctx, s.db, id)
}

func (s *Store) workspaceDevfile(ctx context.Context, q querier, id string) (string, error) {
	var text string
	err := q.QueryRowContext(ctx, s.q(`SELECT devfile FROM workspaces WHERE id = ?`), id).Scan(&text)
	return text, notFound(err, "workspace "+id)
}

// reconcileTx is store.ReconcileTx on q: the reconcile's transaction (or, when there is none, the
// pool: no rows were read, so nothing is asked of it).
type reconcileTx struct {
	s   *Store
	ctx context.Context
	q   querier
}

func (t reconcileTx) WorkspaceDevfile(id string) (string, error) {
	return t.s.workspaceDevfile(t.ctx, t.q, id)
}

func (s *Store) ListWorkspaces(ctx context.Context, f store.ListFilter) ([]workspace.Workspace, error) {
	var conds []string
	var args []any
	if f.OwnerID != "" {
		conds, args = append(conds, `w.owner_id = ?`), append(args, f.OwnerID)
	}
	if !f.Terminated {
		conds = append(conds, `w.actual_state <> 'Terminated'`)
	}
	if !f.Prebuilds {
		conds, args = append(conds, `w.owner_id <> ?`), append(args, store.PrebuildsUserID)
	}
	where := ""
	if len(conds) > 0 {
		where = ` WHERE ` + strings.Join(conds, ` AND `)
	}
	return s.queryWorkspaces(ctx, s.db, `SELECT `+wsCols+wsFrom+where+` ORDER BY u.username, w.name, w.created_at DESC, w.id`, args...)
}

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) queryWorkspaces(ctx context.Context, db querier, query string, args ...any) ([]workspace.Workspace, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("read workspaces: %w", err)
	}
	defer rows.Close()
	out := []workspace.Workspace{}
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			return nil, fmt.Errorf("read workspace: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// lockClause returns the row lock for a query joining users and agents: only the workspace rows.
func (s *Store) lockClause() string {
	if s.d.ForUpdate == "" {
		return ""
	}
	return s.d.ForUpdate + " OF w"
}

func (s *Store) UpdateWorkspace(ctx context.Context, ref store.WorkspaceRef, fn func(workspace.Workspace) (workspace.Workspace, error)) (workspace.Workspace, error) {
	var out workspace.Workspace
	woken := "" // the agent to wake after the commit
	err := s.actionTx(ctx, func(tx *sql.Tx) error {
		// Locking protocol (Postgres): a reconcile holds its agent's row FOR UPDATE and reads the
		// agent's workspaces without row locks; a single-workspace writer holds the agent's row FOR
		// SHARE, then the workspace row FOR UPDATE. So a user's change waits for a running reconcile
		// of the workspace's agent (and the reverse), and two users' changes of one row serialize on
		// the row, without a reconcile locking thousands of rows.
		// A terraform workspace has no agent: only its row is locked.
		w, err := s.lockWorkspace(ctx, tx, ref)
		if err != nil {
			return err
		}
		next, err := fn(w)
		if err != nil {
			return err
		}
		out = next
		notify := ""
		if !next.DesiredStateUpdatedAt.Equal(w.DesiredStateUpdatedAt) && w.AgentID != "" {
			notify = w.AgentID // the desired state changed: the agent is told
		}
		if err := s.updateOne(ctx, tx, next, notify); err != nil {
			return err
		}
		if err := s.writeDefinition(ctx, tx, w, next); err != nil {
			return err
		}
		if err := s.trackStart(ctx, tx, &w, next); err != nil {
			return err
		}
		woken = notify
		return nil
	})
	if err == nil && woken != "" {
		s.committed(woken)
	}
	return out, err
}

func equalPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func equalTimePtr(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }

// updateOne writes one workspace's row as a user's or the automation's change leaves it, in one
// statement: the columns a reconcile writes, those of lifecycle automation, and its last use
// (only ever moved forward). With notify set (an agent's id) on Postgres, the same statement sends
// the agent's notification: a user's change is then BEGIN, the locks, this and COMMIT.
func (s *Store) updateOne(ctx context.Context, tx *sql.Tx, w workspace.Workspace, notify string) error {
	q := `UPDATE workspaces SET desired_state = ?, actual_state = ?, desired_state_updated_at = ?, actual_state_updated_at = ?,
		responded_to_agent_at = ?, deployment_resource_version = ?, error_type = ?, error_message = ?,
		autostart_schedule = ?, autostart_timezone = ?, ttl_ms = ?, dormant_at = ?, desired_state_reason = ?,
		last_activity_at = CASE WHEN last_activity_at IS NULL OR last_activity_at < ?` + s.d.BigintCast + ` THEN ?` + s.d.BigintCast + ` ELSE last_activity_at END
		WHERE id = ?`
	args := []any{string(w.DesiredState), string(w.ActualState), micros(w.DesiredStateUpdatedAt), nullMicros(w.ActualStateUpdatedAt),
		nullMicros(w.RespondedToAgentAt), nullString(w.DeploymentResourceVersion), w.ErrorType, w.ErrorMessage,
		w.Schedule.Autostart, w.Schedule.Timezone, nullMillis(w.Schedule.TTL), nullMicros(w.DormantAt), w.DesiredStateReason,
		nullMicros(w.LastActivityAt), nullMicros(w.LastActivityAt), w.ID}
	if notify != "" && s.d.Notify != "" {
		// A data-modifying WITH runs whatever the outer statement reads; the notification is sent
		// at commit, as notifyTx's.
		q = `WITH u AS (` + q + ` RETURNING 1) ` + s.d.Notify + ` FROM u`
		args = append(args, notify)
	}
	if _, err := tx.ExecContext(ctx, s.q(q), args...); err != nil {
		return fmt.Errorf("update workspace %q: %w", w.Name, err)
	}
	return nil
}

// writeDefinition writes what UpdateWorkspace's fn changed of next's definition: its devfile (with
// its URL and generation) when fn set one, its repository source when it differs from cur's.
func (s *Store) writeDefinition(ctx context.Context, tx *sql.Tx, cur, next workspace.Workspace) error {
	if next.Devfile != "" {
		if next.DefinitionGeneration <= cur.DefinitionGeneration {
			return fmt.Errorf("update workspace %q: a new devfile needs a new definition generation (have %d, got %d)", next.Name, cur.DefinitionGeneration, next.DefinitionGeneration)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspaces SET devfile = ?, url = ?, definition_generation = ? WHERE id = ?`),
			next.Devfile, next.URL, next.DefinitionGeneration, next.ID); err != nil {
			return fmt.Errorf("update workspace %q: write its definition: %w", next.Name, err)
		}
	}
	if equalRepository(cur.Repository, next.Repository) {
		return nil
	}
	var repo workspace.RepositorySource
	var readAt sql.NullInt64
	if next.Repository != nil {
		repo, readAt = *next.Repository, sql.NullInt64{Int64: micros(next.Repository.ReadAt), Valid: true}
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspaces SET repo_url = ?, repo_ref = ?, repo_devcontainer_path = ?, repo_commit = ?,
		repo_definition_path = ?, repo_read_at = ? WHERE id = ?`),
		repo.URL, repo.Ref, repo.DevcontainerPath, repo.Commit, repo.DefinitionPath, readAt, next.ID); err != nil {
		return fmt.Errorf("update workspace %q: write its repository: %w", next.Name, err)
	}
	return nil
}

func equalRepository(a, b *workspace.RepositorySource) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	return x.ReadAt.Equal(y.ReadAt) && x.URL == y.URL && x.Ref == y.Ref && x.DevcontainerPath == y.DevcontainerPath &&
		x.Commit == y.Commit && x.DefinitionPath == y.DefinitionPath
}

// writeLifecycle writes w's columns of lifecycle automation.
func (s *Store) writeLifecycle(ctx context.Context, tx *sql.Tx, w workspace.Workspace) error {
	_, err := tx.ExecContext(ctx, s.q(`UPDATE workspaces SET autostart_schedule = ?, autostart_timezone = ?, ttl_ms = ?, dormant_at = ?,
		desired_state_reason = ? WHERE id = ?`),
		w.Schedule.Autostart, w.Schedule.Timezone, nullMillis(w.Schedule.TTL), nullMicros(w.DormantAt), w.DesiredStateReason, w.ID)
	if err != nil {
		return fmt.Errorf("update workspace %q: %w", w.Name, err)
	}
	return nil
}

func nullMillis(d *time.Duration) sql.NullInt64 {
	if d == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: d.Milliseconds(), Valid: true}
}

// refQuery is the condition, arguments and order that select the workspace ref names (take the
// first row): by id, or else the owner's workspace of that name that is not Terminated, or else
// the latest created of those that are.
func refQuery(ref store.WorkspaceRef) (where string, args []any, order string) {
	if ref.ID != "" {
		return `w.id = ?`, []any{ref.ID}, ``
	}
	return `w.owner_id = ? AND w.name = ?`, []any{ref.OwnerID, ref.Name},
		` ORDER BY CASE WHEN w.actual_state = 'Terminated' THEN 1 ELSE 0 END, w.created_at DESC, w.id LIMIT 1`
}

func refString(ref store.WorkspaceRef) string {
	if ref.ID != "" {
		return "workspace " + ref.ID
	}
	return fmt.Sprintf("workspace %q", ref.Name)
}

// lockWorkspace reads the workspace ref names, locked against concurrent writers (Postgres): first
// its agent's row FOR SHARE if it has an agent (see UpdateWorkspace), then its own row FOR UPDATE.
// SQLite's transaction already holds the write lock.
func (s *Store) lockWorkspace(ctx context.Context, tx *sql.Tx, ref store.WorkspaceRef) (workspace.Workspace, error) {
	what := refString(ref)
	if s.d.ForShare != "" {
		// Postgres: the agent's row FOR SHARE first (the locking protocol above), in the statement
		// that chooses the row. A name is chosen once, then locked by id: Postgres does not order
		// again after waiting for a lock, so a name's two locking reads could each pick a different
		// namesake under a concurrent create or terminate. No agent (terraform): the workspace's
		// own row lock is enough.
		where, args, order := refQuery(ref)
		var id string
		var agentID sql.NullString
		err := tx.QueryRowContext(ctx, s.q(`SELECT c.id, (SELECT a.id FROM agents a WHERE a.id = c.agent_id`+s.d.ForShare+`)
			FROM (SELECT w.id, w.agent_id FROM workspaces w WHERE `+where+order+`) c`), args...).Scan(&id, &agentID)
		if errors.Is(err, sql.ErrNoRows) {
			return workspace.Workspace{}, fmt.Errorf("%s: %w", what, store.ErrNotFound)
		}
		if err != nil {
			return workspace.Workspace{}, fmt.Errorf("lock agent of %s: %w", what, err)
		}
		ref = store.WorkspaceRef{ID: id}
	}
	where, args, order := refQuery(ref)
	ws, err := s.queryWorkspaces(ctx, tx, `SELECT `+wsCols+wsFrom+` WHERE `+where+order+s.lockClause(), args...)
	if err != nil {
		return workspace.Workspace{}, err
	}
	if len(ws) == 0 {
		return workspace.Workspace{}, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return ws[0], nil
}

func (s *Store) Reconcile(ctx context.Context, scope store.ReconcileScope, fn func(store.ReconcileTx, []workspace.Workspace) ([]workspace.Workspace, error)) error {
	if !scope.Full && len(scope.KubeNames) == 0 {
		// Most partial reconciles report nothing and find nothing pending. Then one read through
		// the partial index answers, without a transaction, the agent's lock or (SQLite) the write
		// lock: with no rows there is nothing to decide or write, and a user's change committed
		// after this read is pending for the next reconcile, and wakes the agent's wait, as it
		// would after a locked read that found nothing (docs/benchmarks.md, "Load: 1,000 agents ×
		// 100 workspaces").
		pending, err := s.HasPending(ctx, scope.AgentID)
		if err != nil {
			return err
		}
		if !pending {
			changed, err := fn(reconcileTx{s, ctx, s.db}, []workspace.Workspace{})
			if err == nil && len(changed) > 0 {
				err = fmt.Errorf("reconcile: %d rows to write from no rows read", len(changed))
			}
			return err
		}
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// Reconciles of one agent run one at a time, and exclude single-workspace writers of the
		// agent's workspaces (Postgres: the agent row's lock, see UpdateWorkspace; SQLite: the write
		// lock every transaction takes).
		if s.d.ForUpdate != "" {
			var id string
			if err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM agents WHERE id = ?`+s.d.ForUpdate), scope.AgentID).Scan(&id); err != nil {
				return fmt.Errorf("lock agent: %w", notFound(err, "agent"))
			}
		}
		var rows []workspace.Workspace
		var err error
		if scope.Full {
			rows, err = s.queryWorkspaces(ctx, tx, `SELECT `+wsCols+wsFrom+` WHERE w.agent_id = ?
				AND NOT (w.desired_state = 'Terminated' AND w.actual_state = 'Terminated') ORDER BY w.id`, scope.AgentID)
		} else {
			rows, err = s.queryWorkspaces(ctx, tx, `SELECT `+wsCols+wsFrom+` WHERE w.agent_id = ?
				AND (w.responded_to_agent_at IS NULL OR w.desired_state_updated_at > w.responded_to_agent_at) ORDER BY w.id`, scope.AgentID)
		}
		if err != nil {
			return err
		}
		seen := make(map[string]bool, len(rows))
		for _, r := range rows {
			seen[r.KubeName] = true
		}
		var missing []string
		for _, n := range scope.KubeNames {
			if !seen[n] {
				seen[n] = true
				missing = append(missing, n)
			}
		}
		for start := 0; start < len(missing); start += s.d.BatchSize {
			chunk := missing[start:min(start+s.d.BatchSize, len(missing))]
			args := make([]any, 0, len(chunk)+1)
			args = append(args, scope.AgentID)
			for _, n := range chunk {
				args = append(args, n)
			}
			more, err := s.queryWorkspaces(ctx, tx, `SELECT `+wsCols+wsFrom+` WHERE w.agent_id = ? AND w.kube_name IN (`+placeholders(len(chunk))+`) ORDER BY w.id`, args...)
			if err != nil {
				return err
			}
			rows = append(rows, more...)
		}
		changed, err := fn(reconcileTx{s, ctx, tx}, rows)
		if err != nil {
			return err
		}
		// Most rows of a reconcile change only responded_to_agent_at; they take one narrow UPDATE
		// per batch instead of the whole row's.
		before := make(map[string]workspace.Workspace, len(rows))
		for _, r := range rows {
			before[r.ID] = r
		}
		var full []workspace.Workspace
		stamped := map[int64][]string{}
		for _, w := range changed {
			if b, ok := before[w.ID]; ok && w.RespondedToAgentAt != nil && onlyRespondedDiffers(b, w) {
				at := micros(*w.RespondedToAgentAt)
				stamped[at] = append(stamped[at], w.ID)
				continue
			}
			full = append(full, w)
		}
		for at, ids := range stamped {
			if err := s.stampResponded(ctx, tx, at, ids); err != nil {
				return err
			}
		}
		if err := s.updateBatch(ctx, tx, full); err != nil {
			return err
		}
		return s.trackStarts(ctx, tx, before, full)
	})
}

// onlyRespondedDiffers reports whether b and w differ in no written column but responded_to_agent_at.
func onlyRespondedDiffers(b, w workspace.Workspace) bool {
	return b.DesiredState == w.DesiredState && b.ActualState == w.ActualState &&
		b.DesiredStateUpdatedAt.Equal(w.DesiredStateUpdatedAt) && timesEqual(b.ActualStateUpdatedAt, w.ActualStateUpdatedAt) &&
		stringsEqual(b.DeploymentResourceVersion, w.DeploymentResourceVersion) &&
		b.ErrorType == w.ErrorType && b.ErrorMessage == w.ErrorMessage
}

func timesEqual(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func stringsEqual(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// stampResponded sets responded_to_agent_at on rows by ID, in batches.
func (s *Store) stampResponded(ctx context.Context, tx *sql.Tx, at int64, ids []string) error {
	batch := s.d.BatchSize * 8
	for start := 0; start < len(ids); start += batch {
		chunk := ids[start:min(start+batch, len(ids))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, at)
		for _, id := range chunk {
			args = append(args, id)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE workspaces SET responded_to_agent_at = ? WHERE id IN (`+placeholders(len(chunk))+`)`), args...); err != nil {
			return fmt.Errorf("stamp %d workspaces answered: %w", len(chunk), err)
		}
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (s *Store) UpdateWorkspacesBatch(ctx context.Context, rows []workspace.Workspace) error {
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.updateBatch(ctx, tx, rows) })
}

// updateBatch writes the mutable columns of rows by ID with one UPDATE ... FROM (VALUES ...) per
// batch. Both engines support it (SQLite since 3.33).
func (s *Store) updateBatch(ctx context.Context, tx *sql.Tx, rows []workspace.Workspace) error {
	const cols = 9
	for start := 0; start < len(rows); start += s.d.BatchSize {
		chunk := rows[start:min(start+s.d.BatchSize, len(rows))]
		var b strings.Builder
		// A CTE with a column list is the form of a VALUES table both engines accept.
		b.WriteString(`WITH v (id, desired_state, actual_state, desired_state_updated_at, actual_state_updated_at,
			responded_to_agent_at, deployment_resource_version, error_type, error_message) AS (VALUES `)
		args := make([]any, 0, len(chunk)*cols)
		t, n := s.d.TextCast, s.d.BigintCast
		row := "(?" + t + ", ?" + t + ", ?" + t + ", ?" + n + ", ?" + n + ", ?" + n + ", ?" + t + ", ?" + t + ", ?" + t + ")"
		for i, w := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
			args = append(args, w.ID, string(w.DesiredState), string(w.ActualState), micros(w.DesiredStateUpdatedAt),
				nullMicros(w.ActualStateUpdatedAt), nullMicros(w.RespondedToAgentAt), nullString(w.DeploymentResourceVersion),
				w.ErrorType, w.ErrorMessage)
		}
		b.WriteString(`) UPDATE workspaces SET desired_state = v.desired_state, actual_state = v.actual_state,
			desired_state_updated_at = v.desired_state_updated_at, actual_state_updated_at = v.actual_state_updated_at,
			responded_to_agent_at = v.responded_to_agent_at, deployment_resource_version = v.deployment_resource_version,
			error_type = v.error_type, error_message = v.error_message
			FROM v WHERE workspaces.id = v.id`)
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return fmt.Errorf("update %d workspaces: %w", len(chunk), err)
		}
	}
	return nil
}

func (s *Store) CountWorkspacesByState(ctx context.Context) (map[[2]workspace.State]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT desired_state, actual_state, COUNT(*) FROM workspaces GROUP BY desired_state, actual_state`)
	if err != nil {
		return nil, fmt.Errorf("count workspaces: %w", err)
	}
	defer rows.Close()
	out := map[[2]workspace.State]int{}
	for rows.Next() {
		var d, a string
		var n int
		if err := rows.Scan(&d, &a, &n); err != nil {
			return nil, err
		}
		out[[2]workspace.State{workspace.State(d), workspace.State(a)}] = n
	}
	return out, rows.Err()
}

var _ store.Store = (*Store)(nil)
