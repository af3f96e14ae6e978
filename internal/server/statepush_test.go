package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
)

// TestStatePushFollowsTheSavedState: `state push --no-build` takes only a Terraform state that
// follows the saved one (same lineage, greater serial), unless force; a refusal names the field
// and writes nothing. `{}` once replaced a workspace's state.
func TestStatePushFollowsTheSavedState(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := newTFEnv(t, engine)
			env := te.Env
			alice := createUser(t, env, "alice")
			p := worker{t, env, te.Prov, "host-1"}
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			p.run("w", 1, protocol.FinishRequest{State: tfState(3)})
			stateOf := func(serial int, lineage string) []byte {
				return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.9.8","serial":%d,"lineage":%q,"resources":[]}`, serial, lineage)
			}
			push := func(query string, state []byte) (int, []byte) {
				t.Helper()
				status, _, body := send(t, env, alice, "PUT", "/api/v1/workspaces/w/state"+query, "application/json", bytes.NewReader(state))
				return status, body
			}
			refused := func(what string, status int, body []byte, wantStatus int, field string) {
				t.Helper()
				if status != wantStatus {
					t.Fatalf("%s: %d %s, want %d naming %s", what, status, body, wantStatus, field)
				}
				e := apiError(t, body)
				if len(e.Validations) != 1 || e.Validations[0].Field != field || e.Validations[0].Detail == "" {
					t.Errorf("%s: %s, want one validation naming %s", what, body, field)
				}
				if wantStatus == http.StatusConflict && e.Message != "state conflict" {
					t.Errorf("%s: message %q", what, e.Message)
				}
			}

			status, body := push("", []byte(`{}`))
			refused("{}", status, body, http.StatusBadRequest, "version")
			status, body = push("", stateOf(3, "hangar-test"))
			refused("the same serial", status, body, http.StatusConflict, "serial")
			status, body = push("", stateOf(2, "hangar-test"))
			refused("an older serial", status, body, http.StatusConflict, "serial")
			status, body = push("", stateOf(10, "another"))
			refused("another lineage", status, body, http.StatusConflict, "lineage")
			wantState(t, env, alice, "w", "", tfState(3), 1) // nothing written

			if status, body = push("", stateOf(4, "hangar-test")); status != http.StatusNoContent {
				t.Fatalf("a newer serial: %d %s", status, body)
			}
			wantState(t, env, alice, "w", "", stateOf(4, "hangar-test"), 1)

			// force: any Terraform state, but a Terraform state all the same.
			status, body = push("?force=true", []byte(`{}`))
			refused("{} with force", status, body, http.StatusBadRequest, "version")
			if status, body = push("?force=true", stateOf(1, "another")); status != http.StatusNoContent {
				t.Fatalf("another lineage with force: %d %s", status, body)
			}
			wantState(t, env, alice, "w", "", stateOf(1, "another"), 1)
			status, body = push("", stateOf(5, "hangar-test"))
			refused("the old lineage after a forced push", status, body, http.StatusConflict, "lineage")

			// No saved state (the first build failed before Terraform wrote one): any Terraform state.
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "n", "template": "tf"}, http.StatusCreated, nil)
			p.run("n", 1, protocol.FinishRequest{Error: "init failed"})
			if status, _, body := send(t, env, alice, "PUT", "/api/v1/workspaces/n/state", "application/json", bytes.NewReader(stateOf(0, "fresh"))); status != http.StatusNoContent {
				t.Fatalf("push with no saved state: %d %s", status, body)
			}
			// A saved state that is not a Terraform state (pushed before this check existed): nothing
			// to compare with.
			if err := env.Store.PutBuildState(t.Context(), getWorkspace(t, env, alice, "n").ID, []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
			if status, _, body := send(t, env, alice, "PUT", "/api/v1/workspaces/n/state", "application/json", bytes.NewReader(stateOf(0, "fresh"))); status != http.StatusNoContent {
				t.Fatalf("push over a saved {}: %d %s", status, body)
			}
		})
	}
}

// TestTemplatePushRefusesDeepNesting: a module whose main.tf nests brackets 100,000 deep is a 400
// naming the archive and the file — not a stack overflow in the HCL parser that kills the server —
// and the server goes on answering.
func TestTemplatePushRefusesDeepNesting(t *testing.T) {
	env := servertest.New(t)
	deep := tfArchive(t, map[string]string{"main.tf": "x = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"})
	status, body := call(t, env, env.AdminToken, "POST", "/api/v1/templates/deep/versions", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: deep})
	wantField(t, "deep module", status, body, "archive")
	if !strings.Contains(string(body), "main.tf:1: nested more than 1000 levels deep") {
		t.Errorf("the refusal does not name the file and the limit: %s", body)
	}
	mustCall(t, env, env.AdminToken, "GET", "/api/v1/templates", nil, http.StatusOK, nil)
}

// TestOldBuildsStateIsPruned: only the latest store.KeptBuildStates builds keep their state; an
// older build says so (state_pruned) and pulling its state says why there is none.
func TestOldBuildsStateIsPruned(t *testing.T) {
	te := newTFEnv(t, "sqlite")
	env := te.Env
	alice := createUser(t, env, "alice")
	p := worker{t, env, te.Prov, "host-1"}
	mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
	p.run("w", 1, protocol.FinishRequest{State: tfState(1)})
	total := store.KeptBuildStates + 1
	for n := 2; n <= total; n++ {
		newBuild(t, env, alice, "w", sdk.CreateBuildRequest{Transition: map[bool]string{true: "stop", false: "start"}[n%2 == 0]})
		p.run("w", n, protocol.FinishRequest{State: tfState(n)})
	}
	if b := getBuild(t, env, alice, "w", 1); !b.StatePruned || b.HasState {
		t.Errorf("build #1 after %d builds: %+v, want its state pruned", total, b)
	}
	if b := getBuild(t, env, alice, "w", 2); b.StatePruned || !b.HasState {
		t.Errorf("build #2: %+v, want its state kept", b)
	}
	status, body, _ := pullState(t, env, alice, "w", "?build=1")
	if status != http.StatusNotFound || !strings.Contains(string(body), "was removed: only the 10 latest builds of a workspace keep theirs") {
		t.Errorf("pull of a pruned state: %d %s", status, body)
	}
	wantState(t, env, alice, "w", "", tfState(total), total)
}
