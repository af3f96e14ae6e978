package protocol

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// A workspace's metadata (docs/decisions.md, "Inside the workspace: metadata and resource
// alerts"): its helper measures the workspace's CPU, memory and volumes from the kernel's own
// figures (the cgroup's and the filesystem's) and runs the custom metadata commands its definition
// declares, and reports them every MetadataInterval to MetadataPath (PUT, a MetadataReport, with
// its token). The server keeps them in memory (and a snapshot in its database at most every
// minute), shows them with the workspace, and turns figures over their thresholds into alerts.

// MetadataPath is where a helper reports its workspace's metadata.
const MetadataPath = "/api/v1/workspace-agent/metadata"

// MetadataInterval is how often a helper measures and reports its workspace's resources.
const MetadataInterval = 10 * time.Second

// Bounds of a metadata specification and report.
const (
	MaxMetadataItems       = 16
	MaxMetadataKeyBytes    = 64
	MaxMetadataNameBytes   = 128
	MaxMetadataScriptBytes = 4 << 10
	// MaxMetadataValueBytes is where a command's output (its value) and error are cut.
	MaxMetadataValueBytes = 1 << 10
	MaxMonitoredVolumes   = 8
	MaxVolumePathBytes    = 512
	// MinMetadataInterval and MaxMetadataInterval bound a command's interval; its timeout is at
	// most its interval.
	MinMetadataInterval = time.Second
	MaxMetadataInterval = 24 * time.Hour
	// DefaultMetadataInterval and DefaultMetadataTimeout are a command's when it says none.
	DefaultMetadataInterval = 10 * time.Second
	DefaultMetadataTimeout  = 5 * time.Second
	// MaxMetadataReportBytes bounds the JSON of one report the server reads.
	MaxMetadataReportBytes = 64 << 10
	// MaxMetadataSpecBytes bounds a specification's JSON (EncodeMetadataSpec): it travels in one
	// environment variable, which Linux bounds at 128 KiB.
	MaxMetadataSpecBytes = 32 << 10
	// MaxReportedBytes bounds a byte count in a report: a percentage of it is computed.
	MaxReportedBytes = int64(1) << 56
)

// EncodeMetadataSpec is a specification's JSON as the helper reads it (HelperMetadataEnv):
// without HTML escapes, which would make a script's < > & six bytes each.
func EncodeMetadataSpec(spec MetadataSpec) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(spec) // strings and numbers: cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// DefaultThresholdPercent is the memory and volume threshold a definition that says nothing gets.
const DefaultThresholdPercent = 90

// HelperMetadataEnv carries a MetadataSpec to the helper, as JSON (the generated pod's main
// container, hangar_agent's init script).
const HelperMetadataEnv = "HANGAR_HELPER_METADATA"

// MetadataSpec is what a workspace's definition asks its helper to collect: custom metadata
// commands (a devfile's hangar.dev/metadata attribute, hangar_agent's metadata blocks) and the
// thresholds of its resources' alerts.
type MetadataSpec struct {
	Items      []MetadataItemSpec  `json:"items,omitempty"`
	Monitoring ResourcesMonitoring `json:"resources_monitoring"`
}

// MetadataItemSpec is one custom metadata command: Script runs with `sh -c` every Interval
// seconds, for at most Timeout seconds; its output, trimmed, is the value shown as DisplayName.
type MetadataItemSpec struct {
	Key         string `json:"key"`
	DisplayName string `json:"display_name"`
	Script      string `json:"script"`
	Interval    int    `json:"interval,omitempty"` // seconds; 0: DefaultMetadataInterval
	Timeout     int    `json:"timeout,omitempty"`  // seconds; 0: DefaultMetadataTimeout (at most Interval)
}

// ResourcesMonitoring holds the thresholds of a workspace's resource alerts, in percent of the
// limit (memory) or of the size (a volume). A nil Memory means DefaultThresholdPercent; 0 turns
// the alert off. No volumes means the workspace's own (its projects' volume or home) at
// DefaultThresholdPercent.
type ResourcesMonitoring struct {
	Memory  *int              `json:"memory,omitempty"`
	Volumes []VolumeThreshold `json:"volumes,omitempty"`
}

// VolumeThreshold is a volume to watch: the filesystem that holds Path.
type VolumeThreshold struct {
	Path      string `json:"path"`
	Threshold int    `json:"threshold"`
}

var metadataKey = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// Validate checks a specification and fills in its defaults. Its errors name the field (items[2].key).
func (s *MetadataSpec) Validate() error {
	if len(s.Items) > MaxMetadataItems {
		return fmt.Errorf("items: %d commands; at most %d", len(s.Items), MaxMetadataItems)
	}
	seen := map[string]bool{}
	for i := range s.Items {
		it := &s.Items[i]
		f := fmt.Sprintf("items[%d]", i)
		switch {
		case it.Key == "" || len(it.Key) > MaxMetadataKeyBytes || !metadataKey.MatchString(it.Key):
			return fmt.Errorf("%s.key: want lower-case letters, digits, '_', '.' and '-' (at most %d bytes), got %q", f, MaxMetadataKeyBytes, it.Key)
		case seen[it.Key]:
			return fmt.Errorf("%s.key: %q is given twice", f, it.Key)
		case !utf8.ValidString(it.DisplayName) || len(it.DisplayName) > MaxMetadataNameBytes || strings.ContainsAny(it.DisplayName, "\r\n\x00"):
			return fmt.Errorf("%s.display_name: want one line of text of at most %d bytes", f, MaxMetadataNameBytes)
		case strings.TrimSpace(it.Script) == "" || len(it.Script) > MaxMetadataScriptBytes || !utf8.ValidString(it.Script) || strings.ContainsRune(it.Script, 0):
			return fmt.Errorf("%s.script: want a shell command of at most %d bytes", f, MaxMetadataScriptBytes)
		case it.Interval < 0 || it.Interval > int(MaxMetadataInterval/time.Second) || (it.Interval > 0 && it.Interval < int(MinMetadataInterval/time.Second)):
			return fmt.Errorf("%s.interval: want seconds from %d to %d, got %d", f, int(MinMetadataInterval/time.Second), int(MaxMetadataInterval/time.Second), it.Interval)
		case it.Timeout < 0:
			return fmt.Errorf("%s.timeout: want seconds, got %d", f, it.Timeout)
		}
		seen[it.Key] = true
		if it.DisplayName == "" {
			it.DisplayName = it.Key
		}
		if it.Interval == 0 {
			it.Interval = int(DefaultMetadataInterval / time.Second)
		}
		if it.Timeout == 0 {
			it.Timeout = min(int(DefaultMetadataTimeout/time.Second), it.Interval)
		}
		if it.Timeout > it.Interval {
			return fmt.Errorf("%s.timeout: %d s is longer than its interval (%d s)", f, it.Timeout, it.Interval)
		}
	}
	m := &s.Monitoring
	if m.Memory != nil && (*m.Memory < 0 || *m.Memory > 100) {
		return fmt.Errorf("resources_monitoring.memory: want a percentage from 0 (off) to 100, got %d", *m.Memory)
	}
	if len(m.Volumes) > MaxMonitoredVolumes {
		return fmt.Errorf("resources_monitoring.volumes: %d volumes; at most %d", len(m.Volumes), MaxMonitoredVolumes)
	}
	paths := map[string]bool{}
	for i, v := range m.Volumes {
		f := fmt.Sprintf("resources_monitoring.volumes[%d]", i)
		if paths[path.Clean(v.Path)] {
			return fmt.Errorf("%s.path: %q is watched twice", f, v.Path)
		}
		paths[path.Clean(v.Path)] = true
		if !path.IsAbs(v.Path) || len(v.Path) > MaxVolumePathBytes || !utf8.ValidString(v.Path) || strings.ContainsAny(v.Path, "\x00\r\n") {
			return fmt.Errorf("%s.path: want an absolute path of at most %d bytes, got %q", f, MaxVolumePathBytes, v.Path)
		}
		if v.Threshold < 0 || v.Threshold > 100 {
			return fmt.Errorf("%s.threshold: want a percentage from 0 (off) to 100, got %d", f, v.Threshold)
		}
	}
	if n := len(EncodeMetadataSpec(*s)); n > MaxMetadataSpecBytes {
		return fmt.Errorf("items: the commands take %d bytes as JSON; at most %d in all", n, MaxMetadataSpecBytes)
	}
	return nil
}

// MemoryThreshold is the memory alert's threshold in percent (0: off).
func (m ResourcesMonitoring) MemoryThreshold() int {
	if m.Memory == nil {
		return DefaultThresholdPercent
	}
	return *m.Memory
}

// ParseMetadataSpec decodes and validates a MetadataSpec ("" is the empty one, with defaults).
func ParseMetadataSpec(s string) (MetadataSpec, error) {
	var spec MetadataSpec
	if strings.TrimSpace(s) != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return MetadataSpec{}, fmt.Errorf("not a metadata specification: %w", err)
		}
		if dec.More() {
			return MetadataSpec{}, fmt.Errorf("not a metadata specification: more than one JSON value")
		}
	}
	return spec, spec.Validate()
}

// MetadataReport is what a helper reports every MetadataInterval: the workspace's resources as
// measured at CollectedAt, and the latest value of each custom metadata command.
type MetadataReport struct {
	CollectedAt time.Time       `json:"collected_at"`
	Resources   Resources       `json:"resources"`
	Items       []MetadataValue `json:"items,omitempty"`
	// Activity is what the helper saw of work in the workspace over the last interval (absent
	// from a helper before protocol 9).
	Activity *Activity `json:"activity,omitempty"`
	// HelperStarted is when the reporting helper started: its OOM kill count is since then, so
	// a count from another start is not compared with this one's.
	HelperStarted time.Time `json:"helper_started,omitempty"`
}

// Activity is the work a helper saw in its workspace over one interval (docs/decisions.md,
// "Inside the workspace: idle by real work"): the CPU its user's processes used, in cores, and
// the busiest of them; a running process the server's list names (its command line, cut); the
// bytes its sessions wrote to their terminals; the connections open to the web editor.
type Activity struct {
	CPUCores          float64 `json:"cpu_cores"`
	TopProcess        string  `json:"top_process,omitempty"`
	Matched           string  `json:"matched,omitempty"`
	TerminalOutput    int64   `json:"terminal_output,omitempty"`
	EditorConnections int     `json:"editor_connections,omitempty"`
}

// MetadataAnswer is the server's answer to a report: the processes (a command's name and first
// words: "make", "go test") whose running counts as work in this workspace, for the next
// interval. A server before protocol 9 answers nothing (204).
type MetadataAnswer struct {
	ActivityProcesses []string `json:"activity_processes,omitempty"`
}

// MaxActivityTextBytes bounds an Activity's process names and command line.
const MaxActivityTextBytes = 256

// Resources are a workspace's figures. A figure the helper cannot read (no cgroup v2 here) is
// absent, never guessed.
type Resources struct {
	CPU     *CPUUsage     `json:"cpu,omitempty"`
	Memory  *MemoryUsage  `json:"memory,omitempty"`
	Volumes []VolumeUsage `json:"volumes,omitempty"`
}

// CPUUsage is the CPU the workspace's processes used over the last interval, in cores (0.25 is a
// quarter of one core's time), and its limit (0: none).
type CPUUsage struct {
	UsedCores  float64 `json:"used_cores"`
	LimitCores float64 `json:"limit_cores,omitempty"`
}

// MemoryUsage is the workspace's memory in use (the cgroup's, page cache it can give back
// excluded), its limit (0: none), the alert's threshold in percent of the limit (0: off), and how
// many of its processes the kernel killed for lack of memory since the helper started.
type MemoryUsage struct {
	UsedBytes  int64 `json:"used_bytes"`
	LimitBytes int64 `json:"limit_bytes,omitempty"`
	Threshold  int   `json:"threshold,omitempty"`
	OOMKills   int64 `json:"oom_kills,omitempty"`
}

// VolumeUsage is the filesystem that holds Path: its size and what is used of it, and the alert's
// threshold in percent (0: off).
type VolumeUsage struct {
	Path       string `json:"path"`
	UsedBytes  int64  `json:"used_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	Threshold  int    `json:"threshold,omitempty"`
}

// MetadataValue is the latest result of a custom metadata command: its output (trimmed), or why
// it has none (Error: its exit status, a timeout).
type MetadataValue struct {
	Key         string    `json:"key"`
	DisplayName string    `json:"display_name"`
	Value       string    `json:"value"`
	Error       string    `json:"error,omitempty"`
	CollectedAt time.Time `json:"collected_at"`
}

// Check refuses a report out of its bounds, naming the field; values and errors over
// MaxMetadataValueBytes are cut (the helper cuts them; a report that does not is cut here).
func (r *MetadataReport) Check() error {
	if len(r.Items) > MaxMetadataItems {
		return fmt.Errorf("items: %d values; at most %d", len(r.Items), MaxMetadataItems)
	}
	seen := map[string]bool{}
	for i := range r.Items {
		it := &r.Items[i]
		f := fmt.Sprintf("items[%d]", i)
		if it.Key == "" || len(it.Key) > MaxMetadataKeyBytes || !metadataKey.MatchString(it.Key) || seen[it.Key] {
			return fmt.Errorf("%s.key: want a key of the specification, once, got %q", f, it.Key)
		}
		seen[it.Key] = true
		if len(it.DisplayName) > MaxMetadataNameBytes || !utf8.ValidString(it.DisplayName) {
			return fmt.Errorf("%s.display_name: want text of at most %d bytes", f, MaxMetadataNameBytes)
		}
		it.Value = TruncateMessage(strings.ToValidUTF8(it.Value, "\uFFFD"), MaxMetadataValueBytes)
		it.Error = TruncateMessage(strings.ToValidUTF8(it.Error, "\uFFFD"), MaxMetadataValueBytes)
	}
	if a := r.Activity; a != nil {
		if a.CPUCores < 0 || a.CPUCores > 1e6 || a.TerminalOutput < 0 || a.EditorConnections < 0 {
			return fmt.Errorf("activity: want cores, bytes and connections from 0")
		}
		a.TopProcess = TruncateMessage(strings.ToValidUTF8(a.TopProcess, "\uFFFD"), MaxActivityTextBytes)
		a.Matched = TruncateMessage(strings.ToValidUTF8(a.Matched, "\uFFFD"), MaxActivityTextBytes)
	}
	res := &r.Resources
	if c := res.CPU; c != nil && (c.UsedCores < 0 || c.LimitCores < 0 || c.UsedCores > 1e6 || c.LimitCores > 1e6) {
		return fmt.Errorf("resources.cpu: want cores from 0, got %v of %v", c.UsedCores, c.LimitCores)
	}
	if m := res.Memory; m != nil && (m.UsedBytes < 0 || m.LimitBytes < 0 || m.OOMKills < 0 || m.Threshold < 0 || m.Threshold > 100 ||
		m.UsedBytes > MaxReportedBytes || m.LimitBytes > MaxReportedBytes) {
		return fmt.Errorf("resources.memory: want bytes (at most 2^56), kills from 0 and a threshold from 0 to 100")
	}
	if len(res.Volumes) > MaxMonitoredVolumes {
		return fmt.Errorf("resources.volumes: %d volumes; at most %d", len(res.Volumes), MaxMonitoredVolumes)
	}
	for i, v := range res.Volumes {
		if !path.IsAbs(v.Path) || len(v.Path) > MaxVolumePathBytes || !utf8.ValidString(v.Path) || strings.ContainsFunc(v.Path, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return fmt.Errorf("resources.volumes[%d].path: want an absolute path of at most %d bytes, without control characters", i, MaxVolumePathBytes)
		}
		if v.UsedBytes < 0 || v.TotalBytes < 0 || v.Threshold < 0 || v.Threshold > 100 || v.UsedBytes > MaxReportedBytes || v.TotalBytes > MaxReportedBytes {
			return fmt.Errorf("resources.volumes[%d]: want bytes from 0 (at most 2^56) and a threshold from 0 to 100", i)
		}
	}
	return nil
}
