package store

import (
	"context"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// KeptBuildStates is how many of a workspace's latest builds keep their Terraform state. Each build
// starts from a copy of the previous build's state, so keeping every build's would grow storage
// without bound; when a build is created, the builds older than the latest KeptBuildStates (the
// new one included) lose theirs (build.Build.StatePruned). The latest build always keeps its state:
// it is the next build's source (seed, "State Source Resolution") and what state pull and push act
// on; the stale-state rules (a cancel, a failure, the reaper) only ever write the latest build's.
const KeptBuildStates = 10

// Template is a named, versioned template.
type Template struct {
	ID   string
	Name string
	Kind string
	// ActiveVersionID is the version new workspaces and every start get: the latest pushed,
	// unless pushed inactive, or another version promoted since (PromoteTemplateVersion).
	ActiveVersionID string
	ActiveVersion   int    // its number, filled on reads
	CreatedBy       string // the username of the first pusher
	// Lifecycle is the policy of the template's workspaces (SetTemplateLifecycle).
	Lifecycle workspace.Lifecycle
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TemplateVersion is one pushed version of a template.
type TemplateVersion struct {
	ID         string
	TemplateID string
	Number     int // 1, 2, ... per template
	// Archive is the module directory as a gzipped tar (terraform), or the devfile (kubernetes).
	// List reads leave it nil.
	Archive []byte
	// Hash is the hex SHA-256 of Archive (provisioners cache modules by it).
	Hash string
	// Variables are the input variables the module declares (terraform): Hangar passes only these.
	Variables []string
	// Parameters are the variables users give values for (those Hangar does not supply itself).
	Parameters []parameter.Parameter
	CreatedBy  string
	CreatedAt  time.Time
	// Inactive, at CreateTemplateVersion only: the version is stored without becoming the
	// template's active version (the first version of a template always becomes active).
	Inactive bool
}

// BuildRecord is a terraform workspace, locked, with its latest build (nil for none): what the build
// rules read and write together in one transaction.
type BuildRecord struct {
	Workspace workspace.Workspace
	Build     *build.Build
	// ActiveVersion is the active version of the workspace's template (without its archive), read
	// in the same transaction: NewBuild only (zero in UpdateBuild), zero for a workspace without a
	// template or a template without an active version.
	ActiveVersion TemplateVersion
	// Kept is what the workspace's builds keep (their states and logs), read in the same
	// transaction: ClaimPrebuild only, where it all moves to the claiming user (zero elsewhere).
	Kept StorageUsage
}

// LogLine is one line of a build's log.
type LogLine struct {
	// ID orders lines within a job (assigned by the store, increasing).
	ID        int64
	JobID     string
	CreatedAt time.Time
	Stage     string
	Level     string // info, warn, error
	Output    string
}

// Provisioner is a registered provisioner daemon (its token authenticates it).
type Provisioner struct {
	ID         string
	Name       string
	TokenHash  []byte
	CreatedAt  time.Time
	LastSeenAt *time.Time
}

// MaxInUseNames bounds the workspaces DeleteTemplate names.
const MaxInUseNames = 10

// BuildStore is the persistence of the Terraform backend. Terraform workspaces live in the
// workspaces table with Backend "terraform" and no agent.
type BuildStore interface {
	// CreateTemplateVersion stores v as the next version of the template named t.Name, creating
	// the template (kind t.Kind) if it does not exist, and makes it the active version unless
	// v.Inactive (a new template's first version is active whatever v.Inactive says). A template
	// of another kind of the same name is ErrConflict. v.Number and v.TemplateID are assigned.
	CreateTemplateVersion(ctx context.Context, t Template, v TemplateVersion) (Template, TemplateVersion, error)
	// PromoteTemplateVersion makes version number of the template name names its active version
	// (ErrNotFound for either missing).
	PromoteTemplateVersion(ctx context.Context, name string, number int, now time.Time) (Template, error)
	// TemplateVersionByNumber reads one version of a template, with its archive when withArchive.
	TemplateVersionByNumber(ctx context.Context, templateID string, number int, withArchive bool) (TemplateVersion, error)
	TemplateByName(ctx context.Context, name string) (Template, error)
	// SetTemplateLifecycle replaces the lifecycle policy of the template name names.
	SetTemplateLifecycle(ctx context.Context, name string, l workspace.Lifecycle) (Template, error)
	ListTemplates(ctx context.Context) ([]Template, error)
	// DeleteTemplate deletes the template name names (ErrNotFound if none), in one transaction
	// with the check of what uses it: inUse is called with the workspaces (owner/name, at most
	// MaxInUseNames of them, sorted, and their count) that are not Terminated, prebuilt ones
	// included, and its presets; an error from it is returned and nothing changes. The row stays
	// (its versions are what its terminated workspaces' builds ran), its name free for a new one.
	DeleteTemplate(ctx context.Context, name string, now time.Time, inUse func(workspaces []string, count int, presets []string) error) error
	// ListTemplateVersions lists a template's versions, newest first, without archives.
	ListTemplateVersions(ctx context.Context, templateID string) ([]TemplateVersion, error)
	// TemplateVersionByID reads one version with its archive.
	TemplateVersionByID(ctx context.Context, id string) (TemplateVersion, error)
	// TemplateVersionInfo reads one version without its archive.
	TemplateVersionInfo(ctx context.Context, id string) (TemplateVersion, error)

	// CreateBuildWorkspace inserts a terraform workspace with its first build and job, in one
	// transaction (ErrConflict if its owner has a workspace of that name that is not Terminated),
	// and announces the job.
	CreateBuildWorkspace(ctx context.Context, w workspace.Workspace, b build.Build) error
	// NewBuild reads the workspace ref names (locked) with its latest build and passes them to fn; if
	// fn returns a build, it is inserted with its job, the workspace row fn returns is written,
	// and the job is announced — all in one transaction. fn may return an error to write nothing.
	// The builds older than the latest KeptBuildStates lose their state in that transaction.
	NewBuild(ctx context.Context, ref WorkspaceRef, fn func(rec BuildRecord) (workspace.Workspace, *build.Build, error)) (workspace.Workspace, *build.Build, error)
	// UpdateBuild reads the build of the job (locked) with its workspace and passes them to fn;
	// the build (its state and job columns) and the workspace row fn returns are written in one
	// transaction, and the job's followers are woken.
	UpdateBuild(ctx context.Context, jobID string, fn func(rec BuildRecord) (BuildRecord, error)) (BuildRecord, error)
	// ListBuilds lists a workspace's builds, newest first, without their state.
	ListBuilds(ctx context.Context, workspaceID string) ([]build.Build, error)
	// BuildByNumber reads one build with its state; number 0 means the latest.
	BuildByNumber(ctx context.Context, workspaceID string, number int) (build.Build, error)
	// JobByID reads one job (cheap: no build, no state).
	JobByID(ctx context.Context, jobID string) (build.Job, error)
	// BuildByJob reads the build of a job, with its state.
	BuildByJob(ctx context.Context, jobID string) (build.Build, error)
	// WorkspaceByID reads one workspace (either backend).
	WorkspaceByID(ctx context.Context, id string) (workspace.Workspace, error)
	// PutBuildState replaces the state of the workspace's latest build, unless a build is active
	// (build.ErrBuildActive) or check, given the latest build's current state in the same
	// transaction, returns an error (returned as is; nothing is written).
	PutBuildState(ctx context.Context, workspaceID string, state []byte, check func(current []byte) error) error

	// AcquireJob claims the oldest pending job for workerID at now (started, heartbeat now), safe
	// against other provisioners claiming at once (Postgres: FOR UPDATE SKIP LOCKED; SQLite: the
	// single writer). ok is false when no job is pending.
	AcquireJob(ctx context.Context, workerID string, now time.Time) (b build.Build, ok bool, err error)
	// Heartbeat records that workerID still runs the job, and returns it (with its cancel mark).
	// A job it does not own, or that has ended, is ErrNotOwner.
	Heartbeat(ctx context.Context, jobID, workerID string, now time.Time) (build.Job, error)
	// AppendLogs adds lines to a job's log (at most MaxLogLinesPerJob are kept: later lines are
	// dropped) and wakes its followers.
	AppendLogs(ctx context.Context, jobID string, lines []LogLine) error
	// JobLogs reads a job's log lines with ID > after, at most limit.
	JobLogs(ctx context.Context, jobID string, after int64, limit int) ([]LogLine, error)
	// StaleJobs lists the active jobs that a reaper must fail: running (or canceling) with no
	// heartbeat since heartbeatBefore, or pending since createdBefore. A zero time matches no job
	// of its kind.
	StaleJobs(ctx context.Context, heartbeatBefore, createdBefore time.Time) ([]string, error)
	// StalledRestarts lists the ids of the terraform workspaces whose restart stopped halfway:
	// desired RestartRequested, and the latest build a stop that succeeded (its start was never
	// queued).
	StalledRestarts(ctx context.Context) ([]string, error)
	// ActiveJobsOf lists the claimed, unfinished jobs of a worker.
	ActiveJobsOf(ctx context.Context, workerID string) ([]string, error)
	// CountJobs counts jobs by status (metrics).
	CountJobs(ctx context.Context) (map[build.JobStatus]int, error)

	// SubscribeJobs wakes after a job is queued or canceled (on Postgres, by any replica). Like
	// SubscribeAgent: coalescing, never blocking, possibly spurious.
	SubscribeJobs() (ch <-chan struct{}, cancel func())
	// SubscribeJob wakes after a change to the job: log lines, cancel, heartbeat, end.
	SubscribeJob(jobID string) (ch <-chan struct{}, cancel func())

	CreateProvisioner(ctx context.Context, p Provisioner) error
	ProvisionerByTokenHash(ctx context.Context, hash []byte) (Provisioner, error)
	ListProvisioners(ctx context.Context) ([]Provisioner, error)
	// TouchProvisioner records that the provisioner called at now.
	TouchProvisioner(ctx context.Context, id string, now time.Time) error
}

// MaxLogLinesPerJob caps a job's log (the reference caps job logs too).
const MaxLogLinesPerJob = 20000

// ErrNotOwner is returned when a provisioner reports on a job it does not own, or that has ended.
var ErrNotOwner = errNotOwner{}

type errNotOwner struct{}

func (errNotOwner) Error() string   { return "the job is not claimed by this provisioner, or has ended" }
func (errNotOwner) Code() errs.Code { return errs.NotOwner }
