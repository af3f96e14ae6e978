package loadgen_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/loadgen"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestRounds runs the generator at a tiny scale, in rounds (no real time), against a real server on
// each store, and checks that what it measured is what happened: every reconcile answered, every
// user change picked up by its agent in its round, the changed workspaces reported in their new
// state the round after.
func TestRounds(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			seeder, ok := env.Store.(loadgen.Seeder)
			if !ok {
				t.Fatalf("the %s store cannot seed in bulk", engine)
			}
			const agents, per, rounds, changes = 3, 4, 3, 2
			rep, err := loadgen.Run(context.Background(), loadgen.Config{
				Servers: []string{env.URL}, AdminToken: env.AdminToken, Seeder: seeder,
				Agents: agents, WorkspacesPerAgent: per, Rounds: rounds, UserChangesPerRound: changes,
				Now:       env.Clock.Now,
				Step:      func() { env.Clock.Advance(time.Second) },
				Processes: []loadgen.Process{{Name: "test", CPU: loadgen.ProcCPU(os.Getpid())}},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", rep)
			if rep.Reconciles.Count != agents*rounds || rep.Reconciles.Errors != 0 {
				t.Errorf("reconciles: %d ok, %d errors (%s); want %d ok", rep.Reconciles.Count, rep.Reconciles.Errors, rep.Reconciles.FirstError, agents*rounds)
			}
			if rep.UserChanges.Count != rounds*changes || rep.UserChanges.Errors != 0 {
				t.Errorf("user changes: %d ok, %d errors (%s); want %d ok", rep.UserChanges.Count, rep.UserChanges.Errors, rep.UserChanges.FirstError, rounds*changes)
			}
			if rep.Configs != rounds*changes {
				t.Errorf("%d configs answered, want one for each of the %d changes", rep.Configs, rounds*changes)
			}
			if rep.Reconciles.P50 <= 0 || rep.Reconciles.P99 < rep.Reconciles.P50 || rep.Reconciles.Max < rep.Reconciles.P99 {
				t.Errorf("reconcile percentiles out of order: %+v", rep.Reconciles)
			}
			if len(rep.CPU) != 1 || rep.CPU[0].Used <= 0 {
				t.Errorf("cpu: %+v, want this process's, above 0", rep.CPU)
			}
			// The changes of the rounds before the last were reported back as applied: the server
			// took the Deployments' states (Stopped for a first change).
			all, err := env.Store.ListWorkspaces(context.Background(), store.ListFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != agents*per {
				t.Fatalf("%d workspaces, want %d", len(all), agents*per)
			}
			stopped := 0
			for _, w := range all {
				if w.DesiredState == workspace.Stopped && w.ActualState == workspace.Stopped {
					stopped++
				}
			}
			if want := (rounds - 1) * changes; stopped != want {
				t.Errorf("%d workspaces desired and reported Stopped, want %d", stopped, want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
	} {
		if got := loadgen.Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
		}
	}
}
