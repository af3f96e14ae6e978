package server_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestAdoptedRunThatNeverStartedIsQueuedAgain: a provisioner that restarts and adopts a run which
// had not reached Terraform's apply or destroy reports it with nothing_ran: the build is queued
// again (its log says why) and runs from the state it started from; reported so a second time,
// it fails with the provisioner's error, keeping that state. A canceled build is not queued again.
func TestAdoptedRunThatNeverStartedIsQueuedAgain(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			p.run("w", 1, protocol.FinishRequest{State: tfState(1)})

			const notStarted = "the provisioner stopped before terraform applied anything; the state is the one the build started from"
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			first := p.run("w", 2, protocol.FinishRequest{Error: notStarted, State: tfState(1), NothingRan: true})
			if b := getBuild(t, env, alice, "w", 2); b.Status != "pending" || b.Error != "" {
				t.Fatalf("after a report that nothing ran: %+v, want the build queued again", b)
			}
			if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != "Stopping" {
				t.Errorf("the workspace while its build is queued again: %s", ws.ActualState)
			}
			ls := logLines(t, env, alice, "w", 2, "")
			if len(ls) != 1 || ls[0].Stage != "Requeued" || !strings.Contains(ls[0].Output, "The build is queued again") || !strings.Contains(ls[0].Output, notStarted) {
				t.Errorf("the re-queued build's log %+v", ls)
			}
			// Another provisioner may take it; it runs from the state the build started from.
			q := worker{t, env, createProvisioner(t, env, "p2"), "host-2"}
			second := q.mustAcquire("w", 2)
			if second.ID != first.ID || !bytes.Equal(second.State, tfState(1)) {
				t.Fatalf("the re-queued build came back as %+v", second)
			}
			q.finish(second.ID, protocol.FinishRequest{Error: notStarted, State: tfState(1), NothingRan: true})
			if b := getBuild(t, env, alice, "w", 2); b.Status != "failed" || b.Error != notStarted {
				t.Fatalf("reported a second time: %+v, want it failed", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 2)

			// A canceled build whose run never started ends canceled.
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			j := p.mustAcquire("w", 3)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/builds/3/cancel", nil, http.StatusOK, nil)
			p.finish(j.ID, protocol.FinishRequest{Canceled: true, Error: "canceled: " + notStarted, NothingRan: true})
			if b := getBuild(t, env, alice, "w", 3); b.Status != "canceled" {
				t.Fatalf("a canceled build reported with nothing_ran: %+v", b)
			}
		})
	}
}
