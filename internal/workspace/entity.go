package workspace

import "time"

// The entities: what Hangar keeps (package store persists them; the store's reads fill the
// fields marked "filled on reads").

// Backends of a workspace, and kinds of a template (the backend its workspaces get).
const (
	KindKubernetes = "kubernetes" // a devfile, run by an agent
	KindTerraform  = "terraform"  // a Terraform module, run by provisioners
)

// User is a person or robot that calls the user API.
type User struct {
	ID       string
	Username string
	Admin    bool
	// TokenHash, on creation only (store.CreateUser), is the hash of the user's first API token
	// (named "initial", without expiry); reads leave it empty: tokens are store.APIToken rows.
	TokenHash []byte
	CreatedAt time.Time
	// SuspendedAt is when the user was suspended (nil: active); a suspended user's tokens,
	// sessions and keys are refused. Filled on reads.
	SuspendedAt *time.Time
	// The profile (profile.go): "" for none. FullNameSet and EmailSet say the user set that field
	// themselves; an OIDC sign-in fills only the others from its claims.
	FullName, Email, DotfilesRepo string
	FullNameSet, EmailSet         bool
}

// Agent is a registered `hangar agent`.
type Agent struct {
	ID        string
	Name      string
	TokenHash []byte
	Config    AgentConfig
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Workspace is a workspace row. Times are UTC with microsecond precision; nil means never set.
type Workspace struct {
	ID   string
	Name string // unique per owner among the workspaces that are not Terminated
	// KubeName is the workspace's name in the cluster (func KubeName; for workspaces from
	// before schema version 3, its name): its objects' name, its namespace's after "hangar-", and
	// the name the agent reports it by. Unique across every workspace ever stored.
	KubeName  string
	OwnerID   string
	OwnerName string // filled on reads
	// Owner is the owner's profile (User.FullName, Email, DotfilesRepo; with OwnerName as
	// Username), filled on reads: the generator gives it to the workspace.
	OwnerFullName, OwnerEmail, OwnerDotfilesRepo string
	AgentID                                      string
	AgentName                                    string // filled on reads
	Namespace                                    string
	// Devfile is written on creation and by UpdateWorkspace when fn sets it (a new definition,
	// with DefinitionGeneration moved on); reads leave it empty (WorkspaceDevfile).
	Devfile string
	// DefinitionGeneration counts the workspace's definitions: 1 at creation, one more each time
	// `hangar update` applies a new one (a cache of parsed devfiles is keyed by it).
	DefinitionGeneration int64
	// Repository is the repository the workspace was created from, and where its definition was
	// last read (nil: none). Written on creation and by UpdateWorkspace; filled on reads.
	Repository                *RepositorySource
	DesiredState              State
	ActualState               State
	DesiredStateUpdatedAt     time.Time
	ActualStateUpdatedAt      *time.Time
	RespondedToAgentAt        *time.Time
	DeploymentResourceVersion *string
	ErrorType                 string
	ErrorMessage              string
	// URL is where the workspace's main endpoint is served (set at creation).
	URL string
	// CreatedAt is when the workspace became its owner's: its create, or the claim of a prebuilt
	// workspace (ClaimedAt). Its builds keep their own times: a claimed workspace's first builds,
	// the prebuild's, were made before it.
	CreatedAt time.Time
	// ClaimedAt is when a prebuilt workspace was claimed by its owner (nil: it was created for
	// them, or is still unclaimed). The lifecycle's times count from the claim (the claim is its
	// owner's start).
	ClaimedAt *time.Time
	// Backend is KindKubernetes (an agent reconciles it) or KindTerraform (builds run
	// it; AgentID, Namespace and Devfile are empty, TemplateID is set).
	Backend      string
	TemplateID   string
	TemplateName string // filled on reads
	// TemplateVersionID is the template version of the workspace's latest build (terraform);
	// builds write it (the store's CreateBuildWorkspace, NewBuild). TemplateVersion is its number
	// and TemplateActiveVersionID the template's active version, filled on reads: the workspace is
	// outdated when they differ.
	TemplateVersionID       string
	TemplateVersion         int
	TemplateActiveVersionID string
	// Parameters are the workspace's parameter values (terraform): what its builds pass. Builds
	// write them (CreateBuildWorkspace, NewBuild); sensitive values are never shown.
	Parameters []ParameterValue
	// LastActivityAt is the latest use of the workspace: through the access proxy its proxies
	// reported, or its owner's own change (nil: never). The store's RecordActivity,
	// RecordWorkspaceActivity and UpdateWorkspace write it, never moving it back; Reconcile leaves it.
	LastActivityAt *time.Time
	// LastWorkAt is when the workspace's helper last saw work inside it, and LastWorkReason what
	// (Store.RecordWork): the use a policy with activity "work" counts (nil: never).
	LastWorkAt     *time.Time
	LastWorkReason string

	// Lifecycle automation (package lifecycle). Schedule is the workspace's own settings; DormantAt
	// is when it went dormant (nil: it is not); DesiredStateReason says why the desired state is
	// what it is: "" for a user's change, else the automation's reason. CreateWorkspace and
	// UpdateWorkspace write them; a reconcile leaves them.
	Schedule           Schedule
	DormantAt          *time.Time
	DesiredStateReason string

	// Prebuilt pools (package prebuild). PresetID is the preset the workspace was made from
	// ("" for none): a prebuilt workspace, owned by store.PrebuildsUserID until claimed, or one
	// created with the preset (its Parameters are the preset's).
	PresetID   string
	PresetName string // filled on reads

	// Helper is what the store knows of a Terraform workspace's helper connection, filled on
	// reads (func Helper makes the status users see of it).
	Helper HelperRecord
}

// Visible reports whether u may see w: its owner, or an admin (the automation is one). A
// workspace the caller may not see is answered as not found.
func Visible(u User, w Workspace) bool { return u.Admin || w.OwnerID == u.ID }

// ParameterValue is a workspace's value of one parameter (package parameter: the template
// version's parameters, and the checks of their values).
type ParameterValue struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

// RepositorySource is where a workspace's definition comes from (docs/decisions.md, "A team's
// repository: the definition follows the repository"): what the user gave at create, and what
// the last read of it found.
type RepositorySource struct {
	URL string
	// Ref is the branch, tag or commit given ("": the repository's default branch).
	Ref string
	// DevcontainerPath is the devcontainer.json named at create ("": found in the usual places).
	DevcontainerPath string
	// Commit is the commit the definition was read at (the ref resolved when it was read; "" when
	// it was not read: no configured forge serves the repository).
	Commit string
	// DefinitionPath is the file the definition was read from ("": none, the default was used).
	DefinitionPath string
	// ReadAt is when the definition was read.
	ReadAt time.Time
}

// DotfilesStatus is the install of a workspace owner's dotfiles, as the workspace's helper last
// reported it (protocol.DotfilesStatus; docs/decisions.md, "A team's repository: the definition
// follows the repository").
type DotfilesStatus struct {
	// State is "installing", "installed" or "failed".
	State string
	// Repository is the dotfiles repository the helper installed (URL[#ref]).
	Repository string
	// Script is the install script run ("": the dot-files were linked).
	Script string
	// Error is why the install failed.
	Error string
	// Log is the last lines of the install's output.
	Log       string
	UpdatedAt time.Time
}

// InUTC is the time t points at, in UTC (nil: nil), as the store keeps times.
func InUTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// StartupStep is one step of a workspace's startup as its agent last reported it
// (protocol.StartupStep; docs/decisions.md, "Image build progress"): the image build's prepare,
// build and push, each with its state ("pending", "running", "done", "failed"), times, the latest
// line that says how far it is, and the last lines of its log.
type StartupStep struct {
	Name string
	// Position is the step's place in the order steps run in (protocol.StartupStepOrder): they
	// are read back in it, whichever of them a report named.
	Position  int
	State     string
	StartedAt *time.Time
	EndedAt   *time.Time
	Detail    string
	Log       string
	UpdatedAt time.Time
}
