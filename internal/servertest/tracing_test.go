package servertest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/hangar-dev/hangar/internal/agent"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/otlptest"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// With tracing on, the reconcile answer that sends a workspace's config carries the traceparent
// of the server's span of the request that last changed the workspace (create, then stop), on both
// stores; an answer without a config carries none.
func TestReconcileAnswerCarriesTheChangesTrace(t *testing.T) {
	rc := otlptest.Start(t)
	shutdown, err := tracing.Setup(context.Background(), "hangar-server", rc.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracing.Shutdown(shutdown) })
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			ctx := context.Background()
			admin, err := sdk.New(env.URL, env.AdminToken)
			if err != nil {
				t.Fatal(err)
			}
			admin.HTTP = tracing.Client(&http.Client{})
			a, err := admin.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "k"})
			if err != nil {
				t.Fatal(err)
			}
			ag := &agent.ServerClient{URL: env.URL, Token: a.Token, HTTP: &http.Client{}}

			// change makes one traced request and returns its trace id.
			change := func(name string, do func(ctx context.Context) error) string {
				t.Helper()
				ctx, span := tracing.Tracer().Start(ctx, name)
				defer span.End()
				if err := do(ctx); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return span.SpanContext().TraceID().String()
			}
			// answer is a partial reconcile's answer: the workspaces with something new.
			reconcile := func() []protocol.WorkspaceRailsInfo {
				t.Helper()
				resp, err := ag.Reconcile(ctx, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
				if err != nil {
					t.Fatal(err)
				}
				return resp.WorkspaceRailsInfos
			}
			answer := func() protocol.WorkspaceRailsInfo {
				t.Helper()
				infos := reconcile()
				if len(infos) != 1 {
					t.Fatalf("answer: %+v", infos)
				}
				return infos[0]
			}

			created := change("create", func(ctx context.Context) error {
				_, err := admin.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "dev", Agent: "k"})
				return err
			})
			w := answer()
			sc, err := tracing.ParseTraceParent(w.TraceParent)
			if w.ConfigToApply == "" || err != nil || sc.TraceID().String() != created {
				t.Fatalf("the answer to create: config %d bytes, traceparent %q (%v), want trace %s", len(w.ConfigToApply), w.TraceParent, err, created)
			}
			for _, again := range reconcile() {
				if again.ConfigToApply == "" && again.TraceParent != "" {
					t.Fatalf("an answer without a config carries %q", again.TraceParent)
				}
			}

			stopped := change("stop", func(ctx context.Context) error {
				_, err := admin.UpdateWorkspace(ctx, "dev", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"})
				return err
			})
			w = answer()
			sc, err = tracing.ParseTraceParent(w.TraceParent)
			if w.ConfigToApply == "" || err != nil || sc.TraceID().String() != stopped {
				t.Fatalf("the answer to stop: traceparent %q (%v), want trace %s (create's was %s)", w.TraceParent, err, stopped, created)
			}
			// The traceparent names the server's span of that request, a child of the client's.
			if err := tracing.Shutdown(shutdown); err != nil {
				t.Fatal(err)
			}
			shutdown, err = tracing.Setup(context.Background(), "hangar-server", rc.URL)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, s := range rc.Spans() {
				if s.SpanID == sc.SpanID().String() {
					found = s.Kind == "SPAN_KIND_SERVER" && s.Name == "PATCH /api/v1/workspaces/{name}" && s.TraceID == stopped
				}
			}
			if !found {
				t.Fatalf("no server span %s of PATCH /api/v1/workspaces/{name} in trace %s", sc.SpanID(), stopped)
			}
		})
	}
}
