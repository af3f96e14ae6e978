package prebuilds

import (
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/prebuild"
)

// TestStatusOf: an instance's status from its latest build; a failed delete is tried again only
// once RetryDelete has passed since it failed.
func TestStatusOf(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	for _, tc := range []struct {
		name string
		b    *build.Build
		want prebuild.Status
	}{
		{"no build", nil, prebuild.Failed},
		{"start pending", &build.Build{Transition: build.Start}, prebuild.Pending},
		{"start running", &build.Build{Transition: build.Start, Job: build.Job{StartedAt: at(time.Minute)}}, prebuild.Building},
		{"start succeeded", &build.Build{Transition: build.Start, Job: build.Job{StartedAt: at(time.Minute), CompletedAt: at(0)}}, prebuild.Ready},
		{"start failed", &build.Build{Transition: build.Start, Job: build.Job{StartedAt: at(time.Minute), CompletedAt: at(0), Error: "boom"}}, prebuild.Failed},
		{"delete running", &build.Build{Transition: build.Delete, Job: build.Job{StartedAt: at(time.Minute)}}, prebuild.Deleting},
		{"delete failed just now", &build.Build{Transition: build.Delete, Job: build.Job{StartedAt: at(2 * time.Minute), CompletedAt: at(time.Minute), Error: "boom"}}, prebuild.Deleting},
		{"delete failed an hour ago", &build.Build{Transition: build.Delete, Job: build.Job{StartedAt: at(2 * time.Hour), CompletedAt: at(RetryDelete), Error: "boom"}}, prebuild.Failed},
		{"stop", &build.Build{Transition: build.Stop, Job: build.Job{StartedAt: at(2 * time.Hour), CompletedAt: at(2 * time.Hour)}}, prebuild.Deleting},
	} {
		if got := StatusOf(tc.b, now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
