package reconcile

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func dep(replicas *int32, available, unavailable int32, conds ...[2]string) *protocol.DeploymentInfo {
	d := &protocol.DeploymentInfo{Metadata: protocol.DeploymentMetadata{ResourceVersion: "1"}, Status: &protocol.DeploymentStatus{AvailableReplicas: available, UnavailableReplicas: unavailable}}
	if replicas != nil {
		d.Spec = &protocol.DeploymentSpec{Replicas: replicas}
	}
	for _, c := range conds {
		d.Status.Conditions = append(d.Status.Conditions, protocol.DeploymentCondition{Type: c[0], Status: "True", Reason: c[1]})
	}
	return d
}

func r(i int32) *int32 { return &i }

func TestDeploymentState(t *testing.T) {
	prog := func(reason string) [2]string { return [2]string{"Progressing", reason} }
	avail := func(reason string) [2]string { return [2]string{"Available", reason} }
	tests := []struct {
		name string
		d    *protocol.DeploymentInfo
		want workspace.State
	}{
		{"nil", nil, workspace.Unknown},
		{"no spec", dep(nil, 0, 0, prog("NewReplicaSetAvailable")), workspace.Unknown},
		{"no conditions", dep(r(1), 0, 0), workspace.Unknown},
		{"no progressing", dep(r(1), 0, 0, avail("MinimumReplicasAvailable")), workspace.Unknown},
		{"progressing without reason", dep(r(1), 0, 0, prog("")), workspace.Unknown},
		{"deadline exceeded", dep(r(1), 0, 1, prog("ProgressDeadlineExceeded"), avail("MinimumReplicasUnavailable")), workspace.Failed},
		{"new RS created, 1", dep(r(1), 0, 1, prog("NewReplicaSetCreated")), workspace.Starting},
		{"found new RS, 1", dep(r(1), 0, 1, prog("FoundNewReplicaSet")), workspace.Starting},
		{"RS updated, 0", dep(r(0), 1, 0, prog("ReplicaSetUpdated")), workspace.Stopping},
		{"RS updated, 2 replicas", dep(r(2), 0, 0, prog("ReplicaSetUpdated")), workspace.Unknown},
		{"available, 0, none available", dep(r(0), 0, 0, prog("NewReplicaSetAvailable"), avail("MinimumReplicasAvailable")), workspace.Stopped},
		{"available, 1 of 1", dep(r(1), 1, 0, prog("NewReplicaSetAvailable"), avail("MinimumReplicasAvailable")), workspace.Running},
		{"available, 0 but 1 available", dep(r(0), 1, 0, prog("NewReplicaSetAvailable"), avail("MinimumReplicasAvailable")), workspace.Stopping},
		{"available, 1, none available", dep(r(1), 0, 1, prog("NewReplicaSetAvailable"), avail("MinimumReplicasAvailable")), workspace.Starting},
		{"unavailable, 1, none available", dep(r(1), 0, 1, prog("NewReplicaSetAvailable"), avail("MinimumReplicasUnavailable")), workspace.Starting},
		{"no available condition", dep(r(1), 1, 0, prog("NewReplicaSetAvailable")), workspace.Unknown},
		{"1 available but 1 unavailable", dep(r(1), 1, 1, prog("NewReplicaSetAvailable"), avail("MinimumReplicasAvailable")), workspace.Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeploymentState(tc.d); got != tc.want {
				t.Errorf("DeploymentState = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestReportedState(t *testing.T) {
	running := dep(r(1), 1, 0, [2]string{"Progressing", "NewReplicaSetAvailable"}, [2]string{"Available", "MinimumReplicasAvailable"})
	errd := &protocol.ErrorDetails{ErrorType: "applier", ErrorMessage: "x"}
	starting := dep(r(1), 0, 1, [2]string{"Progressing", "ReplicaSetUpdated"}, [2]string{"Available", "MinimumReplicasUnavailable"})
	stopped := dep(r(0), 0, 0, [2]string{"Progressing", "NewReplicaSetAvailable"}, [2]string{"Available", "MinimumReplicasAvailable"})
	tests := []struct {
		name    string
		info    protocol.WorkspaceAgentInfo
		allowed bool
		want    workspace.State
		ok      bool
	}{
		{"nothing", protocol.WorkspaceAgentInfo{}, true, "", false},
		{"error", protocol.WorkspaceAgentInfo{ErrorDetails: errd, LatestK8sDeploymentInfo: running}, true, workspace.Error, true},
		{"error suppressed falls back to the deployment", protocol.WorkspaceAgentInfo{ErrorDetails: errd, LatestK8sDeploymentInfo: running}, false, workspace.Running, true},
		{"error suppressed, nothing else", protocol.WorkspaceAgentInfo{ErrorDetails: errd}, false, "", false},
		{"terminated wins over error", protocol.WorkspaceAgentInfo{ErrorDetails: errd, TerminationProgress: "Terminated"}, true, workspace.Terminated, true},
		{"error wins over terminating", protocol.WorkspaceAgentInfo{ErrorDetails: errd, TerminationProgress: "Terminating"}, true, workspace.Error, true},
		{"terminating", protocol.WorkspaceAgentInfo{TerminationProgress: "Terminating", LatestK8sDeploymentInfo: running}, true, workspace.Terminating, true},
		{"deployment", protocol.WorkspaceAgentInfo{LatestK8sDeploymentInfo: running}, true, workspace.Running, true},
		{"pod failure while starting", protocol.WorkspaceAgentInfo{LatestK8sDeploymentInfo: starting, PodFailure: &protocol.PodFailure{Reason: "CrashLoopBackOff"}}, true, workspace.Failed, true},
		{"pod failure while stopped does not count", protocol.WorkspaceAgentInfo{LatestK8sDeploymentInfo: stopped, PodFailure: &protocol.PodFailure{Reason: "CrashLoopBackOff"}}, true, workspace.Stopped, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ReportedState(tc.info, tc.allowed)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ReportedState = %s, %v; want %s, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
