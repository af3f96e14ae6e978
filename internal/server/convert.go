package server

import (
	"encoding/json"
	"fmt"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
)

// This file is the only place store rows become API types.

func toUser(u store.User, token string) sdk.User {
	return sdk.User{ID: u.ID, Username: u.Username, Admin: u.Admin, Token: token, CreatedAt: u.CreatedAt}
}

func toAgent(a store.Agent, token string) (sdk.Agent, error) {
	cfg, err := json.Marshal(a.Config)
	if err != nil {
		return sdk.Agent{}, fmt.Errorf("encode agent config: %w", err)
	}
	return sdk.Agent{ID: a.ID, Name: a.Name, Token: token, Config: cfg, CreatedAt: a.CreatedAt}, nil
}

func toWorkspace(w store.Workspace) sdk.Workspace {
	desiredAt := w.DesiredStateUpdatedAt
	out := sdk.Workspace{
		ID:                        w.ID,
		Name:                      w.Name,
		Owner:                     w.OwnerName,
		Agent:                     w.AgentName,
		Namespace:                 w.Namespace,
		DesiredState:              string(w.DesiredState),
		ActualState:               string(w.ActualState),
		DesiredStateUpdatedAt:     &desiredAt,
		ActualStateUpdatedAt:      w.ActualStateUpdatedAt,
		RespondedToAgentAt:        w.RespondedToAgentAt,
		DeploymentResourceVersion: w.DeploymentResourceVersion,
		URL:                       w.URL,
		CreatedAt:                 w.CreatedAt,
	}
	if w.ErrorType != "" || w.ErrorMessage != "" {
		out.Error = &sdk.WorkspaceError{Type: w.ErrorType, Message: w.ErrorMessage}
	}
	return out
}
