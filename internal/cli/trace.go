package cli

import (
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/tracing"
)

// commandTrace ends the span of the running client command, if tracing is on.
var commandTrace struct {
	mu  sync.Mutex
	end func(error)
}

// traceCommand runs before every client command (PersistentPreRunE): with OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, the command is one span ("hangar start"), each of
// its requests a child span whose traceparent header the server continues. Unset, nothing happens.
func (a *app) traceCommand(cmd *cobra.Command, _ []string) error {
	shutdown, err := tracing.Setup(cmd.Context(), "hangar-cli", a.getenv(tracing.EnvEndpoint))
	if err != nil {
		return fmt.Errorf("%s: %w", tracing.EnvEndpoint, err)
	}
	if !tracing.Enabled() {
		return nil
	}
	ctx, span := tracing.Tracer().Start(cmd.Context(), cmd.CommandPath())
	cmd.SetContext(ctx)
	commandTrace.mu.Lock()
	commandTrace.end = func(err error) {
		tracing.Fail(span, err)
		span.End()
		_ = tracing.Shutdown(shutdown) // sends the spans before the process ends
	}
	commandTrace.mu.Unlock()
	return nil
}

// endCommandTrace ends the command's span with the command's outcome and sends the spans.
func endCommandTrace(err error) {
	commandTrace.mu.Lock()
	end := commandTrace.end
	commandTrace.end = nil
	commandTrace.mu.Unlock()
	if end != nil {
		end(err)
	}
}
