package workspace

import (
	"fmt"
	"time"
)

// The workspace helper's status, one notion for both backends (docs/decisions.md, "Helper status
// everywhere"): can the helper be reached, since when, what last went wrong, and, when it should
// be reachable and is not after HelperGrace, the likely cause.
//
//   - Terraform: the helper connects out to the server. It is connected while a server replica
//     holds its connection (the store's connection record, since its connected_at); the end of a
//     connection is recorded with its time and why.
//   - Kubernetes: the helper serves SSH in the pod, and that SSH port is the main container's
//     readiness probe, so the workspace is Running exactly when the kubelet has reached the
//     helper. It is connected while the workspace is Running (since it became Running); its last
//     error is the one the agent reported.

// HelperGrace is how long after a workspace became Running (Terraform) or was started
// (Kubernetes) a helper that is not reachable is reported as a problem rather than as starting.
const HelperGrace = 2 * time.Minute

// HelperRecord is what the store knows of a Terraform workspace's helper, filled on reads.
type HelperRecord struct {
	// ConnectedAt is when the helper's current connection was made (nil: not connected).
	ConnectedAt *time.Time
	// DisconnectedAt is when its last connection ended, and LastError why (nil: never ended).
	DisconnectedAt *time.Time
	LastError      string
	// HasToken tells whether a helper token of the workspace is valid: one its Terraform state
	// holds (a hangar_agent resource) or one of a build still running.
	HasToken bool
}

// HelperState is whether the helper is reachable.
type HelperState string

const (
	// HelperConnected: the helper is reachable.
	HelperConnected HelperState = "connected"
	// HelperWaiting: the workspace is starting or became Running, and its helper has not been
	// reached since.
	HelperWaiting HelperState = "waiting"
	// HelperDisconnected: the helper was connected during this run, and its connection ended.
	HelperDisconnected HelperState = "disconnected"
	// HelperOff: the workspace is not meant to run, so no helper is expected.
	HelperOff HelperState = "off"
)

// HelperStatus is the helper's status as users see it.
type HelperStatus struct {
	State HelperState
	// Since is when State began (nil when unknown, and for HelperOff).
	Since     *time.Time
	LastError string
	// Problem, when the helper should be reachable and has not been for HelperGrace, says so
	// with the likely cause.
	Problem string
}

// Helper is w's helper status at now.
func Helper(w Workspace, now time.Time) HelperStatus {
	if w.Backend == KindTerraform {
		return terraformHelper(w, now)
	}
	return kubernetesHelper(w, now)
}

func terraformHelper(w Workspace, now time.Time) HelperStatus {
	h := w.Helper
	st := HelperStatus{LastError: h.LastError}
	if h.ConnectedAt != nil {
		st.State, st.Since = HelperConnected, h.ConnectedAt
		return st
	}
	running := w.ActualState == Running
	if !running && w.DesiredState != Running {
		st.State = HelperOff
		return st
	}
	// Since when the helper should have been connected: the workspace became Running (or, while
	// its start build runs, the start was asked for).
	from := w.DesiredStateUpdatedAt
	if running && w.ActualStateUpdatedAt != nil {
		from = *w.ActualStateUpdatedAt
	}
	if h.DisconnectedAt != nil && !h.DisconnectedAt.Before(from) {
		st.State, st.Since = HelperDisconnected, h.DisconnectedAt
	} else {
		st.State, st.Since = HelperWaiting, &from
	}
	if !running || now.Sub(*st.Since) < HelperGrace {
		return st
	}
	ago := roundDuration(now.Sub(*st.Since))
	switch {
	case st.State == HelperDisconnected:
		st.Problem = fmt.Sprintf("the helper's connection ended %s ago and it has not connected again: the machine may be stopped or restarting, "+
			"or may no longer reach the server's URL for helpers (hangar server --helper-url, by default --access-url)", ago)
	case !h.HasToken:
		st.Problem = fmt.Sprintf("the helper has not connected %s after the workspace became Running, and the workspace's Terraform state holds no hangar_agent: "+
			"the template must have a hangar_agent resource whose init script the machine runs", ago)
	default:
		st.Problem = fmt.Sprintf("the helper has not connected %s after the workspace became Running: the machine may not run hangar_agent's init script "+
			"(it must run on the machine, for example as its startup script; run in the Terraform build, the sandbox ends it with the build), "+
			"or it cannot reach the server's URL for helpers (hangar server --helper-url, by default --access-url)", ago)
	}
	return st
}

func kubernetesHelper(w Workspace, now time.Time) HelperStatus {
	st := HelperStatus{}
	if w.ErrorType != "" || w.ErrorMessage != "" {
		st.LastError = w.ErrorMessage
	}
	switch {
	case w.ActualState == Running:
		st.State, st.Since = HelperConnected, w.ActualStateUpdatedAt
		return st
	case w.DesiredState != Running:
		st.State = HelperOff
		return st
	}
	from := w.DesiredStateUpdatedAt
	st.State, st.Since = HelperWaiting, &from
	if (w.ActualState == CreationRequested || w.ActualState == Starting || w.ActualState == RestartRequested) && now.Sub(from) >= HelperGrace {
		st.Problem = fmt.Sprintf("the workspace's pod is not ready %s after the start: its image may still be pulled or missing from the node, "+
			"or its postStart commands or editor are still starting (the helper serves SSH, the pod's readiness probe, only after them)",
			roundDuration(now.Sub(from)))
	}
	return st
}

// roundDuration is d to the second (to the minute beyond an hour), as people read it.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Hour {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}
