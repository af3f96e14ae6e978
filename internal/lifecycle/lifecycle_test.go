package lifecycle

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC) // a Monday

func h(n int) time.Duration { return time.Duration(n) * time.Hour }

func dur(d time.Duration) workspace.Duration { return workspace.Duration(d) }

func ptr[T any](v T) *T { return &v }

func running() Snapshot {
	return Snapshot{Desired: workspace.Running, Actual: workspace.Running, DesiredAt: t0, ActualAt: ptr(t0), LastUse: t0}
}

func stopped() Snapshot {
	return Snapshot{Desired: workspace.Stopped, Actual: workspace.Stopped, DesiredAt: t0, ActualAt: ptr(t0), LastUse: t0}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		snap   func() Snapshot
		now    time.Time
		to     workspace.State
		dorm   bool
		reason build.Reason
		due    time.Time
	}{
		{"no policy: nothing", running, t0.Add(h(1000)), "", false, "", time.Time{}},
		{"autostop before its deadline", func() Snapshot { s := running(); s.Policy.DefaultTTL = dur(h(8)); return s },
			t0.Add(h(8) - time.Minute), "", false, "", time.Time{}},
		{"autostop at its deadline", func() Snapshot { s := running(); s.Policy.DefaultTTL = dur(h(8)); return s },
			t0.Add(h(8)), workspace.Stopped, false, build.ReasonAutostop, t0.Add(h(8))},
		{"use pushes the deadline back", func() Snapshot {
			s := running()
			s.Policy.DefaultTTL, s.LastUse = dur(h(8)), t0.Add(h(5))
			return s
		}, t0.Add(h(12)), "", false, "", time.Time{}},
		{"use pushes the deadline back, then it passes", func() Snapshot {
			s := running()
			s.Policy.DefaultTTL, s.LastUse = dur(h(8)), t0.Add(h(5))
			return s
		}, t0.Add(h(13)), workspace.Stopped, false, build.ReasonAutostop, t0.Add(h(13))},
		{"the workspace's own TTL wins over the default", func() Snapshot {
			s := running()
			s.Policy.DefaultTTL, s.Schedule.TTL = dur(h(8)), ptr(h(2))
			return s
		}, t0.Add(h(2)), workspace.Stopped, false, build.ReasonAutostop, t0.Add(h(2))},
		{"a TTL of 0 turns autostop off", func() Snapshot {
			s := running()
			s.Policy.DefaultTTL, s.Schedule.TTL = dur(h(8)), ptr(time.Duration(0))
			return s
		}, t0.Add(h(100)), "", false, "", time.Time{}},
		{"max_ttl bounds a TTL set before it", func() Snapshot {
			s := running()
			s.Policy.MaxTTL, s.Schedule.TTL = dur(h(4)), ptr(time.Duration(0))
			return s
		}, t0.Add(h(4)), workspace.Stopped, false, build.ReasonAutostop, t0.Add(h(4))},
		{"failure TTL", func() Snapshot {
			s := running()
			s.Actual, s.ActualAt, s.Policy.FailureTTL = workspace.Failed, ptr(t0.Add(h(1))), dur(h(1))
			return s
		}, t0.Add(h(2)), workspace.Stopped, false, build.ReasonFailureTTL, t0.Add(h(2))},
		{"failure TTL not yet", func() Snapshot {
			s := running()
			s.Actual, s.ActualAt, s.Policy.FailureTTL = workspace.Failed, ptr(t0.Add(h(1))), dur(h(1))
			return s
		}, t0.Add(h(2) - time.Second), "", false, "", time.Time{}},
		{"max active stops whatever the use", func() Snapshot {
			s := running()
			s.Policy.MaxActive, s.LastUse = dur(h(36)), t0.Add(h(35))
			return s
		}, t0.Add(h(36)), workspace.Stopped, false, build.ReasonMaxActive, t0.Add(h(36))},
		{"dormancy stops a running workspace and marks it", func() Snapshot { s := running(); s.Policy.DormancyThreshold = dur(h(720)); return s },
			t0.Add(h(720)), workspace.Stopped, true, build.ReasonDormancy, t0.Add(h(720))},
		{"dormancy marks a stopped workspace", func() Snapshot { s := stopped(); s.Policy.DormancyThreshold = dur(h(720)); return s },
			t0.Add(h(720)), "", true, build.ReasonDormancy, t0.Add(h(720))},
		{"a dormant workspace is deleted after the period", func() Snapshot {
			s := stopped()
			s.DormantAt, s.Policy.DormancyThreshold, s.Policy.DormancyAutoDelete = ptr(t0.Add(h(1))), dur(h(720)), dur(h(24))
			return s
		}, t0.Add(h(25)), workspace.Terminated, false, build.ReasonAutodelete, t0.Add(h(25))},
		{"a dormant workspace waits for the period", func() Snapshot {
			s := stopped()
			s.DormantAt, s.Policy.DormancyThreshold, s.Policy.DormancyAutoDelete = ptr(t0.Add(h(1))), dur(h(720)), dur(h(24))
			return s
		}, t0.Add(h(25) - time.Minute), "", false, "", time.Time{}},
		{"a dormant workspace without auto-delete stays", func() Snapshot {
			s := stopped()
			s.DormantAt, s.Policy.DormancyThreshold = ptr(t0.Add(h(1))), dur(h(720))
			return s
		}, t0.Add(h(10000)), "", false, "", time.Time{}},
		{"max stopped deletes", func() Snapshot { s := stopped(); s.Policy.MaxStopped = dur(h(744)); return s },
			t0.Add(h(744)), workspace.Terminated, false, build.ReasonMaxStopped, t0.Add(h(744))},
		{"autostart at the next scheduled time after the stop", func() Snapshot {
			s := stopped()
			s.Schedule.Autostart, s.Schedule.Timezone = "0 9 * * 1-5", "Europe/Paris" // 08:00 UTC in November
			return s
		}, t0.Add(h(23)), workspace.Running, false, build.ReasonAutostart, time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)},
		{"autostart not yet", func() Snapshot {
			s := stopped()
			s.Schedule.Autostart, s.Schedule.Timezone = "0 9 * * 1-5", "Europe/Paris"
			return s
		}, t0.Add(h(23) - time.Second), "", false, "", time.Time{}},
		{"a weekend is skipped", func() Snapshot {
			s := stopped()
			s.DesiredAt = time.Date(2026, 11, 6, 18, 0, 0, 0, time.UTC) // Friday evening
			s.Schedule.Autostart = "0 9 * * 1-5"
			return s
		}, time.Date(2026, 11, 8, 23, 0, 0, 0, time.UTC), "", false, "", time.Time{}},
		{"a missed start is due once, from the first missed time", func() Snapshot {
			s := stopped()
			s.Schedule.Autostart = "0 9 * * *"
			return s
		}, t0.Add(h(24 * 5)), workspace.Running, false, build.ReasonAutostart, t0.Add(h(24))},
		{"no autostart while stopping", func() Snapshot {
			s := stopped()
			s.Actual, s.Schedule.Autostart = workspace.Stopping, "0 9 * * *"
			return s
		}, t0.Add(h(25)), "", false, "", time.Time{}},
		{"no autostart for a dormant workspace", func() Snapshot {
			s := stopped()
			s.DormantAt, s.Schedule.Autostart = ptr(t0), "0 9 * * *"
			return s
		}, t0.Add(h(25)), "", false, "", time.Time{}},
		{"nothing while a build runs", func() Snapshot {
			s := running()
			s.Busy, s.Policy.DefaultTTL = true, dur(h(1))
			return s
		}, t0.Add(h(5)), "", false, "", time.Time{}},
		{"nothing for a terminated workspace", func() Snapshot {
			s := stopped()
			s.Desired, s.Policy.MaxStopped = workspace.Terminated, dur(h(1))
			return s
		}, t0.Add(h(5)), "", false, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Decide(tc.now, tc.snap())
			if a.To != tc.to || a.MarkDormant != tc.dorm || a.Reason != tc.reason || !a.Due.Equal(tc.due) {
				t.Fatalf("Decide = %+v, want to %q dormant %v reason %q due %s", a, tc.to, tc.dorm, tc.reason, tc.due)
			}
			if !a.None() && (a.Detail == "" || !strings.HasPrefix(a.Text(), string(tc.reason)+": ")) {
				t.Fatalf("reason text %q", a.Text())
			}
		})
	}
}

// TestDecideProperties: over random snapshots, an action never sets the state the workspace already
// has, is never due in the future, and once applied is not taken again at the same time (so two
// replicas deciding again on the locked row cannot both act).
func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	states := []workspace.State{workspace.Running, workspace.Stopped, workspace.Terminated, workspace.Failed, workspace.Starting,
		workspace.Stopping, workspace.RestartRequested}
	pick := func() workspace.State { return states[r.IntN(len(states))] }
	opt := func() workspace.Duration {
		if r.IntN(2) == 0 {
			return 0
		}
		return dur(time.Duration(1+r.IntN(200)) * time.Hour)
	}
	for i := 0; i < 20000; i++ {
		s := Snapshot{Desired: pick(), Actual: pick(), DesiredAt: t0.Add(time.Duration(r.IntN(100)) * time.Hour),
			LastUse: t0.Add(time.Duration(r.IntN(100)) * time.Hour), Busy: r.IntN(10) == 0,
			Policy: workspace.Lifecycle{DefaultTTL: opt(), FailureTTL: opt(), DormancyThreshold: opt(), DormancyAutoDelete: opt(),
				MaxActive: opt(), MaxStopped: opt()}}
		if r.IntN(2) == 0 {
			s.ActualAt = ptr(t0.Add(time.Duration(r.IntN(100)) * time.Hour))
		}
		if r.IntN(4) == 0 {
			s.DormantAt = ptr(t0.Add(time.Duration(r.IntN(100)) * time.Hour))
		}
		if r.IntN(2) == 0 {
			s.Schedule.Autostart = []string{"0 9 * * 1-5", "*/30 * * * *", "@daily"}[r.IntN(3)]
		}
		now := t0.Add(time.Duration(r.IntN(400)) * time.Hour)
		a := Decide(now, s)
		if a.None() {
			continue
		}
		if s.Busy || s.Desired == workspace.Terminated || a.To == s.Desired || a.Due.After(now) || (a.MarkDormant && s.DormantAt != nil) {
			t.Fatalf("Decide(%s, %+v) = %+v", now, s, a)
		}
		next := s
		if a.To != "" {
			next.Desired, next.DesiredAt = a.To, now
		}
		if a.MarkDormant {
			next.DormantAt = ptr(now)
		}
		if b := Decide(now, next); !b.None() && b.Reason == a.Reason && b.To == a.To {
			t.Fatalf("applied %+v to %+v, then decided it again: %+v", a, s, b)
		}
	}
}

func TestCheckSchedule(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		name  string
		sc    workspace.Schedule
		p     workspace.Lifecycle
		field string
	}{
		{"good", workspace.Schedule{Autostart: "0 9 * * 1-5", Timezone: "Europe/Paris", TTL: ptr(h(8))}, workspace.Lifecycle{}, ""},
		{"descriptor", workspace.Schedule{Autostart: "@daily"}, workspace.Lifecycle{}, ""},
		{"bad cron", workspace.Schedule{Autostart: "0 9 * *"}, workspace.Lifecycle{}, "autostart"},
		{"seconds field", workspace.Schedule{Autostart: "0 0 9 * * 1-5"}, workspace.Lifecycle{}, "autostart"},
		{"zone in the expression", workspace.Schedule{Autostart: "CRON_TZ=Europe/Paris 0 9 * * *"}, workspace.Lifecycle{}, "autostart"},
		{"every", workspace.Schedule{Autostart: "@every 1h"}, workspace.Lifecycle{}, "autostart"},
		{"never fires", workspace.Schedule{Autostart: "0 0 30 2 *"}, workspace.Lifecycle{}, "autostart"},
		{"unknown zone", workspace.Schedule{Autostart: "0 9 * * *", Timezone: "Mars/Olympus"}, workspace.Lifecycle{}, "timezone"},
		{"Local is not a zone", workspace.Schedule{Autostart: "0 9 * * *", Timezone: "Local"}, workspace.Lifecycle{}, "timezone"},
		{"zone without schedule", workspace.Schedule{Timezone: "UTC"}, workspace.Lifecycle{}, "timezone"},
		{"ttl over max", workspace.Schedule{TTL: ptr(h(9))}, workspace.Lifecycle{MaxTTL: dur(h(8))}, "ttl"},
		{"ttl off under max", workspace.Schedule{TTL: ptr(time.Duration(0))}, workspace.Lifecycle{MaxTTL: dur(h(8))}, "ttl"},
		{"ttl too short", workspace.Schedule{TTL: ptr(time.Second)}, workspace.Lifecycle{}, "ttl"},
		{"ttl negative", workspace.Schedule{TTL: ptr(-time.Hour)}, workspace.Lifecycle{}, "ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &workspace.ValidationError{}
			CheckSchedule(tc.sc, tc.p, now, v)
			got := ""
			if len(v.Problems) > 0 {
				got = v.Problems[0].Field
			}
			if got != tc.field || len(v.Problems) > 1 {
				t.Fatalf("problems %+v, want one on %q", v.Problems, tc.field)
			}
		})
	}
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "@daily", "*/5 * * * *", "0 0 30 2 *", "CRON_TZ=UTC 0 9 * * *", "60 25 32 13 8"} {
		f.Add(s, "Europe/Paris")
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		sched, err := ParseSchedule(expr, tz)
		if err != nil {
			return
		}
		if next := sched.Next(t0); !next.IsZero() && !next.After(t0) {
			t.Fatalf("Next(%s) = %s, not after", t0, next)
		}
	})
}
