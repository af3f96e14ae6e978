package build

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hangar-dev/hangar/internal/workspace"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func at(s int) *time.Time { t := t0.Add(time.Duration(s) * time.Second); return &t }

func TestJobStatus(t *testing.T) {
	for _, tc := range []struct {
		job  Job
		want JobStatus
	}{
		{Job{}, Pending},
		{Job{StartedAt: at(1)}, Running},
		{Job{StartedAt: at(1), CompletedAt: at(2)}, Succeeded},
		{Job{StartedAt: at(1), CompletedAt: at(2), Error: "boom"}, Failed},
		{Job{StartedAt: at(1), CanceledAt: at(2)}, Canceling},
		{Job{StartedAt: at(1), CanceledAt: at(2), CompletedAt: at(3), Error: "interrupted"}, Canceled},
		{Job{CanceledAt: at(2), CompletedAt: at(2)}, Canceled},     // canceled while pending
		{Job{CompletedAt: at(2), Error: "no provisioner"}, Failed}, // reaped while pending
	} {
		if got := tc.job.Status(); got != tc.want {
			t.Errorf("%+v: status %s, want %s", tc.job, got, tc.want)
		}
	}
}

// The seed's "State Source Resolution": orphan → none, explicit → given, otherwise the previous
// build's (none for the first build, POST /workspaces).
func TestInitialState(t *testing.T) {
	prev := &Build{State: []byte(`{"prev":1}`)}
	explicit := []byte(`{"pushed":1}`)
	for _, tc := range []struct {
		name       string
		orphan     bool
		explicit   []byte
		previous   *Build
		wantState  []byte
		wantSource StateSource
	}{
		{"create: empty", false, nil, nil, nil, SourceNone},
		{"start/stop/delete: last build", false, nil, prev, prev.State, SourcePrevious},
		{"previous build without state", false, nil, &Build{}, nil, SourcePrevious},
		{"state push: explicit", false, explicit, prev, explicit, SourceExplicit},
		{"orphan delete: ignored", true, explicit, prev, nil, SourceOrphan},
		{"orphan delete of a first build", true, nil, nil, nil, SourceOrphan},
	} {
		state, source := InitialState(tc.orphan, tc.explicit, tc.previous)
		if !bytes.Equal(state, tc.wantState) || (state == nil) != (tc.wantState == nil) || source != tc.wantSource {
			t.Errorf("%s: got %q from %s, want %q from %s", tc.name, state, source, tc.wantState, tc.wantSource)
		}
	}
}

// The seed's "State Update on Completion" and "on Failure", and Hangar's rule on cancel.
func TestFinishStateRules(t *testing.T) {
	input := []byte(`{"input":1}`)
	produced := []byte(`{"after":1}`)
	running := Build{Number: 3, State: input, Job: Job{StartedAt: at(1)}}
	canceling := running
	canceling.Job.CanceledAt = at(2)
	for _, tc := range []struct {
		name       string
		b          Build
		o          Outcome
		wantState  []byte
		wantStatus JobStatus
		captured   bool
	}{
		{"success writes the state", running, Outcome{State: produced}, produced, Succeeded, false},
		{"success with no state (destroy of nothing) writes none", running, Outcome{}, nil, Succeeded, false},
		{"failure with state writes it", running, Outcome{Error: "apply failed", State: produced}, produced, Failed, false},
		{"failure before terraform made state keeps the input", running, Outcome{Error: "init failed"}, input, Failed, false},
		{"cancel with state keeps it, marked", canceling, Outcome{Canceled: true, Error: "interrupted", State: produced}, produced, Canceled, true},
		{"cancel without state keeps the input", canceling, Outcome{Canceled: true, Error: "interrupted"}, input, Canceled, false},
		{"a canceled job that finished anyway is canceled", canceling, Outcome{State: produced}, produced, Canceled, true},
	} {
		got := Finish(tc.b, tc.o, *at(9))
		if !bytes.Equal(got.State, tc.wantState) || (got.State == nil) != (tc.wantState == nil) {
			t.Errorf("%s: state %q, want %q", tc.name, got.State, tc.wantState)
		}
		if got.Job.Status() != tc.wantStatus || got.StateCapturedOnCancel != tc.captured {
			t.Errorf("%s: status %s captured %v, want %s %v", tc.name, got.Job.Status(), got.StateCapturedOnCancel, tc.wantStatus, tc.captured)
		}
		if got.Job.CompletedAt == nil || !got.Job.CompletedAt.Equal(*at(9)) {
			t.Errorf("%s: completed at %v", tc.name, got.Job.CompletedAt)
		}
	}
}

func TestCancel(t *testing.T) {
	pending := Build{Number: 1, State: []byte("s")}
	got, err := Cancel(pending, "alice", *at(5))
	if err != nil || got.Job.Status() != Canceled || !bytes.Equal(got.State, []byte("s")) {
		t.Fatalf("cancel pending: %+v %v", got, err)
	}
	running := Build{Number: 2, Job: Job{StartedAt: at(1)}}
	got, err = Cancel(running, "alice", *at(5))
	if err != nil || got.Job.Status() != Canceling {
		t.Fatalf("cancel running: %s %v", got.Job.Status(), err)
	}
	again, err := Cancel(got, "bob", *at(6))
	if err != nil || !again.Job.CanceledAt.Equal(*at(5)) {
		t.Fatalf("cancel twice: %+v %v", again.Job, err)
	}
	done := Build{Number: 3, Job: Job{StartedAt: at(1), CompletedAt: at(2)}}
	if _, err := Cancel(done, "alice", *at(5)); !errors.Is(err, ErrNotActive) {
		t.Fatalf("cancel a finished build: %v", err)
	}
}

func TestCheckNew(t *testing.T) {
	if err := CheckNew(nil, Start); err != nil {
		t.Fatal(err)
	}
	if err := CheckNew(&Build{Number: 1, Transition: Start}, Stop); !errors.Is(err, ErrBuildActive) {
		t.Fatalf("while pending: %v", err)
	}
	if err := CheckNew(&Build{Number: 1, Transition: Start, Job: Job{StartedAt: at(1), CompletedAt: at(2), Error: "x"}}, Delete); err != nil {
		t.Fatalf("after a failure: %v", err)
	}
	if err := CheckNew(&Build{Number: 2, Transition: Delete, Job: Job{StartedAt: at(1), CompletedAt: at(2)}}, Start); !errors.Is(err, ErrDeleted) {
		t.Fatalf("after a delete: %v", err)
	}
	if err := CheckNew(&Build{Number: 2, Transition: Delete, Job: Job{StartedAt: at(1), CompletedAt: at(2), Error: "x"}}, Delete); err != nil {
		t.Fatalf("retry a failed delete: %v", err)
	}
}

// Actual is a total function of the build's transition and job status, and WorkspaceAfter sets an
// error exactly when the workspace is Failed or Canceled.
func TestActualAndWorkspaceAfter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr := rapid.SampledFrom([]Transition{Start, Stop, Delete}).Draw(t, "transition")
		ts := func(name string) *time.Time {
			if rapid.Bool().Draw(t, name) {
				return at(rapid.IntRange(0, 100).Draw(t, name+"_s"))
			}
			return nil
		}
		j := Job{StartedAt: ts("started"), CanceledAt: ts("canceled"), CompletedAt: ts("completed"), Error: rapid.SampledFrom([]string{"", "boom"}).Draw(t, "error")}
		b := Build{Number: 1, Transition: tr, Job: j}
		actual := Actual(b)
		st := j.Status()
		switch {
		case st.Active():
			want := map[Transition]workspace.State{Start: workspace.Starting, Stop: workspace.Stopping, Delete: workspace.Terminating}[tr]
			if actual != want {
				t.Fatalf("active %s %s: %s", tr, st, actual)
			}
		case st == Succeeded:
			want := map[Transition]workspace.State{Start: workspace.Running, Stop: workspace.Stopped, Delete: workspace.Terminated}[tr]
			if actual != want {
				t.Fatalf("succeeded %s: %s", tr, actual)
			}
		case st == Canceled:
			if actual != workspace.Canceled {
				t.Fatalf("canceled %s: %s", tr, actual)
			}
		default:
			if actual != workspace.Failed {
				t.Fatalf("%s %s: %s", tr, st, actual)
			}
		}
		w := WorkspaceAfter(WorkspaceState{Actual: workspace.Running, ActualAt: t0, ErrorType: "old", ErrorMessage: "old"}, b, *at(200))
		if (w.ErrorMessage != "") != (actual == workspace.Failed || actual == workspace.Canceled) || w.Actual != actual {
			t.Fatalf("workspace after %s %s: %+v", tr, st, w)
		}
		if actual != workspace.Running && !w.ActualAt.Equal(*at(200)) {
			t.Fatalf("actual changed but its time did not: %+v", w)
		}
	})
}
