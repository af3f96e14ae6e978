package prebuild

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hangar-dev/hangar/internal/workspace"
)

var t0 = time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)

func inst(id, version string, st Status, age time.Duration) Instance {
	return Instance{WorkspaceID: id, Name: "prebuild-" + id, VersionID: version, Status: st, CreatedAt: t0.Add(-age)}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Snapshot
		now  time.Time
		want Actions
	}{
		// The seed's "Create prebuild": the pool is short, new instances are built.
		{"empty pool creates the desired instances",
			Snapshot{Pool: Pool{Instances: 3}, VersionID: "v1"}, t0,
			Actions{Desired: 3, Create: 3}},
		{"building ones count: only the rest is created",
			Snapshot{Pool: Pool{Instances: 3}, VersionID: "v1", Instances: []Instance{
				inst("a", "v1", Ready, time.Hour), inst("b", "v1", Building, time.Minute)}}, t0,
			Actions{Desired: 3, Create: 1, Ready: 1, Building: 1}},
		{"full pool does nothing",
			Snapshot{Pool: Pool{Instances: 2}, VersionID: "v1", Instances: []Instance{
				inst("a", "v1", Ready, time.Hour), inst("b", "v1", Pending, time.Minute)}}, t0,
			Actions{Desired: 2, Ready: 1, Building: 1}},
		// A claim takes an instance out of the snapshot: the next decision replaces it.
		{"after a claim the pool is refilled",
			Snapshot{Pool: Pool{Instances: 2}, VersionID: "v1", Instances: []Instance{inst("a", "v1", Ready, time.Hour)}}, t0,
			Actions{Desired: 2, Create: 1, Ready: 1}},
		// The seed's "Delete prebuild": extra and outdated ready instances are destroyed.
		{"extra ready instances are deleted, newest first",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Instances: []Instance{
				inst("old", "v1", Ready, 3*time.Hour), inst("new", "v1", Ready, time.Hour), inst("mid", "v1", Ready, 2*time.Hour)}}, t0,
			Actions{Desired: 1, Ready: 3, Delete: []Deletion{{"new", ReasonExtra, false}, {"mid", ReasonExtra, false}}}},
		{"outdated ready instances are replaced",
			Snapshot{Pool: Pool{Instances: 2}, VersionID: "v2", Instances: []Instance{
				inst("a", "v1", Ready, time.Hour), inst("b", "v1", Ready, time.Hour)}}, t0,
			Actions{Desired: 2, Create: 2, Delete: []Deletion{{"a", ReasonOutdated, false}, {"b", ReasonOutdated, false}}}},
		{"an outdated build in progress finishes first",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v2", Instances: []Instance{inst("a", "v1", Building, time.Minute)}}, t0,
			Actions{Desired: 1, Create: 1}},
		// The seed's "Cancel pending + orphan": a queued create no longer wanted is canceled and
		// deleted without Terraform.
		{"an outdated pending create is canceled and orphaned",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v2", Instances: []Instance{inst("a", "v1", Pending, time.Minute)}}, t0,
			Actions{Desired: 1, Create: 1, Delete: []Deletion{{"a", ReasonOutdated, true}}}},
		{"extra pending creates go before ready instances",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Instances: []Instance{
				inst("r", "v1", Ready, time.Hour), inst("p", "v1", Pending, time.Minute)}}, t0,
			Actions{Desired: 1, Ready: 1, Building: 1, Delete: []Deletion{{"p", ReasonExtra, true}}}},
		{"a running build is never cut short, even when extra",
			Snapshot{Pool: Pool{Instances: 0}, VersionID: "v1", Instances: []Instance{inst("b", "v1", Building, time.Minute)}}, t0,
			Actions{Desired: 0, Building: 1}},
		{"failed instances are deleted and replaced",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Instances: []Instance{inst("f", "v1", Failed, time.Minute)}}, t0,
			Actions{Desired: 1, Create: 1, Delete: []Deletion{{"f", ReasonFailed, false}}}},
		{"instances being deleted count for nothing",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Instances: []Instance{inst("d", "v1", Deleting, time.Minute)}}, t0,
			Actions{Desired: 1, Create: 1}},
		// Backoff after failures.
		{"one failure holds creates back a minute",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Failures: []time.Time{t0.Add(-30 * time.Second)}}, t0,
			Actions{Desired: 1, BackoffUntil: t0.Add(30 * time.Second)}},
		{"after the backoff creates resume",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Failures: []time.Time{t0.Add(-61 * time.Second)}}, t0,
			Actions{Desired: 1, Create: 1}},
		{"three failures in a row wait four minutes",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Failures: []time.Time{t0.Add(-10 * time.Minute), t0.Add(-5 * time.Minute), t0.Add(-3 * time.Minute)}}, t0,
			Actions{Desired: 1, BackoffUntil: t0.Add(time.Minute)}},
		{"the backoff is capped",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Failures: slices.Repeat([]time.Time{t0.Add(-31 * time.Minute)}, 40)}, t0,
			Actions{Desired: 1, Create: 1}},
		{"a backoff never stops deletions",
			Snapshot{Pool: Pool{Instances: 1}, VersionID: "v1", Failures: []time.Time{t0}, Instances: []Instance{inst("f", "v1", Failed, 0)}}, t0,
			Actions{Desired: 1, BackoffUntil: t0.Add(time.Minute), Delete: []Deletion{{"f", ReasonFailed, false}}}},
		// Schedules.
		{"a matching schedule rule sets the size",
			Snapshot{Pool: Pool{Instances: 1, Schedule: []ScheduleRule{{"* 8-18 * * 1-5", 4}}}, VersionID: "v1"}, t0, // a Thursday, 09:30 UTC
			Actions{Desired: 4, Create: 4}},
		{"outside the rule the base size holds",
			Snapshot{Pool: Pool{Instances: 1, Schedule: []ScheduleRule{{"* 8-18 * * 1-5", 4}}}, VersionID: "v1"}, t0.Add(10 * time.Hour),
			Actions{Desired: 1, Create: 1}},
		{"rules are read in the pool's zone",
			Snapshot{Pool: Pool{Instances: 0, Timezone: "America/New_York", Schedule: []ScheduleRule{{"* 8-18 * * 1-5", 2}}}, VersionID: "v1"}, t0, // 04:30 in New York
			Actions{Desired: 0}},
		{"the first matching rule wins",
			Snapshot{Pool: Pool{Instances: 0, Schedule: []ScheduleRule{{"* 9 * * *", 5}, {"* * * * *", 1}}}, VersionID: "v1"}, t0,
			Actions{Desired: 5, Create: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.now, tc.s, DefaultOptions)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Decide:\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

// TestDecideProperties checks, over random pools, what must hold whatever the snapshot: no build
// in progress is ever cut short, every failed instance goes, no instance is deleted twice, a
// backoff creates nothing, and, once the decision is carried out, the pool has exactly the
// instances it wants unless running builds or a backoff keep it from it.
func TestDecideProperties(t *testing.T) {
	statuses := []Status{Pending, Building, Ready, Failed, Deleting}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(t, "n")
		s := Snapshot{Pool: Pool{Instances: rapid.IntRange(0, 8).Draw(t, "desired")}, VersionID: "v2"}
		for i := range n {
			s.Instances = append(s.Instances, Instance{
				WorkspaceID: fmt.Sprint("w", i),
				VersionID:   rapid.SampledFrom([]string{"v1", "v2"}).Draw(t, "version"),
				Status:      rapid.SampledFrom(statuses).Draw(t, "status"),
				CreatedAt:   t0.Add(-time.Duration(rapid.IntRange(0, 1000).Draw(t, "age")) * time.Minute),
			})
		}
		for range rapid.IntRange(0, 5).Draw(t, "failures") {
			s.Failures = append(s.Failures, t0.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "ago"))*time.Minute))
		}
		a := Decide(t0, s, DefaultOptions)

		byID := map[string]Instance{}
		for _, in := range s.Instances {
			byID[in.WorkspaceID] = in
		}
		deleted := map[string]bool{}
		for _, d := range a.Delete {
			in := byID[d.WorkspaceID]
			if deleted[d.WorkspaceID] {
				t.Fatalf("%s deleted twice", d.WorkspaceID)
			}
			deleted[d.WorkspaceID] = true
			if in.Status == Building || in.Status == Deleting {
				t.Fatalf("%s is %s and was deleted", d.WorkspaceID, in.Status)
			}
			if d.Orphan != (in.Status == Pending) {
				t.Fatalf("%s is %s: orphan %v", d.WorkspaceID, in.Status, d.Orphan)
			}
		}
		fresh, running := 0, 0 // instances of the pool's version that stay
		for _, in := range s.Instances {
			if in.Status == Failed && !deleted[in.WorkspaceID] {
				t.Fatalf("failed %s kept", in.WorkspaceID)
			}
			if in.VersionID != s.VersionID && in.Status != Building && in.Status != Deleting && !deleted[in.WorkspaceID] {
				t.Fatalf("outdated %s (%s) kept", in.WorkspaceID, in.Status)
			}
			if in.VersionID == s.VersionID && !deleted[in.WorkspaceID] && (in.Status == Ready || in.Status == Pending || in.Status == Building) {
				fresh++
				if in.Status == Building {
					running++
				}
			}
		}
		if !a.BackoffUntil.IsZero() && (a.Create != 0 || !t0.Before(a.BackoffUntil)) {
			t.Fatalf("backoff until %v with %d creates", a.BackoffUntil, a.Create)
		}
		after := fresh + a.Create
		switch {
		case !a.BackoffUntil.IsZero():
			if after > max(a.Desired, running) {
				t.Fatalf("backing off with %d instances for %d desired", after, a.Desired)
			}
		case after != max(a.Desired, running):
			t.Fatalf("after the decision the pool has %d (running %d) for %d desired: %+v", after, running, a.Desired, a)
		}
	})
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Pool
		want []string // fields named
	}{
		{"fine", Pool{Instances: 2, Schedule: []ScheduleRule{{"* 8-18 * * 1-5", 5}}, Timezone: "Europe/Paris"}, nil},
		{"negative", Pool{Instances: -1}, []string{"instances"}},
		{"too many", Pool{Instances: MaxInstances + 1}, []string{"instances"}},
		{"bad cron", Pool{Schedule: []ScheduleRule{{"every day", 1}}}, []string{"schedule[0].cron"}},
		{"never", Pool{Schedule: []ScheduleRule{{"0 0 30 2 *", 1}}}, []string{"schedule[0].cron"}},
		{"bad zone", Pool{Schedule: []ScheduleRule{{"* * * * *", 1}}, Timezone: "Mars/Olympus"}, []string{"timezone"}},
		{"zone alone", Pool{Timezone: "UTC"}, []string{"timezone"}},
		{"rule count", Pool{Schedule: slices.Repeat([]ScheduleRule{{"* * * * *", 1}}, MaxScheduleRules+1)}, []string{"schedule"}},
		{"rule size", Pool{Schedule: []ScheduleRule{{"* * * * *", -2}}}, []string{"schedule[0].instances"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v workspace.ValidationError
			Check(tc.p, t0, &v)
			var got []string
			for _, p := range v.Problems {
				got = append(got, p.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("fields %v, want %v (%v)", got, tc.want, v.Problems)
			}
		})
	}
}
