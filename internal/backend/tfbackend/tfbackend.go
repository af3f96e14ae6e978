// Package tfbackend is the Terraform backend's service (it was package builder), the server's side
// of the seed terraform-state-management.md: it turns users' requests into workspace builds and
// provisioner jobs, hands jobs to provisioners, records how they end under the seed's state rules
// (package build), and reaps jobs whose provisioner went silent. HTTP handlers and the
// in-process provisioner both call it; the decisions it applies are the pure functions of package
// build, and every change is one store transaction.
package tfbackend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Options configure a Service.
type Options struct {
	Store  store.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// After makes the timers of waits (Acquire, Heartbeat) and of the backup poll; default
	// time.After.
	After func(time.Duration) <-chan time.Time
	// HeartbeatTimeout: a running job with no heartbeat for this long is failed by the reaper
	// (default 5 min). PendingTimeout: a job nobody claimed for this long is failed (default 30 min).
	HeartbeatTimeout, PendingTimeout time.Duration
	// PollInterval is the backup poll of a waiting Acquire, in case a wake-up was lost (default 30 s).
	PollInterval time.Duration
	// HelperURL returns the URL workspace helpers connect out to (hangar_agent's init script:
	// hangar server --helper-url, by default its access URL); nil or "": builds get no helper
	// token and hangar_agent fails with a clear error.
	HelperURL func() string
	// MaxStoragePerUser bounds the bytes of Terraform state and build log each user's workspaces
	// keep; a create or a start over it first prunes, then is refused (storage.go). 0: no bound.
	MaxStoragePerUser int64
}

// Service is the Terraform backend's service.
type Service struct {
	opts Options
	st   store.Store
	log  *slog.Logger
	now  func() time.Time

	started time.Time // when this service started: the reaper waits a heartbeat timeout after it

	mu        sync.Mutex
	observers []func(build.Build)
	workers   map[string]time.Time // worker id → last call (Acquire, Heartbeat)
}

// Observe registers fn to be called with every build that ends (succeeded, failed, canceled,
// reaped, orphan-deleted), after its transaction committed: metrics.
func (s *Service) Observe(fn func(build.Build)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observers = append(s.observers, fn)
}

func (s *Service) ended(b build.Build) {
	s.pruneAgentTokens(b)
	s.mu.Lock()
	obs := s.observers
	s.mu.Unlock()
	for _, fn := range obs {
		fn(b)
	}
}

func (s *Service) sawWorker(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers == nil {
		s.workers = map[string]time.Time{}
	}
	s.workers[id] = s.now()
}

// InProcessWorkerPrefix begins the worker id of every provisioner daemon `hangar server` runs in
// its own process (the ids of registered provisioners' daemons begin with the provisioner's UUID).
const InProcessWorkerPrefix = "server/"

// InProcess reports the provisioner daemons running in this server's process that asked for work
// or heartbeated within the last minute: how many, the latest call, and since when this service
// runs. They are no registered provisioner (no token, no row), so this is how the API shows them.
func (s *Service) InProcess() (daemons int, lastSeen, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := s.now().Add(-time.Minute)
	for id, t := range s.workers {
		if strings.HasPrefix(id, InProcessWorkerPrefix) && !t.Before(cutoff) {
			daemons++
			if t.After(lastSeen) {
				lastSeen = t
			}
		}
	}
	return daemons, lastSeen, s.started
}

// ConnectedWorkers counts the provisioner daemons (in process or over HTTP) that asked for work or
// heartbeated through this server within the last minute, and forgets older ones.
func (s *Service) ConnectedWorkers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := s.now().Add(-time.Minute)
	for id, t := range s.workers {
		if t.Before(cutoff) {
			delete(s.workers, id)
		}
	}
	return len(s.workers)
}

// New returns a Service.
func New(opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = 5 * time.Minute
	}
	if opts.PendingTimeout <= 0 {
		opts.PendingTimeout = 30 * time.Minute
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 30 * time.Second
	}
	return &Service{opts: opts, st: opts.Store, log: opts.Logger, now: opts.Clock.Now, started: opts.Clock.Now()}
}

// Errors the HTTP layer maps to answers.
var (
	// ErrHidden is a workspace the user may not see: answered as not found.
	ErrHidden = backend.ErrHidden
	// ErrNotTerraform is a build request for a workspace an agent runs.
	ErrNotTerraform = errs.New(errs.Conflict, "the workspace is not built by Terraform")
	// ErrBadRequest wraps a request the rules refuse for its content (orphan on a start, ...).
	ErrBadRequest = errs.New(errs.Invalid, "bad request")
)

// CreateWorkspace creates a workspace from a terraform template, with its first build (a start
// from no state: seed, "API Operations", POST /workspaces) on the template's active version,
// without parameter values, at the default log level.
func (s *Service) CreateWorkspace(ctx context.Context, u workspace.User, name string, t store.Template) (workspace.Workspace, build.Build, error) {
	return s.Create(ctx, u, name, t, Spec{})
}

// Spec is what a workspace is made from besides its template.
type Spec struct {
	// VersionID is the template version of the first build ("": the template's active one).
	VersionID string
	// Parameters are the values given for the version's parameters, checked against it before
	// anything is written (parameter.Resolve).
	Parameters map[string]string
	// PresetID names the preset it comes from; IsPrebuild makes it a prebuilt workspace's create.
	PresetID   string
	IsPrebuild bool
	// Reason of the first build (build.ReasonInitiator when empty).
	Reason build.Reason
	// LogLevel of the first build: "" or build.LogDebug (TF_LOG=DEBUG).
	LogLevel string
	// Note, when not empty, is a warning the first build's log starts with (why a prebuilt
	// workspace was not claimed: ClaimOverStorageError).
	Note string
}

// Create creates a workspace from a terraform template as spec says, with its first build (a start
// from no state). A parameter value the version refuses is a *workspace.ValidationError naming
// each, and nothing is written.
func (s *Service) Create(ctx context.Context, u workspace.User, name string, t store.Template, spec Spec) (workspace.Workspace, build.Build, error) {
	if !spec.IsPrebuild { // a prebuild belongs to no user until claimed
		if err := s.storageError(ctx, u.ID); err != nil {
			return workspace.Workspace{}, build.Build{}, err
		}
	}
	versionID := cmp.Or(spec.VersionID, t.ActiveVersionID)
	v, err := s.st.TemplateVersionInfo(ctx, versionID)
	if err != nil {
		return workspace.Workspace{}, build.Build{}, fmt.Errorf("template %q: its version: %w", t.Name, err)
	}
	values, err := parameter.Resolve(v.Parameters, nil, spec.Parameters, true)
	if err != nil {
		return workspace.Workspace{}, build.Build{}, err
	}
	now := s.now()
	id := uuid.NewString()
	w := workspace.Workspace{
		ID: id, Name: name, KubeName: workspace.KubeName(name, id), OwnerID: u.ID, OwnerName: u.Username,
		DesiredState: workspace.Running, ActualState: workspace.Starting, DesiredStateUpdatedAt: now, ActualStateUpdatedAt: &now,
		CreatedAt: now, Backend: workspace.KindTerraform, TemplateID: t.ID, TemplateName: t.Name,
		TemplateVersionID: versionID, TemplateVersion: v.Number, TemplateActiveVersionID: t.ActiveVersionID,
		PresetID: spec.PresetID, Parameters: values,
	}
	state, source := build.InitialState(false, nil, nil)
	b := build.Build{
		ID: uuid.NewString(), WorkspaceID: w.ID, Number: 1, Transition: build.Start, Reason: cmp.Or(spec.Reason, build.ReasonInitiator),
		InitiatorID: u.ID, InitiatorName: u.Username, TemplateVersionID: versionID,
		State: state, StateSource: source, LogLevel: spec.LogLevel, IsPrebuild: spec.IsPrebuild, CreatedAt: now,
		Job: build.Job{ID: uuid.NewString(), CreatedAt: now},
	}
	b.Job.BuildID = b.ID
	entry := audit.From(ctx)
	entry.SetTarget(audit.Workspace(w.ID, u.Username, name))
	entry.Set("backend", workspace.KindTerraform)
	entry.Set("template", t.Name)
	auditBuild(entry, b)
	if err := s.st.CreateBuildWorkspace(ctx, w, b); err != nil {
		return w, b, err
	}
	if spec.Note != "" {
		s.appendLogs(ctx, b.Job.ID, "Storage", "warn", spec.Note)
	}
	s.log.Info("workspace created", "workspace", name, "owner", u.Username, "template", t.Name, "version", v.Number,
		"build", 1, "parameters", names(values), "preset", spec.PresetID, "is_prebuild", spec.IsPrebuild)
	return w, b, nil
}

// Request is a user's build request.
type Request struct {
	Transition build.Transition
	// Orphan (delete only): skip Terraform, leave the resources in place.
	Orphan bool
	// State, when not nil, is the explicit state the build starts from (state push).
	State []byte
	// Desired overrides the desired state the transition implies (RestartRequested for a
	// restart's stop).
	Desired workspace.State
	Reason  build.Reason
	// LogLevel is the build's Terraform log level ("" or build.LogDebug).
	LogLevel string
	// Parameters (a start only), when not nil, become the workspace's values with this start:
	// those an update's stop kept for it (build.Build.StartParameters).
	Parameters []workspace.ParameterValue
}

// NewBuild starts a build of the workspace ref names. It refuses while a build is active, after a
// successful delete, and for workspaces the user may not see (ErrHidden).
func (s *Service) NewBuild(ctx context.Context, u workspace.User, ref store.WorkspaceRef, req Request) (workspace.Workspace, build.Build, error) {
	if req.Orphan && req.Transition != build.Delete {
		return workspace.Workspace{}, build.Build{}, fmt.Errorf("%w: orphan applies to delete only", ErrBadRequest)
	}
	if req.Reason == "" {
		req.Reason = build.ReasonInitiator
	}
	switch {
	case req.State != nil:
		// A pushed state is counted by how much it grows what the workspace keeps (its latest
		// state); one that does not grow it is refused only as a start is.
		owner, growth := s.pushGrowth(ctx, ref, req.State)
		if req.Transition == build.Start || growth > 0 {
			if err := s.storageFor(ctx, owner, growth, "the pushed state"); err != nil {
				return workspace.Workspace{}, build.Build{}, err
			}
		}
	case req.Transition == build.Start:
		if err := s.storageError(ctx, s.ownerOf(ctx, ref)); err != nil {
			return workspace.Workspace{}, build.Build{}, err
		}
	}
	var tmplActive string
	w, b, err := s.st.NewBuild(ctx, ref, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		w := rec.Workspace
		name := w.Name
		if !workspace.Visible(u, w) {
			return w, nil, ErrHidden
		}
		entry := audit.From(ctx)
		entry.SetTarget(audit.Workspace(w.ID, w.OwnerName, w.Name))
		if w.Backend != workspace.KindTerraform {
			return w, nil, fmt.Errorf("workspace %q: %w (an agent runs it: change its desired state instead)", name, ErrNotTerraform)
		}
		if err := build.CheckNew(rec.Build, req.Transition); err != nil {
			return w, nil, err
		}
		if req.Parameters != nil && req.Transition == build.Start {
			w.Parameters = req.Parameters
			rec.Workspace = w // startVersion checks these against the active version
		}
		if w.DesiredState == workspace.Terminated && req.Transition != build.Delete {
			// Termination is permanent (as for agent workspaces): after a failed delete, only a
			// delete (or an orphan delete) may follow.
			return w, nil, fmt.Errorf("workspace %q: %w (its delete failed: retry the delete, or delete it with --orphan)", name, workspace.ErrTerminated)
		}
		if req.Transition == build.Start && tmplActive == "" {
			// Starts take the template's active version (so a fixed template helps the next start);
			// stops and deletes run the module that created the resources (the last build's).
			t, err := startVersion(rec)
			if err != nil {
				return w, nil, err
			}
			tmplActive = t
		}
		b := s.newBuild(u, w, rec.Build, req, tmplActive)
		auditBuild(entry, b)
		nw := s.afterBuild(w, b, req)
		nw.DesiredStateReason = "" // a user's request
		if req.Transition == build.Start {
			nw.DormantAt = nil // its owner's start wakes a dormant workspace
		}
		return nw, &b, nil
	})
	if err != nil {
		return w, build.Build{}, err
	}
	s.log.Info("build queued", "workspace", w.Name, "build", b.Number, "transition", b.Transition, "by", u.Username,
		"state_source", b.StateSource, "orphan", b.Orphan)
	if b.Orphan {
		s.appendLogs(ctx, b.Job.ID, "Orphan delete", "warn",
			"Orphan delete: Terraform was not run; every resource in the last state was left in place. Clean them up by hand.")
		s.ended(*b)
	}
	return w, *b, nil
}

// auditBuild adds a build to the pending audit entry: the seed's transition and
// template_version_id ("Audit Log Fields"), its number, reason and where its state comes from —
// never the state itself.
func auditBuild(entry *audit.Pending, b build.Build) {
	entry.Set("build_number", b.Number)
	entry.Set("transition", string(b.Transition))
	entry.Set("template_version_id", b.TemplateVersionID)
	entry.Set("build_reason", string(b.Reason))
	entry.Set("state_source", string(b.StateSource))
	if b.Orphan {
		entry.Set("orphan", true)
	}
	if b.LogLevel != "" {
		entry.Set("log_level", b.LogLevel)
	}
}

// startVersion is the version a start of the workspace takes, its template's active one (read by
// the store inside the build's transaction), once its parameter values are checked against it (a
// failing check writes nothing).
func startVersion(rec store.BuildRecord) (string, error) {
	w, v := rec.Workspace, rec.ActiveVersion
	if v.ID == "" {
		return "", fmt.Errorf("template %q of workspace %q: its active version: %w", w.TemplateName, w.Name, store.ErrNotFound)
	}
	if v.ID == w.TemplateVersionID {
		return v.ID, nil // checked when they were given
	}
	if _, err := parameter.Resolve(v.Parameters, w.Parameters, nil, false); err != nil {
		// A version promoted since declares a new required parameter, or checks a value
		// differently: 'hangar update NAME --parameter' gives the values and starts it.
		return "", fmt.Errorf("workspace %q on version %d of template %q (give the values with 'hangar update %s --parameter NAME=VALUE'): %w",
			w.Name, v.Number, w.TemplateName, w.Name, err)
	}
	return v.ID, nil
}

// names lists the names of values, for logs (never the values).
func names(values []workspace.ParameterValue) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = v.Name
	}
	return out
}

// UpdateResult says what Update did.
type UpdateResult string

const (
	// UpdateUpToDate: the workspace already runs the active version with these values; nothing
	// was built.
	UpdateUpToDate UpdateResult = "up-to-date"
	// UpdateRestart: the workspace was started, so it is stopped, then started on the active
	// version (the start is queued when the stop succeeds, as for a restart).
	UpdateRestart UpdateResult = "restart"
	// UpdateStart: the workspace was stopped: it is started on the active version.
	UpdateStart UpdateResult = "start"
)

// Update moves a terraform workspace to its template's active version and to new parameter
// values (seed, "CLI Operations", coder update): a stop if its latest build is a start (the
// resources may exist), then a start on the active version; the state comes from the last build.
// The values given are checked against the active version first (immutable ones may not change,
// new required ones must be given), and written with the first build in one transaction. An
// up-to-date workspace with unchanged values is left as it is (UpdateUpToDate), started or not.
func (s *Service) Update(ctx context.Context, u workspace.User, ref store.WorkspaceRef, params map[string]string) (workspace.Workspace, UpdateResult, error) {
	var result UpdateResult
	var active store.TemplateVersion
	// An update ends in a start: refused over the storage bound, unless there is nothing to do.
	full := s.storageError(ctx, s.ownerOf(ctx, ref))
	if full != nil && !errors.Is(full, ErrStorageFull) {
		return workspace.Workspace{}, "", full
	}
	w, b, err := s.st.NewBuild(ctx, ref, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		w := rec.Workspace
		if !workspace.Visible(u, w) {
			return w, nil, ErrHidden
		}
		if w.Backend != workspace.KindTerraform {
			return w, nil, fmt.Errorf("workspace %q: %w (an agent runs it from the devfile it was created with: there is no version to update to)", w.Name, ErrNotTerraform)
		}
		if w.DesiredState == workspace.Terminated {
			return w, nil, fmt.Errorf("workspace %q: %w", w.Name, workspace.ErrTerminated)
		}
		if rec.Build != nil && rec.Build.Job.Status().Active() {
			return w, nil, build.CheckNew(rec.Build, build.Start)
		}
		if active = rec.ActiveVersion; active.ID == "" { // read inside this transaction
			return w, nil, fmt.Errorf("template %q: its active version: %w", w.TemplateName, store.ErrNotFound)
		}
		values, err := parameter.Resolve(active.Parameters, w.Parameters, params, false)
		if err != nil {
			return w, nil, err
		}
		if w.TemplateVersionID == active.ID && !parameter.Changed(w.Parameters, values) {
			result = UpdateUpToDate
			return w, nil, nil
		}
		if full != nil {
			return w, nil, full
		}
		req := Request{Transition: build.Start, Reason: build.ReasonInitiator}
		result = UpdateStart
		if rec.Build != nil && rec.Build.Transition == build.Start {
			req.Transition, req.Desired, result = build.Stop, workspace.RestartRequested, UpdateRestart
		}
		if err := build.CheckNew(rec.Build, req.Transition); err != nil {
			return w, nil, err
		}
		version := active.ID
		if req.Transition == build.Stop {
			// The stop runs the module that created the resources (the last build's) with the
			// values they were created with; the new values go with the stop to the start that
			// follows it (continueRestart), so a stop that fails changes none.
			version = ""
		} else {
			w.Parameters = values
		}
		b := s.newBuild(u, w, rec.Build, req, version)
		if req.Transition == build.Stop {
			b.StartParameters = values
		}
		nw := s.afterBuild(w, b, req)
		nw.DesiredStateReason = ""
		nw.DormantAt = nil // its owner's update wakes a dormant workspace
		return nw, &b, nil
	})
	if err != nil {
		return w, "", err
	}
	if b != nil {
		s.log.Info("workspace update queued", "workspace", w.Name, "owner", w.OwnerName, "by", u.Username, "build", b.Number,
			"transition", b.Transition, "to_version", active.Number, "parameters", names(w.Parameters))
	}
	return w, result, nil
}

func (s *Service) newBuild(u workspace.User, w workspace.Workspace, last *build.Build, req Request, activeVersion string) build.Build {
	now := s.now()
	number, version := 1, activeVersion
	if last != nil {
		number = last.Number + 1
		if version == "" {
			version = last.TemplateVersionID
		}
	}
	state, source := build.InitialState(req.Orphan, req.State, last)
	b := build.Build{
		ID: uuid.NewString(), WorkspaceID: w.ID, Number: number, Transition: req.Transition, Reason: req.Reason,
		InitiatorID: u.ID, InitiatorName: u.Username, TemplateVersionID: version,
		State: state, StateSource: source, Orphan: req.Orphan, LogLevel: req.LogLevel, CreatedAt: now,
		Job: build.Job{ID: uuid.NewString(), CreatedAt: now},
	}
	b.Job.BuildID = b.ID
	if req.Orphan {
		// Orphan delete skips Terraform (seed, "Orphan Delete Mode"): the job ends as it is made,
		// so that it works with no provisioner at all. The state is not carried forward.
		b.Job.StartedAt, b.Job.CompletedAt = &now, &now
	}
	return b
}

// afterBuild is the workspace row once build b is queued (or, for an orphan delete, done).
func (s *Service) afterBuild(w workspace.Workspace, b build.Build, req Request) workspace.Workspace {
	now := s.now()
	desired := build.Desired(b.Transition)
	if req.Desired != "" {
		desired = req.Desired
	}
	if desired != w.DesiredState {
		w.DesiredState, w.DesiredStateUpdatedAt = desired, now
	}
	return applyState(w, b, now)
}

func applyState(w workspace.Workspace, b build.Build, now time.Time) workspace.Workspace {
	at := time.Time{}
	if w.ActualStateUpdatedAt != nil {
		at = *w.ActualStateUpdatedAt
	}
	ws := build.WorkspaceAfter(build.WorkspaceState{Desired: w.DesiredState, Actual: w.ActualState, ActualAt: at,
		ErrorType: w.ErrorType, ErrorMessage: w.ErrorMessage}, b, now)
	w.ActualState, w.ErrorType, w.ErrorMessage = ws.Actual, ws.ErrorType, ws.ErrorMessage
	if !ws.ActualAt.IsZero() {
		t := ws.ActualAt
		w.ActualStateUpdatedAt = &t
	}
	return w
}

// SetDesired maps a desired-state change (PATCH /workspaces/{name}, or the lifecycle executor's)
// of a terraform workspace to a build: Running → start, Stopped → stop, Terminated → delete,
// RestartRequested → stop, then a start when the stop succeeds. decide is called on the workspace
// locked inside the build's transaction (backend.Decide). Asking for what the workspace already
// is, or is becoming, changes nothing.
func (s *Service) SetDesired(ctx context.Context, by workspace.User, ref store.WorkspaceRef, decide backend.Decide) (workspace.Workspace, error) {
	var tmplActive string
	var c backend.Change
	// Only a start is refused over the storage bound; which transition it is is decided in the
	// transaction, so the bound is checked before it.
	full := s.storageError(ctx, s.ownerOf(ctx, ref))
	if full != nil && !errors.Is(full, ErrStorageFull) {
		return workspace.Workspace{}, full
	}
	w, b, err := s.st.NewBuild(ctx, ref, func(rec store.BuildRecord) (workspace.Workspace, *build.Build, error) {
		w := rec.Workspace
		if !workspace.Visible(by, w) {
			return w, nil, ErrHidden
		}
		entry := audit.From(ctx)
		entry.SetTarget(audit.Workspace(w.ID, w.OwnerName, w.Name))
		if w.Backend != workspace.KindTerraform {
			return w, nil, fmt.Errorf("workspace %q: %w (an agent runs it)", w.Name, ErrNotTerraform)
		}
		busy := rec.Build != nil && rec.Build.Job.Status().Active()
		var err error
		if c, err = decide(w, busy); err != nil || c.To == "" {
			return w, nil, err
		}
		backend.AuditChange(entry, w, c)
		req := Request{Reason: c.BuildReason, LogLevel: c.LogLevel}
		switch c.To {
		case workspace.Running:
			req.Transition = build.Start
		case workspace.Stopped:
			req.Transition = build.Stop
		case workspace.Terminated:
			req.Transition = build.Delete
		case workspace.RestartRequested:
			req.Transition, req.Desired = build.Stop, workspace.RestartRequested
		default:
			return w, nil, fmt.Errorf("%w: %q is not a desired state", workspace.ErrIllegalTransition, c.To)
		}
		if err := workspace.CheckDesiredChange(w.DesiredState, w.ActualState, c.To); err != nil {
			return w, nil, fmt.Errorf("workspace %q from desired %s to %s: %w", w.Name, w.DesiredState, c.To, err)
		}
		if last := rec.Build; last != nil && w.DesiredState == c.To && last.Transition == req.Transition {
			if st := last.Job.Status(); st.Active() || st == build.Succeeded {
				return w, nil, nil // already there or on its way
			}
		}
		if err := build.CheckNew(rec.Build, req.Transition); err != nil {
			return w, nil, err
		}
		if req.Reason == "" {
			req.Reason = build.ReasonInitiator
		}
		if req.Transition == build.Start {
			if full != nil {
				return w, nil, full
			}
			t, err := startVersion(rec)
			if err != nil {
				return w, nil, err
			}
			tmplActive = t
		}
		b := s.newBuild(by, w, rec.Build, req, tmplActive)
		auditBuild(entry, b)
		nw := s.afterBuild(w, b, req)
		nw.DesiredStateReason = c.Reason
		switch {
		case c.Dormant && nw.DormantAt == nil:
			now := s.now()
			nw.DormantAt = &now
		case c.To == workspace.Running && c.Reason == "":
			nw.DormantAt = nil // its owner's start wakes a dormant workspace
		}
		return nw, &b, nil
	})
	if err != nil || b == nil {
		return w, err
	}
	s.log.Info("build queued", "workspace", w.Name, "build", b.Number, "transition", b.Transition, "by", by.Username,
		"reason", b.Reason, "why", c.Reason, "state_source", b.StateSource)
	return w, nil
}

// Cancel cancels the workspace's build number (0: the latest).
func (s *Service) Cancel(ctx context.Context, u workspace.User, ref store.WorkspaceRef, number int) (build.Build, error) {
	w, err := s.st.Workspace(ctx, ref)
	if err == nil && !workspace.Visible(u, w) {
		err = ErrHidden
	}
	if err != nil {
		return build.Build{}, err
	}
	b, err := s.st.BuildByNumber(ctx, w.ID, number)
	if err != nil {
		return b, err
	}
	entry := audit.From(ctx)
	entry.SetTarget(audit.Workspace(w.ID, w.OwnerName, w.Name))
	entry.Set("build_number", b.Number)
	entry.Set("transition", string(b.Transition))
	rec, err := s.st.UpdateBuild(ctx, b.Job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		nb, err := build.Cancel(*rec.Build, u.Username, s.now())
		if err != nil {
			return rec, err
		}
		rec.Build = &nb
		rec.Workspace = applyState(rec.Workspace, nb, s.now())
		return rec, nil
	})
	if err != nil {
		return b, err
	}
	s.log.Info("build canceled", "workspace", w.Name, "owner", w.OwnerName, "build", rec.Build.Number, "by", u.Username, "status", rec.Build.Job.Status())
	if rec.Build.Job.Status() == build.Canceled {
		s.ended(*rec.Build)
	}
	msg := fmt.Sprintf("Canceled by %s.", u.Username)
	if rec.Build.Job.Status() == build.Canceling {
		msg += " Interrupting Terraform; it stops after the operations in progress and its state is kept."
	}
	s.appendLogs(ctx, b.Job.ID, build.StageCanceling, "warn", msg)
	return *rec.Build, nil
}

// PushState replaces the state of the workspace's latest build without a build (state push
// --no-build: seed, PUT /workspacebuilds/{id}/state). The state must be a Terraform state that
// follows the saved one (build.CheckPush: same lineage, greater serial), unless force; the check
// and the write are one transaction, so two pushes cannot both pass against the same saved state.
func (s *Service) PushState(ctx context.Context, u workspace.User, ref store.WorkspaceRef, state []byte, force bool) error {
	w, err := s.st.Workspace(ctx, ref)
	if err == nil && !workspace.Visible(u, w) {
		err = ErrHidden
	}
	if err != nil {
		return err
	}
	entry := audit.From(ctx)
	entry.SetTarget(audit.Workspace(w.ID, w.OwnerName, w.Name))
	entry.Set("with_build", false)
	entry.Set("force", force)
	if w.Backend != workspace.KindTerraform {
		return fmt.Errorf("workspace %q: %w", w.Name, ErrNotTerraform)
	}
	// A push that grows what the workspace keeps is held to the storage bound as a create is
	// (prune first, then refuse, writing nothing); one that shrinks it frees, and is never refused.
	if _, growth := s.pushGrowth(ctx, store.WorkspaceRef{ID: w.ID, OwnerID: w.OwnerID}, state); growth > 0 {
		if err := s.storageFor(ctx, w.OwnerID, growth, "this state"); err != nil {
			return err
		}
	}
	var meta build.StateMeta
	if err := s.st.PutBuildState(ctx, w.ID, state, func(saved []byte) error {
		m, err := build.CheckPush(saved, state, force)
		meta = m
		// What identifies the state, never the state (seed, "Audit Log Fields": provisioner_state
		// is not tracked).
		if m.Lineage != "" {
			entry.Set("serial", m.Serial)
			entry.Set("lineage", m.Lineage)
		}
		entry.Set("bytes", len(state))
		return err
	}); err != nil {
		return err
	}
	s.log.Info("state pushed without a build", "workspace", w.Name, "owner", w.OwnerName, "by", u.Username, "bytes", len(state),
		"serial", meta.Serial, "lineage", meta.Lineage, "force", force)
	return nil
}

// --- provisioners

// Acquire claims a pending job for workerID, waiting up to wait for one to be queued. It returns
// nil when none came.
func (s *Service) Acquire(ctx context.Context, workerID string, wait time.Duration) (*protocol.ProvisionerJob, error) {
	s.sawWorker(workerID)
	defer s.sawWorker(workerID)
	if err := s.abandoned(ctx, workerID); err != nil {
		return nil, err
	}
	wake, unsubscribe := s.st.SubscribeJobs()
	defer unsubscribe()
	timeout := s.opts.After(wait)
	for {
		b, ok, err := s.st.AcquireJob(ctx, workerID, s.now())
		if err != nil {
			return nil, err
		}
		if ok {
			return s.jobPayload(ctx, b)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, nil
		case <-wake:
		case <-s.opts.After(s.opts.PollInterval):
		}
	}
}

// abandoned re-queues the jobs a worker claimed and no longer runs. A worker asks for work only
// when it runs none, after adopting every run it left in its work directory (provisioner.Daemon,
// which does not ask while it cannot read that directory), so a job it still holds is one it lost
// before Terraform started: a daemon killed between claiming a job and starting it, or a claim
// whose answer never reached it (the connection, or the database, failed in between). Nothing
// ran, so the job goes back to the queue, once: a job lost a second time (a build that kills its
// provisioner before Terraform starts, such as an archive that exhausts its memory) fails, as a
// canceled one ends, keeping the state it started from. Worker ids must therefore be unique among
// live daemons (a lock on the work directory and the provisioner's token make them so).
// abandonAfter: a job heartbeated (or claimed) this recently is not taken for abandoned
// (provisioners heartbeat every 10 s).
const abandonAfter = 30 * time.Second

// stageRequeued is the log stage of the line that says a job was re-queued (abandoned).
const stageRequeued = "Requeued"

func (s *Service) abandoned(ctx context.Context, workerID string) error {
	ids, err := s.st.ActiveJobsOf(ctx, workerID)
	if err != nil || len(ids) == 0 {
		return err
	}
	for _, id := range ids {
		again, err := s.requeuedBefore(ctx, id)
		if err != nil {
			return fmt.Errorf("read the log of an abandoned job: %w", err)
		}
		var msg, stage, level string
		requeued := false
		rec, err := s.st.UpdateBuild(ctx, id, func(rec store.BuildRecord) (store.BuildRecord, error) {
			b := *rec.Build
			if b.Job.WorkerID != workerID || b.Job.CompletedAt != nil {
				return rec, errAlreadyDone
			}
			if last := b.Job.HeartbeatAt; last != nil && s.now().Sub(*last) < abandonAfter {
				// Heartbeated (or claimed) just now: a live daemon runs it — another process with
				// the same worker id (a misconfiguration), or this one's heartbeat racing its own
				// restart. Leave it to the next look, or to the reaper.
				return rec, errAlreadyDone
			}
			var nb build.Build
			switch {
			case b.Job.CanceledAt != nil:
				msg, stage, level = "Canceled: the provisioner that claimed this build restarted before it ran Terraform; nothing ran and the state is unchanged.", build.StageCanceling, "warn"
				nb = build.Finish(b, build.Outcome{Canceled: true}, s.now())
			case again:
				msg, stage, level = "The provisioner that claimed this build restarted before it ran Terraform, a second time after the build was queued again; "+
					"nothing ran and the state is unchanged. Look at the provisioner's log for why it stops, then start the build again.", "Abandoned", "error"
				nb = build.Finish(b, build.Outcome{Error: "the provisioner that claimed this build restarted before it ran Terraform, twice; nothing ran and the state is unchanged"}, s.now())
			default:
				msg, stage, level = "The provisioner that claimed this build restarted before it ran Terraform; nothing ran and the state is unchanged. The build is queued again.", stageRequeued, "warn"
				nb, requeued = requeue(b), true
			}
			nb.State = b.State
			rec.Build = &nb
			rec.Workspace = applyState(rec.Workspace, nb, s.now())
			return rec, nil
		})
		if errors.Is(err, errAlreadyDone) {
			continue
		}
		if err != nil {
			return fmt.Errorf("abandoned job: %w", err)
		}
		s.appendLogs(ctx, id, stage, level, msg)
		if requeued {
			s.log.Warn("build abandoned by its provisioner before Terraform started: queued again", "workspace", rec.Workspace.Name, "build", rec.Build.Number, "worker", workerID)
			continue
		}
		s.ended(*rec.Build)
		s.log.Warn("build abandoned by its provisioner", "workspace", rec.Workspace.Name, "build", rec.Build.Number, "worker", workerID, "status", rec.Build.Job.Status())
	}
	return nil
}

// requeue is build b, claimed and not run, back in the queue: no worker, not started.
func requeue(b build.Build) build.Build {
	b.Job.WorkerID, b.Job.StartedAt, b.Job.HeartbeatAt = "", nil, nil
	return b
}

// requeuedBefore reports whether the job was re-queued once already (its log says so).
func (s *Service) requeuedBefore(ctx context.Context, jobID string) (bool, error) {
	var after int64
	for {
		lines, err := s.st.JobLogs(ctx, jobID, after, 1000)
		if err != nil || len(lines) == 0 {
			return false, err
		}
		for _, l := range lines {
			if l.Stage == stageRequeued {
				return true, nil
			}
		}
		after = lines[len(lines)-1].ID
	}
}

func (s *Service) jobPayload(ctx context.Context, b build.Build) (*protocol.ProvisionerJob, error) {
	w, err := s.st.WorkspaceByID(ctx, b.WorkspaceID)
	if err != nil {
		return nil, fmt.Errorf("job %s: read workspace: %w", b.Job.ID, err)
	}
	v, err := s.st.TemplateVersionByID(ctx, b.TemplateVersionID)
	if err != nil {
		return nil, fmt.Errorf("job %s: read template version: %w", b.Job.ID, err)
	}
	s.log.Info("build started", "workspace", w.Name, "build", b.Number, "transition", b.Transition, "worker", b.Job.WorkerID)
	job := &protocol.ProvisionerJob{
		ID: b.Job.ID, WorkspaceID: w.ID, WorkspaceName: w.Name, BuildNumber: b.Number, Transition: string(b.Transition),
		Archive: v.Archive, State: b.State, Variables: Variables(w, b), LogLevel: b.LogLevel,
	}
	if s.opts.HelperURL != nil {
		if u := s.opts.HelperURL(); u != "" {
			token, err := s.mintAgentToken(ctx, w, b)
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", b.Job.ID, err)
			}
			job.AgentToken, job.AgentURL = token, u
		}
	}
	return job, nil
}

// Variables are the module variables Hangar offers a build (each passed only if the module
// declares it): the workspace's parameter values, then Hangar's own, which no parameter overrides: start_count (seed, "Workspace Transitions"), the workspace's id, name and owner, the
// transition, and the prebuild flags of the seed ("Prebuild State Isolation": is_prebuild on a
// prebuilt workspace's create, is_prebuild_claim on the start that hands it to its user).
func Variables(w workspace.Workspace, b build.Build) map[string]string {
	out := parameter.Map(w.Parameters)
	for k, v := range map[string]string{
		"start_count":          strconv.Itoa(b.Transition.StartCount()),
		"workspace_id":         w.ID,
		"workspace_name":       w.Name,
		"workspace_owner":      w.OwnerName,
		"workspace_transition": string(b.Transition),
		"is_prebuild":          strconv.FormatBool(b.IsPrebuild),
		"is_prebuild_claim":    strconv.FormatBool(b.IsPrebuildClaim),
		// The owner's profile, for the template's git identity and dotfiles.
		"workspace_owner_full_name":     w.OwnerFullName,
		"workspace_owner_email":         w.OwnerEmail,
		"workspace_owner_dotfiles_repo": w.OwnerDotfilesRepo,
	} {
		out[k] = v
	}
	return out
}

// ReservedVariables are the variables Hangar sets itself (Variables): no parameter may be named so.
var ReservedVariables = []string{"start_count", "workspace_id", "workspace_name", "workspace_owner", "workspace_transition",
	"is_prebuild", "is_prebuild_claim", "workspace_owner_full_name", "workspace_owner_email", "workspace_owner_dotfiles_repo"}

// VariableNames are the names of Variables: Hangar supplies these, so they are never parameters.
func VariableNames() map[string]bool {
	out := make(map[string]bool, len(ReservedVariables))
	for _, n := range ReservedVariables {
		out[n] = true
	}
	return out
}

// Heartbeat records that workerID runs the job and waits up to wait for it to be canceled; it
// answers at once if it is.
func (s *Service) Heartbeat(ctx context.Context, jobID, workerID string, wait time.Duration) (canceled bool, err error) {
	s.sawWorker(workerID)
	wake, unsubscribe := s.st.SubscribeJob(jobID)
	defer unsubscribe()
	j, err := s.st.Heartbeat(ctx, jobID, workerID, s.now())
	if err != nil {
		return false, err
	}
	if j.CanceledAt != nil {
		return true, nil
	}
	timeout := s.opts.After(wait)
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timeout:
			return false, nil
		case <-wake:
		}
		j, err := s.st.JobByID(ctx, jobID)
		if err != nil {
			return false, err
		}
		if j.CanceledAt != nil {
			return true, nil
		}
		if j.CompletedAt != nil {
			return false, fmt.Errorf("job %s: %w", jobID, store.ErrNotOwner)
		}
	}
}

// AppendLogs adds the worker's lines to the job's log.
func (s *Service) AppendLogs(ctx context.Context, jobID, workerID string, lines []protocol.LogLine) error {
	j, err := s.st.JobByID(ctx, jobID)
	if err != nil {
		return err
	}
	if j.WorkerID != workerID || j.CompletedAt != nil {
		return fmt.Errorf("job %s: %w", jobID, store.ErrNotOwner)
	}
	now := s.now()
	out := make([]store.LogLine, len(lines))
	for i, l := range lines {
		at := l.Time.UTC().Truncate(time.Microsecond)
		if at.IsZero() || at.After(now) {
			at = now
		}
		out[i] = store.LogLine{JobID: jobID, CreatedAt: at, Stage: noNUL(l.Stage), Level: noNUL(l.Level), Output: noNUL(l.Output)}
	}
	return s.st.AppendLogs(ctx, jobID, out)
}

// noNUL replaces NUL characters, which Postgres text cannot hold, in text a provisioner reports
// (Terraform's output may contain them).
func noNUL(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

func (s *Service) appendLogs(ctx context.Context, jobID, stage, level, output string) {
	err := s.st.AppendLogs(ctx, jobID, []store.LogLine{{JobID: jobID, CreatedAt: s.now(), Stage: stage, Level: level, Output: output}})
	if err != nil {
		s.log.Warn("cannot write the build log", "job", jobID, "err", err)
	}
}

// Finish records how the worker's job ended, under the state rules of build.Finish, and moves the
// workspace to the state the build leaves it in. A restart's stop that succeeded queues its start.
//
// An outcome that says nothing ran (o.NothingRan: a run adopted after the provisioner restarted,
// before Terraform's apply or destroy began) queues the build again instead, once, as for a job
// its worker lost before starting it (abandoned); a second time, or a canceled build, ends as o
// says.
func (s *Service) Finish(ctx context.Context, jobID, workerID string, o build.Outcome) error {
	o.Error = noNUL(o.Error)
	again := false
	if o.NothingRan && o.Error != "" && !o.Canceled {
		var err error
		if again, err = s.requeuedBefore(ctx, jobID); err != nil {
			return err
		}
	}
	requeued := false
	rec, err := s.st.UpdateBuild(ctx, jobID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		b := *rec.Build
		if b.Job.WorkerID != workerID || b.Job.CompletedAt != nil {
			return rec, fmt.Errorf("job %s: %w", jobID, store.ErrNotOwner)
		}
		if o.NothingRan && o.Error != "" && !o.Canceled && b.Job.CanceledAt == nil && !again {
			nb := requeue(b)
			rec.Build, requeued = &nb, true
			return rec, nil
		}
		nb := build.Finish(b, o, s.now())
		rec.Build = &nb
		rec.Workspace = applyState(rec.Workspace, nb, s.now())
		return rec, nil
	})
	if err != nil {
		return err
	}
	if requeued {
		s.appendLogs(ctx, jobID, stageRequeued, "warn", "The provisioner restarted before Terraform began to apply or destroy ("+o.Error+"); nothing changed and the state is unchanged. The build is queued again.")
		s.log.Warn("build adopted by its restarted provisioner before Terraform started: queued again", "workspace", rec.Workspace.Name, "build", rec.Build.Number, "worker", workerID)
		return nil
	}
	b := rec.Build
	s.log.Info("build finished", "workspace", rec.Workspace.Name, "build", b.Number, "transition", b.Transition,
		"status", b.Job.Status(), "actual_state", rec.Workspace.ActualState, "state_bytes", len(b.State),
		"state_captured_on_cancel", b.StateCapturedOnCancel)
	s.ended(*b)
	s.continueRestart(ctx, rec)
	return nil
}

// continueRestart queues the start of a restart whose stop succeeded.
func (s *Service) continueRestart(ctx context.Context, rec store.BuildRecord) {
	if rec.Workspace.DesiredState != workspace.RestartRequested || rec.Build.Transition != build.Stop || rec.Build.Job.Status() != build.Succeeded {
		return
	}
	s.queueRestartStart(ctx, rec.Workspace, *rec.Build)
}

func (s *Service) queueRestartStart(ctx context.Context, w workspace.Workspace, stop build.Build) {
	initiator := workspace.User{ID: stop.InitiatorID, Username: stop.InitiatorName, Admin: true}
	// The start runs at the stop's log level: a restart asked with --log-level debug is debugged whole.
	// An update's restart gives its new values now, with the start (Update).
	req := Request{Transition: build.Start, Reason: build.ReasonRestart, LogLevel: stop.LogLevel, Parameters: stop.StartParameters}
	if _, _, err := s.NewBuild(ctx, initiator, store.WorkspaceRef{ID: w.ID}, req); err != nil {
		s.log.Warn("restart: the stop succeeded but the start could not be queued; the reaper tries again", "workspace", w.Name, "owner", w.OwnerName, "err", err)
	}
}

// resumeRestarts queues the start of restarts whose stop succeeded but whose start was never
// queued (the server stopped in between, or queueing failed).
func (s *Service) resumeRestarts(ctx context.Context) error {
	ids, err := s.st.StalledRestarts(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		w, err := s.st.WorkspaceByID(ctx, id)
		if err != nil {
			return err
		}
		stop, err := s.st.BuildByNumber(ctx, w.ID, 0)
		if err != nil {
			return err
		}
		s.log.Info("restart: queueing the start its stop left pending", "workspace", w.Name, "owner", w.OwnerName, "stop_build", stop.Number)
		s.queueRestartStart(ctx, w, stop)
	}
	return nil
}

// Reap fails the jobs whose provisioner went silent (no heartbeat for HeartbeatTimeout) and the
// jobs nobody claimed (pending for PendingTimeout), each with a line in its log saying what happened
// and why. The build keeps the state it started from: the last good one. It returns how many it
// failed.
func (s *Service) Reap(ctx context.Context) (int, error) {
	now := s.now()
	if err := s.resumeRestarts(ctx); err != nil {
		return 0, err
	}
	hbCut, pendingCut := reapCuts(now, s.started, s.opts.HeartbeatTimeout, s.opts.PendingTimeout)
	if hbCut.IsZero() && pendingCut.IsZero() {
		return 0, nil
	}
	ids, err := s.st.StaleJobs(ctx, hbCut, pendingCut)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		var msg string
		rec, err := s.st.UpdateBuild(ctx, id, func(rec store.BuildRecord) (store.BuildRecord, error) {
			b := *rec.Build
			switch b.Job.Status() {
			case build.Pending:
				msg = fmt.Sprintf("no provisioner picked this build up in %s: is a provisioner running, and can it reach the server? The state is unchanged.", s.opts.PendingTimeout)
			case build.Running, build.Canceling:
				last := b.Job.CreatedAt
				if b.Job.HeartbeatAt != nil {
					last = *b.Job.HeartbeatAt
				}
				if !last.Before(hbCut) {
					return rec, errAlreadyDone // it heartbeated since StaleJobs looked
				}
				msg = fmt.Sprintf("the provisioner running this build stopped reporting (last heartbeat %s ago, the limit is %s): it was probably killed or lost its connection. "+
					"The workspace keeps the state this build started from; resources Terraform created since may need a new build to be adopted or cleaned up.",
					now.Sub(last).Round(time.Second), s.opts.HeartbeatTimeout)
			default:
				return rec, errAlreadyDone
			}
			nb := build.Finish(b, build.Outcome{Error: msg}, now)
			nb.State = b.State // keep the last good state
			rec.Build = &nb
			rec.Workspace = applyState(rec.Workspace, nb, now)
			return rec, nil
		})
		if errors.Is(err, errAlreadyDone) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("reap job %s: %w", id, err)
		}
		n++
		s.ended(*rec.Build)
		s.appendLogs(ctx, id, "Reaped", "error", msg)
		s.log.Warn("build failed by the reaper", "workspace", rec.Workspace.Name, "build", rec.Build.Number, "reason", msg)
	}
	return n, nil
}

var errAlreadyDone = errors.New("job already ended")

// reapCuts returns the times before which a running job's last heartbeat, and a pending job's
// creation, make it stale; a zero time judges none of that kind.
//
// Each kind is judged by its own clock, counted only while this server was up:
//   - A running job is judged only once the server has been up for a heartbeat timeout: during an
//     outage (or before a restart) nobody could heartbeat, so a provisioner gets a full heartbeat
//     timeout to come back.
//   - A pending job is judged by its age, counted from when it was created or from the server's
//     start, whichever is later: a job created while this server runs fails exactly
//     PendingTimeout after it was queued (the heartbeat timeout does not delay it, so a short
//     --build-pending-timeout holds from the start), and a job queued before a restart gets a full
//     PendingTimeout after it, since no provisioner could claim it from a server that was down.
//     Both amount to a creation cut of now - PendingTimeout once the server has been up that long.
func reapCuts(now, started time.Time, heartbeatTimeout, pendingTimeout time.Duration) (hbCut, pendingCut time.Time) {
	up := now.Sub(started)
	if up >= heartbeatTimeout {
		hbCut = now.Add(-heartbeatTimeout)
	}
	if up >= pendingTimeout {
		pendingCut = now.Add(-pendingTimeout)
	}
	return hbCut, pendingCut
}

// RunReaper reaps every interval until ctx ends.
func (s *Service) RunReaper(ctx context.Context, interval time.Duration) {
	for {
		if _, err := s.Reap(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reaper", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.opts.After(interval):
		}
	}
}
