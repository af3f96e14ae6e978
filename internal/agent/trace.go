package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hangar-dev/hangar/internal/agent/errtrack"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// The agent's spans, when tracing is on (internal/tracing): each reconcile cycle is a span (its
// request to the server a child, which the server's span continues), and each apply of a
// workspace's config is a span in the trace of the change it carries out when the server's answer
// names one (traceparent), linked to the cycle that received it; else a child of that cycle.

func startCycleSpan(ctx context.Context, ut protocol.UpdateType) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx) // a no-op span: nothing to end
	}
	return tracing.Tracer().Start(ctx, "agent reconcile", trace.WithAttributes(attribute.String("hangar.update_type", string(ut))))
}

// applyTrace returns the change's span context (from the answer's traceparent; empty if none or
// unreadable) and the cycle's.
func applyTrace(ctx context.Context, traceParent string) (change, cycle trace.SpanContext) {
	if !tracing.Enabled() {
		return
	}
	cycle = trace.SpanContextFromContext(ctx)
	if traceParent != "" {
		change, _ = tracing.ParseTraceParent(traceParent)
	}
	return change, cycle
}

func startApplySpan(ctx context.Context, k errtrack.Key, job applyJob) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	parent := job.cycle
	var links []trace.Link
	if job.change.IsValid() {
		parent = job.change
		if job.cycle.IsValid() {
			links = append(links, trace.Link{SpanContext: job.cycle})
		}
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return tracing.Tracer().Start(ctx, "agent apply", trace.WithLinks(links...), trace.WithAttributes(
		attribute.String("hangar.workspace", k.Name), attribute.String("k8s.namespace.name", k.Namespace),
		attribute.Int("hangar.objects", len(job.objs))))
}

func endApplySpan(span trace.Span, applied int, errs []error) {
	if !tracing.Enabled() {
		return
	}
	span.SetAttributes(attribute.Int("hangar.objects_applied", applied))
	if len(errs) > 0 {
		tracing.Fail(span, errs[0])
		span.SetAttributes(attribute.Int("hangar.apply_errors", len(errs)))
	}
	span.End()
}
