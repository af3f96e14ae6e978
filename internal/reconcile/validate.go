package reconcile

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Validate checks a decoded reconcile request whose messages protocol.TruncateMessages has cut.
// Every problem names its field. It enforces the bounds of protocol/bounds.go on identifiers
// (refused when over) and, for a caller that did not cut them, on messages.
func Validate(req protocol.ReconcileRequest) error {
	v := &workspace.ValidationError{}
	switch req.UpdateType {
	case protocol.UpdateFull, protocol.UpdatePartial:
	default:
		v.Add("update_type", "must be %q or %q, got %q", protocol.UpdateFull, protocol.UpdatePartial, clip(string(req.UpdateType)))
	}
	if req.WorkspaceAgentInfos == nil {
		v.Add("workspace_agent_infos", "is required (an empty list is [])")
	}
	seen := make(map[string]bool, len(req.WorkspaceAgentInfos))
	for i, info := range req.WorkspaceAgentInfos {
		f := fmt.Sprintf("workspace_agent_infos[%d]", i)
		if !workspace.IsDNSLabel(info.Name, 63) {
			v.Add(f+".name", "must be a workspace name (DNS-1123 label), got %q", clip(info.Name))
		} else if seen[info.Name] {
			v.Add(f+".name", "workspace %q is reported twice", clip(info.Name))
		}
		seen[info.Name] = true
		if !workspace.IsDNSLabel(info.Namespace, 63) {
			v.Add(f+".namespace", "must be a namespace name (DNS-1123 label), got %q", clip(info.Namespace))
		}
		switch info.TerminationProgress {
		case "", protocol.TerminationTerminating, protocol.TerminationTerminated:
		default:
			v.Add(f+".termination_progress", "must be %q or %q, got %q", protocol.TerminationTerminating, protocol.TerminationTerminated, clip(string(info.TerminationProgress)))
		}
		if e := info.ErrorDetails; e != nil {
			switch e.ErrorType {
			case protocol.ErrorTypeApplier, protocol.ErrorTypeUnknown:
			default:
				v.Add(f+".error_details.error_type", "must be %q or %q, got %q", protocol.ErrorTypeApplier, protocol.ErrorTypeUnknown, clip(string(e.ErrorType)))
			}
			tooLong(v, f+".error_details.error_message", e.ErrorMessage, protocol.MaxMessageBytes)
		}
		if p := info.PodFailure; p != nil {
			if p.Reason == "" {
				v.Add(f+".pod_failure.reason", "is required")
			}
			tooLong(v, f+".pod_failure.reason", p.Reason, protocol.MaxConditionIdentifierBytes)
			tooLong(v, f+".pod_failure.message", p.Message, protocol.MaxMessageBytes)
		}
		validateSteps(v, f+".startup_steps", info.StartupSteps)
		if n := len(info.PodAlerts); n > protocol.MaxPodAlerts {
			v.Add(f+".pod_alerts", "has %d alerts, the limit is %d", n, protocol.MaxPodAlerts)
		}
		for j, a := range info.PodAlerts {
			g := fmt.Sprintf("%s.pod_alerts[%d]", f, j)
			if a.Kind != protocol.PodAlertOOMKilled && a.Kind != protocol.PodAlertEvicted {
				v.Add(g+".kind", "must be %q or %q, got %q", protocol.PodAlertOOMKilled, protocol.PodAlertEvicted, clip(a.Kind))
			}
			if a.Subject == "" {
				v.Add(g+".subject", "is required")
			}
			tooLong(v, g+".subject", a.Subject, protocol.MaxConditionIdentifierBytes)
			if a.At.IsZero() {
				v.Add(g+".at", "is required")
			}
			tooLong(v, g+".message", a.Message, protocol.MaxMessageBytes)
		}
		if d := info.LatestK8sDeploymentInfo; d != nil {
			switch rv := d.Metadata.ResourceVersion; {
			case rv == "":
				v.Add(f+".latest_k8s_deployment_info.metadata.resourceVersion", "is required")
			case !protocol.ValidResourceVersion(rv):
				v.Add(f+".latest_k8s_deployment_info.metadata.resourceVersion", "must be 1 to %d printable ASCII characters without spaces (Kubernetes' are digits), got %d bytes",
					protocol.MaxResourceVersionBytes, len(rv))
			}
			if d.Spec != nil && d.Spec.Replicas != nil && (*d.Spec.Replicas < 0) {
				v.Add(f+".latest_k8s_deployment_info.spec.replicas", "must not be negative, got %d", *d.Spec.Replicas)
			}
			if d.Status != nil {
				cf := f + ".latest_k8s_deployment_info.status.conditions"
				if n := len(d.Status.Conditions); n > protocol.MaxConditions {
					v.Add(cf, "has %d conditions, the limit is %d", n, protocol.MaxConditions)
				}
				for j, c := range d.Status.Conditions {
					g := fmt.Sprintf("%s[%d]", cf, j)
					tooLong(v, g+".type", c.Type, protocol.MaxConditionIdentifierBytes)
					tooLong(v, g+".status", c.Status, protocol.MaxConditionIdentifierBytes)
					tooLong(v, g+".reason", c.Reason, protocol.MaxConditionIdentifierBytes)
					tooLong(v, g+".message", c.Message, protocol.MaxMessageBytes)
				}
			}
		}
	}
	return v.Err()
}

// validateSteps checks a workspace's startup steps as an agent reports them: at most
// protocol.MaxStartupSteps, each an agent's step (protocol.AgentSteps) once, and ValidateStep.
func validateSteps(v *workspace.ValidationError, f string, steps []protocol.StartupStep) {
	if n := len(steps); n > protocol.MaxStartupSteps {
		v.Add(f, "has %d steps, the limit is %d", n, protocol.MaxStartupSteps)
		return
	}
	seen := map[string]bool{}
	for j, st := range steps {
		g := fmt.Sprintf("%s[%d]", f, j)
		switch {
		case !slices.Contains(protocol.AgentSteps, st.Name):
			v.Add(g+".name", "must be one of %q, got %q", protocol.AgentSteps, clip(st.Name))
		case seen[st.Name]:
			v.Add(g+".name", "step %q is reported twice", st.Name)
		}
		seen[st.Name] = true
		ValidateStep(v, g, st)
	}
}

// ValidateStep checks what every startup step must be, whoever reports it: a known state, an
// end only after its start, and bounded text (JSON decoding has made it UTF-8). Its problems are
// added under the prefix f ("" for a step alone).
func ValidateStep(v *workspace.ValidationError, f string, st protocol.StartupStep) {
	if f != "" {
		f += "."
	}
	switch st.State {
	case protocol.StepPending, protocol.StepRunning, protocol.StepDone, protocol.StepFailed:
	default:
		v.Add(f+"state", "must be %q, %q, %q or %q, got %q", protocol.StepPending, protocol.StepRunning, protocol.StepDone, protocol.StepFailed, clip(st.State))
	}
	if st.StartedAt != nil && st.EndedAt != nil && st.EndedAt.Before(*st.StartedAt) {
		v.Add(f+"ended_at", "is before started_at")
	}
	tooLong(v, f+"detail", st.Detail, protocol.MaxStepDetailBytes)
	tooLong(v, f+"log", st.Log, protocol.MaxStepLogBytes)
}

// tooLong adds a problem on field when s is over max bytes; the detail says the size, not the value.
func tooLong(v *workspace.ValidationError, field, s string, max int) {
	if len(s) > max {
		v.Add(field, "is %d bytes, the limit is %d", len(s), max)
	}
}

// clip shortens a value an agent sent for its echo in an error (the request may be megabytes):
// at most 64 bytes, cut on a UTF-8 boundary, and the length said.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
