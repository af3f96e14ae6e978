// Package lifecycle decides what the lifecycle executor does to a workspace nobody is asking about
// (the seed's "Autobuild Operations": autostart, autostop, failure TTL, dormancy and auto-delete,
// plus GitLab's two agent lifetimes). Decide is a pure function of a snapshot and the time; the
// executor (package autobuild) applies its answer through the workspace's backend, deciding again
// on the locked row, so that a change is made once whatever the number of replicas.
package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA zones; a static binary may run where the system has none

	"github.com/robfig/cron/v3"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Snapshot is what a decision reads about one workspace.
type Snapshot struct {
	Desired, Actual workspace.State
	// DesiredAt is when the desired state last changed: the start that a TTL and the max active
	// lifetime count from, the stop that the max stopped lifetime and the next autostart count from.
	DesiredAt time.Time
	// ActualAt is when the actual state last changed (nil: never): a failure's time.
	ActualAt *time.Time
	// LastUse is the latest use: creation, a user's API change, a build a user asked for, or
	// traffic through the proxy or the server (the workspace's LastActivityAt and CreatedAt); under
	// a policy whose activity is work, creation or the latest work its helper saw (LastWorkAt).
	LastUse time.Time
	// NoWork: under a policy whose activity is work, its helper has seen none (LastUse is the
	// creation): the action's detail says so.
	NoWork    bool
	DormantAt *time.Time
	Schedule  workspace.Schedule
	Policy    workspace.Lifecycle
	// Busy: a build is queued or running (Terraform). Nothing is decided until it ends.
	Busy bool
}

// Action is what the executor does: move the desired state To (if set), and mark the workspace
// dormant (MarkDormant). The zero Action does nothing.
type Action struct {
	To          workspace.State
	MarkDormant bool
	Reason      build.Reason
	// Detail says why, for people: "no use since 2026-11-02 09:00 UTC (dormancy threshold 720h0m0s)".
	Detail string
	// Due is when the action became due: the executor takes the most overdue first.
	Due time.Time
}

// None reports whether a does nothing.
func (a Action) None() bool { return a.To == "" && !a.MarkDormant }

// Text is the reason as the workspace shows it: "autostop: ...".
func (a Action) Text() string { return string(a.Reason) + ": " + a.Detail }

// lastUse says the last use of s as an action's detail does, in the words of its policy.
func lastUse(s Snapshot) string {
	switch {
	case s.NoWork:
		return "no work seen inside"
	case s.Policy.Activity == workspace.ActivityWork:
		return "last work seen inside " + stamp(s.LastUse)
	}
	return "last used " + stamp(s.LastUse)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }

// Decide returns what to do to the workspace s describes at now.
func Decide(now time.Time, s Snapshot) Action {
	if s.Busy {
		return Action{}
	}
	p := s.Policy
	switch s.Desired {
	case workspace.Running:
		if d := p.FailureTTL.D(); d > 0 && s.Actual == workspace.Failed && s.ActualAt != nil && !now.Before(s.ActualAt.Add(d)) {
			return Action{To: workspace.Stopped, Reason: build.ReasonFailureTTL, Due: s.ActualAt.Add(d),
				Detail: fmt.Sprintf("failed since %s (failure TTL %s)", stamp(*s.ActualAt), p.FailureTTL)}
		}
		if d := p.DormancyThreshold.D(); d > 0 && !now.Before(s.LastUse.Add(d)) {
			return Action{To: workspace.Stopped, MarkDormant: s.DormantAt == nil, Reason: build.ReasonDormancy, Due: s.LastUse.Add(d),
				Detail: fmt.Sprintf("no use since %s (dormancy threshold %s)", stamp(s.LastUse), p.DormancyThreshold)}
		}
		if d := p.MaxActive.D(); d > 0 && !now.Before(s.DesiredAt.Add(d)) {
			return Action{To: workspace.Stopped, Reason: build.ReasonMaxActive, Due: s.DesiredAt.Add(d),
				Detail: fmt.Sprintf("running since %s (max active %s)", stamp(s.DesiredAt), p.MaxActive)}
		}
		if at, ok := StopDeadline(s); ok && !now.Before(at) {
			return Action{To: workspace.Stopped, Reason: build.ReasonAutostop, Due: at,
				Detail: fmt.Sprintf("started %s, %s (TTL %s)", stamp(s.DesiredAt), lastUse(s), workspace.TTL(s.Schedule, p))}
		}
	case workspace.Stopped:
		if s.DormantAt != nil {
			if d := p.DormancyAutoDelete.D(); d > 0 && !now.Before(s.DormantAt.Add(d)) {
				return Action{To: workspace.Terminated, Reason: build.ReasonAutodelete, Due: s.DormantAt.Add(d),
					Detail: fmt.Sprintf("dormant since %s (auto-delete after %s)", stamp(*s.DormantAt), p.DormancyAutoDelete)}
			}
		} else if d := p.DormancyThreshold.D(); d > 0 && !now.Before(s.LastUse.Add(d)) {
			return Action{MarkDormant: true, Reason: build.ReasonDormancy, Due: s.LastUse.Add(d),
				Detail: fmt.Sprintf("no use since %s (dormancy threshold %s)", stamp(s.LastUse), p.DormancyThreshold)}
		}
		if d := p.MaxStopped.D(); d > 0 && !now.Before(s.DesiredAt.Add(d)) {
			return Action{To: workspace.Terminated, Reason: build.ReasonMaxStopped, Due: s.DesiredAt.Add(d),
				Detail: fmt.Sprintf("stopped since %s (max stopped %s)", stamp(s.DesiredAt), p.MaxStopped)}
		}
		if at, ok := NextStart(s); ok && !now.Before(at) {
			return Action{To: workspace.Running, Reason: build.ReasonAutostart, Due: at,
				Detail: fmt.Sprintf("schedule %q (%s) was due at %s", s.Schedule.Autostart, zoneName(s.Schedule.Timezone), stamp(at))}
		}
	}
	return Action{}
}

// StopDeadline is when a running workspace's autostop is due: its TTL after its start or its last
// use, whichever is later. ok is false when it has no TTL or is not running.
func StopDeadline(s Snapshot) (time.Time, bool) {
	ttl := workspace.TTL(s.Schedule, s.Policy)
	if s.Desired != workspace.Running || ttl <= 0 {
		return time.Time{}, false
	}
	from := s.DesiredAt
	if s.LastUse.After(from) {
		from = s.LastUse
	}
	return from.Add(ttl), true
}

// NextStart is when a stopped workspace's autostart is due: the schedule's first time after it was
// stopped. A workspace that is dormant, not (yet) stopped, or without a schedule has none. A
// schedule missed while no server ran is due once, at its latest time, not once per time missed.
func NextStart(s Snapshot) (time.Time, bool) {
	if s.Desired != workspace.Stopped || s.Actual != workspace.Stopped || s.DormantAt != nil || s.Schedule.Autostart == "" {
		return time.Time{}, false
	}
	sched, err := ParseSchedule(s.Schedule.Autostart, s.Schedule.Timezone)
	if err != nil {
		return time.Time{}, false // stored schedules were checked; one that no longer parses never fires
	}
	at := sched.Next(s.DesiredAt)
	return at, !at.IsZero()
}

func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ErrUnknownZone is a time zone that is not an IANA name (ParseSchedule wraps it).
var ErrUnknownZone = errs.New(errs.Invalid, "unknown time zone")

// ParseSchedule reads an autostart schedule: a cron expression of five fields (minute hour
// day-of-month month day-of-week, or @daily, @weekly...) in the IANA zone tz ("" is UTC).
func ParseSchedule(expr, tz string) (cron.Schedule, error) {
	if strings.HasPrefix(strings.TrimSpace(expr), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(expr), "TZ=") {
		return nil, errors.New("give the time zone apart (timezone), not inside the expression")
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "@every") {
		return nil, errors.New("@every is not a schedule of times: use a cron expression such as \"0 9 * * 1-5\"")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return nil, fmt.Errorf("%w %q: give an IANA name such as Europe/Paris", ErrUnknownZone, tz)
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: want five fields (minute hour day-of-month month day-of-week), e.g. \"0 9 * * 1-5\"", err)
	}
	if s, ok := sched.(*cron.SpecSchedule); ok {
		s.Location = loc
	}
	return sched, nil
}

// CheckSchedule adds to v each problem of a workspace's schedule under policy p, at now (a
// schedule that never fires is refused).
func CheckSchedule(sc workspace.Schedule, p workspace.Lifecycle, now time.Time, v *workspace.ValidationError) {
	if sc.Autostart != "" {
		sched, err := ParseSchedule(sc.Autostart, sc.Timezone)
		switch {
		case errors.Is(err, ErrUnknownZone):
			v.Add("timezone", "%s", err)
		case err != nil:
			v.Add("autostart", "%q: %s", sc.Autostart, err)
		case sched.Next(now).IsZero():
			v.Add("autostart", "%q never fires", sc.Autostart)
		}
	} else if sc.Timezone != "" {
		v.Add("timezone", "applies to an autostart schedule: give autostart too")
	}
	if sc.TTL != nil {
		if msg := workspace.CheckTTL(*sc.TTL, p); msg != "" {
			v.Add("ttl", "%s", msg)
		}
	}
}
