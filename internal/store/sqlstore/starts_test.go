package sqlstore

import (
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func TestStartChange(t *testing.T) {
	ws := func(desired, actual workspace.State) *workspace.Workspace {
		return &workspace.Workspace{OwnerID: "u1", DesiredState: desired, ActualState: actual}
	}
	const (
		R  = workspace.Running
		S  = workspace.Stopped
		T  = workspace.Terminated
		RR = workspace.RestartRequested
		St = workspace.Starting
		CR = workspace.CreationRequested
		F  = workspace.Failed
	)
	for _, tc := range []struct {
		name       string
		prev, next *workspace.Workspace
		want       startAction
	}{
		{"create", nil, ws(R, CR), startRequested},
		{"terraform create", nil, ws(R, St), startRequested},
		{"start", ws(S, S), ws(R, S), startRequested},
		{"restart", ws(R, R), ws(RR, R), startRequested},
		{"the restart's second leg keeps its start", ws(RR, S), ws(R, S), startNone},
		{"starting", ws(R, CR), ws(R, St), startNone},
		{"first Running", ws(R, St), ws(R, R), startSeen},
		{"Running after a failure", ws(R, F), ws(R, R), startSeen},
		{"still Running", ws(R, R), ws(R, R), startNone},
		{"Running but wanted stopped", ws(S, St), ws(S, R), startNone},
		{"stop before running", ws(R, St), ws(S, St), startDropped},
		{"delete", ws(R, St), ws(T, St), startDropped},
		{"an error on the way", ws(R, St), ws(R, workspace.Error), startNone},
		{"prebuilt", nil, &workspace.Workspace{OwnerID: store.PrebuildsUserID, DesiredState: R, ActualState: CR}, startNone},
	} {
		if got := startChange(tc.prev, *tc.next); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
