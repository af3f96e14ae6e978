// Package sdk holds the user API's wire types and a Go client for it. The server, the CLI and tests
// share these types; the server converts store rows to them in one place (server/convert.go).
package sdk

import (
	"encoding/json"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// Workspace is a workspace as the user API shows it.
type Workspace struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Owner string `json:"owner"`
	Agent string `json:"agent"`
	// KubeName (kubernetes) names the workspace's objects in the cluster, and its namespace after
	// "hangar-" when it has one of its own: unique to this workspace.
	KubeName string `json:"kube_name,omitempty"`
	// Definition (kubernetes) is what the workspace was defined with: "devfile" or
	// "devcontainer.json"; in the answers to create and to a read of one workspace.
	Definition string `json:"definition,omitempty"`
	// Repository (kubernetes) is the repository the workspace was created from, and the commit
	// and file its definition was last read at (hangar update reads it again); absent for a
	// workspace not made from a repository.
	Repository *WorkspaceRepository `json:"repository,omitempty"`
	// Backend is "kubernetes" (an agent runs it) or "terraform" (builds run it).
	Backend  string `json:"backend"`
	Template string `json:"template,omitempty"`
	// Preset is the preset the workspace was made from (claimed or built), if any.
	Preset                    string          `json:"preset,omitempty"`
	Namespace                 string          `json:"namespace"`
	DesiredState              string          `json:"desired_state"`
	ActualState               string          `json:"actual_state"`
	DesiredStateUpdatedAt     *time.Time      `json:"desired_state_updated_at"`
	ActualStateUpdatedAt      *time.Time      `json:"actual_state_updated_at"`
	RespondedToAgentAt        *time.Time      `json:"responded_to_agent_at"`
	DeploymentResourceVersion *string         `json:"deployment_resource_version"`
	Error                     *WorkspaceError `json:"error"`
	URL                       string          `json:"url"`
	// AppsURL, for a Terraform workspace when the server serves apps, is the address of a port of
	// its machine in the browser, with {port} for the port.
	AppsURL string `json:"apps_url,omitempty"`
	// CreatedAt is when the workspace became its owner's: its create, or its claim (ClaimedAt).
	CreatedAt time.Time `json:"created_at"`
	// ClaimedAt is set when the workspace was a prebuilt one, claimed by its owner at that time
	// (create with a preset); its first builds are the prebuild's, older than CreatedAt.
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	// LastActivityAt is when the workspace was last used through the access proxy (an SSH session
	// or forward, an HTTP request), as its proxies reported it; null when never.
	LastActivityAt *time.Time `json:"last_activity_at"`
	// Schedule is the workspace's own lifecycle settings.
	Schedule WorkspaceSchedule `json:"schedule"`
	// DesiredStateReason says why the desired state is what it is when the lifecycle executor set
	// it ("autostop: ..."); empty for a user's change.
	DesiredStateReason string `json:"desired_state_reason,omitempty"`
	// DormantAt is when the workspace went dormant (no use for its policy's dormancy threshold);
	// null when it is not. Starting it wakes it.
	DormantAt *time.Time `json:"dormant_at"`
	// TemplateVersion is the template version of the workspace's latest build (terraform);
	// Outdated says it is not the template's active version (hangar update moves it).
	TemplateVersion int  `json:"template_version,omitempty"`
	Outdated        bool `json:"outdated,omitempty"`
	// Parameters are the workspace's parameter values (terraform); sensitive ones without value.
	Parameters []WorkspaceParameter `json:"parameters,omitempty"`
	// Automation is what the lifecycle executor will do, in the answers about one workspace and in
	// lists.
	Automation *WorkspaceAutomation `json:"automation,omitempty"`
	// Helper is the status of the workspace's helper (SSH, apps): reachable or not, since when,
	// its last error, and a problem when it should be reachable and is not.
	Helper WorkspaceHelper `json:"helper"`
	// Endpoints (kubernetes, in the answer about one workspace) are the devfile's declared
	// endpoints, with the URL the access proxy serves each public one at.
	Endpoints []WorkspaceEndpoint `json:"endpoints,omitempty"`
	// Dotfiles (in the answer about one workspace) is how the install of its owner's dotfiles
	// went, as its helper reported it.
	Dotfiles *WorkspaceDotfiles `json:"dotfiles,omitempty"`
	// StartupSteps (in the answer about one workspace) are the steps of its start, as its agent
	// and its helper last reported them: the image build's prepare, build and push and the
	// project clone (kubernetes), and the postStart commands; each with how far it is and the
	// last lines of its log.
	StartupSteps []WorkspaceStartupStep `json:"startup_steps,omitempty"`
	// StartupFailed (in the answer about one workspace) names the step that failed while the
	// workspace runs: it is "Running, startup failed".
	StartupFailed string `json:"startup_failed,omitempty"`
	// Resources (in the answer about one workspace) are its CPU, memory and volumes as its
	// helper last measured them (the cgroup's and the filesystems' figures), with the recent
	// history; nil when no helper has reported.
	Resources *WorkspaceResources `json:"resources,omitempty"`
	// Metadata (in the answer about one workspace) are the latest values of the custom metadata
	// commands its definition declares.
	Metadata []protocol.MetadataValue `json:"metadata,omitempty"`
	// Alerts (in the answer about one workspace) are its resource alerts, the latest first: memory
	// or a volume over its threshold (active until it is under again), a process or container
	// killed for lack of memory, the pod evicted.
	Alerts []WorkspaceAlert `json:"alerts,omitempty"`
	// Warnings, only in the answers to create and update: what Hangar accepted in the devfile but
	// ignores (starterProjects, components only build and deploy commands use, ...).
	Warnings []string `json:"warnings,omitempty"`
}

// Ref is owner/name: how an admin, or anyone, names this workspace in the API and the CLI.
func (w Workspace) Ref() string {
	if w.Owner == "" {
		return w.Name
	}
	return w.Owner + "/" + w.Name
}

// WorkspaceHelper is the status of a workspace's helper (docs/decisions.md, "Helper status
// everywhere"). Terraform: connected while its outbound connection to the server is up.
// Kubernetes: connected while the pod is ready (its readiness probe is the helper's SSH port).
type WorkspaceHelper struct {
	// Status is connected, waiting (not reached since the workspace started), disconnected (its
	// connection ended during this run) or off (the workspace is not meant to run).
	Status string `json:"status"`
	// Since is when Status began; null when unknown or off.
	Since *time.Time `json:"since"`
	// LastError is the last error known: why its last connection ended (terraform), the agent's
	// last error (kubernetes).
	LastError string `json:"last_error,omitempty"`
	// Problem, when the helper should be reachable and has not been for two minutes, says so
	// with the likely cause.
	Problem string `json:"problem,omitempty"`
}

// WorkspaceEndpoint is an endpoint a devfile declares.
type WorkspaceEndpoint struct {
	Name      string `json:"name"`
	Container string `json:"container"`
	Port      int    `json:"port"`
	// Exposure is public (the access proxy serves it at URL), internal or none.
	Exposure string `json:"exposure"`
	Path     string `json:"path,omitempty"`
	URL      string `json:"url,omitempty"`
}

// WorkspaceError is the last error the agent reported for the workspace's current desired state.
type WorkspaceError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// RepositorySource is a repository a workspace is created from.
type RepositorySource struct {
	// URL is the repository's https:// or http:// URL.
	URL string `json:"url"`
	// Ref is a branch, tag or commit ("": the default branch).
	Ref string `json:"ref,omitempty"`
	// DevcontainerPath names the devcontainer.json to use when the repository has several
	// (.devcontainer/<name>/devcontainer.json).
	DevcontainerPath string `json:"devcontainer_path,omitempty"`
}

// WorkspaceStartupStep is one step of a workspace's startup.
type WorkspaceStartupStep struct {
	// Name is "image-prepare" (the base image and the features are fetched and checked, or the
	// image is found built already), "image-build" (the definition's steps and features run),
	// "image-push" (the image goes to the cluster's registry), "project-clone" (the definition's
	// projects are cloned), "post-start" (its postStart commands run, by the helper) or
	// "dotfiles" (the owner's dotfiles installed, by the helper: its Dotfiles as a step).
	Name string `json:"name"`
	// State is "pending", "running", "done" or "failed" as the agent reported it; or, once the
	// workspace no longer starts, StepInterrupted for a step that was running and StepSkipped for
	// one that had not begun.
	State     string     `json:"state"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Detail is the latest line that says how far the step is ("step 3/7: RUN make").
	Detail string `json:"detail,omitempty"`
	// Log is the last lines of the step's output (at most 16 KiB).
	Log       string    `json:"log,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// The states a startup step shows once its workspace no longer starts (stopped mid-build, or
// failed at an earlier step).
const (
	StepInterrupted = "interrupted"
	StepSkipped     = "skipped"
)

// NotTerraformMessage is the message of the 409 the build endpoints answer for a Kubernetes
// workspace: it has no builds (its startup steps are in its detail instead).
const NotTerraformMessage = "not a terraform workspace"

// RunningStep is the workspace's startup step that runs now, or nil.
func (w Workspace) RunningStep() *WorkspaceStartupStep {
	for i := range w.StartupSteps {
		if w.StartupSteps[i].State == "running" {
			return &w.StartupSteps[i]
		}
	}
	return nil
}

// WorkspaceResources are a workspace's resources as its helper measured them at CollectedAt (a
// figure it cannot read is absent), and History, the samples of the last minutes, oldest first.
type WorkspaceResources struct {
	CollectedAt time.Time `json:"collected_at"`
	protocol.Resources
	History []ResourceSample `json:"history,omitempty"`
}

// ResourceSample is one past measure of a workspace's CPU (cores) and memory (bytes in use).
type ResourceSample struct {
	At          time.Time `json:"at"`
	CPUCores    float64   `json:"cpu_cores"`
	MemoryBytes int64     `json:"memory_bytes"`
}

// WorkspaceAlert is a resource alert of a workspace (docs/decisions.md, "Inside the workspace:
// metadata and resource alerts"). Kind is memory, volume, oom-killed or evicted; Subject what it
// is about within the kind (a volume's path, a container's name); Active while a condition holds.
type WorkspaceAlert struct {
	Kind      string     `json:"kind"`
	Subject   string     `json:"subject,omitempty"`
	Detail    string     `json:"detail"`
	Active    bool       `json:"active"`
	RaisedAt  time.Time  `json:"raised_at"`
	ClearedAt *time.Time `json:"cleared_at,omitempty"`
}

// WorkspaceDotfiles is the install of a workspace owner's dotfiles.
type WorkspaceDotfiles struct {
	// Status is "not configured" (the owner has no dotfiles repository), "pending" (to be
	// installed at the workspace's next start), "installing", "installed" or "failed".
	Status     string `json:"status"`
	Repository string `json:"repository,omitempty"`
	// Script is the install script run ("": the dot-files were linked into the home directory).
	Script string `json:"script,omitempty"`
	// Error is why the install failed; Log the last lines of its output (at most 4 KiB).
	Error     string     `json:"error,omitempty"`
	Log       string     `json:"log,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// WorkspaceRepository is where a workspace's definition comes from.
type WorkspaceRepository struct {
	URL string `json:"url"`
	// Ref is the branch, tag or commit given at create ("": the default branch).
	Ref              string `json:"ref,omitempty"`
	DevcontainerPath string `json:"devcontainer_path,omitempty"`
	// Commit is the commit the definition was read at ("": not read, no configured forge serves
	// the repository).
	Commit string `json:"commit,omitempty"`
	// DefinitionPath is the file the definition came from ("": none; the default was used).
	DefinitionPath string `json:"definition_path,omitempty"`
	// ReadAt is when the definition was read.
	ReadAt time.Time `json:"read_at"`
}

// CreateWorkspaceRequest is the body of POST /api/v1/workspaces. Devfile is YAML text; empty means
// the default devfile.
type CreateWorkspaceRequest struct {
	Name    string `json:"name"`
	Agent   string `json:"agent,omitempty"`
	Devfile string `json:"devfile,omitempty"`
	// Devcontainer is a devcontainer.json (JSON with comments) that defines the workspace instead
	// of a devfile: exclusive with Devfile and Template; at most MaxDevfileBytes.
	Devcontainer string `json:"devcontainer,omitempty"`
	// Repository, when set, creates the workspace from a repository: its first project, defined by
	// the repository's devfile or devcontainer.json (read with the user's linked forge account),
	// else the agent's default; exclusive with Devfile, Devcontainer and Template.
	Repository *RepositorySource `json:"repository,omitempty"`
	// Template names a template: a terraform one needs no agent; a kubernetes one gives the devfile.
	Template string `json:"template,omitempty"`
	// Parameters are the values of the template's parameters (terraform), by name: a string,
	// number or bool as text, any other type as JSON.
	Parameters map[string]string `json:"parameters,omitempty"`
	// LogLevel is the first build's Terraform log level (terraform templates): "" or "info", or
	// "debug" (TF_LOG=DEBUG for that build only).
	LogLevel string `json:"log_level,omitempty"`
	// Preset names a preset of the terraform template: a ready prebuilt workspace of it is
	// claimed when there is one, else the workspace is built with the preset's version and
	// parameters.
	Preset string `json:"preset,omitempty"`
}

// WorkspaceParameter is a workspace's value of one parameter; a sensitive one's value is never
// sent (empty).
type WorkspaceParameter struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

// UpdateWorkspaceVersionRequest is the body of POST /api/v1/workspaces/{name}/update.
type UpdateWorkspaceVersionRequest struct {
	// Parameters are new values: of mutable parameters, or of parameters the active version adds.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// UpdateWorkspaceVersionResponse answers an update: Result is "up-to-date" (nothing was built),
// "restart" (a stop, then a start on the active version) or "start"; for a Kubernetes workspace
// made from a repository, "up-to-date" (the definition read again is the one it has) or
// "definition" (the new definition is the workspace's: a running workspace is rolled onto it, a
// stopped one takes it at its start).
type UpdateWorkspaceVersionResponse struct {
	Result    string    `json:"result"`
	Workspace Workspace `json:"workspace"`
}

// UpdateWorkspaceRequest is the body of PATCH /api/v1/workspaces/{name}.
type UpdateWorkspaceRequest struct {
	DesiredState string `json:"desired_state"`
	// LogLevel is "" or "info", or "debug": the builds of a Terraform workspace's change run with
	// TF_LOG=DEBUG (refused for a workspace an agent runs).
	LogLevel string `json:"log_level,omitempty"`
}

// User is a user. Token is set only in the answer to its creation.
type User struct {
	ID        string    `json:"id"`
	Username  string    `json:"username"`
	Admin     bool      `json:"admin"`
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Suspended users keep their workspaces (stopped) but every request, session, proxy and SSH
	// access of theirs is refused; SuspendedAt says since when.
	Suspended   bool       `json:"suspended"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	// TokenExpiresAt, with Token only: when that token expires (none: never).
	TokenExpiresAt *time.Time `json:"token_expires_at,omitempty"`
	// CurrentToken, in GET /api/v1/users/me only: the token the request was made with (none for a
	// browser session begun without one).
	CurrentToken *Token `json:"current_token,omitempty"`
	// StoppedWorkspaces, in the answer to a suspension only: the workspaces it asked to stop.
	StoppedWorkspaces []string `json:"stopped_workspaces,omitempty"`
	// The profile ("" for none): the name and email of the user's commits in their workspaces,
	// and the dotfiles repository (URL[#ref]) installed at each workspace's first start.
	FullName     string `json:"full_name,omitempty"`
	Email        string `json:"email,omitempty"`
	DotfilesRepo string `json:"dotfiles_repo,omitempty"`
}

// UpdateProfileRequest is the body of PATCH /api/v1/users/me: each field given is set, "" clears
// it, an absent one is left as it is.
type UpdateProfileRequest struct {
	FullName     *string `json:"full_name,omitempty"`
	Email        *string `json:"email,omitempty"`
	DotfilesRepo *string `json:"dotfiles_repo,omitempty"`
}

// CreateUserRequest is the body of POST /api/v1/users.
type CreateUserRequest struct {
	Username string `json:"username"`
	Admin    bool   `json:"admin,omitempty"`
}

// Agent is a registered agent. Token is set only in the answer to its creation. Config is the agent
// configuration with every default filled in (workspace.AgentConfig).
type Agent struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Token     string          `json:"token,omitempty"`
	Config    json.RawMessage `json:"config"`
	CreatedAt time.Time       `json:"created_at"`
	// LastSeenAt is when the agent last called the server (a reconcile or a wait), and Connected
	// whether that was within the last two minutes: only in lists.
	LastSeenAt *time.Time `json:"last_seen_at,omitempty"`
	Connected  *bool      `json:"connected,omitempty"`
	// Warnings, only in the answer to its creation: settings an admin should look at again, such as
	// caps below what a workspace created without a devfile needs.
	Warnings []string `json:"warnings,omitempty"`
}

// CreateAgentRequest is the body of POST /api/v1/agents.
type CreateAgentRequest struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config,omitempty"`
}

// Error is every error body of the API.
type Error struct {
	// Code says what kind of error it is (CodeNotFound, ...): match it, never Message.
	Code        string       `json:"code"`
	Message     string       `json:"message"`
	Detail      string       `json:"detail,omitempty"`
	Validations []Validation `json:"validations,omitempty"`
}

// Validation names one invalid field.
type Validation struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
	// Choices, when the field needs one of several values the server found (the repository's
	// devcontainer definitions for repository.devcontainer_path), lists them: a client offers them.
	Choices []string `json:"choices,omitempty"`
}

// Body size limits of the user API.
const (
	// MaxBodyBytes caps every user API request body.
	MaxBodyBytes = 1 << 20
	// MaxDevfileBytes caps a devfile inside a create request.
	MaxDevfileBytes = 256 << 10
)

// Template is a named, versioned template: "kubernetes" (a devfile, run by an agent) or
// "terraform" (a module, run by provisioners).
type Template struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Kind          string            `json:"kind"`
	ActiveVersion int               `json:"active_version"`
	CreatedBy     string            `json:"created_by"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	Versions      []TemplateVersion `json:"versions,omitempty"`
	// Lifecycle is the policy of the template's workspaces.
	Lifecycle Lifecycle `json:"lifecycle"`
}

// TemplateVersion is one pushed version of a template.
type TemplateVersion struct {
	Number    int      `json:"number"`
	Hash      string   `json:"hash"`
	Variables []string `json:"variables"`
	// Active: new workspaces, starts and updates take this version.
	Active bool `json:"active"`
	// Parameters are the variables users give values for.
	Parameters []TemplateParameter `json:"parameters"`
	CreatedBy  string              `json:"created_by"`
	CreatedAt  time.Time           `json:"created_at"`
}

// TemplateParameter is one parameter of a template version.
type TemplateParameter struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
	// Default is the module's default (as a value's text), left out when sensitive.
	Default   string `json:"default,omitempty"`
	Sensitive bool   `json:"sensitive,omitempty"`
	Mutable   bool   `json:"mutable,omitempty"`
	// Validations counts the module's validation blocks, checked before any build.
	Validations int `json:"validations,omitempty"`
}

// CreateTemplateVersionRequest is the body of POST /api/v1/templates/{name}/versions: a terraform
// module as a gzipped tar (Archive), or a kubernetes devfile.
type CreateTemplateVersionRequest struct {
	Kind    string `json:"kind"`
	Archive []byte `json:"archive,omitempty"`
	Devfile string `json:"devfile,omitempty"`
	// Activate makes the version the active one (the default); false stores it for a later
	// promote. A new template's first version is always active.
	Activate *bool `json:"activate,omitempty"`
}

// Build is one transition of a terraform workspace and its provisioner job.
type Build struct {
	Number                int    `json:"number"`
	Transition            string `json:"transition"`
	Reason                string `json:"reason"`
	Initiator             string `json:"initiator"`
	TemplateVersion       int    `json:"template_version"`
	StateSource           string `json:"state_source"`
	HasState              bool   `json:"has_state"`
	StateCapturedOnCancel bool   `json:"state_captured_on_cancel"`
	// StatePruned: the build's state was removed because newer builds followed it (the server
	// keeps the state of a workspace's latest builds only).
	StatePruned bool `json:"state_pruned"`
	Orphan      bool `json:"orphan"`
	// LogLevel is "debug" for a build run with TF_LOG=DEBUG ("" otherwise).
	LogLevel string `json:"log_level,omitempty"`
	// IsPrebuild marks the create of a prebuilt workspace, IsPrebuildClaim the start that handed
	// it to its user (its state is the prebuilt workspace's).
	IsPrebuild      bool       `json:"is_prebuild,omitempty"`
	IsPrebuildClaim bool       `json:"is_prebuild_claim,omitempty"`
	Status          string     `json:"status"`
	Error           string     `json:"error,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at"`
	CompletedAt     *time.Time `json:"completed_at"`
	CanceledAt      *time.Time `json:"canceled_at"`
}

// CreateBuildRequest is the body of POST /api/v1/workspaces/{name}/builds. State, when present, is
// the explicit Terraform state the build starts from (state push).
type CreateBuildRequest struct {
	Transition string `json:"transition"`
	Orphan     bool   `json:"orphan,omitempty"`
	State      []byte `json:"state,omitempty"`
	// LogLevel is "" or "info", or "debug": Terraform runs with TF_LOG=DEBUG for this build only,
	// and its debug lines are in the build's log.
	LogLevel string `json:"log_level,omitempty"`
}

// BuildLog is one line of a build log. Logs are streamed as one JSON object per line; a followed
// stream ends with a line whose End is true, carrying the build's final status.
type BuildLog struct {
	ID     int64     `json:"id,omitempty"`
	Time   time.Time `json:"time"`
	Stage  string    `json:"stage,omitempty"`
	Level  string    `json:"level,omitempty"`
	Output string    `json:"output,omitempty"`
	End    bool      `json:"end,omitempty"`
	Status string    `json:"status,omitempty"`
}

// Provisioner is a registered provisioner daemon. Token is set only in the answer to its creation.
type Provisioner struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Token      string     `json:"token,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastSeenAt *time.Time `json:"last_seen_at"`
	// BuiltIn marks the daemons the answering server runs in its own process (hangar server
	// --provisioners), listed as one provisioner with ID and Name BuiltInProvisioner, Daemons of
	// them, created when the server started.
	BuiltIn bool `json:"built_in,omitempty"`
	Daemons int  `json:"daemons,omitempty"`
}

// BuiltInProvisioner is the ID and name of the built-in provisioner in a provisioner list.
const BuiltInProvisioner = "built-in"

// CreateProvisionerRequest is the body of POST /api/v1/provisioners.
type CreateProvisionerRequest struct {
	Name string `json:"name"`
}

// Limits of the Terraform backend's requests.
const (
	// MaxTemplateArchiveBytes caps a template version's module archive (gzipped).
	MaxTemplateArchiveBytes = 16 << 20
	// MaxStateBytes caps a Terraform state pushed by a user: the cap of every state Hangar stores.
	MaxStateBytes = protocol.MaxStateBytes
)
