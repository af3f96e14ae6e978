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

// storageEnv is a Terraform server whose users may keep limit bytes of state and log, with a
// template tf, alice's workspace tw and a provisioner.
type storageEnv struct {
	*tfEnv
	w worker
}

func newStorageEnv(t *testing.T, engine string, limit int64) *storageEnv {
	te := &tfEnv{Log: &syncBuffer{}}
	te.Env = servertest.NewWith(t, engine, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		te.Builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger, MaxStoragePerUser: limit})
		o.Builder = te.Builder
	})
	mustCall(t, te.Env, te.AdminToken, "POST", "/api/v1/templates/tf/versions",
		sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: tfModule(t)}, http.StatusCreated, nil)
	return &storageEnv{tfEnv: te, w: worker{t: t, env: te.Env, token: createProvisioner(t, te.Env, "p1"), id: "w1"}}
}

// padState is a Terraform state of n bytes of padding (and about 130 of Terraform's), serial s.
func padState(s, n int) []byte {
	return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.9.8","serial":%d,"lineage":"hangar-test","outputs":{"pad":{"value":%q,"type":"string"}},"resources":[]}`,
		s, strings.Repeat("p", n))
}

// run runs build number of ws: a log line of 900 bytes, then the state st.
func (e *storageEnv) run(ws string, number int, st []byte) {
	e.w.t.Helper()
	j := e.w.mustAcquire(ws, number)
	e.w.log(j.ID, strings.Repeat("l", 900))
	e.w.finish(j.ID, protocol.FinishRequest{State: st})
}

// TestStoragePushIsBounded: a state push, without a build or with one, that grows what a user
// keeps past --max-storage-per-user first prunes the user's older builds, as a create does, and
// goes ahead if that was enough; if not, it is refused with the create's 409 'storage limit
// reached', naming what is kept, what the state adds and the limit, and nothing is written. A
// push that shrinks the state is never refused.
func TestStoragePushIsBounded(t *testing.T) {
	const limit = 20 << 10
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newStorageEnv(t, engine, limit)
			alice := createUser(t, e.Env, "alice")
			push := func(st []byte) (int, []byte) {
				t.Helper()
				status, _, body := send(t, e.Env, alice, "PUT", "/api/v1/workspaces/tw/state", "application/json", bytes.NewReader(st))
				return status, body
			}

			// Three builds of about 4 KB each (state and log): 12 KB kept.
			mustCall(t, e.Env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
			e.run("tw", 1, padState(1, 3000))
			for n, tr := range []string{"stop", "start"} {
				newBuild(t, e.Env, alice, "tw", sdk.CreateBuildRequest{Transition: tr})
				e.run("tw", n+2, padState(n+2, 3000))
			}

			// A push of 14 KB replaces build #3's 3 KB: 23 KB, over. Builds #1 and #2 are pruned
			// (4 KB each), which makes room: the push goes ahead.
			if status, body := push(padState(4, 14_000)); status != http.StatusNoContent {
				t.Fatalf("a push that fits once older builds are pruned: %d %s", status, body)
			}
			wantState(t, e.Env, alice, "tw", "", padState(4, 14_000), 3)
			for _, b := range listBuilds(t, e.Env, alice, "tw") {
				lines := logLines(t, e.Env, alice, "tw", b.Number, "")
				pruned := b.StatePruned && len(lines) == 1 && strings.Contains(lines[0].Output, "--max-storage-per-user")
				if (b.Number < 3) != pruned {
					t.Errorf("build #%d after the push: state pruned %v, log %+v", b.Number, b.StatePruned, lines)
				}
			}

			// A push of 30 KB adds 16 KB to the 15 KB kept; nothing is left to prune: refused, the
			// state unchanged.
			status, body := push(padState(5, 30_000))
			wantError(t, "a push over the limit", status, body, http.StatusConflict, "storage limit reached",
				"this state adds 15.6 KiB, which would make 30.", "over the limit of 20.0 KiB per user", "--max-storage-per-user")
			wantState(t, e.Env, alice, "tw", "", padState(4, 14_000), 3)
			// The same state pushed with a build: refused alike, no build written.
			status, body = call(t, e.Env, alice, "POST", "/api/v1/workspaces/tw/builds",
				sdk.CreateBuildRequest{Transition: "stop", State: padState(5, 30_000)})
			wantError(t, "a push with a build over the limit", status, body, http.StatusConflict, "storage limit reached",
				"the pushed state adds 15.6 KiB", "over the limit of 20.0 KiB per user")
			if bs := listBuilds(t, e.Env, alice, "tw"); len(bs) != 3 {
				t.Fatalf("a refused push wrote a build: %d builds", len(bs))
			}

			// A push that shrinks the state frees, and goes ahead (also with a build).
			if status, body := push(padState(6, 100)); status != http.StatusNoContent {
				t.Fatalf("a smaller push: %d %s", status, body)
			}
			wantState(t, e.Env, alice, "tw", "", padState(6, 100), 3)
			b := newBuild(t, e.Env, alice, "tw", sdk.CreateBuildRequest{Transition: "stop", State: padState(7, 18_000)})
			if b.Number != 4 {
				t.Fatalf("the push with a build that fits: build #%d", b.Number)
			}
		})
	}
}

// TestStorageClaimIsBounded: a claimed prebuilt workspace's states and logs become its claimer's,
// so they count. A claim that fits is made (once the claimer's older builds are pruned, if that
// is what makes room); one that does not fit though the claimer alone is within the limit is not
// made, and the workspace is built from scratch, its first build's log saying why; a claimer
// already over the limit is refused with the create's 409, and nothing is written.
func TestStorageClaimIsBounded(t *testing.T) {
	const limit = 20 << 10
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			e := newStorageEnv(t, engine, limit)
			mustCall(t, e.Env, e.AdminToken, "PUT", "/api/v1/templates/tf/presets/small", map[string]any{"instances": 1}, http.StatusOK, nil)
			// ready makes the pool's instance ready: its create logs 900 bytes and leaves a state of
			// 7 KB, so that a claim moves 15 KB (its state and log, and the claim build's copy).
			ready := func() string {
				t.Helper()
				if _, err := e.Env.Server.Prebuilds().Tick(t.Context()); err != nil {
					t.Fatal(err)
				}
				j := e.w.acquire()
				if j == nil || !strings.HasPrefix(j.WorkspaceName, "prebuild-") {
					t.Fatalf("acquired %+v, want the prebuilt workspace's create", j)
				}
				e.w.log(j.ID, strings.Repeat("l", 900))
				e.w.finish(j.ID, protocol.FinishRequest{State: padState(1, 7000)})
				return j.WorkspaceName
			}
			pool := func() sdk.PresetPool {
				t.Helper()
				var ps []sdk.Preset
				mustCall(t, e.Env, e.AdminToken, "GET", "/api/v1/templates/tf/presets", nil, http.StatusOK, &ps)
				return ps[0].Pool
			}
			create := func(token, name string) (int, []byte) {
				t.Helper()
				return call(t, e.Env, token, "POST", "/api/v1/workspaces", map[string]any{"name": name, "template": "tf", "preset": "small"})
			}
			claimed := func(token, name string) {
				t.Helper()
				if status, body := create(token, name); status != http.StatusCreated {
					t.Fatalf("create %s from the preset: %d %s", name, status, body)
				}
				if b := getBuild(t, e.Env, token, name, 0); b.Number != 2 || !b.IsPrebuildClaim {
					t.Fatalf("%s: latest build #%d, is_prebuild_claim %v: want the claim", name, b.Number, b.IsPrebuildClaim)
				}
				e.run(name, 2, padState(2, 7000))
			}

			// Carol keeps two builds of 4 KB: 8 KB + 15 KB claimed is over; pruning build #1 makes
			// room, and the claim is made.
			carol := createUser(t, e.Env, "carol")
			ready()
			mustCall(t, e.Env, carol, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
			e.run("tw", 1, padState(1, 3000))
			newBuild(t, e.Env, carol, "tw", sdk.CreateBuildRequest{Transition: "stop"})
			e.run("tw", 2, padState(2, 3000))
			claimed(carol, "c1")
			if b := getBuild(t, e.Env, carol, "tw", 1); !b.StatePruned {
				t.Errorf("carol's build #1 was not pruned to make room for the claim")
			}

			// Dave keeps 6 KB, and nothing to prune: the claim would bring him to 21 KB. It is not
			// made; his workspace is built from scratch, and its log says why.
			dave := createUser(t, e.Env, "dave")
			instance := ready()
			ins, err := e.Env.Store.PrebuildInstances(t.Context(), "")
			if err != nil || len(ins) != 1 || ins[0].Workspace.Name != instance {
				t.Fatalf("the pool holds %+v (%v), want %s", ins, err, instance)
			}
			instanceID := ins[0].Workspace.ID
			mustCall(t, e.Env, dave, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
			e.run("tw", 1, padState(1, 5000))
			if status, body := create(dave, "d1"); status != http.StatusCreated {
				t.Fatalf("dave's create from the preset: %d %s", status, body)
			}
			b := getBuild(t, e.Env, dave, "d1", 0)
			if b.Number != 1 || b.IsPrebuildClaim {
				t.Fatalf("d1: build #%d, is_prebuild_claim %v: want a build from scratch", b.Number, b.IsPrebuildClaim)
			}
			lines := logLines(t, e.Env, dave, "d1", 1, "")
			if len(lines) == 0 || lines[0].Level != "warn" || !strings.Contains(lines[0].Output, `A prebuilt workspace of preset "small" was ready, but not claimed`) ||
				!strings.Contains(lines[0].Output, "over the limit of 20.0 KiB per user (--max-storage-per-user)") {
				t.Errorf("d1's log does not say why it was not claimed: %+v", lines)
			}
			if p := pool(); p.Ready != 1 {
				t.Errorf("the instance left the pool: %+v", p)
			}
			e.run("d1", 1, padState(1, 100))

			// Erin is over the limit already: refused as a create is, nothing written, the instance
			// still the pool's.
			erin := createUser(t, e.Env, "erin")
			mustCall(t, e.Env, erin, "POST", "/api/v1/workspaces", map[string]any{"name": "tw", "template": "tf"}, http.StatusCreated, nil)
			e.run("tw", 1, padState(1, 25_000))
			status, body := create(erin, "e1")
			wantError(t, "a claim by a user over the limit", status, body, http.StatusConflict, "storage limit reached", "over the limit of 20.0 KiB per user")
			var list []sdk.Workspace
			mustCall(t, e.Env, erin, "GET", "/api/v1/workspaces", nil, http.StatusOK, &list)
			if len(list) != 1 {
				t.Errorf("a refused claim wrote a workspace: %+v", list)
			}
			if p := pool(); p.Ready != 1 {
				t.Errorf("the instance left the pool: %+v", p)
			}

			// The same instance still goes to a user with room.
			frank := createUser(t, e.Env, "frank")
			claimed(frank, "f1")
			if w := getWorkspace(t, e.Env, frank, "f1"); w.ID != instanceID {
				t.Errorf("frank claimed %s, want the instance dave and erin left, %s", w.ID, instanceID)
			}
		})
	}
}
