package reconcile

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var t0 = time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)

func genRow(t *rapid.T, i int) workspace.Workspace {
	desired := rapid.SampledFrom(workspace.DesiredStates).Draw(t, "desired")
	actual := rapid.SampledFrom(workspace.ActualStates).Draw(t, "actual")
	// Names repeat (two owners' dev, or a dev created again): the agent names workspaces by their
	// cluster names, which never do, and the rows must never mix.
	name := rapid.SampledFrom([]string{"dev", "app"}).Draw(t, "name")
	kube := fmt.Sprintf("%s-%d", name, i)
	ns := rapid.SampledFrom([]string{"hangar-" + kube, "shared"}).Draw(t, "namespace")
	w := workspace.Workspace{ID: fmt.Sprint(i), Name: name, KubeName: kube, Namespace: ns,
		DesiredState: desired, ActualState: actual,
		DesiredStateUpdatedAt: t0.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "desiredAt")) * time.Minute)}
	if rapid.Bool().Draw(t, "responded") {
		r := t0.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "respondedAt")) * time.Minute)
		w.RespondedToAgentAt = &r
	}
	return w
}

func genInfo(t *rapid.T, name, ns string) protocol.WorkspaceAgentInfo {
	info := protocol.WorkspaceAgentInfo{Name: name, Namespace: ns}
	switch rapid.IntRange(0, 4).Draw(t, "kind") {
	case 1:
		info.ErrorDetails = &protocol.ErrorDetails{ErrorType: "applier", ErrorMessage: "boom"}
	case 2:
		info.TerminationProgress = rapid.SampledFrom([]string{"Terminating", "Terminated"}).Draw(t, "term")
	case 3:
		rep := int32(rapid.IntRange(0, 1).Draw(t, "replicas"))
		info.LatestK8sDeploymentInfo = &protocol.DeploymentInfo{
			Metadata: protocol.DeploymentMetadata{ResourceVersion: rapid.StringMatching(`[0-9]{1,4}`).Draw(t, "rv")},
			Spec:     &protocol.DeploymentSpec{Replicas: &rep},
			Status: &protocol.DeploymentStatus{AvailableReplicas: rep, Conditions: []protocol.DeploymentCondition{
				{Type: "Progressing", Reason: "NewReplicaSetAvailable"}, {Type: "Available", Reason: "MinimumReplicasAvailable"}}},
		}
	}
	return info
}

// TestDecideProperties checks the rules that hold for every input, on random rows and reports.
func TestDecideProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "rows")
		var rows []workspace.Workspace
		var infos []protocol.WorkspaceAgentInfo
		for i := 0; i < n; i++ {
			w := genRow(t, i)
			rows = append(rows, w)
			if rapid.Bool().Draw(t, "reported") {
				infos = append(infos, genInfo(t, w.KubeName, w.Namespace))
			}
		}
		orphans := rapid.IntRange(0, 2).Draw(t, "orphans")
		for i := 0; i < orphans; i++ {
			infos = append(infos, genInfo(t, fmt.Sprintf("ghost%d", i), "hangar-ghost"))
		}
		ut := rapid.SampledFrom([]protocol.UpdateType{protocol.UpdateFull, protocol.UpdatePartial}).Draw(t, "type")
		now := t0.Add(10 * time.Minute)
		out := Decide(Input{UpdateType: ut, Rows: rows, Infos: infos, Now: now})

		reported := map[string]protocol.WorkspaceAgentInfo{}
		for _, info := range infos {
			reported[info.Name] = info
		}
		items := map[string]Item{}
		for _, it := range out.Items {
			items[it.Workspace.KubeName] = it
			if it.Workspace.RespondedToAgentAt == nil || !it.Workspace.RespondedToAgentAt.Equal(now) {
				t.Fatalf("%s answered without responded_to_agent_at = now", it.Workspace.KubeName)
			}
		}
		if len(out.Changed) != len(out.Items) {
			t.Fatalf("%d rows written for %d answered", len(out.Changed), len(out.Items))
		}
		if len(out.Orphans) != orphans {
			t.Fatalf("%d orphans, want %d", len(out.Orphans), orphans)
		}
		for _, row := range rows {
			it, answered := items[row.KubeName]
			info, wasReported := reported[row.KubeName]
			changed := ChangedSinceResponse(row)
			fully := row.DesiredState == workspace.Terminated && row.ActualState == workspace.Terminated
			// Who is answered.
			wantAnswered := wasReported || changed
			if ut == protocol.UpdateFull {
				wantAnswered = wasReported || !fully
			}
			if answered != wantAnswered {
				t.Fatalf("%s answered=%v, want %v (reported %v, changed %v, type %s)", row.KubeName, answered, wantAnswered, wasReported, changed, ut)
			}
			if !answered {
				continue
			}
			w := it.Workspace
			// Terminated is permanent; only RestartRequested changes desired by itself.
			if w.DesiredState != row.DesiredState {
				if row.DesiredState != workspace.RestartRequested || w.DesiredState != workspace.Running || w.ActualState != workspace.Stopped {
					t.Fatalf("%s desired %s → %s", row.KubeName, row.DesiredState, w.DesiredState)
				}
				if !w.DesiredStateUpdatedAt.Equal(now) || !it.IncludeConfig {
					t.Fatalf("%s restart flip without new timestamp or config", row.KubeName)
				}
			}
			// Config follows the seed's rule on partial reconciles.
			if ut == protocol.UpdatePartial && it.IncludeConfig != (changed || w.DesiredState != row.DesiredState) {
				t.Fatalf("%s config=%v, changed=%v", row.KubeName, it.IncludeConfig, changed)
			}
			if changed && !it.IncludeConfig {
				t.Fatalf("%s changed but no config", row.KubeName)
			}
			// An error becomes Error only when the desired state did not change since the response.
			if w.ActualState == workspace.Error && row.ActualState != workspace.Error {
				if !wasReported || info.ErrorDetails == nil || changed {
					t.Fatalf("%s became Error (reported %v, changed %v)", row.KubeName, wasReported, changed)
				}
			}
			if wasReported && info.ErrorDetails != nil && !changed && info.TerminationProgress != "Terminated" && w.ActualState != workspace.Error {
				t.Fatalf("%s: current error lost, actual %s", row.KubeName, w.ActualState)
			}
			// Nothing reported, nothing changes in the actual state.
			if !wasReported && w.ActualState != row.ActualState {
				t.Fatalf("%s actual changed without a report", row.KubeName)
			}
		}
	})
}
