// Package prebuild decides what keeps a preset's pool of prebuilt workspaces full (the seed's
// "Prebuild Operations", terraform-state-management.md): how many to create, which to delete
// (outdated, failed, extra) and when to hold back after failures. Decide is a pure function of a
// snapshot of one preset and the time; the reconciler (package prebuilds) reads the snapshot,
// applies the answer through the Terraform backend and claims ready instances for users.
package prebuild

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/lifecycle"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Bounds of a preset.
const (
	// MaxInstances bounds a preset's desired instances, in its base count and in each schedule rule.
	MaxInstances = 100
	// MaxScheduleRules bounds a preset's schedule rules.
	MaxScheduleRules = 20
)

// ScheduleRule sets the desired instances while the time matches Cron (five fields, read in the
// preset's time zone): "* 8-18 * * 1-5" with 5 instances keeps five ready on working hours.
type ScheduleRule struct {
	Cron      string `json:"cron"`
	Instances int    `json:"instances"`
}

// Pool is what a preset asks for: Instances ready workspaces of the template version, or, while a
// schedule rule matches, that rule's instances (the first that matches wins).
type Pool struct {
	Instances int
	Schedule  []ScheduleRule
	Timezone  string // IANA zone of the schedule; "" is UTC
}

// Status is where one prebuilt instance stands.
type Status string

const (
	// Pending: its create (start) build is queued; no provisioner has taken it, so Terraform has
	// made nothing yet.
	Pending Status = "pending"
	// Building: its create (start) build is running.
	Building Status = "building"
	// Ready: its latest build is a start that succeeded; a user may claim it.
	Ready Status = "ready"
	// Failed: its latest build failed or was canceled; it is deleted and counts as a failure.
	Failed Status = "failed"
	// Deleting: its delete is queued or running, or it is stopped; it is on its way out.
	Deleting Status = "deleting"
)

// Instance is one prebuilt workspace of the preset, not yet claimed.
type Instance struct {
	WorkspaceID string
	Name        string
	VersionID   string // the template version its latest build ran
	Status      Status
	CreatedAt   time.Time
}

// Snapshot is what a decision reads about one preset.
type Snapshot struct {
	Pool Pool
	// VersionID is the template version the pool must run: the preset's, or its template's
	// active one. Instances of any other version are outdated.
	VersionID string
	Instances []Instance
	// Failures are the times of the preset's failed creates since its last successful one,
	// oldest first: what the backoff counts.
	Failures []time.Time
}

// Options tune the backoff after failed creates: after k failures in a row, the next create waits
// Backoff·2^(k-1) after the last, at most MaxBackoff.
type Options struct {
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultOptions are the reconciler's defaults.
var DefaultOptions = Options{Backoff: time.Minute, MaxBackoff: 30 * time.Minute}

// Reason says why an instance is deleted.
type Reason string

const (
	ReasonOutdated Reason = "outdated" // it runs another template version than the pool's
	ReasonFailed   Reason = "failed"   // its create failed
	ReasonExtra    Reason = "extra"    // the pool has more ready instances than it wants
)

// Deletion is an instance to delete, with why. Orphan is set for a pending instance: its queued
// create is canceled and it is deleted without Terraform (the seed's "Cancel pending + orphan":
// nothing was built, so there is nothing to destroy).
type Deletion struct {
	WorkspaceID string
	Reason      Reason
	Orphan      bool
}

// Actions is what the reconciler does for a preset.
type Actions struct {
	// Desired is the number of instances wanted now (the schedule's, or the base count).
	Desired int
	// Create is how many new instances to create now.
	Create int
	// Delete are the instances to delete, failed first, then outdated, then extra.
	Delete []Deletion
	// BackoffUntil is set when creates are held back after failures: none before that time.
	BackoffUntil time.Time
	// Ready and Building count the pool's current instances of the right version (Building
	// counts pending ones too), before the deletions.
	Ready, Building int
}

// Desired is the number of instances p wants at now.
func (p Pool) Desired(now time.Time) int {
	for _, r := range p.Schedule {
		if Matches(r.Cron, p.Timezone, now) {
			return r.Instances
		}
	}
	return p.Instances
}

// Matches reports whether now falls in a minute that the cron expression names, read in zone tz.
// An expression that does not parse matches nothing (presets are checked when they are written).
func Matches(expr, tz string, now time.Time) bool {
	sched, err := lifecycle.ParseSchedule(expr, tz)
	if err != nil {
		return false
	}
	minute := now.Truncate(time.Minute)
	return sched.Next(minute.Add(-time.Second)).Equal(minute)
}

// Decide returns what to do for the preset s describes at now.
func Decide(now time.Time, s Snapshot, o Options) Actions {
	a := Actions{Desired: s.Pool.Desired(now)}
	var ready, pending []Instance
	for _, in := range s.Instances {
		outdated := in.VersionID != s.VersionID
		switch {
		case in.Status == Failed:
			a.Delete = append(a.Delete, Deletion{WorkspaceID: in.WorkspaceID, Reason: ReasonFailed})
		case in.Status == Deleting:
		case outdated && in.Status == Pending:
			a.Delete = append(a.Delete, Deletion{WorkspaceID: in.WorkspaceID, Reason: ReasonOutdated, Orphan: true})
		case outdated && in.Status == Ready:
			a.Delete = append(a.Delete, Deletion{WorkspaceID: in.WorkspaceID, Reason: ReasonOutdated})
		case outdated:
			// A running build finishes first: cutting it short could leave what it made untracked.
		case in.Status == Pending:
			a.Building++
			pending = append(pending, in)
		case in.Status == Building:
			a.Building++
		case in.Status == Ready:
			a.Ready++
			ready = append(ready, in)
		}
	}
	live := a.Ready + a.Building
	if extra := live - a.Desired; extra > 0 {
		// Pending creates go first (canceled, nothing to destroy), newest first; then ready ones,
		// newest first, so that the longest warmed stay for the next claims. A running build is
		// never cut short: it is deleted once ready, at a later tick, if still extra.
		newestFirst := func(x, y Instance) int {
			return cmp.Or(y.CreatedAt.Compare(x.CreatedAt), cmp.Compare(x.WorkspaceID, y.WorkspaceID))
		}
		slices.SortFunc(pending, newestFirst)
		slices.SortFunc(ready, newestFirst)
		for _, in := range pending[:min(extra, len(pending))] {
			a.Delete = append(a.Delete, Deletion{WorkspaceID: in.WorkspaceID, Reason: ReasonExtra, Orphan: true})
			extra--
		}
		for _, in := range ready[:min(extra, len(ready))] {
			a.Delete = append(a.Delete, Deletion{WorkspaceID: in.WorkspaceID, Reason: ReasonExtra})
		}
	}
	if want := a.Desired - live; want > 0 {
		if until, ok := backoff(s.Failures, o); ok && now.Before(until) {
			a.BackoffUntil = until
		} else {
			a.Create = want
		}
	}
	return a
}

// backoff is when creates may resume after the failures, if there were any.
func backoff(failures []time.Time, o Options) (time.Time, bool) {
	if len(failures) == 0 {
		return time.Time{}, false
	}
	wait := o.Backoff
	for i := 1; i < len(failures) && wait < o.MaxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, o.MaxBackoff)
	return slices.MaxFunc(failures, time.Time.Compare).Add(wait), true
}

// Check adds to v each problem of a pool: instance counts within 0..MaxInstances, schedule rules
// that parse in a known zone and fire at some time.
func Check(p Pool, now time.Time, v *workspace.ValidationError) {
	if p.Instances < 0 || p.Instances > MaxInstances {
		v.Add("instances", "%d: want 0 to %d", p.Instances, MaxInstances)
	}
	if len(p.Schedule) > MaxScheduleRules {
		v.Add("schedule", "%d rules: at most %d", len(p.Schedule), MaxScheduleRules)
		return
	}
	if p.Timezone != "" && len(p.Schedule) == 0 {
		v.Add("timezone", "applies to a schedule: give schedule rules too")
	}
	for i, r := range p.Schedule {
		field := fmt.Sprintf("schedule[%d]", i)
		if r.Instances < 0 || r.Instances > MaxInstances {
			v.Add(field+".instances", "%d: want 0 to %d", r.Instances, MaxInstances)
		}
		sched, err := lifecycle.ParseSchedule(r.Cron, p.Timezone)
		switch {
		case errors.Is(err, lifecycle.ErrUnknownZone):
			v.Add("timezone", "%s", err)
		case err != nil:
			v.Add(field+".cron", "%q: %s", r.Cron, err)
		case sched.Next(now).IsZero():
			v.Add(field+".cron", "%q never matches", r.Cron)
		}
	}
}
