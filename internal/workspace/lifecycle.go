package workspace

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Duration is a time.Duration written in JSON as Go's duration text ("8h", "90m"); it also reads
// a number of seconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration's text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "8h" (Go's duration text) or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n float64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("must be a duration such as \"8h\" or \"30m\"")
		}
		*d = Duration(n * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("must be a duration such as \"8h\" or \"30m\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// Lifecycle is the lifecycle policy of a template (Terraform workspaces) or an agent (Kubernetes
// workspaces): what the lifecycle executor does to their workspaces without being asked (the
// seed's "Autobuild Operations"). A zero duration turns its rule off.
type Lifecycle struct {
	// DefaultTTL is the autostop TTL of workspaces that set none: a running workspace is stopped
	// this long after its start or its last use, whichever is later.
	DefaultTTL Duration `json:"default_ttl,omitempty"`
	// MaxTTL bounds a workspace's own TTL: when set, a workspace may neither exceed it nor turn
	// autostop off.
	MaxTTL Duration `json:"max_ttl,omitempty"`
	// FailureTTL stops a workspace this long after it failed (the seed's "Failure TTL").
	FailureTTL Duration `json:"failure_ttl,omitempty"`
	// DormancyThreshold: a workspace nobody used for this long is stopped and marked dormant.
	DormancyThreshold Duration `json:"dormancy_threshold,omitempty"`
	// DormancyAutoDelete deletes a workspace dormant for this long, unless its owner starts it.
	DormancyAutoDelete Duration `json:"dormancy_auto_delete,omitempty"`
	// MaxActive stops a workspace this long after it was last started, used or not (GitLab's
	// max_active_hours_before_stop).
	MaxActive Duration `json:"max_active,omitempty"`
	// MaxStopped deletes a workspace stopped for this long (GitLab's
	// max_stopped_hours_before_termination).
	MaxStopped Duration `json:"max_stopped,omitempty"`
	// Activity is what counts as use for the autostop TTL and dormancy (docs/decisions.md,
	// "Inside the workspace: idle by real work"): ActivityConnections ("" too), traffic through
	// the proxy or the server and the owner's changes; or ActivityWork, the work its helper sees
	// inside: CPU time of the user's processes at or over ActivityCPU cores (DefaultActivityCPU
	// when 0), a running process that ActivityProcesses names, terminal output in a session,
	// connections to the web editor.
	Activity          string   `json:"activity,omitempty"`
	ActivityProcesses []string `json:"activity_processes,omitempty"`
	ActivityCPU       float64  `json:"activity_cpu,omitempty"`
}

// The values of Lifecycle.Activity.
const (
	ActivityConnections = "connections"
	ActivityWork        = "work"
)

// DefaultActivityCPU is the CPU, in cores averaged over the helper's interval, at or over which
// the user's processes are working.
const DefaultActivityCPU = 0.1

// Bounds of ActivityProcesses.
const (
	MaxActivityProcesses     = 32
	MaxActivityProcessLength = 128
)

// CPUThreshold is the CPU at or over which the user's processes are working.
func (l Lifecycle) CPUThreshold() float64 {
	if l.ActivityCPU > 0 {
		return l.ActivityCPU
	}
	return DefaultActivityCPU
}

// MinLifecycleDuration is the shortest duration a policy or a workspace's TTL may set: the
// executor looks once a minute.
const MinLifecycleDuration = time.Minute

// Validate adds each problem of l to v, naming fields under prefix ("lifecycle.").
func (l Lifecycle) Validate(prefix string, v *ValidationError) {
	for _, f := range []struct {
		name string
		d    Duration
	}{
		{"default_ttl", l.DefaultTTL}, {"max_ttl", l.MaxTTL}, {"failure_ttl", l.FailureTTL},
		{"dormancy_threshold", l.DormancyThreshold}, {"dormancy_auto_delete", l.DormancyAutoDelete},
		{"max_active", l.MaxActive}, {"max_stopped", l.MaxStopped},
	} {
		if f.d != 0 && f.d.D() < MinLifecycleDuration {
			v.Add(prefix+f.name, "must be 0 (off) or at least %s, got %s", MinLifecycleDuration, f.d)
		}
	}
	if l.MaxTTL != 0 && l.DefaultTTL.D() > l.MaxTTL.D() {
		v.Add(prefix+"default_ttl", "must not exceed max_ttl (%s), got %s", l.MaxTTL, l.DefaultTTL)
	}
	if l.DormancyAutoDelete != 0 && l.DormancyThreshold == 0 {
		v.Add(prefix+"dormancy_auto_delete", "needs dormancy_threshold: only dormant workspaces are deleted")
	}
	if l.Activity != "" && l.Activity != ActivityConnections && l.Activity != ActivityWork {
		v.Add(prefix+"activity", "must be %q or %q, got %q", ActivityConnections, ActivityWork, l.Activity)
	}
	if len(l.ActivityProcesses) > MaxActivityProcesses {
		v.Add(prefix+"activity_processes", "has %d entries, at most %d", len(l.ActivityProcesses), MaxActivityProcesses)
	}
	for i, p := range l.ActivityProcesses {
		if strings.TrimSpace(p) != p || p == "" || len(p) > MaxActivityProcessLength || strings.ContainsAny(p, "\x00\r\n\t") || !utf8.ValidString(p) {
			v.Add(fmt.Sprintf("%sactivity_processes[%d]", prefix, i), "must be a command's name and first words (\"make\", \"go test\"), at most %d bytes, got %q", MaxActivityProcessLength, p)
		}
	}
	if l.ActivityCPU < 0 || l.ActivityCPU > 1024 {
		v.Add(prefix+"activity_cpu", "must be cores from 0 (the default, %g) to 1024, got %g", DefaultActivityCPU, l.ActivityCPU)
	}
}

// Schedule is a workspace's own lifecycle settings, within its policy's bounds.
type Schedule struct {
	// Autostart is a cron expression (minute hour day-of-month month day-of-week) at which a
	// stopped workspace is started; "" is none. Timezone is the IANA zone it is read in ("" is
	// UTC).
	Autostart string
	Timezone  string
	// TTL overrides the policy's DefaultTTL (nil: the default; 0: autostop off, where allowed).
	TTL *time.Duration
}

// TTL is the autostop TTL in force for a workspace with schedule s under policy p (0: none).
func TTL(s Schedule, p Lifecycle) time.Duration {
	ttl := p.DefaultTTL.D()
	if s.TTL != nil {
		ttl = *s.TTL
	}
	if m := p.MaxTTL.D(); m > 0 && (ttl == 0 || ttl > m) {
		ttl = m // the policy's bound wins over a TTL set before it was tightened
	}
	return ttl
}

// CheckTTL returns why ttl may not be a workspace's own TTL under policy p ("" if it may).
func CheckTTL(ttl time.Duration, p Lifecycle) string {
	switch {
	case ttl < 0:
		return fmt.Sprintf("must not be negative, got %s", ttl)
	case ttl != 0 && ttl < MinLifecycleDuration:
		return fmt.Sprintf("must be 0 (off) or at least %s, got %s", MinLifecycleDuration, ttl)
	case p.MaxTTL != 0 && ttl == 0:
		return fmt.Sprintf("must be set: the policy stops workspaces after at most %s", p.MaxTTL)
	case p.MaxTTL != 0 && ttl > p.MaxTTL.D():
		return fmt.Sprintf("must not exceed the policy's max_ttl (%s), got %s", p.MaxTTL, ttl)
	}
	return ""
}

// Policy returns the lifecycle policy of an agent's workspaces: its lifecycle settings, with
// GitLab's two lifetimes.
func (c AgentConfig) Policy() Lifecycle {
	l := c.Lifecycle
	l.MaxActive = Duration(time.Duration(c.MaxActiveHoursBeforeStop) * time.Hour)
	l.MaxStopped = Duration(time.Duration(c.MaxStoppedHoursBeforeTermination) * time.Hour)
	return l
}
