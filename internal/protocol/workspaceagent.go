package protocol

// The helper of a Terraform workspace ⇄ server connection (docs/decisions.md, "Terraform
// workspaces: the helper connects out"): `hangar workspace-helper --connect-url URL` opens a
// WebSocket to WorkspaceAgentConnectPath with its token as the Bearer credential, and runs yamux
// over it as the server side of the streams: the server opens one stream per user connection (GET
// /api/v1/workspaces/{name}/ssh), and the helper serves SSH on it; on version 2 also one per
// connection to an app, which the helper relays to the port (WorkspaceAgentSubprotocolV2).
const (
	WorkspaceAgentConnectPath = "/api/v1/workspace-agent/connect"
	// WorkspaceAgentTokenPrefix begins every helper token.
	WorkspaceAgentTokenPrefix = "hwa_"
	// WorkspaceAgentSubprotocol is the WebSocket subprotocol of the connection; its version is
	// bumped when the framing changes.
	WorkspaceAgentSubprotocol = "hangar-workspace-agent.v1"
	// WorkspaceAgentSubprotocolV2 is version 2 of the connection: the same yamux session, whose
	// every stream begins with a header that says what it carries (internal/wsmux): an SSH
	// connection, as every stream of version 1, or a TCP connection to a port on the machine's
	// loopback address, which the server opens for a Terraform workspace's app without an SSH
	// connection of its own (docs/decisions.md, "The way in, faster"). A helper offers both
	// versions, 2 first; a server that knows version 2 picks it, an older one picks 1.
	WorkspaceAgentSubprotocolV2 = "hangar-workspace-agent.v2"
	// WorkspaceSSHSubprotocol is the subprotocol of a user's SSH connection to a workspace: the
	// bytes of an SSH connection, relayed to the helper.
	WorkspaceSSHSubprotocol = "hangar-ssh.v1"
	// GitCredentialsPath is where a helper asks, with its token, for the workspace owner's
	// credentials for a git remote (POST, git's attributes as JSON: protocol, host, path).
	GitCredentialsPath = "/api/v1/workspace-agent/git-credentials"
	// GitSSHKeyPath is where a helper reads, with its token, the workspace owner's git SSH public
	// key (GET); GitSSHSignPath is where it asks the server to sign with that key (POST).
	GitSSHKeyPath  = "/api/v1/workspace-agent/gitssh"
	GitSSHSignPath = "/api/v1/workspace-agent/gitssh/sign"
)

// DotfilesStatusPath is where a helper reports, with its token, how the install of the owner's
// dotfiles went (PUT, a DotfilesStatus): shown with the workspace (hangar show, the API's
// workspace detail, its page).
const DotfilesStatusPath = "/api/v1/workspace-agent/dotfiles"

// StartupStepPath is where a helper reports, with its token, a startup step it runs (PUT, a
// StartupStep named one of HelperSteps): its postStart commands, while they run and when they
// end. Shown with the workspace's other steps; a failed one makes a Running workspace "Running,
// startup failed".
const StartupStepPath = "/api/v1/workspace-agent/startup-step"

// The states of a DotfilesStatus.
const (
	DotfilesInstalling = "installing"
	DotfilesInstalled  = "installed"
	DotfilesFailed     = "failed"
)

// MaxDotfilesLogBytes bounds a DotfilesStatus's log: the last lines of the install's output.
const MaxDotfilesLogBytes = 4 << 10

// DotfilesStatus is an install of the owner's dotfiles, as the helper reports it.
type DotfilesStatus struct {
	// State is DotfilesInstalling, DotfilesInstalled or DotfilesFailed.
	State string `json:"state"`
	// Repository is the dotfiles repository installed (URL[#ref]).
	Repository string `json:"repository"`
	// Script is the install script run (install.sh, ...); "" when the dot-files were linked.
	Script string `json:"script,omitempty"`
	// Error is why it failed (State DotfilesFailed).
	Error string `json:"error,omitempty"`
	// Log is the last lines of the install's output, at most MaxDotfilesLogBytes.
	Log string `json:"log,omitempty"`
}
