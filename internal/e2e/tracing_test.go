package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/otlptest"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// TestTraceFromCLIToAgentApply: with tracing on (the server and the agent by --otel-endpoint, the
// CLI by the standard OTEL_EXPORTER_OTLP_ENDPOINT), `hangar create` and then `hangar stop` are each
// one trace in a real OTLP/HTTP receiver on loopback: the CLI command's span, its request's client
// span, the server's span of that request, and the agent's apply of the workspace's config, whose
// parent is the server's span (the reconcile answer carried its traceparent) and which links to the
// agent's reconcile cycle that received it.
func TestTraceFromCLIToAgentApply(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	rc := otlptest.Start(t)
	// The environment of each process, not this one's (t.Setenv would forbid t.Parallel).
	const batchEvery100ms = "OTEL_BSP_SCHEDULE_DELAY=100" // the daemons send their batches every 100 ms
	srv := startServerWith(t, []string{batchEvery100ms}, "--otel-endpoint", rc.URL)
	token := srv.registerAgent(t, "traced", "")
	start(t, "agent traced", []string{"HANGAR_LOG_LEVEL=debug", batchEvery100ms}, "agent", "--server", srv.URL, "--token-file", token,
		"--kubeconfig", cluster.Kubeconfig, "--lease-namespace", "", "--otel-endpoint", rc.URL)
	// The CLI, by the standard variable.
	cli := func(args ...string) {
		t.Helper()
		cmd := cliUser{url: srv.URL, token: srv.AdminToken, home: t.TempDir()}.cmd(args...)
		cmd.Env = append(cmd.Env, tracing.EnvEndpoint+"="+rc.URL, batchEvery100ms)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hangar %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	c := srv.client(t, srv.AdminToken)
	cli("create", "traced", "--agent", "traced")
	w := waitFor(t, c, "traced", 60*time.Second, "Running", state("Running", "Running"))
	deleteNamespaceAtEnd(t, cluster, w.Namespace)
	created := traceOf(t, rc, "hangar create", "POST /api/v1/workspaces", w.KubeName)

	cli("stop", "traced")
	waitFor(t, c, "traced", 60*time.Second, "Stopped", state("Stopped", "Stopped"))
	stopped := traceOf(t, rc, "hangar stop", "PATCH /api/v1/workspaces/{name}", w.KubeName)
	if created == stopped {
		t.Fatalf("create and stop share the trace %s", created)
	}
}

// traceOf waits for the trace of the CLI command (its root span's name) and checks the chain: the
// command's root span → its client span → the server's span (route starting with route) → the
// agent's apply of workspace kubeName, linked to an agent reconcile cycle. It returns the trace id.
func traceOf(t *testing.T, rc *otlptest.Receiver, command, route, kubeName string) string {
	t.Helper()
	var traceID string
	kubetest.Eventually(t, 30*time.Second, "the trace of "+command+" to reach the agent's apply", func(context.Context) error {
		spans := rc.Spans()
		byID := map[string]otlptest.Span{}
		for _, s := range spans {
			byID[s.SpanID] = s
		}
		var root *otlptest.Span
		for i, s := range spans {
			if s.Service == "hangar-cli" && s.Name == command && s.ParentSpanID == "" {
				root = &spans[i]
			}
		}
		if root == nil {
			return fmt.Errorf("no root span %q from hangar-cli among %d spans", command, len(spans))
		}
		traceID = root.TraceID
		var names []string
		for _, s := range spans {
			if s.TraceID != root.TraceID {
				continue
			}
			names = append(names, s.Service+": "+s.Name)
			if s.Service != "hangar-agent" || s.Name != "agent apply" || s.Attributes["hangar.workspace"] != kubeName {
				continue
			}
			server, ok := byID[s.ParentSpanID]
			if !ok || server.Service != "hangar-server" || server.Kind != "SPAN_KIND_SERVER" || !strings.HasPrefix(server.Name, route) {
				return fmt.Errorf("the apply's parent is not the server's span of %s: %+v", route, server)
			}
			client, ok := byID[server.ParentSpanID]
			if !ok || client.Service != "hangar-cli" || client.Kind != "SPAN_KIND_CLIENT" || client.ParentSpanID != root.SpanID {
				return fmt.Errorf("the server span's parent is not the CLI's request within %q: %+v", command, client)
			}
			if len(s.Links) != 1 {
				return fmt.Errorf("the apply links to %d spans, want its reconcile cycle", len(s.Links))
			}
			if cycle, ok := byID[s.Links[0]]; !ok || cycle.Service != "hangar-agent" || cycle.Name != "agent reconcile" {
				return fmt.Errorf("the apply's link is not an agent reconcile span: %+v", cycle)
			}
			if s.StatusError {
				return fmt.Errorf("the apply failed: %+v", s)
			}
			return nil
		}
		return fmt.Errorf("trace %s has no agent apply of %s yet: %v", root.TraceID, kubeName, names)
	})
	return traceID
}
