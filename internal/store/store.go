// Package store defines Hangar's persistence: one Store interface, implemented over SQL by
// sqlstore for two dialects (package sqlite: the embedded default; package postgres: several server
// replicas). The shared suite in storetest runs against both.
package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Errors every adapter returns (wrapped) so that callers can map them to API answers.
var (
	ErrNotFound = errs.New(errs.NotFound, "not found")
	ErrConflict = errs.New(errs.Conflict, "already exists")
	// ErrQuota is returned by CreateWorkspace when a quota of the agent would be exceeded.
	ErrQuota = errs.New(errs.Conflict, "quota exceeded")
)

// AutomationUserID is the system user that the lifecycle executor's changes and builds name as
// their initiator (migration 12). No token finds it and no username lookup returns it.
const AutomationUserID = "00000000-0000-4000-8000-00000000a070"

// AutomationUsername is its name, shown as the initiator of what it did.
const AutomationUsername = "hangar-automation"

// ReconcileScope says which of an agent's workspaces a reconcile reads.
type ReconcileScope struct {
	AgentID string
	// Full reads every workspace of the agent that is not (desired Terminated and actual
	// Terminated). Otherwise only those never responded to, or whose desired state changed after
	// the last response (desired_state_updated_at > responded_to_agent_at; see docs/decisions.md).
	Full bool
	// KubeNames are read as well, whatever their state: the workspaces the agent reported (the
	// agent names a workspace by its cluster name, Workspace.KubeName).
	KubeNames []string
}

// ReconcileTx reads, inside a reconcile's transaction, what its decision needs beyond the rows.
type ReconcileTx interface {
	// WorkspaceDevfile reads the devfile a workspace was created with (Store.WorkspaceDevfile).
	WorkspaceDevfile(id string) (string, error)
	// SetStartupSteps records the startup steps the agent reported for a workspace of the
	// decision's rows: each named step is replaced, except that an empty log keeps the log stored
	// for the same run of the step (the same started_at), which a restarted agent no longer has.
	SetStartupSteps(workspaceID string, steps []workspace.StartupStep) error
}

// WorkspaceRef names one workspace: by ID, or else by owner and name. A name may have been used
// before by Terminated workspaces of the owner: it names the one that is not Terminated if there is
// one, else the latest created.
type WorkspaceRef struct {
	ID      string
	OwnerID string
	Name    string
}

// ListFilter says which workspaces ListWorkspaces lists.
type ListFilter struct {
	OwnerID string // "" lists every owner's
	// Terminated lists the Terminated workspaces too (actual state Terminated: deleted).
	Terminated bool
	// Prebuilds lists the unclaimed prebuilt workspaces too (owned by PrebuildsUserID): they are
	// left out otherwise.
	Prebuilds bool
}

// Store is Hangar's persistence.
type Store interface {
	BuildStore
	SessionStore
	SSHKeyStore
	ActivityStore
	AgentTokenStore
	AuditStore
	PresetStore
	OIDCStore
	ExternalAuthStore
	GitSSHKeyStore
	WorkspaceChangeStore
	AgentSeenStore
	TokenStore
	StorageStore

	Close() error
	// Ping checks the database answers (readiness).
	Ping(ctx context.Context) error

	// CreateUser creates u with a first token named "initial", without expiry, whose hash is
	// u.TokenHash (no token when it is empty); audited.
	CreateUser(ctx context.Context, u workspace.User) error
	// UserByUsername reads a user who is not deleted (suspended ones included).
	UserByUsername(ctx context.Context, username string) (workspace.User, error)
	CountUsers(ctx context.Context) (int, error)

	CreateAgent(ctx context.Context, a workspace.Agent) error
	AgentByTokenHash(ctx context.Context, hash []byte) (workspace.Agent, error)
	AgentByName(ctx context.Context, name string) (workspace.Agent, error)
	ListAgents(ctx context.Context) ([]workspace.Agent, error)

	// CreateWorkspace inserts w unless its owner has a workspace of that name that is not Terminated
	// (ErrConflict) or the agent's quotas would be exceeded (ErrQuota); both checks and the insert
	// happen in one transaction.
	CreateWorkspace(ctx context.Context, w workspace.Workspace, agentQuota, perUserQuota int) error
	// Workspace reads one workspace.
	Workspace(ctx context.Context, ref WorkspaceRef) (workspace.Workspace, error)
	// WorkspaceDevfile reads a workspace's devfile: the one of its create, or of its latest
	// definition generation (UpdateWorkspace).
	WorkspaceDevfile(ctx context.Context, id string) (string, error)
	// SetWorkspaceDotfiles records the install of the owner's dotfiles its helper reported
	// (ErrNotFound: no such workspace); WorkspaceDotfiles reads it (ErrNotFound: none reported).
	SetWorkspaceDotfiles(ctx context.Context, workspaceID string, d workspace.DotfilesStatus) error
	WorkspaceDotfiles(ctx context.Context, workspaceID string) (workspace.DotfilesStatus, error)
	// SetWorkspaceMetadata keeps the latest metadata report of a workspace's helper (JSON) and
	// when it came (ErrNotFound: no such workspace); WorkspaceMetadata reads it (ErrNotFound:
	// none kept).
	SetWorkspaceMetadata(ctx context.Context, workspaceID string, report []byte, at time.Time) error
	WorkspaceMetadata(ctx context.Context, workspaceID string) ([]byte, time.Time, error)
	// RecordWorkspaceAlert records an alert of a workspace: a condition (ClearedAt nil) unless
	// one of its kind and subject is open; an event (ClearedAt set) unless one of its kind,
	// subject and RaisedAt is kept. It reports whether it wrote one (ErrNotFound: no such
	// workspace), and keeps the latest workspace.MaxAlertsKept and every open condition.
	RecordWorkspaceAlert(ctx context.Context, workspaceID string, a workspace.Alert) (bool, error)
	// ClearWorkspaceAlert clears the open condition of that kind and subject, at at (none: no-op).
	ClearWorkspaceAlert(ctx context.Context, workspaceID, kind, subject string, at time.Time) error
	// WorkspaceAlerts reads a workspace's alerts, the latest raised first.
	WorkspaceAlerts(ctx context.Context, workspaceID string) ([]workspace.Alert, error)
	// ServerKey returns the server's key of that name, the same for every replica on the
	// database: the stored one, else gen's, stored (at now) by the first replica to ask.
	ServerKey(ctx context.Context, name string, gen func() []byte, now time.Time) ([]byte, error)
	// SetWorkspaceStartupStep records one startup step a workspace's helper reported, as
	// ReconcileTx.SetStartupSteps does (ErrNotFound: no such workspace).
	SetWorkspaceStartupStep(ctx context.Context, workspaceID string, st workspace.StartupStep) error
	// WorkspaceStartupSteps reads a workspace's startup steps in the order they run (none: empty).
	WorkspaceStartupSteps(ctx context.Context, workspaceID string) ([]workspace.StartupStep, error)
	// ListWorkspaces lists workspaces by owner and name, then newest first.
	ListWorkspaces(ctx context.Context, f ListFilter) ([]workspace.Workspace, error)
	// UpdateWorkspace reads the workspace ref names, locked against concurrent writers, passes it to
	// fn and writes what fn returns, all in one transaction. fn may return an error to write nothing.
	// A Devfile fn sets (reads leave it empty) is written with URL and DefinitionGeneration, which
	// must then be greater than the row's; a Repository that differs from the row's is written.
	UpdateWorkspace(ctx context.Context, ref WorkspaceRef, fn func(w workspace.Workspace) (workspace.Workspace, error)) (workspace.Workspace, error)
	// Reconcile reads the workspaces in scope, locked against concurrent writers, passes them to fn,
	// and writes the rows fn returns (by ID), all in one transaction. A user's concurrent change to
	// one of those workspaces waits for it, so neither update is lost. fn reads anything else it
	// needs through tx, inside the same transaction: never through the Store, whose other
	// connection would wait for the transaction's locks (or, with a pool of one, for its
	// connection). A partial scope without KubeNames that finds nothing pending calls fn with no
	// rows, without a transaction.
	Reconcile(ctx context.Context, scope ReconcileScope, fn func(tx ReconcileTx, rows []workspace.Workspace) (changed []workspace.Workspace, err error)) error
	// UpdateWorkspacesBatch writes rows by ID in batches, outside any decision: the benchmarks'
	// baseline and Reconcile's own writer.
	UpdateWorkspacesBatch(ctx context.Context, rows []workspace.Workspace) error
	// HasPending reports whether a workspace of the agent was never answered or changed its desired
	// state since its last answer: what a partial reconcile would pick up (the partial scope of
	// ReconcileScope, served by the partial index workspaces_pending). It reads the database, so its
	// answer is right whichever replica asks and whatever notifications were lost.
	HasPending(ctx context.Context, agentID string) (bool, error)
	// SubscribeAgent returns a channel that receives a value after a commit that may have made a
	// workspace of the agent pending (CreateWorkspace; UpdateWorkspace when desired_state_updated_at
	// moved), and a function to unsubscribe. On SQLite the commits are this process's; on Postgres
	// they are any replica's on the same database (NOTIFY in the writing transaction, one LISTEN
	// connection per store), and when that connection is re-established every subscriber is woken
	// once, since notifications may have been lost meanwhile. Wake-ups coalesce (a buffer of one, a
	// publisher never blocks) and may be spurious: a wake-up means "call HasPending again". To miss
	// nothing, subscribe first, then call HasPending, then wait. The channel is never closed.
	SubscribeAgent(agentID string) (ch <-chan struct{}, cancel func())
	// CountWorkspacesByState counts workspaces by (desired, actual) state, for metrics.
	CountWorkspacesByState(ctx context.Context) (map[[2]workspace.State]int, error)
}
