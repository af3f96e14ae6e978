package servercmd

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestPostgresMaxConnsRefused: a pool size that is not a whole number from 1 to 1000 stops the
// server before it opens any store, saying which option is wrong.
func TestPostgresMaxConnsRefused(t *testing.T) {
	for _, v := range []string{"0", "-3", "twenty", "1001"} {
		cfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PostgresURL: "postgres://127.0.0.1:1/none",
			PostgresMaxConns: v, Provisioners: "0", HeartbeatTimeout: "5m", PendingTimeout: "30m", PollInterval: "30s",
			LogLevel: "error", LogFormat: "text", AppsZone: "none"}
		err := Run(context.Background(), cfg, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--postgres-max-conns") {
			t.Errorf("--postgres-max-conns %q: %v, want it refused", v, err)
		}
	}
}

// TestAuditRetentionRefused: a retention that is not 0 or a duration of at least an hour stops the
// server before it opens its store, naming the option.
func TestAuditRetentionRefused(t *testing.T) {
	for _, v := range []string{"-1h", "a year", "10m", "365d"} {
		cfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Provisioners: "0", HeartbeatTimeout: "5m",
			PendingTimeout: "30m", PollInterval: "30s", LogLevel: "error", LogFormat: "text", AppsZone: "none", AuditRetention: v}
		err := Run(context.Background(), cfg, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--audit-retention") {
			t.Errorf("--audit-retention %q: %v, want it refused", v, err)
		}
	}
}
