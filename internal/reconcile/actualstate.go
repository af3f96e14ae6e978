package reconcile

import (
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Deployment condition types and reasons the rules read (Kubernetes' deployment controller).
const (
	condProgressing = "Progressing"
	condAvailable   = "Available"

	reasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	reasonNewReplicaSetCreated       = "NewReplicaSetCreated"
	reasonFoundNewReplicaSet         = "FoundNewReplicaSet"
	reasonReplicaSetUpdated          = "ReplicaSetUpdated"
	reasonNewReplicaSetAvailable     = "NewReplicaSetAvailable"
	reasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	reasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
)

// DeploymentState derives a workspace's actual state from its Deployment, by the rules in
// ../shared/reference/anchors.md ("GitLab: actual state from a Deployment"), rules 3 to 6; the first
// rule that matches wins.
func DeploymentState(d *protocol.DeploymentInfo) workspace.State {
	if d == nil || d.Spec == nil || d.Spec.Replicas == nil || d.Status == nil || len(d.Status.Conditions) == 0 {
		return workspace.Unknown
	}
	var progressing, available *protocol.DeploymentCondition
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		switch c.Type {
		case condProgressing:
			progressing = c
		case condAvailable:
			available = c
		}
	}
	if progressing == nil || progressing.Reason == "" {
		return workspace.Unknown
	}
	replicas := *d.Spec.Replicas
	st := d.Status
	switch progressing.Reason {
	case reasonProgressDeadlineExceeded:
		return workspace.Failed
	case reasonNewReplicaSetCreated, reasonFoundNewReplicaSet, reasonReplicaSetUpdated:
		switch replicas {
		case 0:
			return workspace.Stopping
		case 1:
			return workspace.Starting
		}
		return workspace.Unknown
	}
	if available == nil {
		return workspace.Unknown
	}
	if progressing.Reason == reasonNewReplicaSetAvailable && available.Reason == reasonMinimumReplicasAvailable {
		switch {
		case replicas == 0 && st.AvailableReplicas == 0:
			return workspace.Stopped
		case replicas == st.AvailableReplicas && st.UnavailableReplicas == 0:
			return workspace.Running
		case replicas == 0 && st.AvailableReplicas == 1:
			return workspace.Stopping
		}
	}
	if (available.Reason == reasonMinimumReplicasAvailable || available.Reason == reasonMinimumReplicasUnavailable) &&
		replicas == 1 && st.AvailableReplicas == 0 {
		return workspace.Starting
	}
	return workspace.Unknown
}

// ReportedState derives the actual state an agent report implies, by rules 1 to 6 of the anchors.
// errorAllowed is false when the report's error_details must be suppressed (the desired state changed
// since the last response: tracking-applier-errors.md, "Changes in Rails"); the error is then ignored
// and the other rules decide. ok is false when the report says nothing about the state (no
// Deployment, no termination progress, no error that counts): the stored state stays.
func ReportedState(info protocol.WorkspaceAgentInfo, errorAllowed bool) (state workspace.State, ok bool) {
	if info.TerminationProgress == protocol.TerminationTerminated {
		return workspace.Terminated, true
	}
	if info.ErrorDetails != nil && errorAllowed {
		return workspace.Error, true
	}
	if info.TerminationProgress == protocol.TerminationTerminating {
		return workspace.Terminating, true
	}
	if info.LatestK8sDeploymentInfo == nil {
		return "", false
	}
	return DeploymentState(info.LatestK8sDeploymentInfo), true
}
