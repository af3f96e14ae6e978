package store

import (
	"context"
	"time"
)

// StorageUsage is what a user's Terraform workspaces keep in the database (docs/decisions.md,
// "Per-user storage"): the bytes of their builds' Terraform states and of their builds' logs.
type StorageUsage struct {
	StateBytes int64
	LogBytes   int64
}

// Total is StateBytes + LogBytes.
func (u StorageUsage) Total() int64 { return u.StateBytes + u.LogBytes }

// StorageStore measures and bounds what each user's builds keep.
type StorageStore interface {
	// StorageUsage sums the state and log bytes of the builds of every workspace ownerID owns
	// (Terminated ones included: their builds stay).
	StorageUsage(ctx context.Context, ownerID string) (StorageUsage, error)
	// LatestStateBytes is the size of the state of the workspace's latest build (0 when it has
	// none), without reading the state.
	LatestStateBytes(ctx context.Context, workspaceID string) (int64, error)
	// PruneStorage frees, in one transaction, what the state rules do not need of ownerID's builds:
	// the state of every build but its workspace's latest (marked state_pruned, as the builds past
	// KeptBuildStates are), and the log of every ended build but its workspace's latest, replaced
	// by one line, note, at now; of a deleted workspace (actual Terminated), every build's. It
	// returns the usage after.
	PruneStorage(ctx context.Context, ownerID string, now time.Time, note string) (StorageUsage, error)
}
