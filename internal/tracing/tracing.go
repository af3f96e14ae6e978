// Package tracing is Hangar's optional OpenTelemetry tracing, off by default.
//
// Setup turns it on in a process when an OTLP endpoint is given (--otel-endpoint, or the standard
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): spans go to that endpoint by
// OTLP over HTTP (protobuf), batched. Off, nothing is installed: Handler and Transport return
// what they are given, the global tracer provider stays OpenTelemetry's no-op one, and no
// exporter exists. The W3C traceparent header carries a trace from the CLI to the server, and the
// reconcile answer carries the trace of a workspace's last change to the agent that applies it
// (docs/decisions.md, "Tracing").
package tracing

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Environment variables of the OpenTelemetry specification that turn tracing on.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// ScopeName is the instrumentation scope of Hangar's spans.
const ScopeName = "github.com/hangar-dev/hangar"

// EndpointHelp is the help of the daemons' --otel-endpoint.
const EndpointHelp = "send traces (OpenTelemetry, OTLP over HTTP) to the collector at this base URL, such as http://127.0.0.1:4318 (/v1/traces is added); empty: no tracing, unless " + EnvTracesEndpoint + " is set"

var enabled atomic.Bool

// propagator reads and writes the W3C traceparent header (and tracestate).
var propagator = propagation.TraceContext{}

// Enabled says whether Setup turned tracing on in this process.
func Enabled() bool { return enabled.Load() }

// Tracer returns the tracer Hangar's spans come from (the no-op one until Setup turns tracing on).
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Setup turns tracing on when endpoint (a base URL such as http://collector:4318, to which
// /v1/traces is added) is not empty, or when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. service
// names the process in the traces (service.name). shutdown sends the spans still batched and
// stops; it is a no-op when tracing stayed off.
func Setup(ctx context.Context, service, endpoint string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	var opts []otlptracehttp.Option
	switch {
	case endpoint != "":
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return noop, fmt.Errorf("want an http:// or https:// URL such as http://127.0.0.1:4318, got %q", endpoint)
		}
		opts = append(opts, otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path.Join("/", u.Path, "v1/traces")))
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
	case os.Getenv(EnvTracesEndpoint) != "":
		// The exporter reads it (and the other OTEL_EXPORTER_OTLP_* variables) itself.
	default:
		return noop, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return noop, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return noop, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	// A failed export is logged like the rest of the process's log (JSON with --log-format json),
	// never printed by OpenTelemetry's own logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { slog.Default().Warn("tracing: export failed", "error", err) }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	enabled.Store(true)
	return tp.Shutdown, nil
}

// Shutdown calls shutdown with a bound of its own, so that an unreachable collector never holds up
// the end of the process by more than a few seconds.
func Shutdown(shutdown func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return shutdown(ctx)
}

// Handler wraps an HTTP server's handler: each request is a server span, a child of the trace the
// request's traceparent names, named by the route that served it ("POST /api/v1/workspaces").
// Off, it returns h itself.
func Handler(h http.Handler) http.Handler {
	if !Enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := Tracer().Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		r = r.WithContext(ctx)
		h.ServeHTTP(sw, r)
		// The mux sets the pattern on the request it routed, which is r.
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
		if sw.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
	})
}

// statusWriter remembers the status code. Unwrap keeps http.ResponseController (flushes,
// hijacks, deadlines) working through it.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack serves callers that assert http.Hijacker (WebSockets, the SSH relays).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Transport wraps an HTTP client's transport: each request made within a span is a client span,
// and carries its traceparent to the server. Off, it returns rt itself (nil stays nil: http.DefaultTransport).
func Transport(rt http.RoundTripper) http.RoundTripper {
	if !Enabled() {
		return rt
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return transport{rt}
}

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		// Only requests made within a span are traced (a CLI command's, an agent's reconcile):
		// the agent's long-polls would otherwise each start a trace of their own.
		return t.next.RoundTrip(r)
	}
	ctx, span := Tracer().Start(r.Context(), r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
			attribute.String("server.address", r.URL.Host)))
	defer span.End()
	r = r.Clone(ctx)
	propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	return resp, nil
}

// Client returns c with Transport around its transport (a copy; c itself is unchanged), or c
// itself when tracing is off.
func Client(c *http.Client) *http.Client {
	if !Enabled() {
		return c
	}
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	cp.Transport = Transport(c.Transport)
	return &cp
}

// TraceParent returns the W3C traceparent of ctx's span, or "" when it has none (tracing off, or
// not in a sampled trace).
func TraceParent(ctx context.Context) string {
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// ErrBadTraceParent is what ParseTraceParent returns for a value that is not a W3C traceparent.
var ErrBadTraceParent = errors.New("not a W3C traceparent")

// ParseTraceParent returns the span context a traceparent names, as a remote one.
func ParseTraceParent(tp string) (trace.SpanContext, error) {
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.SpanContext{}, ErrBadTraceParent
	}
	return sc, nil
}

// Fail marks span as failed with err (nothing when err is nil).
func Fail(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}
