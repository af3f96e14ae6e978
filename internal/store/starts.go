package store

import "time"

// StartSeen is a workspace first seen Running after its start was asked for: the user-facing
// start-latency SLI (hangar_workspace_start_duration_seconds).
type StartSeen struct {
	WorkspaceID string
	Backend     string // workspace.KindKubernetes or workspace.KindTerraform
	RequestedAt time.Time
	RunningAt   time.Time
}

// StartObserver is a store that reports StartSeen after the commit that wrote Running (each start
// once, whichever replica wrote it). The SQL stores are.
type StartObserver interface {
	ObserveStarts(func(StartSeen))
}
