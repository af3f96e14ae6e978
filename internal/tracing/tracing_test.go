package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/hangar-dev/hangar/internal/testutil/otlptest"
)

// Off (no endpoint), Setup installs nothing: the handler, transport and client given are returned
// as they are, and the global provider stays the no-op one. On, a request made in a span carries
// its traceparent to the server, whose span is its child and is named by the route; the spans
// reach a real OTLP/HTTP receiver on loopback. (One test: Setup's effect lasts for the process.)
func TestOffCostsNothingOnLinksClientToServer(t *testing.T) {
	t.Setenv(EnvTracesEndpoint, "")
	shutdown, err := Setup(context.Background(), "test", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if Enabled() || Handler(mux) != http.Handler(mux) {
		t.Fatal("off: Handler wrapped the handler")
	}
	rt := &http.Transport{}
	if Transport(rt) != http.RoundTripper(rt) || Transport(nil) != nil {
		t.Fatal("off: Transport wrapped the transport")
	}
	if c := (&http.Client{}); Client(c) != c {
		t.Fatal("off: Client changed the client")
	}
	if _, ok := otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
		t.Fatal("off: an SDK tracer provider is installed")
	}
	if TraceParent(context.Background()) != "" {
		t.Fatal("off: a traceparent without a trace")
	}

	for _, bad := range []string{"127.0.0.1:4318", "ftp://x", "http://"} {
		if _, err := Setup(context.Background(), "test", bad); err == nil || !strings.Contains(err.Error(), "want an http:// or https:// URL") {
			t.Errorf("Setup(%q): got %v", bad, err)
		}
	}
	if Enabled() {
		t.Fatal("a refused endpoint turned tracing on")
	}

	rc := otlptest.Start(t)
	shutdown, err = Setup(context.Background(), "test-service", rc.URL)
	if err != nil {
		t.Fatal(err)
	}
	// TraceParent and ParseTraceParent round-trip a span's context.
	ctx, span := Tracer().Start(context.Background(), "x")
	sc, err := ParseTraceParent(TraceParent(ctx))
	if err != nil || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsRemote() {
		t.Errorf("round trip: %v %+v", err, sc)
	}
	if _, err := ParseTraceParent("00-zz-yy-01"); err == nil {
		t.Error("a bad traceparent was read")
	}
	span.End()
	mux.HandleFunc("POST /things/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(Handler(mux))
	defer srv.Close()
	client := Client(&http.Client{})

	ctx, root := Tracer().Start(context.Background(), "command")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/things/a", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	root.End()
	// Outside a span: no client span, and the server's span starts a trace of its own.
	resp, err = client.Post(srv.URL+"/things/b", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := Shutdown(shutdown); err != nil {
		t.Fatal(err)
	}

	spans := rc.Spans()
	byName := map[string][]otlptest.Span{}
	for _, s := range spans {
		if s.Service != "test-service" {
			t.Errorf("span %q has service %q", s.Name, s.Service)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	cmd, cl, sv := byName["command"], byName["POST /things/a"], byName["POST /things/{name}"]
	if len(cmd) != 1 || len(cl) != 1 || len(sv) != 2 || len(spans) != 5 {
		t.Fatalf("want the command, one client span and two server spans; got %+v", spans)
	}
	rootID := root.SpanContext().TraceID().String()
	if len(byName["x"]) != 1 {
		t.Errorf("the span x: %+v", byName["x"])
	}
	if cmd[0].TraceID != rootID || cl[0].TraceID != rootID || cl[0].ParentSpanID != cmd[0].SpanID || cl[0].Kind != "SPAN_KIND_CLIENT" {
		t.Errorf("client span not a child of the command: %+v / %+v", cl[0], cmd[0])
	}
	var linked, own otlptest.Span
	for _, s := range sv {
		if s.TraceID == rootID {
			linked = s
		} else {
			own = s
		}
	}
	if linked.ParentSpanID != cl[0].SpanID || linked.Kind != "SPAN_KIND_SERVER" || linked.Attributes["http.response.status_code"] != "201" ||
		linked.Attributes["http.route"] != "POST /things/{name}" {
		t.Errorf("server span not the client span's child, or without route and code: %+v", linked)
	}
	if own.TraceID == "" || own.ParentSpanID != "" || own.Attributes["url.path"] != "/things/b" {
		t.Errorf("the untraced request's server span: %+v", own)
	}

}
