package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/provisioner"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
)

// TestBuildAPIOperations runs each row of the seed's "API Operations" table
// (../shared/seeds/terraform-state-management.md) through HTTP, the test playing the provisioner:
// where each build's state comes from, and what its end writes.
func TestBuildAPIOperations(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}

			// POST /workspaces with a terraform template: build 1, a start from no state.
			var ws sdk.Workspace
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, &ws)
			if ws.Backend != "terraform" || ws.Template != "tf" || ws.Agent != "" || ws.Owner != "alice" ||
				ws.DesiredState != "Running" || ws.ActualState != "Starting" || ws.Error != nil {
				t.Fatalf("created %+v", ws)
			}
			b := getBuild(t, env, alice, "w", 1)
			if b.Number != 1 || b.Transition != "start" || b.StateSource != "none" || b.HasState || b.Status != "pending" ||
				b.Reason != "initiator" || b.Initiator != "alice" || b.TemplateVersion != 1 || b.StartedAt != nil {
				t.Fatalf("build 1 %+v", b)
			}
			if status, body, _ := pullState(t, env, alice, "w", ""); status != http.StatusNotFound {
				t.Errorf("state of a first build before it ends: %d %s, want 404", status, body)
			}
			job := p.mustAcquire("w", 1)
			if job.Transition != "start" || job.State != nil || job.Variables["start_count"] != "1" ||
				job.Variables["workspace_name"] != "w" || job.Variables["workspace_owner"] != "alice" ||
				job.Variables["workspace_id"] != ws.ID || !bytes.Equal(job.Archive, te.Archive) {
				t.Fatalf("job of build 1: %+v", job)
			}
			if b := getBuild(t, env, alice, "w", 0); b.Status != "running" || b.StartedAt == nil {
				t.Fatalf("acquired build 1 %+v", b)
			}
			if p.heartbeat(job.ID) {
				t.Fatal("heartbeat of a build nobody canceled answered canceled")
			}
			p.log(job.ID, "terraform_data.home[0]: Creation complete")
			state := tfState(1)
			p.finish(job.ID, protocol.FinishRequest{State: state})
			if b := getBuild(t, env, alice, "w", 1); b.Status != "succeeded" || !b.HasState || b.CompletedAt == nil || b.Error != "" {
				t.Fatalf("finished build 1 %+v", b)
			}
			if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != "Running" || ws.Error != nil {
				t.Fatalf("after build 1: %+v", ws)
			}
			wantState(t, env, alice, "w", "", state, 1)

			// POST builds stop, then start: each starts from the state the previous build finished
			// with, and its end writes the state Terraform reports.
			for i, step := range []struct{ transition, during, after, startCount string }{
				{"stop", "Stopping", "Stopped", "0"},
				{"start", "Starting", "Running", "1"},
			} {
				n := i + 2
				b := newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: step.transition})
				if b.Number != n || b.Transition != step.transition || b.StateSource != "previous" || !b.HasState || b.Status != "pending" {
					t.Fatalf("build %d (%s) %+v", n, step.transition, b)
				}
				if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != step.during {
					t.Errorf("during %s: actual %s, want %s", step.transition, ws.ActualState, step.during)
				}
				wantState(t, env, alice, "w", "", state, n) // while it runs: the state it started from
				job := p.mustAcquire("w", n)
				if job.Transition != step.transition || !bytes.Equal(job.State, state) || job.Variables["start_count"] != step.startCount {
					t.Fatalf("job of build %d: transition %s start_count %s state %s, want %s %s %s",
						n, job.Transition, job.Variables["start_count"], job.State, step.transition, step.startCount, state)
				}
				state = tfState(n)
				p.finish(job.ID, protocol.FinishRequest{State: state})
				wantState(t, env, alice, "w", "", state, n)
				if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != step.after || ws.DesiredState != step.after {
					t.Errorf("after %s: %s/%s, want %s", step.transition, ws.DesiredState, ws.ActualState, step.after)
				}
			}
			// Every build keeps its own state.
			wantState(t, env, alice, "w", "?build=1", tfState(1), 1)
			wantState(t, env, alice, "w", "?build=2", tfState(2), 2)

			// POST builds delete: terraform destroy from the previous state.
			b = newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "delete"})
			if b.Number != 4 || b.StateSource != "previous" || b.Orphan {
				t.Fatalf("delete build %+v", b)
			}
			if ws := getWorkspace(t, env, alice, "w"); ws.DesiredState != "Terminated" || ws.ActualState != "Terminating" {
				t.Errorf("deleting: %s/%s", ws.DesiredState, ws.ActualState)
			}
			job = p.mustAcquire("w", 4)
			if job.Transition != "delete" || !bytes.Equal(job.State, state) || job.Variables["start_count"] != "0" {
				t.Fatalf("delete job %+v", job)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(4)})
			if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != "Terminated" || ws.Error != nil {
				t.Errorf("deleted: %+v", ws)
			}
			// Nothing after a successful delete.
			for _, req := range []sdk.CreateBuildRequest{{Transition: "start"}, {Transition: "stop"}, {Transition: "delete"}, {Transition: "delete", Orphan: true}} {
				status, body := call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", req)
				wantError(t, "build after a delete", status, body, http.StatusConflict, "build conflict", "deleted")
			}
			status, body := call(t, env, alice, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Running"})
			wantError(t, "start after a delete", status, body, http.StatusConflict, "illegal state change")
			if bs := listBuilds(t, env, alice, "w"); len(bs) != 4 || bs[0].Number != 4 || bs[3].Number != 1 {
				t.Errorf("builds after the delete: %+v", bs)
			}
			if a := p.acquire(); a != nil {
				t.Errorf("a job is pending after the delete: %+v", a)
			}

			// POST builds delete+orphan: no Terraform, no job, finished at once, no state.
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "o", "template": "tf"}, http.StatusCreated, nil)
			p.run("o", 1, protocol.FinishRequest{State: tfState(10)})
			b = newBuild(t, env, alice, "o", sdk.CreateBuildRequest{Transition: "delete", Orphan: true})
			if b.Number != 2 || b.Status != "succeeded" || b.StateSource != "orphan" || b.HasState || !b.Orphan ||
				b.CompletedAt == nil || b.Transition != "delete" {
				t.Fatalf("orphan delete %+v", b)
			}
			if a := p.acquire(); a != nil {
				t.Fatalf("an orphan delete queued a job: %+v", a)
			}
			if ws := getWorkspace(t, env, alice, "o"); ws.DesiredState != "Terminated" || ws.ActualState != "Terminated" {
				t.Errorf("orphan-deleted: %s/%s", ws.DesiredState, ws.ActualState)
			}
			if ls := logLines(t, env, alice, "o", 2, ""); len(ls) != 1 || ls[0].Stage != "Orphan delete" || !strings.Contains(ls[0].Output, "left in place") {
				t.Errorf("orphan delete's log: %+v", ls)
			}
			if status, body, _ := pullState(t, env, alice, "o", ""); status != http.StatusNotFound {
				t.Errorf("state after an orphan delete: %d %s, want 404", status, body)
			}
			wantState(t, env, alice, "o", "?build=1", tfState(10), 1)
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/o/builds", sdk.CreateBuildRequest{Transition: "start"})
			wantError(t, "start after an orphan delete", status, body, http.StatusConflict, "build conflict", "deleted")

			// Cancel of a pending build: canceled at once, the state unchanged.
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "c", "template": "tf"}, http.StatusCreated, nil)
			p.run("c", 1, protocol.FinishRequest{State: tfState(20)})
			newBuild(t, env, alice, "c", sdk.CreateBuildRequest{Transition: "stop"})
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/c/builds/2/cancel", nil, http.StatusOK, &b)
			if b.Status != "canceled" || b.CanceledAt == nil || b.CompletedAt == nil || b.StartedAt != nil ||
				!strings.Contains(b.Error, "canceled by alice") || b.StateCapturedOnCancel {
				t.Fatalf("canceled pending build %+v", b)
			}
			if a := p.acquire(); a != nil {
				t.Fatalf("a canceled build was handed out: %+v", a)
			}
			wantState(t, env, alice, "c", "", tfState(20), 2)
			if ws := getWorkspace(t, env, alice, "c"); ws.ActualState != "Canceled" || ws.DesiredState != "Stopped" || ws.Error == nil ||
				ws.Error.Type != "canceled" || !strings.Contains(ws.Error.Message, "build #2 (stop) was canceled") ||
				!strings.Contains(ws.Error.Message, "start, stop or delete the workspace") {
				t.Errorf("after a canceled stop: %+v %+v", ws, ws.Error)
			}

			// Cancel of a running build: canceling; the heartbeat says canceled (also one waiting);
			// a finish with canceled and a state stores it, marked captured on cancel.
			b = newBuild(t, env, alice, "c", sdk.CreateBuildRequest{Transition: "start"})
			if b.Number != 3 || b.StateSource != "previous" {
				t.Fatalf("build after a cancel %+v", b)
			}
			job = p.mustAcquire("c", 3)
			if !bytes.Equal(job.State, tfState(20)) {
				t.Fatalf("build after a cancel starts from %s", job.State)
			}
			waiting := make(chan bool, 1)
			go func() {
				var r protocol.HeartbeatResponse
				status, body := p.post(protocol.ProvisionerHeartbeatPath, job.ID, protocol.HeartbeatRequest{WorkerID: p.id, WaitSeconds: 60})
				if status != http.StatusOK || json.Unmarshal(body, &r) != nil {
					t.Errorf("waiting heartbeat: %d %s", status, body)
				}
				waiting <- r.Canceled
			}()
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/c/builds/latest/cancel", nil, http.StatusOK, &b)
			if b.Status != "canceling" || b.CanceledAt == nil || b.CompletedAt != nil {
				t.Fatalf("canceled running build %+v", b)
			}
			select {
			case canceled := <-waiting:
				if !canceled {
					t.Error("a waiting heartbeat answered not canceled")
				}
			case <-time.After(deadline):
				t.Fatal("a waiting heartbeat did not learn of the cancel")
			}
			if !p.heartbeat(job.ID) {
				t.Error("heartbeat of a canceling build answered not canceled")
			}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/c/builds/3/cancel", nil, http.StatusOK, &b)
			if b.Status != "canceling" {
				t.Errorf("second cancel: %+v", b)
			}
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/c/builds", sdk.CreateBuildRequest{Transition: "stop"})
			wantError(t, "build while one is canceling", status, body, http.StatusConflict, "build conflict", "#3", "canceling")
			if ws := getWorkspace(t, env, alice, "c"); ws.ActualState != "Starting" {
				t.Errorf("while canceling: actual %s, want Starting", ws.ActualState)
			}
			captured := tfState(23)
			p.finish(job.ID, protocol.FinishRequest{Canceled: true, Error: "terraform apply: interrupted", State: captured})
			b = getBuild(t, env, alice, "c", 3)
			if b.Status != "canceled" || !b.StateCapturedOnCancel || !b.HasState || b.Error != "canceled by alice; terraform apply: interrupted" {
				t.Fatalf("build canceled while running %+v", b)
			}
			wantState(t, env, alice, "c", "", captured, 3)
			if ws := getWorkspace(t, env, alice, "c"); ws.ActualState != "Canceled" || ws.Error == nil || !strings.Contains(ws.Error.Message, "was canceled") {
				t.Errorf("after a canceled start: %+v", ws)
			}
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/c/builds/3/cancel", nil)
			wantError(t, "cancel of an ended build", status, body, http.StatusConflict, "build conflict", "canceled")

			// PUT state: replaces the latest build's state, with no new build, and clears the mark.
			pushed := tfState(30)
			if status, _, body := send(t, env, alice, "PUT", "/api/v1/workspaces/c/state", "application/json", bytes.NewReader(pushed)); status != http.StatusNoContent {
				t.Fatalf("state push: %d %s", status, body)
			}
			if bs := listBuilds(t, env, alice, "c"); len(bs) != 3 {
				t.Errorf("state push made a build: %+v", bs)
			}
			wantState(t, env, alice, "c", "", pushed, 3)
			if b := getBuild(t, env, alice, "c", 3); b.StateCapturedOnCancel || b.Status != "canceled" {
				t.Errorf("build 3 after the push %+v", b)
			}
			// ... and the next build starts from it; while it is active, a push is refused.
			newBuild(t, env, alice, "c", sdk.CreateBuildRequest{Transition: "stop"})
			for _, phase := range []string{"pending", "running"} {
				status, _, body := send(t, env, alice, "PUT", "/api/v1/workspaces/c/state", "", bytes.NewReader(tfState(99)))
				wantError(t, "state push while a build is "+phase, status, body, http.StatusConflict, "build conflict", phase)
				if phase == "pending" {
					job = p.mustAcquire("c", 4)
					if !bytes.Equal(job.State, pushed) {
						t.Fatalf("build after a push starts from %s", job.State)
					}
				}
			}
			wantState(t, env, alice, "c", "", pushed, 4)
			p.finish(job.ID, protocol.FinishRequest{State: tfState(31)})
			wantState(t, env, alice, "c", "", tfState(31), 4)

			// POST builds with a state (state push with a build): state source explicit.
			explicit := tfState(40)
			b = newBuild(t, env, alice, "c", sdk.CreateBuildRequest{Transition: "start", State: explicit})
			if b.StateSource != "explicit" || !b.HasState {
				t.Fatalf("build with a state %+v", b)
			}
			job = p.mustAcquire("c", 5)
			if !bytes.Equal(job.State, explicit) {
				t.Fatalf("build with a state starts from %s", job.State)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(41)})
			wantState(t, env, alice, "c", "", tfState(41), 5)
		})
	}
}

// TestBuildFailureState: a failed build writes the state Terraform reports; without one it keeps
// the state it started from (seed, "State Update on Failure").
func TestBuildFailureState(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "f", "template": "tf"}, http.StatusCreated, nil)

			// A failure with a state writes it.
			p.run("f", 1, protocol.FinishRequest{Error: "terraform apply: exit status 1", State: tfState(1)})
			b := getBuild(t, env, alice, "f", 1)
			if b.Status != "failed" || !b.HasState || b.Error != "terraform apply: exit status 1" || b.StateCapturedOnCancel {
				t.Fatalf("failed build %+v", b)
			}
			wantState(t, env, alice, "f", "", tfState(1), 1)
			ws := getWorkspace(t, env, alice, "f")
			if ws.ActualState != "Failed" || ws.DesiredState != "Running" || ws.Error == nil || ws.Error.Type != "build" ||
				ws.Error.Message != "build #1 (start) failed: terraform apply: exit status 1" {
				t.Fatalf("after a failure: %+v %+v", ws, ws.Error)
			}

			// The next build (a retry) starts from it; a failure without a state keeps it.
			newBuild(t, env, alice, "f", sdk.CreateBuildRequest{Transition: "start"})
			job := p.mustAcquire("f", 2)
			if !bytes.Equal(job.State, tfState(1)) {
				t.Fatalf("retry starts from %s", job.State)
			}
			p.finish(job.ID, protocol.FinishRequest{Error: "terraform init: no network"})
			if b := getBuild(t, env, alice, "f", 2); b.Status != "failed" || !b.HasState || b.StateSource != "previous" {
				t.Fatalf("failed build without a state %+v", b)
			}
			wantState(t, env, alice, "f", "", tfState(1), 2)

			// A success after failures writes its state and clears the error.
			newBuild(t, env, alice, "f", sdk.CreateBuildRequest{Transition: "start"})
			job = p.mustAcquire("f", 3)
			if !bytes.Equal(job.State, tfState(1)) {
				t.Fatalf("retry starts from %s", job.State)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(3)})
			wantState(t, env, alice, "f", "", tfState(3), 3)
			if ws := getWorkspace(t, env, alice, "f"); ws.ActualState != "Running" || ws.Error != nil {
				t.Errorf("after a success: %+v", ws)
			}
			// A success without a state (an empty module) leaves the build without one.
			newBuild(t, env, alice, "f", sdk.CreateBuildRequest{Transition: "stop"})
			p.run("f", 4, protocol.FinishRequest{})
			if status, body, _ := pullState(t, env, alice, "f", ""); status != http.StatusNotFound {
				t.Errorf("state of a success that reported none: %d %s", status, body)
			}
		})
	}
}

// TestProvisionerJobOwnership: only the worker that claimed a job (same provisioner token and same
// worker id) may heartbeat, log and finish it, and only while it runs.
func TestProvisionerJobOwnership(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p2 := createProvisioner(t, env, "p2")
			owner := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			job := owner.mustAcquire("w", 1)
			if a := (worker{t, env, p2, "host-1"}).acquire(); a != nil {
				t.Fatalf("a claimed job was handed out again: %+v", a)
			}

			notOwner := store.ErrNotOwner.Error()
			for name, w := range map[string]worker{
				"another worker of the provisioner":      {t, env, te.Prov, "host-2"},
				"another provisioner, same worker id":    {t, env, p2, "host-1"},
				"another provisioner, another worker id": {t, env, p2, "host-2"},
			} {
				for _, c := range []struct {
					path string
					body any
				}{
					{protocol.ProvisionerHeartbeatPath, protocol.HeartbeatRequest{WorkerID: w.id}},
					{protocol.ProvisionerLogsPath, protocol.LogsRequest{WorkerID: w.id, Lines: []protocol.LogLine{{Output: "not mine"}}}},
					{protocol.ProvisionerFinishPath, protocol.FinishRequest{WorkerID: w.id, State: tfState(666)}},
					{protocol.ProvisionerFinishPath, protocol.FinishRequest{WorkerID: w.id, Error: "boom"}},
				} {
					status, body := w.post(c.path, job.ID, c.body)
					wantError(t, name+" "+c.path, status, body, http.StatusConflict, notOwner)
				}
			}
			// Nothing they sent was recorded.
			if b := getBuild(t, env, alice, "w", 1); b.Status != "running" || b.HasState {
				t.Fatalf("build after others' reports %+v", b)
			}
			if ls := logLines(t, env, alice, "w", 1, ""); len(ls) != 0 {
				t.Fatalf("others' log lines were kept: %+v", ls)
			}

			// The provisioner's client tells them by the answer's code: not the owner, no such job.
			other := &provisioner.Client{URL: env.URL, Token: p2, HTTP: http.DefaultClient}
			if _, err := other.Heartbeat(t.Context(), job.ID, "host-1", 0); !errors.Is(err, store.ErrNotOwner) {
				t.Errorf("client heartbeat of another's job: %v, want ErrNotOwner", err)
			}
			if err := other.AppendLogs(t.Context(), "no-such-job", "host-1", nil); !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner) {
				t.Errorf("client logs of an unknown job: %v, want ErrNotFound", err)
			}
			gone := &provisioner.Client{URL: env.URL + "/api/v1/nothing-here", Token: p2, HTTP: http.DefaultClient}
			if err := gone.AppendLogs(t.Context(), job.ID, "host-1", nil); errors.Is(err, store.ErrNotFound) || !apiclient.HasCode(err, sdk.CodeUnknownEndpoint) {
				t.Errorf("client logs to a path the server does not serve: %v, want unknown_endpoint and not ErrNotFound", err)
			}

			// Unknown jobs are 404; wrong tokens 401.
			for _, path := range []string{protocol.ProvisionerHeartbeatPath, protocol.ProvisionerLogsPath, protocol.ProvisionerFinishPath} {
				status, body := owner.post(path, "no-such-job", map[string]any{"worker_id": owner.id})
				wantError(t, "unknown job "+path, status, body, http.StatusNotFound, "")
				for name, token := range map[string]string{"no token": "", "unknown token": "hgp_nope", "user token": alice, "admin token": env.AdminToken} {
					status, body := (worker{t, env, token, owner.id}).post(path, job.ID, map[string]any{"worker_id": owner.id})
					wantError(t, name+" on "+path, status, body, http.StatusUnauthorized, "")
				}
			}
			status, body := call(t, env, alice, "POST", protocol.ProvisionerAcquirePath, protocol.AcquireRequest{WorkerID: "x"})
			wantError(t, "user token on acquire", status, body, http.StatusUnauthorized, "")
			status, body = call(t, env, te.Prov, "GET", "/api/v1/workspaces", nil)
			wantError(t, "provisioner token on the user API", status, body, http.StatusUnauthorized, "")

			// A second build while one is active is refused, naming it.
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "stop"})
			wantError(t, "second build", status, body, http.StatusConflict, "build conflict", "build #1 (start) is running")

			// The owner finishes; then the job is nobody's.
			owner.log(job.ID, "done")
			owner.finish(job.ID, protocol.FinishRequest{State: tfState(1)})
			for _, c := range []struct {
				path string
				body any
			}{
				{protocol.ProvisionerHeartbeatPath, protocol.HeartbeatRequest{WorkerID: owner.id}},
				{protocol.ProvisionerLogsPath, protocol.LogsRequest{WorkerID: owner.id, Lines: []protocol.LogLine{{Output: "late"}}}},
				{protocol.ProvisionerFinishPath, protocol.FinishRequest{WorkerID: owner.id, Error: "again"}},
			} {
				status, body := owner.post(c.path, job.ID, c.body)
				wantError(t, "owner after the end "+c.path, status, body, http.StatusConflict, notOwner)
			}
			if b := getBuild(t, env, alice, "w", 1); b.Status != "succeeded" || b.Error != "" {
				t.Errorf("build after a second finish %+v", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 1)

			// A worker that asks for work while it holds a job lost it (restarted before it ran
			// Terraform): nothing ran, so the job is queued again, once, and the worker's request
			// takes it. Lost a second time, it fails, keeping the state it started from.
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			lost := owner.mustAcquire("w", 2)
			// Right after the claim (a heartbeat's age), the job may still be run by a live process
			// with the same worker id: it is left alone.
			if a := owner.acquire(); a != nil {
				t.Fatalf("acquire handed out %+v", a)
			}
			if b := getBuild(t, env, alice, "w", 2); b.Status != "running" {
				t.Fatalf("a just-claimed build taken for abandoned %+v", b)
			}
			env.Clock.Advance(31 * time.Second)
			again := owner.mustAcquire("w", 2)
			if again.ID != lost.ID || !bytes.Equal(again.State, tfState(1)) {
				t.Fatalf("the re-queued build came back as %+v", again)
			}
			if b := getBuild(t, env, alice, "w", 2); b.Status != "running" || b.Error != "" {
				t.Fatalf("the re-queued build %+v", b)
			}
			if ls := logLines(t, env, alice, "w", 2, ""); len(ls) != 1 || ls[0].Stage != "Requeued" || !strings.Contains(ls[0].Output, "queued again") {
				t.Errorf("the re-queued build's log %+v", ls)
			}
			env.Clock.Advance(31 * time.Second)
			if a := owner.acquire(); a != nil {
				t.Fatalf("acquire handed out %+v", a)
			}
			if b := getBuild(t, env, alice, "w", 2); b.Status != "failed" || !strings.Contains(b.Error, "restarted before it ran Terraform, twice") {
				t.Fatalf("abandoned build %+v", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 2)
			if ls := logLines(t, env, alice, "w", 2, ""); len(ls) != 2 || ls[1].Stage != "Abandoned" {
				t.Errorf("abandoned build's log %+v", ls)
			}
			status, body = owner.post(protocol.ProvisionerFinishPath, lost.ID, protocol.FinishRequest{WorkerID: owner.id, State: tfState(2)})
			wantError(t, "finish of an abandoned job", status, body, http.StatusConflict, notOwner)

			// A canceled job its worker lost ends canceled: nothing ran.
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			owner.mustAcquire("w", 3)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/builds/3/cancel", nil, http.StatusOK, nil)
			env.Clock.Advance(31 * time.Second)
			if a := owner.acquire(); a != nil {
				t.Fatalf("acquire handed out %+v", a)
			}
			if b := getBuild(t, env, alice, "w", 3); b.Status != "canceled" {
				t.Fatalf("a canceled build its worker lost: %+v", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 3)

			// Provisioners are listed for admins only, with when they last called.
			var ps []sdk.Provisioner
			mustCall(t, env, env.AdminToken, "GET", "/api/v1/provisioners", nil, http.StatusOK, &ps)
			if len(ps) != 2 || ps[0].Name != "p1" || ps[0].LastSeenAt == nil || ps[0].Token != "" || ps[1].Name != "p2" {
				t.Errorf("provisioners %+v", ps)
			}
			status, body = call(t, env, alice, "GET", "/api/v1/provisioners", nil)
			wantError(t, "user lists provisioners", status, body, http.StatusForbidden, "")
			status, body = call(t, env, alice, "POST", "/api/v1/provisioners", sdk.CreateProvisionerRequest{Name: "p3"})
			wantError(t, "user registers a provisioner", status, body, http.StatusForbidden, "")
			status, body = call(t, env, env.AdminToken, "POST", "/api/v1/provisioners", sdk.CreateProvisionerRequest{Name: "p2"})
			wantError(t, "provisioner name taken", status, body, http.StatusConflict, "already exists")
		})
	}
}

// TestProvisionerTextWithNUL: text a provisioner reports may hold NUL characters (Terraform's
// output), which Postgres text cannot: they are replaced, not a 500 that would lose the outcome.
func TestProvisionerTextWithNUL(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			job := p.mustAcquire("w", 1)
			p.log(job.ID, "binary\x00output")
			p.finish(job.ID, protocol.FinishRequest{Error: "exit\x00status 1", State: tfState(1)})
			if ls := logLines(t, env, alice, "w", 1, ""); len(ls) != 1 || ls[0].Output != "binary\uFFFDoutput" {
				t.Errorf("log with a NUL %+v", ls)
			}
			if b := getBuild(t, env, alice, "w", 1); b.Status != "failed" || b.Error != "exit\uFFFDstatus 1" || !b.HasState {
				t.Errorf("build with a NUL in its error %+v", b)
			}
			status, body := call(t, env, te.Prov, "POST", protocol.ProvisionerAcquirePath, `{"worker_id":"a\u0000b"}`)
			wantField(t, "worker id with a NUL", status, body, "worker_id")
		})
	}
}

// TestBlockingAcquire: an acquire waiting for a job gets the build queued meanwhile.
func TestBlockingAcquire(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			alice := createUser(t, te.Env, "alice")
			p := worker{t, te.Env, te.Prov, "host-1"}
			got := make(chan *protocol.ProvisionerJob, 1)
			go func() {
				var r protocol.AcquireResponse
				status, body := p.post(protocol.ProvisionerAcquirePath, "", protocol.AcquireRequest{WorkerID: p.id, WaitSeconds: 60})
				if status != http.StatusOK || json.Unmarshal(body, &r) != nil {
					t.Errorf("waiting acquire: %d %s", status, body)
				}
				got <- r.Job
			}()
			mustCall(t, te.Env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			select {
			case j := <-got:
				if j == nil || j.WorkspaceName != "w" || j.BuildNumber != 1 {
					t.Fatalf("waiting acquire got %+v", j)
				}
			case <-time.After(deadline):
				t.Fatal("a waiting acquire did not get the build queued")
			}
		})
	}
}

// TestTerraformDesiredState: PATCH desired_state of a terraform workspace queues the builds it
// maps to (docs/decisions.md, "Desired and actual states of a terraform workspace").
func TestTerraformDesiredState(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			patch := func(to string, want int) sdk.Workspace {
				t.Helper()
				var ws sdk.Workspace
				status, body := call(t, env, alice, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": to})
				if status != want {
					t.Fatalf("PATCH %s: %d %s, want %d", to, status, body, want)
				}
				if want == http.StatusOK {
					if err := json.Unmarshal(body, &ws); err != nil {
						t.Fatal(err)
					}
				}
				return ws
			}
			count := func(want int) {
				t.Helper()
				if bs := listBuilds(t, env, alice, "w"); len(bs) != want {
					t.Fatalf("%d builds, want %d", len(bs), want)
				}
			}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			patch("Running", http.StatusOK) // becoming Running already
			count(1)
			p.run("w", 1, protocol.FinishRequest{State: tfState(1)})
			patch("Running", http.StatusOK) // Running already
			count(1)

			// Stopped: a stop; asked again while it runs, nothing more.
			if ws := patch("Stopped", http.StatusOK); ws.DesiredState != "Stopped" || ws.ActualState != "Stopping" {
				t.Fatalf("PATCH Stopped: %s/%s", ws.DesiredState, ws.ActualState)
			}
			count(2)
			patch("Stopped", http.StatusOK)
			count(2)
			if b := getBuild(t, env, alice, "w", 2); b.Transition != "stop" || b.StateSource != "previous" {
				t.Fatalf("build of PATCH Stopped %+v", b)
			}
			status, body := call(t, env, alice, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "Running"})
			wantError(t, "PATCH Running while stopping", status, body, http.StatusConflict, "build conflict", "#2")
			p.run("w", 2, protocol.FinishRequest{State: tfState(2)})
			if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != "Stopped" {
				t.Fatalf("stopped: %+v", ws)
			}
			// A restart needs a workspace meant to run.
			status, body = call(t, env, alice, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": "RestartRequested"})
			wantError(t, "restart when stopped", status, body, http.StatusConflict, "illegal state change", "start it instead")
			count(2)

			// Running: a start.
			if ws := patch("Running", http.StatusOK); ws.DesiredState != "Running" || ws.ActualState != "Starting" {
				t.Fatalf("PATCH Running: %s/%s", ws.DesiredState, ws.ActualState)
			}
			if b := getBuild(t, env, alice, "w", 3); b.Transition != "start" {
				t.Fatalf("build of PATCH Running %+v", b)
			}
			p.run("w", 3, protocol.FinishRequest{State: tfState(3)})

			// RestartRequested: a stop; when it succeeds, a start (reason restart) is queued.
			if ws := patch("RestartRequested", http.StatusOK); ws.DesiredState != "RestartRequested" || ws.ActualState != "Stopping" {
				t.Fatalf("PATCH RestartRequested: %s/%s", ws.DesiredState, ws.ActualState)
			}
			patch("RestartRequested", http.StatusOK)
			count(4)
			if b := getBuild(t, env, alice, "w", 4); b.Transition != "stop" || b.Reason != "initiator" {
				t.Fatalf("restart's stop %+v", b)
			}
			p.run("w", 4, protocol.FinishRequest{State: tfState(4)})
			count(5)
			b := getBuild(t, env, alice, "w", 5)
			if b.Transition != "start" || b.Reason != "restart" || b.Initiator != "alice" || b.StateSource != "previous" || b.Status != "pending" {
				t.Fatalf("restart's start %+v", b)
			}
			if ws := getWorkspace(t, env, alice, "w"); ws.DesiredState != "Running" || ws.ActualState != "Starting" {
				t.Fatalf("restarting: %s/%s", ws.DesiredState, ws.ActualState)
			}
			job := p.mustAcquire("w", 5)
			if !bytes.Equal(job.State, tfState(4)) || job.Transition != "start" {
				t.Fatalf("restart's start job %+v", job)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(5)})
			if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != "Running" {
				t.Fatalf("restarted: %+v", ws)
			}

			// A restart whose stop fails starts nothing; asked again, it retries the stop.
			patch("RestartRequested", http.StatusOK)
			p.run("w", 6, protocol.FinishRequest{Error: "stop failed"})
			count(6)
			if ws := getWorkspace(t, env, alice, "w"); ws.DesiredState != "RestartRequested" || ws.ActualState != "Failed" {
				t.Fatalf("failed restart: %s/%s", ws.DesiredState, ws.ActualState)
			}
			patch("RestartRequested", http.StatusOK)
			count(7)
			if b := getBuild(t, env, alice, "w", 7); b.Transition != "stop" {
				t.Fatalf("restart retry %+v", b)
			}
			p.run("w", 7, protocol.FinishRequest{State: tfState(7)})
			p.run("w", 8, protocol.FinishRequest{State: tfState(8)})

			// Terminated: a delete; then only Terminated again, which changes nothing.
			if ws := patch("Terminated", http.StatusOK); ws.DesiredState != "Terminated" || ws.ActualState != "Terminating" {
				t.Fatalf("PATCH Terminated: %s/%s", ws.DesiredState, ws.ActualState)
			}
			job = p.mustAcquire("w", 9)
			if job.Transition != "delete" || !bytes.Equal(job.State, tfState(8)) {
				t.Fatalf("delete job %+v", job)
			}
			p.finish(job.ID, protocol.FinishRequest{State: tfState(9)})
			if ws := patch("Terminated", http.StatusOK); ws.ActualState != "Terminated" {
				t.Fatalf("deleted: %+v", ws)
			}
			count(9)
			for _, to := range []string{"Running", "Stopped", "RestartRequested"} {
				status, body := call(t, env, alice, "PATCH", "/api/v1/workspaces/w", map[string]string{"desired_state": to})
				wantError(t, to+" after the delete", status, body, http.StatusConflict, "illegal state change", "permanent")
			}
			count(9)
		})
	}
}

// TestBuildVisibility: another user sees none of a workspace's builds, logs or state (404, as for a
// workspace that does not exist); an admin sees and acts on them.
func TestBuildVisibility(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			bob := createUser(t, env, "bob")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			p.run("w", 1, protocol.FinishRequest{State: tfState(1)})
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			job := p.mustAcquire("w", 2)
			p.log(job.ID, "stopping")

			for _, r := range []struct{ method, path, body string }{
				{"GET", "/api/v1/workspaces/%s", ""},
				{"PATCH", "/api/v1/workspaces/%s", `{"desired_state":"Terminated"}`},
				{"POST", "/api/v1/workspaces/%s/builds", `{"transition":"delete","orphan":true}`},
				{"GET", "/api/v1/workspaces/%s/builds", ""},
				{"GET", "/api/v1/workspaces/%s/builds/1", ""},
				{"GET", "/api/v1/workspaces/%s/builds/latest", ""},
				{"POST", "/api/v1/workspaces/%s/builds/2/cancel", ""},
				{"POST", "/api/v1/workspaces/%s/builds/latest/cancel", ""},
				{"GET", "/api/v1/workspaces/%s/builds/2/logs", ""},
				{"GET", "/api/v1/workspaces/%s/builds/2/logs?follow=true", ""},
				{"GET", "/api/v1/workspaces/%s/state", ""},
				{"GET", "/api/v1/workspaces/%s/state?build=1", ""},
				{"PUT", "/api/v1/workspaces/%s/state", string(tfState(9))},
			} {
				var body any
				if r.body != "" {
					body = r.body
				}
				status, got := call(t, env, bob, r.method, fmt.Sprintf(r.path, "w"), body)
				_, none := call(t, env, bob, r.method, fmt.Sprintf(r.path, "nope"), body)
				wantError(t, "bob "+r.method+" "+r.path, status, got, http.StatusNotFound, `workspace "w" not found`)
				if string(bytes.ReplaceAll(none, []byte("nope"), []byte("w"))) != string(got) {
					t.Errorf("bob %s %s: %s differs from the answer for a missing workspace %s", r.method, r.path, got, none)
				}
			}
			var list []sdk.Workspace
			mustCall(t, env, bob, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 0 {
				t.Errorf("bob lists %+v", list)
			}
			// Bob changed nothing.
			if b := getBuild(t, env, alice, "w", 0); b.Number != 2 || b.Status != "running" {
				t.Fatalf("after bob: %+v", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 2)

			// The admin sees and acts, naming the owner (a plain name is the admin's own).
			admin := env.AdminToken
			if status, body := call(t, env, admin, "GET", "/api/v1/workspaces/w/builds", nil); status != http.StatusNotFound {
				t.Errorf("admin's own w: %d %s, want 404", status, body)
			}
			if bs := listBuilds(t, env, admin, "alice%2Fw"); len(bs) != 2 {
				t.Errorf("admin lists %d builds", len(bs))
			}
			if ls := logLines(t, env, admin, "alice%2Fw", 2, ""); len(ls) != 1 || ls[0].Output != "stopping" {
				t.Errorf("admin reads the log %+v", ls)
			}
			wantState(t, env, admin, "alice%2Fw", "?build=1", tfState(1), 1)
			var b sdk.Build
			mustCall(t, env, admin, "POST", "/api/v1/workspaces/alice%2Fw/builds/2/cancel", nil, http.StatusOK, &b)
			if b.Status != "canceling" {
				t.Fatalf("admin's cancel %+v", b)
			}
			p.finish(job.ID, protocol.FinishRequest{Canceled: true})
			if b := getBuild(t, env, alice, "w", 2); b.Status != "canceled" || b.StateCapturedOnCancel {
				t.Fatalf("canceled without a state %+v", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 2) // no state reported: the one it started from
			if ws := getWorkspace(t, env, alice, "w"); ws.Error == nil || ws.Error.Message != "build #2 (stop) was canceled by admin; start, stop or delete the workspace" {
				t.Errorf("canceled by the admin: %+v", ws.Error)
			}
			if status, _, body := send(t, env, admin, "PUT", "/api/v1/workspaces/alice%2Fw/state", "application/json", bytes.NewReader(tfState(5))); status != http.StatusNoContent {
				t.Fatalf("admin's state push: %d %s", status, body)
			}
			b = newBuild(t, env, admin, "alice%2Fw", sdk.CreateBuildRequest{Transition: "start"})
			if b.Initiator != "admin" || b.Number != 3 {
				t.Errorf("admin's build %+v", b)
			}
			// The log of the cancel says who.
			ls := logLines(t, env, alice, "w", 2, "")
			if last := ls[len(ls)-1]; last.Stage != "Canceling" || !strings.Contains(last.Output, "Canceled by admin") {
				t.Errorf("cancel's log line %+v", last)
			}
		})
	}
}

// TestBuildReaper: tfbackend.Service.Reap with an injected clock fails a running job whose heartbeat
// is stale and a pending job nobody claimed, each with a log line saying why, keeping the state.
func TestBuildReaper(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			ctx := t.Context()
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			reap := func(want int) {
				t.Helper()
				n, err := te.Builder.Reap(ctx)
				if err != nil || n != want {
					t.Fatalf("reap: %d %v, want %d", n, err, want)
				}
			}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			p.run("w", 1, protocol.FinishRequest{State: tfState(1)})
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			job := p.mustAcquire("w", 2)

			// Heartbeats within the timeout keep it.
			env.Clock.Advance(4 * time.Minute)
			p.heartbeat(job.ID)
			env.Clock.Advance(4 * time.Minute)
			reap(0)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "q", "template": "tf"}, http.StatusCreated, nil)

			// Silent for over 5 minutes: failed, keeping the state it started from.
			env.Clock.Advance(2 * time.Minute)
			reap(1)
			b := getBuild(t, env, alice, "w", 2)
			if b.Status != "failed" || !b.HasState || !strings.Contains(b.Error, "stopped reporting (last heartbeat 6m0s ago, the limit is 5m0s)") {
				t.Fatalf("reaped running build %+v", b)
			}
			wantState(t, env, alice, "w", "", tfState(1), 2)
			ls := logLines(t, env, alice, "w", 2, "")
			if len(ls) == 0 || ls[len(ls)-1].Stage != "Reaped" || ls[len(ls)-1].Level != "error" || ls[len(ls)-1].Output != b.Error {
				t.Errorf("reaped build's log %+v", ls)
			}
			if ws := getWorkspace(t, env, alice, "w"); ws.ActualState != "Failed" || ws.Error == nil || !strings.Contains(ws.Error.Message, "stopped reporting") {
				t.Errorf("workspace of a reaped build %+v", ws)
			}
			// The worker, back, learns that the job is no longer its.
			status, body := p.post(protocol.ProvisionerFinishPath, job.ID, protocol.FinishRequest{WorkerID: p.id, State: tfState(2)})
			wantError(t, "finish after the reaper", status, body, http.StatusConflict, store.ErrNotOwner.Error())
			wantState(t, env, alice, "w", "", tfState(1), 2)
			if b := getBuild(t, env, alice, "q", 1); b.Status != "pending" {
				t.Fatalf("pending build reaped early %+v", b)
			}

			// Pending for over 30 minutes: failed, saying no provisioner took it.
			env.Clock.Advance(27 * time.Minute)
			reap(0)
			env.Clock.Advance(2 * time.Minute)
			reap(1)
			b = getBuild(t, env, alice, "q", 1)
			if b.Status != "failed" || b.HasState || !strings.Contains(b.Error, "no provisioner picked this build up in 30m0s") {
				t.Fatalf("reaped pending build %+v", b)
			}
			ls = logLines(t, env, alice, "q", 1, "")
			if len(ls) != 1 || ls[0].Stage != "Reaped" || ls[0].Output != b.Error {
				t.Errorf("reaped pending build's log %+v", ls)
			}
			if a := p.acquire(); a != nil {
				t.Errorf("a reaped build was handed out: %+v", a)
			}
			reap(0)
			if !strings.Contains(te.Log.String(), "build failed by the reaper") {
				t.Error("the reaper logged nothing")
			}
		})
	}
}

// TestBuildLogs: logs read in pages (after), and followed until the build ends with an end line.
func TestBuildLogs(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			job := p.mustAcquire("w", 1)
			if ls := logLines(t, env, alice, "w", 1, ""); len(ls) != 0 {
				t.Fatalf("log of a fresh build %+v", ls)
			}
			p.log(job.ID, "l1", "l2", "l3")
			p.log(job.ID, "l4", "l5")
			all := logLines(t, env, alice, "w", 1, "")
			if len(all) != 5 {
				t.Fatalf("log %+v", all)
			}
			for i, l := range all {
				if l.Output != fmt.Sprintf("l%d", i+1) || l.Stage != "Applying" || l.Level != "info" || l.End || l.Time.IsZero() ||
					(i > 0 && l.ID <= all[i-1].ID) {
					t.Errorf("line %d: %+v", i, l)
				}
			}
			if ls := logLines(t, env, alice, "w", 1, fmt.Sprintf("?after=%d", all[1].ID)); len(ls) != 3 || ls[0].Output != "l3" {
				t.Errorf("after line 2: %+v", ls)
			}
			if ls := logLines(t, env, alice, "w", 1, fmt.Sprintf("?after=%d&follow=false", all[4].ID)); len(ls) != 0 {
				t.Errorf("after the last line: %+v", ls)
			}
			for _, q := range []string{"-1", "abc", "1.5", "99999999999999999999"} {
				status, body := call(t, env, alice, "GET", "/api/v1/workspaces/w/builds/1/logs?after="+q, nil)
				wantField(t, "after="+q, status, body, "after")
			}
			for _, n := range []string{"0", "x", "-1"} {
				status, body := call(t, env, alice, "GET", "/api/v1/workspaces/w/builds/"+n+"/logs", nil)
				wantField(t, "build "+n, status, body, "number")
			}
			status, body := call(t, env, alice, "GET", "/api/v1/workspaces/w/builds/9/logs", nil)
			wantError(t, "logs of a missing build", status, body, http.StatusNotFound, `workspace "w" has no build 9`)

			// Follow: lines as they come, then the end line once the build ends.
			req, err := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s/api/v1/workspaces/w/builds/1/logs?follow=true&after=%d", env.URL, all[3].ID), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+alice)
			resp, err := http.DefaultClient.Do(req) // answers once the stream has started (subscribed)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
				t.Fatalf("follow: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			lines := make(chan sdk.BuildLog, 16)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					var l sdk.BuildLog
					if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
						t.Errorf("followed line %q: %v", sc.Text(), err)
						return
					}
					lines <- l
				}
			}()
			next := func() (sdk.BuildLog, bool) {
				t.Helper()
				select {
				case l, ok := <-lines:
					return l, ok
				case <-time.After(deadline):
					t.Fatal("the followed log sent nothing")
					return sdk.BuildLog{}, false
				}
			}
			if l, _ := next(); l.Output != "l5" {
				t.Fatalf("first followed line %+v, want l5", l)
			}
			p.log(job.ID, "l6")
			if l, _ := next(); l.Output != "l6" {
				t.Fatalf("followed line %+v, want l6", l)
			}
			p.log(job.ID, "l7", "l8")
			p.finish(job.ID, protocol.FinishRequest{State: tfState(1)})
			for _, want := range []string{"l7", "l8"} {
				if l, _ := next(); l.Output != want {
					t.Fatalf("followed line %+v, want %s", l, want)
				}
			}
			if l, _ := next(); !l.End || l.Status != "succeeded" || l.ID != 0 || l.Output != "" {
				t.Fatalf("end line %+v", l)
			}
			if l, ok := next(); ok {
				t.Fatalf("a line after the end: %+v", l)
			}

			// Following an ended build: its lines and the end line at once.
			ls := logLines(t, env, alice, "w", 1, "?follow=1")
			if len(ls) != 9 || ls[7].Output != "l8" || !ls[8].End || ls[8].Status != "succeeded" {
				t.Errorf("follow of an ended build %+v", ls)
			}

			// A long log is read in full (the server pages through it).
			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop"})
			job = p.mustAcquire("w", 2)
			for batch := range 3 {
				out := make([]string, protocol.MaxLogLinesPerRequest)
				for i := range out {
					out[i] = fmt.Sprintf("line %d", batch*protocol.MaxLogLinesPerRequest+i)
				}
				p.log(job.ID, out...)
			}
			p.finish(job.ID, protocol.FinishRequest{Error: "boom"})
			ls = logLines(t, env, alice, "w", 2, "?follow=true")
			if n := 3 * protocol.MaxLogLinesPerRequest; len(ls) != n+1 || ls[n-1].Output != fmt.Sprintf("line %d", n-1) || !ls[n].End || ls[n].Status != "failed" {
				t.Errorf("long log: %d lines, last %+v", len(ls), ls[len(ls)-1])
			}
		})
	}
}

// TestTerraformStateNotLeaked: the Terraform state never appears in an error body nor in the server
// log (debug level), whatever goes wrong.
func TestTerraformStateNotLeaked(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			bob := createUser(t, env, "bob")
			createAgent(t, env, "k1", nil)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "kube", "agent": "k1"}, http.StatusCreated, nil)
			p := worker{t, env, te.Prov, "host-1"}
			other := worker{t, env, te.Prov, "host-2"}
			secret := "hangar-leak-check-7f3a9c"
			stateOf := func(serial int, lineage string) []byte {
				return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.9.8","serial":%d,"lineage":%q,"outputs":{"password":{"value":"`+secret+`","type":"string","sensitive":true}},"resources":[]}`, serial, lineage)
			}
			state := stateOf(1, "l")
			newer := stateOf(2, "l")
			b64 := base64.StdEncoding.EncodeToString(state)
			broken := append(bytes.Clone(state), []byte(`,"x"`)...)
			var bodies [][]byte
			expect := func(what string, status, want int, body []byte) {
				t.Helper()
				if status != want {
					t.Errorf("%s: %d %s, want %d", what, status, body, want)
				}
				bodies = append(bodies, body)
			}

			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			job := p.mustAcquire("w", 1)
			status, body := other.post(protocol.ProvisionerFinishPath, job.ID, protocol.FinishRequest{WorkerID: other.id, State: state})
			expect("finish by another worker", status, http.StatusConflict, body)
			status, body = p.post(protocol.ProvisionerFinishPath, "no-such-job", protocol.FinishRequest{WorkerID: p.id, State: state})
			expect("finish of an unknown job", status, http.StatusNotFound, body)
			status, body = p.post(protocol.ProvisionerFinishPath, job.ID, `{"worker_id":"host-1","state":"`+secret+`!"}`)
			expect("finish with a state that is not base64", status, http.StatusBadRequest, body)
			status, body = p.post(protocol.ProvisionerFinishPath, job.ID, `{"worker_id":"host-1","state":"`+b64+`","tfstate":1}`)
			expect("finish with an unknown field", status, http.StatusBadRequest, body)
			status, body = p.post(protocol.ProvisionerFinishPath, job.ID, `{"worker_id":"host-1","state":"`+b64+`"} trailing`)
			expect("finish with trailing data", status, http.StatusBadRequest, body)
			p.finish(job.ID, protocol.FinishRequest{State: state})
			status, body = p.post(protocol.ProvisionerFinishPath, job.ID, protocol.FinishRequest{WorkerID: p.id, State: state})
			expect("second finish", status, http.StatusConflict, body)

			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader(state))
			expect("push of the same serial", status, http.StatusConflict, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader(stateOf(3, "other")))
			expect("push of another lineage", status, http.StatusConflict, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader([]byte(`{"version":4,"terraform_version":{"`+secret+`":1},"serial":2,"lineage":"l"}`)))
			expect("push with a field of the wrong type", status, http.StatusBadRequest, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader(newer))
			expect("state push", status, http.StatusNoContent, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader(broken))
			expect("push of a broken state", status, http.StatusBadRequest, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "text/plain", bytes.NewReader(state))
			expect("push as text/plain", status, http.StatusUnsupportedMediaType, body)
			status, _, body = send(t, env, bob, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader(newer))
			expect("push by another user", status, http.StatusNotFound, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/kube/state", "application/json", bytes.NewReader(newer))
			expect("push to a kubernetes workspace", status, http.StatusConflict, body)
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "delete", Orphan: true, State: state})
			expect("orphan delete with a state", status, http.StatusBadRequest, body)
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "restart", State: state})
			expect("unknown transition with a state", status, http.StatusBadRequest, body)
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "start", State: broken})
			expect("build with a broken state", status, http.StatusBadRequest, body)
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", `{"transition":"start","state":`+string(state)+`}`)
			expect("build with a state as an object", status, http.StatusBadRequest, body)
			status, body = call(t, env, bob, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "start", State: state})
			expect("build by another user", status, http.StatusNotFound, body)
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/kube/builds", sdk.CreateBuildRequest{Transition: "start", State: state})
			expect("build of a kubernetes workspace", status, http.StatusConflict, body)

			newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: "stop", State: state})
			status, body = call(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "start", State: state})
			expect("build while one is active", status, http.StatusConflict, body)
			status, _, body = send(t, env, alice, "PUT", "/api/v1/workspaces/w/state", "application/json", bytes.NewReader(stateOf(5, "l")))
			expect("push while a build is active", status, http.StatusConflict, body)
			job = p.mustAcquire("w", 2)
			p.finish(job.ID, protocol.FinishRequest{Error: "failed with " + "a state", State: state})
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/builds", sdk.CreateBuildRequest{Transition: "start"}, http.StatusCreated, nil)
			mustCall(t, env, alice, "POST", "/api/v1/workspaces/w/builds/latest/cancel", nil, http.StatusOK, nil)
			wantState(t, env, alice, "w", "", state, 3)

			for _, b := range bodies {
				if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(b64)) || bytes.Contains(b, []byte("state-secret")) {
					t.Errorf("an answer holds the state: %s", b)
				}
			}
			log := te.Log.String()
			if !strings.Contains(log, "request refused") || !strings.Contains(log, "build finished") {
				t.Fatalf("the log was not captured:\n%s", log)
			}
			for _, s := range []string{secret, b64, b64[:40]} {
				if strings.Contains(log, s) {
					t.Errorf("the server log holds the state (%.20s...):\n%s", s, log)
				}
			}
		})
	}
}

// TestBuildTemplateVersions: a start runs the template's newest version; a stop or delete runs the
// previous build's, the module that created the resources (docs/decisions.md).
func TestBuildTemplateVersions(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			p.run("w", 1, protocol.FinishRequest{State: tfState(1)})
			v2 := tfArchive(t, map[string]string{"main.tf": tfModuleSource, "outputs.tf": `output "n" { value = var.start_count }` + "\n"})
			var tmpl sdk.Template
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/templates/tf/versions", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: v2}, http.StatusCreated, &tmpl)
			if tmpl.ActiveVersion != 2 || tmpl.Versions[0].Number != 2 {
				t.Fatalf("second push %+v", tmpl)
			}
			for i, step := range []struct {
				transition string
				version    int
				archive    []byte
			}{
				{"stop", 1, te.Archive},
				{"start", 2, v2},
				{"delete", 2, v2},
			} {
				b := newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: step.transition})
				if b.TemplateVersion != step.version {
					t.Errorf("%s runs version %d, want %d", step.transition, b.TemplateVersion, step.version)
				}
				job := p.mustAcquire("w", i+2)
				if !bytes.Equal(job.Archive, step.archive) {
					t.Errorf("%s's job carries the archive of the wrong version", step.transition)
				}
				p.finish(job.ID, protocol.FinishRequest{State: tfState(i + 2)})
			}
		})
	}
}

// TestOnlyDeleteAfterAFailedDelete: termination is permanent for terraform workspaces too: once a
// delete was asked, a failed delete may be retried (or orphaned), but nothing else may run.
func TestOnlyDeleteAfterAFailedDelete(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	env := te.Env
	alice := createUser(t, env, "alice")
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "d", "template": "tf"}, http.StatusCreated, nil)
	p.run("d", 1, protocol.FinishRequest{State: tfState(1)})
	newBuild(t, env, alice, "d", sdk.CreateBuildRequest{Transition: "delete"})
	p.run("d", 2, protocol.FinishRequest{Error: "terraform destroy: exit status 1", State: tfState(1)})
	if ws := getWorkspace(t, env, alice, "d"); ws.DesiredState != "Terminated" || ws.ActualState != "Failed" {
		t.Fatalf("after a failed delete: %+v", ws)
	}
	for _, tr := range []string{"start", "stop"} {
		status, body := call(t, env, alice, "POST", "/api/v1/workspaces/d/builds", sdk.CreateBuildRequest{Transition: tr})
		wantError(t, tr+" after a failed delete", status, body, http.StatusConflict, "illegal state change", "terminated")
	}
	if b := newBuild(t, env, alice, "d", sdk.CreateBuildRequest{Transition: "delete"}); b.Number != 3 || b.StateSource != "previous" {
		t.Fatalf("retried delete %+v", b)
	}
}

// TestHeartbeatClientGoneIsNoError: a provisioner ends its heartbeat long-poll when its job ends
// (it hangs up). That is no failure: the server logs no error for it.
func TestHeartbeatClientGoneIsNoError(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	env := te.Env
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "hb", "template": "tf"}, http.StatusCreated, nil)
	job := p.mustAcquire("hb", 1)

	beat, unsubscribe := env.Store.SubscribeJob(job.ID)
	defer unsubscribe()
	ctx, hangUp := context.WithCancel(context.Background())
	body, _ := json.Marshal(protocol.HeartbeatRequest{WorkerID: "host-1", WaitSeconds: 60})
	req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+strings.Replace(protocol.ProvisionerHeartbeatPath, "{id}", job.ID, 1), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+te.Prov)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-beat // the server recorded the heartbeat: the long-poll is waiting
	hangUp()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the hung-up heartbeat returned %v", err)
	}
	// The handler sees the hang-up and returns, logging how.
	if got := te.Log.waitFor(t, "client went away", "level=ERROR"); got != "client went away" {
		t.Fatalf("the server logged an error for a client that hung up:\n%s", te.Log.String())
	}
}

// TestReaperWaitsAfterStart: a server that starts (or comes back after an outage) gives
// provisioners a full heartbeat timeout to report before it reaps their builds: a job whose
// heartbeat went stale while the server was down is not failed at once.
func TestReaperWaitsAfterStart(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	env := te.Env
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "rw", "template": "tf"}, http.StatusCreated, nil)
	p.mustAcquire("rw", 1)
	env.Clock.Advance(20 * time.Minute) // the server was down; nobody could heartbeat
	restarted := tfbackend.New(tfbackend.Options{Store: env.Store, Clock: env.Clock, HeartbeatTimeout: 5 * time.Minute, PendingTimeout: 30 * time.Minute})
	if n, err := restarted.Reap(t.Context()); err != nil || n != 0 {
		t.Fatalf("reap right after the start: %d %v, want 0", n, err)
	}
	env.Clock.Advance(5 * time.Minute)
	if n, err := restarted.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("reap a heartbeat timeout after the start: %d %v, want 1", n, err)
	}
}

// TestReaperPendingTimeoutFromTheStart: the pending timeout is not delayed by the heartbeat
// timeout's wait after a start (it once was, so --build-pending-timeout 1m did nothing for the first
// 5 minutes). A job queued while the server runs fails PendingTimeout after it was queued; a job
// queued before a restart gets a full PendingTimeout after the restart, since no provisioner could
// claim it from a server that was down. Running jobs still wait a heartbeat timeout after a start.
func TestReaperPendingTimeoutFromTheStart(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			ctx := t.Context()
			p := worker{t, env, te.Prov, "host-1"}
			started := tfbackend.New(tfbackend.Options{Store: env.Store, Clock: env.Clock, HeartbeatTimeout: 5 * time.Minute, PendingTimeout: time.Minute})
			reap := func(s *tfbackend.Service, want int) {
				t.Helper()
				if n, err := s.Reap(ctx); err != nil || n != want {
					t.Fatalf("reap: %d %v, want %d", n, err, want)
				}
			}
			// A running job whose provisioner went silent before the start: not judged yet.
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "run", "template": "tf"}, http.StatusCreated, nil)
			p.mustAcquire("run", 1)
			env.Clock.Advance(10 * time.Second)
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "pw", "template": "tf"}, http.StatusCreated, nil)
			env.Clock.Advance(time.Minute)
			reap(started, 0) // exactly a minute: not yet
			env.Clock.Advance(time.Second)
			reap(started, 1)
			if b := getBuild(t, env, env.AdminToken, "pw", 1); b.Status != "failed" || !strings.Contains(b.Error, "no provisioner picked this build up in 1m0s") {
				t.Fatalf("pending build after the pending timeout %+v", b)
			}
			if b := getBuild(t, env, env.AdminToken, "run", 1); b.Status != "running" {
				t.Fatalf("running build reaped within a heartbeat timeout of the start %+v", b)
			}

			// Queued, then the server is down for ten minutes and starts again.
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "pq", "template": "tf"}, http.StatusCreated, nil)
			env.Clock.Advance(10 * time.Minute)
			restarted := tfbackend.New(tfbackend.Options{Store: env.Store, Clock: env.Clock, HeartbeatTimeout: 5 * time.Minute, PendingTimeout: time.Minute})
			reap(restarted, 0)
			env.Clock.Advance(time.Minute + time.Second)
			reap(restarted, 1)
			if b := getBuild(t, env, env.AdminToken, "pq", 1); b.Status != "failed" {
				t.Fatalf("pending build a pending timeout after the restart %+v", b)
			}
			if b := getBuild(t, env, env.AdminToken, "run", 1); b.Status != "running" {
				t.Fatalf("running build reaped within a heartbeat timeout of the restart %+v", b)
			}
		})
	}
}

// TestReaperResumesStalledRestart: a restart whose stop succeeded but whose start was never queued
// (the server stopped between the two) gets its start from the reaper.
func TestReaperResumesStalledRestart(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) { testReaperResumesStalledRestart(t, engine) })
	}
}

func testReaperResumesStalledRestart(t *testing.T, engine string) {
	te := newTFEnv(t, engine)
	env := te.Env
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/workspaces", map[string]any{"name": "rs", "template": "tf"}, http.StatusCreated, nil)
	p.run("rs", 1, protocol.FinishRequest{State: tfState(1)})
	mustCall(t, env, env.AdminToken, "PATCH", "/api/v1/workspaces/rs", map[string]any{"desired_state": "RestartRequested"}, http.StatusOK, nil)
	job := p.mustAcquire("rs", 2)
	// The stop ends, recorded straight in the store: as if the server stopped before it could
	// queue the start.
	if _, err := env.Store.UpdateBuild(t.Context(), job.ID, func(rec store.BuildRecord) (store.BuildRecord, error) {
		nb := build.Finish(*rec.Build, build.Outcome{State: tfState(2)}, env.Clock.Now())
		rec.Build = &nb
		rec.Workspace.ActualState = "Stopped"
		return rec, nil
	}); err != nil {
		t.Fatal(err)
	}
	if ws := getWorkspace(t, env, env.AdminToken, "rs"); ws.DesiredState != "RestartRequested" || ws.ActualState != "Stopped" {
		t.Fatalf("stalled restart %+v", ws)
	}
	if _, err := te.Builder.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := getBuild(t, env, env.AdminToken, "rs", 0)
	if b.Number != 3 || b.Transition != "start" || b.Reason != "restart" || b.StateSource != "previous" {
		t.Fatalf("after the reaper: latest build %+v", b)
	}
	if ws := getWorkspace(t, env, env.AdminToken, "rs"); ws.DesiredState != "Running" || ws.ActualState != "Starting" {
		t.Fatalf("after the reaper: %+v", ws)
	}
}
