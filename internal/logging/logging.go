// Package logging builds the slog loggers of Hangar's commands from their --log-level and
// --log-format options.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"k8s.io/klog/v2"
)

// New returns a logger writing to w at level ("debug", "info", "warn", "error") in format ("text"
// or "json").
func New(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// RouteKlog sends what the Kubernetes client libraries log through klog (client-go's reflectors,
// leader election, throttling notes) to l, so that a command's log has one format: with --log-format
// json, only JSON lines. Their informational and error messages keep their level; their finer
// verbosity (klog's V(1) and up, which klog drops by default) stays dropped. Call it once, at
// start, before any client runs. The standard log package is routed to l too.
func RouteKlog(l *slog.Logger) {
	klog.SetSlogLogger(slog.New(atLeast{Handler: l.Handler(), min: slog.LevelInfo}))
	slog.SetDefault(l)
}

// atLeast drops records below min.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{Handler: h.Handler.WithGroup(name), min: h.min}
}
