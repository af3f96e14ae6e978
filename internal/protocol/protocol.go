// Package protocol holds the wire types of the agent ⇄ server reconcile protocol
// (../shared/seeds/workspaces-architecture-kubernetes.md, "Types of messages"). Server and agent both
// import it; nothing else defines these shapes.
package protocol

import "time"

// Version is the protocol version. Bump it, with a line in the changelog below, on any change an
// older peer would misread.
//
//	1: reconcile request/response of the seed; trimmed deployment info.
//	2: workspace_agent_infos[].pod_failure; GET /api/v1/agent/info and /api/v1/agent/wait. All
//	   additive: a version-1 agent works with a version-2 server.
//	   (Unchanged on the wire, in the same version: `name` is the workspace's cluster name, which
//	   is its name for workspaces created before names became per owner. The agent only ever echoes
//	   the value the server generated into its objects' hangar.dev/workspace-name label.)
//	3: GET /api/v1/agent/info also says the agent's dns_zone and proxy_url_scheme; the access
//	   proxy's endpoints (ProxyExchangePath, ProxyCheckPath), which `hangar proxy` calls with its
//	   agent's token. Additive.
//	4: the access proxy binds a sign-in to the browser: /proxy/authorize takes nonce= and
//	   ProxyExchangeRequest has nonce, both required. Not additive for the proxy: a version-3
//	   proxy's sign-ins are refused (400), so upgrade the server and the proxies together.
//	   Agents are unaffected.
//	5: GET /api/v1/proxy/revocations (ProxyRevocationsPath): a proxy long-polls it and rechecks
//	   its open SSH connections as soon as access was taken away anywhere. Additive: a version-4
//	   proxy rechecks on its interval only; a version-5 proxy facing a version-4 server (404) too.
//	6: ProxyCheckRequest and ProxySSHCheckRequest have client_address (the end client's IP), and
//	   the server may answer a check reason rate_limited with retry_after: failed tokens sent
//	   through a proxy count against the client's address in the server's rate limit of failed
//	   authentications. Additive both ways: a version-5 proxy sends no address (nothing is
//	   counted, never rate_limited); a version-5 server ignores the field.
//	7: WorkspaceRailsInfo has traceparent: the W3C trace context of the change whose config the
//	   agent is sent, when the server traces and knows it. Additive both ways: an older agent
//	   ignores it; an older server sends none.
//	8: WorkspaceAgentInfo has startup_steps: the image build's phases and the project clone of
//	   the workspace's pod, each with its state, times, latest progress line and the tail of its
//	   log; a workspace's helper reports its postStart commands the same way (StartupStepPath).
//	   Additive both ways: an older server ignores them (and answers the helper's report 404,
//	   which the helper logs); an older agent or helper sends none.
//	9: WorkspaceAgentInfo has pod_alerts (a container killed for lack of memory, the pod
//	   evicted), and a workspace's helper reports its resources and custom metadata
//	   (MetadataPath). Additive both ways: an older server ignores the alerts (and answers the
//	   helper's report 404, which the helper logs once); an older agent or helper sends none.
const Version = 9

// ReconcilePath is the endpoint agents POST to, authenticated by the agent's bearer token.
const ReconcilePath = "/api/v1/agent/reconcile"

// MaxReconcileBodyBytes caps a reconcile request body. A full reconcile of 10,000 workspaces with
// trimmed deployment info is about 4 MiB.
const MaxReconcileBodyBytes = 32 << 20

// UpdateType tells whether the agent reports every workspace it manages (full) or only what changed.
type UpdateType string

const (
	UpdateFull    UpdateType = "full"
	UpdatePartial UpdateType = "partial"
)

// Termination progress values an agent reports for a workspace it is deleting.
const (
	TerminationTerminating = "Terminating"
	TerminationTerminated  = "Terminated"
)

// ErrorTypeApplier marks an error from applying Kubernetes resources (tracking-applier-errors.md).
const (
	ErrorTypeApplier = "applier"
	ErrorTypeUnknown = "unknown"
)

// ReconcileRequest is what an agent sends.
type ReconcileRequest struct {
	UpdateType          UpdateType           `json:"update_type"`
	WorkspaceAgentInfos []WorkspaceAgentInfo `json:"workspace_agent_infos"`
}

// WorkspaceAgentInfo is what an agent knows about one workspace. Name is the workspace's cluster
// name (the hangar.dev/workspace-name label of its objects, and their name): unique in the cluster,
// unlike the name its owner gave it, which another owner may give too.
type WorkspaceAgentInfo struct {
	Name                    string          `json:"name"`
	Namespace               string          `json:"namespace"`
	LatestK8sDeploymentInfo *DeploymentInfo `json:"latest_k8s_deployment_info,omitempty"`
	TerminationProgress     string          `json:"termination_progress,omitempty"`
	ErrorDetails            *ErrorDetails   `json:"error_details,omitempty"`
	// PodFailure says why the workspace's pod cannot run (crash loop, image pull, unschedulable),
	// sent with the Deployment, so that the user sees Failed and why within seconds instead of after
	// the Deployment's progress deadline.
	PodFailure *PodFailure `json:"pod_failure,omitempty"`
	// StartupSteps are the steps the workspace's pod runs before it can be ready, as far as the
	// agent sees them: its init containers that are steps (AgentSteps), in order. Sent when they changed since the server last answered; an empty
	// log does not erase the log the server has of the same step run (same started_at).
	StartupSteps []StartupStep `json:"startup_steps,omitempty"`
	// PodAlerts are what happened to the workspace's pod that its owner must hear of although it
	// runs on (docs/decisions.md, "Inside the workspace: metadata and resource alerts"): a
	// container the kernel killed for lack of memory (restarted since), the pod evicted. Sent
	// when they changed since the server last answered; each is recorded once.
	PodAlerts []PodAlert `json:"pod_alerts,omitempty"`
}

// The kinds of a PodAlert (the server's workspace alerts of the same names).
const (
	PodAlertOOMKilled = "oom-killed"
	PodAlertEvicted   = "evicted"
)

// MaxPodAlerts bounds a workspace's pod alerts in one report.
const MaxPodAlerts = 8

// PodAlert is one event of a workspace's pod: its kind, what it is about (a container's name, the
// pod's), when it happened and the words Kubernetes gave.
type PodAlert struct {
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	At      time.Time `json:"at"`
	Message string    `json:"message,omitempty"`
}

// The startup steps: those an agent reports (the image build's three init containers and the
// project clone), then the one the workspace's helper reports (its postStart commands).
const (
	StepImagePrepare = "image-prepare"
	StepImageBuild   = "image-build"
	StepImagePush    = "image-push"
	StepProjectClone = "project-clone"
	StepPostStart    = "post-start"
	// StepPostCreate is the commands that run once per workspace, at its first start (a
	// devcontainer.json's onCreate, updateContent and postCreate commands), before postStart's.
	StepPostCreate = "post-create"
	// StepDotfiles is the install of the owner's dotfiles, which the helper reports on its own
	// path (DotfilesStatusPath): the server shows it as a step.
	StepDotfiles = "dotfiles"
)

// StartupStepOrder is the order the startup steps run in, and are shown in.
var StartupStepOrder = []string{StepImagePrepare, StepImageBuild, StepImagePush, StepProjectClone, StepPostCreate, StepPostStart, StepDotfiles}

// AgentSteps are the steps an agent reports; HelperSteps those a workspace's helper reports.
var (
	AgentSteps  = []string{StepImagePrepare, StepImageBuild, StepImagePush, StepProjectClone}
	HelperSteps = []string{StepPostCreate, StepPostStart}
)

// The states of a StartupStep.
const (
	StepPending = "pending" // not started yet
	StepRunning = "running"
	StepDone    = "done"
	StepFailed  = "failed"
)

// StartupStep is one step of a workspace's startup: its state, when it started and ended, the
// latest line that says how far it is ("step 3/7: RUN make"), and the last lines of its log.
type StartupStep struct {
	Name      string     `json:"name"`
	State     string     `json:"state"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Detail    string     `json:"detail,omitempty"`
	Log       string     `json:"log,omitempty"`
}

// PodFailure is a pod-level reason a workspace cannot run.
type PodFailure struct {
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// ErrorDetails carries an error the agent met while applying a workspace's configuration.
type ErrorDetails struct {
	ErrorType    string `json:"error_type"`
	ErrorMessage string `json:"error_message"`
}

// DeploymentInfo is the part of a Kubernetes apps/v1 Deployment the server needs. Its JSON shape is
// that of the Deployment, so a whole Deployment decodes into it: the server ignores unknown fields in
// reconcile requests.
type DeploymentInfo struct {
	Metadata DeploymentMetadata `json:"metadata"`
	Spec     *DeploymentSpec    `json:"spec,omitempty"`
	Status   *DeploymentStatus  `json:"status,omitempty"`
}

// DeploymentMetadata is the Deployment's metadata, trimmed.
type DeploymentMetadata struct {
	ResourceVersion string `json:"resourceVersion"`
	Generation      int64  `json:"generation,omitempty"`
}

// DeploymentSpec is the Deployment's spec, trimmed.
type DeploymentSpec struct {
	Replicas *int32 `json:"replicas,omitempty"`
}

// DeploymentStatus is the Deployment's status, trimmed.
type DeploymentStatus struct {
	ObservedGeneration  int64                 `json:"observedGeneration,omitempty"`
	Replicas            int32                 `json:"replicas,omitempty"`
	UpdatedReplicas     int32                 `json:"updatedReplicas,omitempty"`
	ReadyReplicas       int32                 `json:"readyReplicas,omitempty"`
	AvailableReplicas   int32                 `json:"availableReplicas,omitempty"`
	UnavailableReplicas int32                 `json:"unavailableReplicas,omitempty"`
	Conditions          []DeploymentCondition `json:"conditions,omitempty"`
}

// DeploymentCondition is one status condition of a Deployment.
type DeploymentCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ReconcileResponse is what the server answers.
type ReconcileResponse struct {
	WorkspaceRailsInfos []WorkspaceRailsInfo `json:"workspace_rails_infos"`
	Settings            Settings             `json:"settings"`
}

// WorkspaceRailsInfo is what the server tells the agent about one workspace. ConfigToApply is a
// multi-document YAML stream; empty means apply nothing. DeploymentResourceVersion echoes the last
// resourceVersion the server persisted (empty if the agent never reported a Deployment). Name is
// the workspace's cluster name, as in WorkspaceAgentInfo.
type WorkspaceRailsInfo struct {
	Name                      string            `json:"name"`
	Namespace                 string            `json:"namespace"`
	DesiredState              string            `json:"desired_state"`
	ActualState               string            `json:"actual_state"`
	DeploymentResourceVersion string            `json:"deployment_resource_version"`
	ConfigToApply             string            `json:"config_to_apply"`
	ImagePullSecrets          []ImagePullSecret `json:"image_pull_secrets"`
	// TraceParent is the W3C traceparent of the user's (or the server's) request that last changed
	// the workspace's desired state, sent with a config to apply when the answering replica traced
	// that request: the agent's apply joins that trace (internal/tracing).
	TraceParent string `json:"traceparent,omitempty"`
}

// ImagePullSecret names a Secret the agent copies into the workspace namespace.
type ImagePullSecret struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Settings tells the agent how often to reconcile.
type Settings struct {
	FullReconciliationIntervalSeconds    int `json:"full_reconciliation_interval_seconds"`
	PartialReconciliationIntervalSeconds int `json:"partial_reconciliation_interval_seconds"`
}

// InfoPath is where an agent learns who it is (GET, agent token): the id it selects its Deployments
// by, its name, and its reconcile settings.
const InfoPath = "/api/v1/agent/info"

// AgentInfo answers InfoPath.
type AgentInfo struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Settings Settings `json:"settings"`
	// DNSZone and ProxyURLScheme are the agent config's: where its workspaces are served, and
	// whether its proxy serves them over https or http.
	DNSZone        string `json:"dns_zone,omitempty"`
	ProxyURLScheme string `json:"proxy_url_scheme,omitempty"`
}

// WaitPath is where an agent long-polls for changes (GET, agent token, ?timeout_seconds=N).
const WaitPath = "/api/v1/agent/wait"

// WaitResponse answers WaitPath: Pending says a partial reconcile now would get something.
type WaitResponse struct {
	Pending bool `json:"pending"`
}
