package protocol

import "time"

// The provisioner ⇄ server protocol (../shared/seeds/terraform-state-management.md): a provisioner
// daemon, authenticated by its token, claims a job, heartbeats while Terraform runs (and learns of a
// cancel from the answer), streams its log, and reports the outcome with the state Terraform wrote.
// The in-process provisioner of `hangar server` speaks the same protocol through a Go interface
// (provisioner.Coordinator) instead of HTTP.

// Provisioner endpoints. {id} is the job id.
const (
	ProvisionerAcquirePath   = "/api/v1/provisioner/acquire"
	ProvisionerHeartbeatPath = "/api/v1/provisioner/jobs/{id}/heartbeat"
	ProvisionerLogsPath      = "/api/v1/provisioner/jobs/{id}/logs"
	ProvisionerFinishPath    = "/api/v1/provisioner/jobs/{id}/finish"
)

// MaxProvisionerBodyBytes caps a provisioner request: a finish carries the state (up to
// MaxStateBytes, base64 in JSON).
const MaxProvisionerBodyBytes = MaxStateBytes/3*4 + 1<<20

// MaxStateBytes caps a Terraform state Hangar stores, whoever sends it: a provisioner's finish, a
// user's build or state push (the SDK and the CLI check it too). Declared once, here.
const MaxStateBytes = 64 << 20

// AcquireRequest asks for a job; the server holds the request up to WaitSeconds (at most 60) for one
// to be queued.
type AcquireRequest struct {
	// WorkerID names this daemon process; it must send it with every call about the job.
	WorkerID    string `json:"worker_id"`
	WaitSeconds int    `json:"wait_seconds"`
}

// AcquireResponse is the job claimed, or no job (Job nil) when none was queued in time.
type AcquireResponse struct {
	Job *ProvisionerJob `json:"job"`
}

// ProvisionerJob is everything a provisioner needs to run one build.
type ProvisionerJob struct {
	ID            string `json:"id"`
	WorkspaceID   string `json:"workspace_id"`
	WorkspaceName string `json:"workspace_name"`
	BuildNumber   int    `json:"build_number"`
	Transition    string `json:"transition"`
	// Archive is the template version's module (gzipped tar).
	Archive []byte `json:"archive"`
	// State is the Terraform state the build starts from (absent: none).
	State []byte `json:"state,omitempty"`
	// Variables are offered to the module; the provisioner passes those it declares.
	Variables map[string]string `json:"variables"`
	// AgentToken is the token minted for this build's workspace helper (hangar_agent), and AgentURL
	// the server's URL the helper connects out to; both reach the provider through its environment.
	AgentToken string `json:"agent_token,omitempty"`
	AgentURL   string `json:"agent_url,omitempty"`
	// LogLevel is "debug" for a build whose terraform runs with TF_LOG=DEBUG, its debug lines
	// shipped with the log (level "debug"); absent otherwise. The provisioner protocol has no
	// version: a provisioner that predates the field ignores it and runs the build at the normal
	// level.
	LogLevel string `json:"log_level,omitempty"`
}

// HeartbeatRequest says the worker still runs the job; the server answers at once if the job is
// canceled, otherwise after up to WaitSeconds (at most 60), so a cancel reaches the worker at once.
type HeartbeatRequest struct {
	WorkerID    string `json:"worker_id"`
	WaitSeconds int    `json:"wait_seconds"`
}

// HeartbeatResponse says whether the job's build was canceled.
type HeartbeatResponse struct {
	Canceled bool `json:"canceled"`
}

// LogsRequest appends lines to the job's log.
type LogsRequest struct {
	WorkerID string    `json:"worker_id"`
	Lines    []LogLine `json:"lines"`
}

// MaxLogLinesPerRequest caps LogsRequest.Lines.
const MaxLogLinesPerRequest = 1000

// LogLine is one line of a build log.
type LogLine struct {
	// Time is when the provisioner saw the line (the server takes its own time if it is absent
	// or later than the server's).
	Time   time.Time `json:"time,omitempty"`
	Stage  string    `json:"stage"`
	Level  string    `json:"level"`
	Output string    `json:"output"`
}

// FinishRequest reports how the job ended.
type FinishRequest struct {
	WorkerID string `json:"worker_id"`
	// Canceled: Terraform was interrupted because the build was canceled.
	Canceled bool `json:"canceled,omitempty"`
	// Error is why the job failed ("" on success).
	Error string `json:"error,omitempty"`
	// State is the Terraform state after the run; absent when Terraform produced none.
	State []byte `json:"state,omitempty"`
	// NothingRan (with Error): Terraform never started changing resources (a run adopted after the
	// provisioner restarted, before apply or destroy). The server queues the build again, once;
	// a server that does not know the field fails it with Error.
	NothingRan bool `json:"nothing_ran,omitempty"`
}
