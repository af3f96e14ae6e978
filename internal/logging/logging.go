// Package logging builds the slog loggers of Hangar's commands from their --log-level and
// --log-format options.
package logging

import (
	"fmt"
	"io"
	"log/slog"
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
