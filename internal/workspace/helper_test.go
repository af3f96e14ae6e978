package workspace

import (
	"strings"
	"testing"
	"time"
)

func TestHelperStatus(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ptr := func(d time.Duration) *time.Time { at := start.Add(d); return &at }
	tf := func(desired, actual State, h HelperRecord) Workspace {
		return Workspace{Backend: KindTerraform, DesiredState: desired, ActualState: actual, DesiredStateUpdatedAt: start.Add(-time.Minute),
			ActualStateUpdatedAt: ptr(0), Helper: h}
	}
	kube := func(desired, actual State, errMsg string) Workspace {
		return Workspace{Backend: KindKubernetes, DesiredState: desired, ActualState: actual, DesiredStateUpdatedAt: start, ActualStateUpdatedAt: ptr(time.Minute), ErrorMessage: errMsg}
	}
	for _, tc := range []struct {
		name      string
		w         Workspace
		now       time.Duration // after start
		state     HelperState
		since     *time.Time
		lastError string
		problem   string // a part of it; "" for none
	}{
		{"tf connected", tf(Running, Running, HelperRecord{ConnectedAt: ptr(time.Second), HasToken: true}), time.Hour, HelperConnected, ptr(time.Second), "", ""},
		{"tf waiting within the grace", tf(Running, Running, HelperRecord{HasToken: true}), HelperGrace - time.Second, HelperWaiting, ptr(0), "", ""},
		{"tf never connected", tf(Running, Running, HelperRecord{HasToken: true}), HelperGrace + time.Second, HelperWaiting, ptr(0), "",
			"has not connected 2m1s after the workspace became Running: the machine may not run hangar_agent's init script"},
		{"tf no hangar_agent", tf(Running, Running, HelperRecord{}), 3 * time.Minute, HelperWaiting, ptr(0), "", "holds no hangar_agent"},
		{"tf an earlier run's end is not this run's", tf(Running, Running, HelperRecord{DisconnectedAt: ptr(-time.Hour), LastError: "old", HasToken: true}),
			3 * time.Minute, HelperWaiting, ptr(0), "old", "has not connected 3m0s"},
		{"tf disconnected", tf(Running, Running, HelperRecord{DisconnectedAt: ptr(time.Minute), LastError: "the connection was lost", HasToken: true}),
			time.Minute + HelperGrace, HelperDisconnected, ptr(time.Minute), "the connection was lost", "connection ended 2m0s ago"},
		{"tf starting: no problem yet", tf(Running, Starting, HelperRecord{HasToken: true}), time.Hour, HelperWaiting, ptr(-time.Minute), "", ""},
		{"tf stopped", tf(Stopped, Stopped, HelperRecord{LastError: "x"}), time.Hour, HelperOff, nil, "x", ""},
		{"kube running", kube(Running, Running, ""), time.Hour, HelperConnected, ptr(time.Minute), "", ""},
		{"kube starting", kube(Running, Starting, ""), time.Minute, HelperWaiting, ptr(0), "", ""},
		{"kube starting too long", kube(Running, Starting, "Back-off pulling image"), HelperGrace, HelperWaiting, ptr(0), "Back-off pulling image", "pod is not ready 2m0s after the start"},
		{"kube failed", kube(Running, Failed, "CrashLoopBackOff"), time.Hour, HelperWaiting, ptr(0), "CrashLoopBackOff", ""},
		{"kube stopped", kube(Stopped, Stopped, ""), time.Hour, HelperOff, nil, "", ""},
	} {
		got := Helper(tc.w, start.Add(tc.now))
		if got.State != tc.state || (got.Since == nil) != (tc.since == nil) || (got.Since != nil && !got.Since.Equal(*tc.since)) || got.LastError != tc.lastError {
			t.Errorf("%s: %+v, want %s since %v with last error %q", tc.name, got, tc.state, tc.since, tc.lastError)
		}
		if (tc.problem == "") != (got.Problem == "") || !strings.Contains(got.Problem, tc.problem) {
			t.Errorf("%s: problem %q, want one with %q", tc.name, got.Problem, tc.problem)
		}
	}
}
