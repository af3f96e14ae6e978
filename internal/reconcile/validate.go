package reconcile

import (
	"fmt"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// MaxErrorMessageBytes caps an error message an agent reports; longer ones are refused.
const MaxErrorMessageBytes = 64 << 10

// Validate checks a decoded reconcile request. Every problem names its field.
func Validate(req protocol.ReconcileRequest) error {
	v := &workspace.ValidationError{}
	switch req.UpdateType {
	case protocol.UpdateFull, protocol.UpdatePartial:
	default:
		v.Add("update_type", "must be %q or %q, got %q", protocol.UpdateFull, protocol.UpdatePartial, req.UpdateType)
	}
	if req.WorkspaceAgentInfos == nil {
		v.Add("workspace_agent_infos", "is required (an empty list is [])")
	}
	seen := make(map[string]bool, len(req.WorkspaceAgentInfos))
	for i, info := range req.WorkspaceAgentInfos {
		f := fmt.Sprintf("workspace_agent_infos[%d]", i)
		if !workspace.IsDNSLabel(info.Name, 63) {
			v.Add(f+".name", "must be a workspace name (DNS-1123 label), got %q", info.Name)
		} else if seen[info.Name] {
			v.Add(f+".name", "workspace %q is reported twice", info.Name)
		}
		seen[info.Name] = true
		if !workspace.IsDNSLabel(info.Namespace, 63) {
			v.Add(f+".namespace", "must be a namespace name (DNS-1123 label), got %q", info.Namespace)
		}
		switch info.TerminationProgress {
		case "", protocol.TerminationTerminating, protocol.TerminationTerminated:
		default:
			v.Add(f+".termination_progress", "must be %q or %q, got %q", protocol.TerminationTerminating, protocol.TerminationTerminated, info.TerminationProgress)
		}
		if e := info.ErrorDetails; e != nil {
			switch e.ErrorType {
			case protocol.ErrorTypeApplier, protocol.ErrorTypeUnknown:
			default:
				v.Add(f+".error_details.error_type", "must be %q or %q, got %q", protocol.ErrorTypeApplier, protocol.ErrorTypeUnknown, e.ErrorType)
			}
			if len(e.ErrorMessage) > MaxErrorMessageBytes {
				v.Add(f+".error_details.error_message", "is %d bytes, the limit is %d", len(e.ErrorMessage), MaxErrorMessageBytes)
			}
		}
		if p := info.PodFailure; p != nil {
			if p.Reason == "" {
				v.Add(f+".pod_failure.reason", "is required")
			}
			if len(p.Message) > MaxErrorMessageBytes {
				v.Add(f+".pod_failure.message", "is %d bytes, the limit is %d", len(p.Message), MaxErrorMessageBytes)
			}
		}
		if d := info.LatestK8sDeploymentInfo; d != nil {
			if d.Metadata.ResourceVersion == "" {
				v.Add(f+".latest_k8s_deployment_info.metadata.resourceVersion", "is required")
			}
			if d.Spec != nil && d.Spec.Replicas != nil && (*d.Spec.Replicas < 0) {
				v.Add(f+".latest_k8s_deployment_info.spec.replicas", "must not be negative, got %d", *d.Spec.Replicas)
			}
		}
	}
	return v.Err()
}
