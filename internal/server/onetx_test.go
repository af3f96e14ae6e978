package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

// TestDecisionsReadInsideTheirTransaction: a reconcile reads the devfiles it generates configs
// from, and a start build or an update reads its template's active version, inside their own
// transaction. The
// store has a pool of one connection: a read through the store while the transaction holds that
// connection would wait for it until the request's deadline, and the request would fail (the
// timeout handler answers 503). The reconciling server is a second one, whose devfile cache is
// cold, so that the reconcile must read the devfiles.
func TestDecisionsReadInsideTheirTransaction(t *testing.T) {
	oneConnection := func(o *server.Options) { o.Store.(*sqlstore.Store).DB().SetMaxOpenConns(1) }
	first := servertest.NewWith(t, "sqlite", oneConnection)
	agentToken := createAgent(t, first, "k1", nil)
	dev := createUser(t, first, "dev")
	for _, n := range []string{"a", "b"} {
		mustCall(t, first, dev, "POST", "/api/v1/workspaces", map[string]any{"name": n, "agent": "k1"}, http.StatusCreated, nil)
	}

	srv := server.New(server.Options{Store: first.Store, Clock: first.Clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(http.TimeoutHandler(srv.Handler(), 10*time.Second, `{"message":"timed out"}`))
	t.Cleanup(hs.Close)
	second := &servertest.Env{URL: hs.URL, AdminToken: first.AdminToken, Clock: first.Clock, Store: first.Store, Server: srv, DataDir: first.DataDir}

	resp := reconcileCall(t, second, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	if len(resp.WorkspaceRailsInfos) != 2 {
		t.Fatalf("answered %d workspaces, want a and b: %+v", len(resp.WorkspaceRailsInfos), resp.WorkspaceRailsInfos)
	}
	for _, info := range resp.WorkspaceRailsInfos {
		if info.ConfigToApply == "" {
			t.Errorf("%s: no config_to_apply", info.Name)
		}
	}

	// A terraform workspace: its create starts build #1 on the template's active version; after a
	// stop, a start through the desired state (the builder's SetDesired) takes it again.
	var tmpl sdk.Template
	mustCall(t, second, second.AdminToken, "POST", "/api/v1/templates/tf/versions",
		sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: tfModule(t)}, http.StatusCreated, &tmpl)
	prov := worker{t, second, createProvisioner(t, second, "p1"), "host-1"}
	mustCall(t, second, dev, "POST", "/api/v1/workspaces", map[string]any{"name": "tf", "template": "tf"}, http.StatusCreated, nil)
	prov.run("tf", 1, protocol.FinishRequest{State: tfState(1)})
	mustCall(t, second, dev, "PATCH", "/api/v1/workspaces/tf", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
	prov.run("tf", 2, protocol.FinishRequest{State: tfState(2)})
	mustCall(t, second, dev, "PATCH", "/api/v1/workspaces/tf", map[string]any{"desired_state": "Running"}, http.StatusOK, nil)
	prov.run("tf", 3, protocol.FinishRequest{State: tfState(3)})
	// An update reads the active version and its parameters in its build's transaction too.
	var up sdk.UpdateWorkspaceVersionResponse
	mustCall(t, second, dev, "POST", "/api/v1/workspaces/tf/update", map[string]any{}, http.StatusOK, &up)
	if up.Result != "up-to-date" {
		t.Errorf("update of a workspace on the active version: %q, want up-to-date", up.Result)
	}
	for n := 1; n <= 3; n += 2 {
		if b := getBuild(t, second, dev, "tf", n); b.Transition != "start" || b.TemplateVersion != tmpl.ActiveVersion {
			t.Errorf("build #%d: %s on version %d, want a start on the active version %d", n, b.Transition, b.TemplateVersion, tmpl.ActiveVersion)
		}
	}
}
