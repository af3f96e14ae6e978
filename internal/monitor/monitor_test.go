package monitor

import (
	"fmt"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// A figure at or over its threshold is a condition (its detail says how much of what); under it,
// with a threshold of 0 (off) or without a limit, none.
func TestResourceConditions(t *testing.T) {
	const gib = int64(1) << 30
	got := ResourceConditions(protocol.Resources{
		Memory: &protocol.MemoryUsage{UsedBytes: 9*gib/10 + 1, LimitBytes: gib, Threshold: 90},
		Volumes: []protocol.VolumeUsage{
			{Path: "/projects", UsedBytes: 95, TotalBytes: 100, Threshold: 95},
			{Path: "/home", UsedBytes: 94, TotalBytes: 100, Threshold: 95},
			{Path: "/tmp", UsedBytes: 100, TotalBytes: 100, Threshold: 0},
			{Path: "/empty", UsedBytes: 0, TotalBytes: 0, Threshold: 1},
		},
	})
	want := "[{memory  memory at 90% of 1.0 GiB (threshold 90%)} {volume /projects volume /projects at 95% of 100 B (threshold 95%)}]"
	var short []string
	for _, a := range got {
		short = append(short, fmt.Sprintf("{%s %s %s}", a.Kind, a.Subject, a.Detail))
	}
	if fmt.Sprint(short) != want {
		t.Fatalf("%v\nwant %s", short, want)
	}
	if got := ResourceConditions(protocol.Resources{Memory: &protocol.MemoryUsage{UsedBytes: 10, Threshold: 90}}); len(got) != 0 {
		t.Fatalf("memory without a limit: %+v", got)
	}
}

// Work is a named process, CPU at or over the policy's threshold, terminal output or an editor
// connection, in that order of reasons; an interval with none of them is idle.
func TestWorkActive(t *testing.T) {
	p := workspace.Lifecycle{Activity: workspace.ActivityWork}
	for _, tc := range []struct {
		a      protocol.Activity
		p      workspace.Lifecycle
		active bool
		why    string
	}{
		{protocol.Activity{}, p, false, ""},
		{protocol.Activity{CPUCores: 0.09, TopProcess: "bash"}, p, false, ""},
		{protocol.Activity{CPUCores: 0.1, TopProcess: "go"}, p, true, "CPU: 0.10 cores (most by go)"},
		{protocol.Activity{CPUCores: 0.3}, workspace.Lifecycle{ActivityCPU: 0.5}, false, ""},
		{protocol.Activity{CPUCores: 2, Matched: "make -j4 (pid 7)"}, p, true, "process running: make -j4 (pid 7)"},
		{protocol.Activity{TerminalOutput: 1}, p, true, "terminal output in a session"},
		{protocol.Activity{EditorConnections: 2}, p, true, "2 connection(s) to the web editor"},
	} {
		if active, why := WorkActive(tc.a, tc.p); active != tc.active || why != tc.why {
			t.Errorf("%+v under %+v: %v %q, want %v %q", tc.a, tc.p, active, why, tc.active, tc.why)
		}
	}
}
