package servercmd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
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

// TestTokenLifetimes: the defaults, valid values, and the refusals naming the flag.
func TestTokenLifetimes(t *testing.T) {
	if d, m, err := parseTokenLifetimes("", ""); err != nil || d != 720*time.Hour || m != 8760*time.Hour {
		t.Fatalf("defaults: %v %v %v", d, m, err)
	}
	if d, m, err := parseTokenLifetimes("24h", "48h"); err != nil || d != 24*time.Hour || m != 48*time.Hour {
		t.Fatalf("24h/48h: %v %v %v", d, m, err)
	}
	for _, c := range [][3]string{{"soon", "", "--token-lifetime"}, {"1s", "", "--token-lifetime"}, {"", "x", "--max-token-lifetime"}, {"48h", "24h", "longer than"}} {
		if _, _, err := parseTokenLifetimes(c[0], c[1]); err == nil || !strings.Contains(err.Error(), c[2]) {
			t.Errorf("%q %q: %v, want an error about %s", c[0], c[1], err, c[2])
		}
	}
}
