package workspace

import (
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// A workspace's resource alerts (docs/decisions.md, "Inside the workspace: metadata and resource
// alerts"). Two sorts:
//   - conditions, raised while a figure is over its threshold and cleared once it is under again
//     (AlertMemory, AlertVolume): ClearedAt is nil while one holds;
//   - events, which happen at one moment (AlertOOMKilled, AlertEvicted): raised and cleared at
//     once.
//
// Each raise is a row the server keeps (Store.RecordWorkspaceAlert): what a later issue's
// notifications send.
const (
	AlertMemory    = "memory"     // the workspace's memory over its threshold of its limit
	AlertVolume    = "volume"     // a volume over its threshold of its size (Subject: its path)
	AlertOOMKilled = "oom-killed" // the kernel killed a process (or the container) for lack of memory
	AlertEvicted   = "evicted"    // Kubernetes evicted the workspace's pod (node pressure)
)

// MaxAlertsKept bounds the alerts kept per workspace: the oldest cleared ones go first.
const MaxAlertsKept = 20

// Alert is one resource alert of a workspace.
type Alert struct {
	ID int64
	// Kind is one of the Alert* constants; Subject what it is about within its kind (a volume's
	// path, a container's name; "" for the workspace's memory).
	Kind, Subject string
	// Detail says what happened, in words: "memory at 95% of 2.0 GiB (threshold 90%)".
	Detail    string
	RaisedAt  time.Time
	ClearedAt *time.Time
}

// Event reports whether the alert is an event (raised and cleared at once).
func (a Alert) Event() bool {
	return a.Kind == AlertOOMKilled || a.Kind == AlertEvicted
}

// ResourceConditions are the condition alerts a helper's figures raise, each with its detail,
// keyed by kind and subject: memory at or over its threshold of its limit, a volume at or over its
// threshold of its size. A threshold of 0 raises nothing.
func ResourceConditions(r protocol.Resources) []Alert {
	var out []Alert
	if m := r.Memory; m != nil && m.Threshold > 0 && m.LimitBytes > 0 && m.UsedBytes*100 >= int64(m.Threshold)*m.LimitBytes {
		out = append(out, Alert{Kind: AlertMemory, Detail: fmt.Sprintf("memory at %d%% of %s (threshold %d%%)",
			m.UsedBytes*100/m.LimitBytes, Bytes(m.LimitBytes), m.Threshold)})
	}
	for _, v := range r.Volumes {
		if v.Threshold > 0 && v.TotalBytes > 0 && v.UsedBytes*100 >= int64(v.Threshold)*v.TotalBytes {
			out = append(out, Alert{Kind: AlertVolume, Subject: v.Path, Detail: fmt.Sprintf("volume %s at %d%% of %s (threshold %d%%)",
				v.Path, v.UsedBytes*100/v.TotalBytes, Bytes(v.TotalBytes), v.Threshold)})
		}
	}
	return out
}

// Bytes says a size in binary units with one decimal: 512 B, 1.5 KiB, 2.0 GiB.
func Bytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB", "PiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.1f %s", f, unit)
}
