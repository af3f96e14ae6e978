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
	st := DeploymentState(info.LatestK8sDeploymentInfo)
	// A pod that cannot run makes a workspace that is meant to run Failed at once: the seed's states
	// say Failed is "resources applied but not ready (for example, crashing container)", and the
	// Deployment alone says so only after its progress deadline (docs/decisions.md, "Pod failures").
	if info.PodFailure != nil && (st == workspace.Starting || st == workspace.Unknown) {
		return workspace.Failed, true
	}
	return st, true
}

// FailureReason is what the user is shown for a Failed workspace: the pod's reason, else the
// Deployment's progress condition's message. ok is false when there is nothing to say.
func FailureReason(info protocol.WorkspaceAgentInfo) (typ, message string, ok bool) {
	if p := info.PodFailure; p != nil {
		msg := p.Reason
		if p.Message != "" {
			msg += ": " + p.Message
		}
		return "pod", msg, true
	}
	if d := info.LatestK8sDeploymentInfo; d != nil && d.Status != nil {
		for _, c := range d.Status.Conditions {
			if c.Type == condProgressing && c.Reason == reasonProgressDeadlineExceeded && c.Message != "" {
				return "deployment", c.Reason + ": " + c.Message, true
			}
		}
	}
	return "", "", false
}
