package reconcile

import (
	"encoding/json"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// FuzzValidateBounds decodes arbitrary reconcile requests as the server does (tolerant JSON, the
// messages cut, then Validate): whatever Validate accepts is within every bound of
// protocol/bounds.go, so what a reconcile stores per workspace (resourceVersion, error message) is
// small whatever an agent sends.
func FuzzValidateBounds(f *testing.F) {
	f.Add([]byte(`{"update_type":"partial","workspace_agent_infos":[{"name":"w","namespace":"n","latest_k8s_deployment_info":{"metadata":{"resourceVersion":"12"},"spec":{"replicas":1},"status":{"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"m"}]}}}]}`))
	f.Add([]byte(`{"update_type":"full","workspace_agent_infos":[{"name":"w","namespace":"n","pod_failure":{"reason":"CrashLoopBackOff","message":"x"}}]}`))
	f.Add([]byte(`{"update_type":"full","workspace_agent_infos":[{"name":"w","namespace":"n","latest_k8s_deployment_info":{"metadata":{"resourceVersion":"a b"}}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req protocol.ReconcileRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		protocol.TruncateMessages(&req)
		if Validate(req) != nil {
			return
		}
		for _, info := range req.WorkspaceAgentInfos {
			if d := info.LatestK8sDeploymentInfo; d != nil {
				if !protocol.ValidResourceVersion(d.Metadata.ResourceVersion) {
					t.Fatalf("accepted resourceVersion %.60q", d.Metadata.ResourceVersion)
				}
				if d.Status != nil && len(d.Status.Conditions) > protocol.MaxConditions {
					t.Fatalf("accepted %d conditions", len(d.Status.Conditions))
				}
			}
			if e := info.ErrorDetails; e != nil && len(e.ErrorMessage) > protocol.MaxMessageBytes {
				t.Fatalf("accepted an error message of %d bytes", len(e.ErrorMessage))
			}
			// What is stored as the workspace's error is bounded.
			if _, msg, ok := FailureReason(info); ok && len(msg) > protocol.MaxConditionIdentifierBytes+2+protocol.MaxMessageBytes {
				t.Fatalf("a failure reason of %d bytes would be stored", len(msg))
			}
		}
	})
}
