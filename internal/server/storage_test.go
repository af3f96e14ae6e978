package server_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestPerUserStorageBound: a user's builds keep at most --max-storage-per-user bytes of Terraform
// state and log. Over it, a start first frees all but each workspace's latest build's state and
// log (the next build's source; the older builds say their state and log were pruned), and goes
// ahead if that was enough; if not, the start and a create are refused (409, saying how much is
// kept and the limit) and nothing is written, while a stop still goes ahead. Another user is not
// affected.
func TestPerUserStorageBound(t *testing.T) {
	const limit = 20 << 10
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			te := &tfEnv{Log: &syncBuffer{}}
			te.Env = servertest.NewWith(t, engine, func(o *server.Options) {
				o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
				te.Builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger, MaxStoragePerUser: limit})
				o.Builder = te.Builder
			})
			mustCall(t, te.Env, te.AdminToken, "POST", "/api/v1/templates/tf/versions",
				sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: tfModule(t)}, http.StatusCreated, nil)
			w := worker{t: t, env: te.Env, token: createProvisioner(t, te.Env, "p1"), id: "w1"}
			alice, bob := createUser(t, te.Env, "alice"), createUser(t, te.Env, "bob")

			// A state of n bytes of padding (and 130 of Terraform's), serial s.
			state := func(s, n int) []byte {
				return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.9.8","serial":%d,"lineage":"hangar-test","outputs":{"pad":{"value":%q,"type":"string"}},"resources":[]}`,
					s, strings.Repeat("p", n))
			}
			run := func(number int, st []byte) {
				t.Helper()
				j := w.mustAcquire("tw", number)
				w.log(j.ID, strings.Repeat("l", 900))
				w.finish(j.ID, protocol.FinishRequest{State: st})
			}
			build := func(tr string, number int, st []byte) {
				t.Helper()
				newBuild(t, te.Env, alice, "tw", sdk.CreateBuildRequest{Transition: tr})
				run(number, st)
			}
			refused := func(what, method, path string, body any) {
				t.Helper()
				status, out := call(t, te.Env, alice, method, path, body)
				wantError(t, what, status, out, http.StatusConflict, "storage limit reached", "over the limit of 20.0 KiB per user", "--max-storage-per-user")
			}

			// Six builds of about 4 KB each (state and log): five fit under 20 KiB, the sixth, a
			// stop, goes over (a stop is never refused).
			mustCall(t, te.Env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
			run(1, state(1, 3000))
			for n, tr := range []string{"stop", "start", "stop", "start", "stop"} {
				build(tr, n+2, state(n+2, 3000))
			}

			// The start prunes builds 1 to 5, keeps 6's state and log, and goes ahead from it.
			b7 := newBuild(t, te.Env, alice, "tw", sdk.CreateBuildRequest{Transition: "start"})
			for _, b := range listBuilds(t, te.Env, alice, "tw") {
				lines := logLines(t, te.Env, alice, "tw", b.Number, "")
				switch {
				case b.Number <= 5:
					if !b.StatePruned || len(lines) != 1 || !strings.Contains(lines[0].Output, "--max-storage-per-user") {
						t.Errorf("build #%d after the prune: state pruned %v, log %+v", b.Number, b.StatePruned, lines)
					}
				case b.Number == 6 && (b.StatePruned || len(lines) != 1 || lines[0].Output != strings.Repeat("l", 900)):
					t.Errorf("the latest build lost its state or log: pruned %v, log %+v", b.StatePruned, lines)
				}
			}
			j := w.mustAcquire("tw", b7.Number)
			if !bytes.Equal(j.State, state(6, 3000)) {
				t.Fatalf("build #7 starts from %d bytes, want build #6's state", len(j.State))
			}
			w.finish(j.ID, protocol.FinishRequest{State: state(7, 25_000)})
			build("stop", 8, state(8, 25_000))

			// The latest state alone is over the limit: a start, a desired Running and a create are
			// refused, saying why, and nothing is written.
			before := listBuilds(t, te.Env, alice, "tw")
			refused("a start", "POST", "/api/v1/workspaces/tw/builds", sdk.CreateBuildRequest{Transition: "start"})
			refused("a desired Running", "PATCH", "/api/v1/workspaces/tw", map[string]any{"desired_state": "Running"})
			refused("a create", "POST", "/api/v1/workspaces", map[string]any{"name": "tw2", "template": "tf"})
			if after := listBuilds(t, te.Env, alice, "tw"); len(after) != len(before) {
				t.Fatalf("a refused start wrote a build: %d builds, were %d", len(after), len(before))
			}
			var list []sdk.Workspace
			mustCall(t, te.Env, alice, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 1 || list[0].DesiredState != "Stopped" {
				t.Fatalf("a refused request wrote a workspace or a desired state: %+v", list)
			}
			// Bob, who keeps nothing, creates as usual.
			mustCall(t, te.Env, bob, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
			run(1, state(1, 100))

			// Alice deletes the workspace (never refused); once it is gone, none of its builds'
			// states and logs are needed, and she creates again.
			build("delete", 9, nil)
			if ws := getWorkspace(t, te.Env, alice, "tw"); ws.ActualState != "Terminated" {
				t.Fatalf("after the delete: %s", ws.ActualState)
			}
			mustCall(t, te.Env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "tw2", "template": "tf"}, http.StatusCreated, nil)
		})
	}
}
