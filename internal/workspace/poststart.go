package workspace

// PostStartCommand is one of a devfile's postStart commands as the generator gives it to the
// workspace helper (HANGAR_HELPER_POST_START: a JSON list of these), which runs them once per start
// of the workspace. It mirrors a devfile exec command:
//
//	[{"id": "install", "commandLine": "npm ci", "workingDir": "${PROJECT_SOURCE}",
//	  "env": [{"name": "CI", "value": "1"}]}]
type PostStartCommand struct {
	// ID names the command in logs.
	ID string `json:"id"`
	// CommandLine runs with /bin/sh -c.
	CommandLine string `json:"commandLine"`
	// WorkingDir is where it runs, after $VAR and ${VAR} are expanded from the command's
	// environment; empty: the helper's own working directory.
	WorkingDir string `json:"workingDir,omitempty"`
	// Env is added to the container's environment.
	Env []EnvVar `json:"env,omitempty"`
	// OncePerWorkspace: it runs at the workspace's first start only (devcontainer.json's
	// postCreateCommand); the helper records its success in its state directory, on the
	// workspace's data volume, and skips it at every later start.
	OncePerWorkspace bool `json:"oncePerWorkspace,omitempty"`
}

// EnvVar is one environment variable of a PostStartCommand.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// EditorProcess is the web editor the workspace helper runs inside the container
// (HANGAR_HELPER_EDITOR, JSON): its command, and the port on which it answers once it is up.
type EditorProcess struct {
	Argv []string `json:"argv"`
	Port int      `json:"port"`
}
