// Package build is the domain of the Terraform backend (../shared/seeds/terraform-state-management.md):
// workspace builds (start, stop, delete), the provisioner jobs that run them, where a build's
// Terraform state comes from, when it is written, and what a workspace's desired and actual states
// are while its builds run. It is pure: no SQL, no HTTP, no Terraform.
package build

import (
	"fmt"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Transition is what a build does to a workspace (seed, "Workspace Transitions").
type Transition string

const (
	Start  Transition = "start"  // terraform apply, start_count = 1
	Stop   Transition = "stop"   // terraform apply, start_count = 0
	Delete Transition = "delete" // terraform destroy
)

// ParseTransition parses a transition named by a user.
func ParseTransition(s string) (Transition, error) {
	switch t := Transition(s); t {
	case Start, Stop, Delete:
		return t, nil
	}
	return "", fmt.Errorf("unknown transition %q: must be start, stop or delete", s)
}

// StartCount is the module variable start_count of a transition (1 on start, 0 otherwise).
func (t Transition) StartCount() int {
	if t == Start {
		return 1
	}
	return 0
}

// Reason says why a build exists.
type Reason string

const (
	ReasonInitiator Reason = "initiator" // a user asked
	ReasonRestart   Reason = "restart"   // the start that follows a restart's stop
	// The lifecycle executor's reasons (package lifecycle; the seed's "Autobuild Operations").
	ReasonAutostart  Reason = "autostart"   // the workspace's autostart schedule
	ReasonAutostop   Reason = "autostop"    // its TTL after start or last use passed
	ReasonFailureTTL Reason = "failure_ttl" // it stayed Failed for its policy's failure TTL
	ReasonDormancy   Reason = "dormancy"    // nobody used it for the dormancy threshold
	ReasonAutodelete Reason = "autodelete"  // it stayed dormant for the auto-delete period
	ReasonMaxActive  Reason = "max_active"  // it ran for its policy's max active lifetime
	ReasonMaxStopped Reason = "max_stopped" // it stayed stopped for its policy's max stopped lifetime
	// ReasonPrebuild: the prebuild reconciler keeps a preset's pool (package prebuilds): the create
	// of a prebuilt workspace, or the delete of one no longer wanted.
	ReasonPrebuild Reason = "prebuild"
)

// JobStatus is a provisioner job's status, derived from its timestamps and error as the reference
// does (anchors.md, "Coder: builds, jobs and state").
type JobStatus string

const (
	Pending   JobStatus = "pending"
	Running   JobStatus = "running"
	Succeeded JobStatus = "succeeded"
	Canceling JobStatus = "canceling"
	Canceled  JobStatus = "canceled"
	Failed    JobStatus = "failed"
)

// Active reports whether a job in this status is not finished yet.
func (s JobStatus) Active() bool { return s == Pending || s == Running || s == Canceling }

// Job is a provisioner job: one build run by one provisioner.
type Job struct {
	ID      string
	BuildID string
	// WorkerID is the provisioner that claimed the job; only it may report on the job.
	WorkerID    string
	CreatedAt   time.Time
	StartedAt   *time.Time
	HeartbeatAt *time.Time
	CanceledAt  *time.Time
	CompletedAt *time.Time
	// Error is why the job failed ("" if it did not); for a canceled job, what the cancel left.
	Error string
}

// Status derives the job's status.
func (j Job) Status() JobStatus {
	switch {
	case j.CanceledAt != nil && j.CompletedAt != nil:
		return Canceled
	case j.CanceledAt != nil:
		return Canceling
	case j.CompletedAt != nil && j.Error != "":
		return Failed
	case j.CompletedAt != nil:
		return Succeeded
	case j.StartedAt != nil:
		return Running
	}
	return Pending
}

// StateSource says where a build's initial Terraform state came from (seed, "State Source
// Resolution").
type StateSource string

const (
	SourceNone     StateSource = "none"     // the first build: empty
	SourcePrevious StateSource = "previous" // the previous build's
	SourceExplicit StateSource = "explicit" // given with the request (state push)
	SourceOrphan   StateSource = "orphan"   // orphan delete: no state, no Terraform
)

// Build is one transition of a workspace.
type Build struct {
	ID                string
	WorkspaceID       string
	Number            int
	Transition        Transition
	Reason            Reason
	InitiatorID       string
	InitiatorName     string // filled on reads
	TemplateVersionID string
	// State is the Terraform state: the input until the job ends, then what the rules of Finish
	// wrote. nil means none.
	State []byte
	// HasState says the build has a state, on reads that leave State out (lists).
	HasState    bool
	StateSource StateSource
	// StateCapturedOnCancel marks state that Terraform wrote when it was interrupted by a cancel:
	// what it had done so far, kept so that nothing it created is forgotten.
	StateCapturedOnCancel bool
	// StatePruned says the build's state was removed because newer builds followed it (only the
	// latest builds of a workspace keep theirs; store.KeptBuildStates).
	StatePruned bool
	Orphan      bool
	// LogLevel is the Terraform log level the build runs with: "" (info) or LogDebug (TF_LOG=DEBUG
	// for this build only; seed, "Debug Logging").
	LogLevel string
	// IsPrebuild marks the create of a prebuilt workspace, IsPrebuildClaim the start that hands
	// one to its user (seed, "Prebuild State Isolation"): the module sees them as the variables
	// is_prebuild and is_prebuild_claim, and the hangar_workspace data source as attributes.
	IsPrebuild      bool
	IsPrebuildClaim bool
	// StartParameters, on the stop of an update's restart, are the values the start that follows
	// takes (nil: the workspace's own). The stop runs with the workspace's values, which change
	// only when that start is queued: a stop that fails changes no value.
	StartParameters []workspace.ParameterValue
	CreatedAt       time.Time
	Job             Job
}

// LogDebug is the log level of a build whose Terraform runs with TF_LOG=DEBUG.
const LogDebug = "debug"

// ParseLogLevel reads a requested log level: "" and "info" are the normal level (""), "debug" is
// LogDebug.
func ParseLogLevel(s string) (string, error) {
	switch s {
	case "", "info":
		return "", nil
	case LogDebug:
		return LogDebug, nil
	}
	return "", fmt.Errorf("must be \"info\" or \"debug\", got %q", s)
}

// InitialState resolves the state a new build starts from, in the seed's order: orphan → none,
// explicit → given, otherwise the previous build's (none for the first build).
func InitialState(orphan bool, explicit []byte, previous *Build) ([]byte, StateSource) {
	switch {
	case orphan:
		return nil, SourceOrphan
	case explicit != nil:
		return explicit, SourceExplicit
	case previous == nil:
		return nil, SourceNone
	}
	return previous.State, SourcePrevious
}

// Errors of the build rules; the server maps them to 409.
var (
	ErrBuildActive = errs.New(errs.Conflict, "a build of this workspace is still running")
	ErrDeleted     = errs.New(errs.Conflict, "the workspace is deleted")
	ErrNotActive   = errs.New(errs.Conflict, "the build is not running")
)

// CheckNew says whether a workspace whose latest build is last may get a new build: not while one
// runs, and nothing after a successful delete.
func CheckNew(last *Build, t Transition) error {
	if last == nil {
		return nil
	}
	st := last.Job.Status()
	if st.Active() {
		return fmt.Errorf("%w: build #%d (%s) is %s; wait for it or cancel it", ErrBuildActive, last.Number, last.Transition, st)
	}
	if last.Transition == Delete && st == Succeeded {
		return fmt.Errorf("%w: build #%d deleted it", ErrDeleted, last.Number)
	}
	return nil
}

// Desired is the workspace's desired state once a build of transition t is asked for.
func Desired(t Transition) workspace.State {
	switch t {
	case Start:
		return workspace.Running
	case Stop:
		return workspace.Stopped
	}
	return workspace.Terminated
}

// Actual is the workspace's actual state while, and after, its latest build runs: Starting,
// Stopping or Terminating while it runs, Running, Stopped or Terminated when it succeeded, Failed
// when it failed and Canceled when it was canceled (either way the workspace is not in the state
// its owner asked for; the error says why).
func Actual(b Build) workspace.State {
	switch b.Job.Status() {
	case Pending, Running, Canceling:
		switch b.Transition {
		case Start:
			return workspace.Starting
		case Stop:
			return workspace.Stopping
		}
		return workspace.Terminating
	case Succeeded:
		switch b.Transition {
		case Start:
			return workspace.Running
		case Stop:
			return workspace.Stopped
		}
		return workspace.Terminated
	case Canceled:
		return workspace.Canceled
	}
	return workspace.Failed
}

// StageCanceling is the stage of the server's notice, in a build's log, that the build was
// canceled (by whom, and what happens next). It is a note on the build's current stage, which the
// provisioner's interrupt then ends, not a stage of its own.
const StageCanceling = "Canceling"

// ErrorType is the workspace error type of a failed build; CanceledErrorType of a canceled one.
const (
	ErrorType         = "build"
	CanceledErrorType = "canceled"
)

// Outcome is what a provisioner reports at the end of a job.
type Outcome struct {
	// Canceled says Terraform was interrupted because of a cancel; Error is then what the interrupt
	// left (or empty if it finished anyway).
	Canceled bool
	Error    string
	// State is the Terraform state after the run, nil if Terraform produced none.
	State []byte
	// NothingRan (with Error) says Terraform never started changing resources: a run its
	// provisioner adopted after a restart that had not reached apply or destroy. The server may
	// queue the build again instead of failing it (tfbackend.Service.Finish).
	NothingRan bool
}

// Finish applies the seed's state rules to a build whose job ends with o, at now, and returns the
// build to write:
//   - success: the state is written (seed, "State Update on Completion");
//   - failure: the state is written only if Terraform produced one (seed, "State Update on Failure");
//   - cancel: Hangar differs from the seed (which keeps the previous state, "The Stale State
//     Condition"): state Terraform wrote after a graceful interrupt is kept and marked
//     captured-on-cancel, so no resource it created is forgotten; without one the input state stays.
func Finish(b Build, o Outcome, now time.Time) Build {
	b.Job.CompletedAt = &now
	switch {
	case o.Canceled || b.Job.CanceledAt != nil:
		if b.Job.CanceledAt == nil {
			b.Job.CanceledAt = &now
		}
		// Cancel recorded who ("canceled by alice"); add how Terraform stopped.
		switch {
		case b.Job.Error == "":
			b.Job.Error = o.Error
		case o.Error != "":
			b.Job.Error += "; " + o.Error
		}
		if b.Job.Error == "" {
			b.Job.Error = "canceled"
		}
		if o.State != nil {
			b.State, b.StateCapturedOnCancel = o.State, true
		}
	case o.Error != "":
		b.Job.Error = o.Error
		if o.State != nil {
			b.State = o.State
		}
	default:
		b.Job.Error = ""
		b.State = o.State
	}
	return b
}

// Cancel marks a build's job canceled at now. A pending job ends at once (nothing ran, the state is
// unchanged); a running one becomes canceling until its provisioner reports how Terraform stopped.
func Cancel(b Build, by string, now time.Time) (Build, error) {
	st := b.Job.Status()
	if !st.Active() {
		return b, fmt.Errorf("%w: build #%d is %s", ErrNotActive, b.Number, st)
	}
	if st == Canceling {
		return b, nil
	}
	b.Job.CanceledAt = &now
	b.Job.Error = "canceled by " + by
	if st == Pending {
		b.Job.CompletedAt = &now
		b.Job.Error += " before a provisioner picked it up"
	}
	return b, nil
}

// WorkspaceAfter returns the workspace row as the build leaves it: desired from the transition,
// actual from the job, and the error of a failed or canceled build.
func WorkspaceAfter(w WorkspaceState, b Build, now time.Time) WorkspaceState {
	actual := Actual(b)
	if actual != w.Actual {
		w.Actual, w.ActualAt = actual, now
	}
	w.ErrorType, w.ErrorMessage = "", ""
	switch actual {
	case workspace.Canceled:
		// The job's error is "canceled by alice", then what the interrupt left; what the user may
		// do next comes before the latter.
		who, left, _ := strings.Cut(b.Job.Error, "; ")
		w.ErrorType = CanceledErrorType
		w.ErrorMessage = fmt.Sprintf("build #%d (%s) was %s; start, stop or delete the workspace", b.Number, b.Transition, who)
		if left != "" {
			w.ErrorMessage += ". " + left
		}
	case workspace.Failed:
		w.ErrorType = ErrorType
		w.ErrorMessage = fmt.Sprintf("build #%d (%s) failed: %s", b.Number, b.Transition, b.Job.Error)
	}
	return w
}

// WorkspaceState is the part of a workspace row builds change.
type WorkspaceState struct {
	Desired      workspace.State
	Actual       workspace.State
	ActualAt     time.Time
	ErrorType    string
	ErrorMessage string
}
