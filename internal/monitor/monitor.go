// Package monitor decides over what a workspace's helper reports from inside it
// (docs/decisions.md, "Inside the workspace: metadata and resource alerts" and "idle by real
// work"): which figures raise an alert, and whether an interval's activity is work. Pure: the
// helper's report (protocol) and the domain's policy in, a decision out.
package monitor

import (
	"fmt"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// ResourceConditions are the condition alerts a helper's figures raise, each with its detail,
// keyed by kind and subject: memory at or over its threshold of its limit, a volume at or over its
// threshold of its size. A threshold of 0 raises nothing.
func ResourceConditions(r protocol.Resources) []workspace.Alert {
	var out []workspace.Alert
	if m := r.Memory; m != nil && m.Threshold > 0 && m.LimitBytes > 0 && m.UsedBytes*100 >= int64(m.Threshold)*m.LimitBytes {
		out = append(out, workspace.Alert{Kind: workspace.AlertMemory, Detail: fmt.Sprintf("memory at %d%% of %s (threshold %d%%)",
			m.UsedBytes*100/m.LimitBytes, workspace.Bytes(m.LimitBytes), m.Threshold)})
	}
	for _, v := range r.Volumes {
		if v.Threshold > 0 && v.TotalBytes > 0 && v.UsedBytes*100 >= int64(v.Threshold)*v.TotalBytes {
			out = append(out, workspace.Alert{Kind: workspace.AlertVolume, Subject: v.Path, Detail: fmt.Sprintf("volume %s at %d%% of %s (threshold %d%%)",
				v.Path, v.UsedBytes*100/v.TotalBytes, workspace.Bytes(v.TotalBytes), v.Threshold)})
		}
	}
	return out
}

// WorkActive says whether what a helper saw over one interval is work under policy l, and why
// (docs/decisions.md, "Inside the workspace: idle by real work"): a running process the policy
// names, the user's processes using at least its CPU threshold, output to a terminal of a
// session, or a connection to the web editor. An open shell that prints nothing, an idle editor
// tab with no connection, a process asleep: none of them is work.
func WorkActive(a protocol.Activity, l workspace.Lifecycle) (bool, string) {
	switch {
	case a.Matched != "":
		return true, "process running: " + a.Matched
	case a.CPUCores >= l.CPUThreshold():
		why := fmt.Sprintf("CPU: %.2f cores", a.CPUCores)
		if a.TopProcess != "" {
			why += " (most by " + a.TopProcess + ")"
		}
		return true, why
	case a.TerminalOutput > 0:
		return true, "terminal output in a session"
	case a.EditorConnections > 0:
		return true, fmt.Sprintf("%d connection(s) to the web editor", a.EditorConnections)
	}
	return false, ""
}
