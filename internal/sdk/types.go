// Package sdk holds the user API's wire types and a Go client for it. The server, the CLI and tests
// share these types; the server converts store rows to them in one place (server/convert.go).
package sdk

import (
	"encoding/json"
	"time"
)

// Workspace is a workspace as the user API shows it.
type Workspace struct {
	ID                        string          `json:"id"`
	Name                      string          `json:"name"`
	Owner                     string          `json:"owner"`
	Agent                     string          `json:"agent"`
	Namespace                 string          `json:"namespace"`
	DesiredState              string          `json:"desired_state"`
	ActualState               string          `json:"actual_state"`
	DesiredStateUpdatedAt     *time.Time      `json:"desired_state_updated_at"`
	ActualStateUpdatedAt      *time.Time      `json:"actual_state_updated_at"`
	RespondedToAgentAt        *time.Time      `json:"responded_to_agent_at"`
	DeploymentResourceVersion *string         `json:"deployment_resource_version"`
	Error                     *WorkspaceError `json:"error"`
	URL                       string          `json:"url"`
	CreatedAt                 time.Time       `json:"created_at"`
}

// WorkspaceError is the last error the agent reported for the workspace's current desired state.
type WorkspaceError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// CreateWorkspaceRequest is the body of POST /api/v1/workspaces. Devfile is YAML text; empty means
// the default devfile.
type CreateWorkspaceRequest struct {
	Name    string `json:"name"`
	Agent   string `json:"agent"`
	Devfile string `json:"devfile,omitempty"`
}

// UpdateWorkspaceRequest is the body of PATCH /api/v1/workspaces/{name}.
type UpdateWorkspaceRequest struct {
	DesiredState string `json:"desired_state"`
}

// User is a user. Token is set only in the answer to its creation.
type User struct {
	ID        string    `json:"id"`
	Username  string    `json:"username"`
	Admin     bool      `json:"admin"`
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
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
}

// CreateAgentRequest is the body of POST /api/v1/agents.
type CreateAgentRequest struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config,omitempty"`
}

// Error is every error body of the API.
type Error struct {
	Message     string       `json:"message"`
	Detail      string       `json:"detail,omitempty"`
	Validations []Validation `json:"validations,omitempty"`
}

// Validation names one invalid field.
type Validation struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Body size limits of the user API.
const (
	// MaxBodyBytes caps every user API request body.
	MaxBodyBytes = 1 << 20
	// MaxDevfileBytes caps a devfile inside a create request.
	MaxDevfileBytes = 256 << 10
)
