package reconcile

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// A huge value an agent sent is not echoed whole in the error (it would reach the 400 answer and
// the logs): at most 64 bytes of it, and its length.
func TestValidateClipsEchoedValues(t *testing.T) {
	huge := strings.Repeat("é", 1<<20) // 2 MiB, cut on a rune boundary
	err := Validate(protocol.ReconcileRequest{UpdateType: protocol.UpdateType(huge), WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{{Name: huge, Namespace: "ns"}}})
	if err == nil {
		t.Fatal("a huge update type and name were accepted")
	}
	msg := err.Error()
	if len(msg) > 2048 || !strings.Contains(msg, "(2097152 bytes)") || !utf8.ValidString(msg) {
		t.Fatalf("error of %d bytes, want a short one naming the length: %.300s", len(msg), msg)
	}
}

// TestValidateStartupSteps: a report's startup steps are refused, naming the field, when a name
// or state is unknown, a name is repeated, an end is before its start, there are too many, or a
// detail or log is over its bound (a caller that did not cut them); good ones pass, and
// protocol.TruncateMessages cuts a log to its last lines and a detail to its bound.
func TestValidateStartupSteps(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	req := func(steps ...protocol.StartupStep) protocol.ReconcileRequest {
		return protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{{Name: "ws", Namespace: "ns", StartupSteps: steps}}}
	}
	good := []protocol.StartupStep{
		{Name: protocol.StepImagePrepare, State: protocol.StepDone, StartedAt: &t0, EndedAt: &t1, Detail: "building r:1 from b:1: 0 steps, 1 features"},
		{Name: protocol.StepImageBuild, State: protocol.StepRunning, StartedAt: &t1, Log: "feature 1/1: r\n"},
		{Name: protocol.StepImagePush, State: protocol.StepPending},
	}
	if err := Validate(req(good...)); err != nil {
		t.Fatalf("good steps: %v", err)
	}
	for _, tc := range []struct {
		steps []protocol.StartupStep
		field string
	}{
		{[]protocol.StartupStep{{Name: "hack", State: protocol.StepDone}}, "startup_steps[0].name"},
		{[]protocol.StartupStep{{Name: protocol.StepImageBuild, State: "exploded"}}, "startup_steps[0].state"},
		{[]protocol.StartupStep{good[0], good[0]}, "startup_steps[1].name"},
		{[]protocol.StartupStep{{Name: protocol.StepImageBuild, State: protocol.StepDone, StartedAt: &t1, EndedAt: &t0}}, "startup_steps[0].ended_at"},
		{make([]protocol.StartupStep, protocol.MaxStartupSteps+1), "startup_steps"},
		{[]protocol.StartupStep{{Name: protocol.StepImageBuild, State: protocol.StepRunning, Log: strings.Repeat("x", protocol.MaxStepLogBytes+1)}}, "startup_steps[0].log"},
		{[]protocol.StartupStep{{Name: protocol.StepImageBuild, State: protocol.StepRunning, Detail: strings.Repeat("x", protocol.MaxStepDetailBytes+1)}}, "startup_steps[0].detail"},
	} {
		err := Validate(req(tc.steps...))
		if err == nil || !strings.Contains(err.Error(), "workspace_agent_infos[0]."+tc.field) {
			t.Errorf("%s: got %v, want a refusal naming it", tc.field, err)
		}
	}
	long := req(protocol.StartupStep{Name: protocol.StepImageBuild, State: protocol.StepRunning,
		Detail: strings.Repeat("d", 2*protocol.MaxStepDetailBytes), Log: strings.Repeat("line\n", protocol.MaxStepLogBytes) + "the end\n"})
	if n := protocol.TruncateMessages(&long); n != 2 {
		t.Errorf("cut %d, want 2", n)
	}
	st := long.WorkspaceAgentInfos[0].StartupSteps[0]
	if len(st.Log) > protocol.MaxStepLogBytes || !strings.HasPrefix(st.Log, protocol.TruncatedPrefix+"line\n") || !strings.HasSuffix(st.Log, "line\nthe end\n") ||
		len(st.Detail) > protocol.MaxStepDetailBytes {
		t.Errorf("cut log %d bytes %.60q…, detail %d bytes", len(st.Log), st.Log, len(st.Detail))
	}
	if err := Validate(long); err != nil {
		t.Errorf("after the cut: %v", err)
	}
}
