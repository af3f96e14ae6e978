package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/provisioner"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestDebugLogsAndAuditEndToEnd runs the commands against a real server whose builds run the real
// terraform in an in-process provisioner: a build asked with --log-level debug has terraform's
// debug lines in `hangar logs`, a normal build has none; `hangar audit` shows what was done, to
// admins only.
func TestDebugLogsAndAuditEndToEnd(t *testing.T) {
	tfPath, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("this test runs the real terraform, which is not on PATH: %v", err)
	}
	var bld *tfbackend.Service
	env := servertest.NewWith(t, "sqlite", func(o *server.Options) {
		bld = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger})
		o.Builder = bld
	})
	ctx, cancel := context.WithCancel(context.Background())
	d := &provisioner.Daemon{Coord: bld, Runner: &terraform.Runner{TerraformPath: tfPath, WorkRoot: t.TempDir(), GracePeriod: time.Minute},
		WorkerID: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	admin := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	admin.limit = 5 * time.Minute
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("variable \"start_count\" {\n  type = number\n}\n\nresource \"terraform_data\" \"home\" {\n  count = var.start_count\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin.ok("templates", "push", "tf", "--directory", dir)
	var alice sdk.User
	if err := json.Unmarshal([]byte(admin.ok("users", "create", "alice", "-o", "json")), &alice); err != nil {
		t.Fatal(err)
	}
	al := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": alice.Token})
	al.limit = 5 * time.Minute

	// A debug build: terraform's own log is in the build's log; the build says its level.
	al.ok("create", "dbg", "--template", "tf", "--log-level", "debug", "--wait")
	debugLog := al.ok("logs", "dbg")
	if !strings.Contains(debugLog, "[DEBUG]") || !strings.Contains(debugLog, "Terraform log level: DEBUG") {
		t.Fatalf("the debug build's log has no terraform debug lines:\n%s", debugLog)
	}
	var builds []sdk.Build
	if err := json.Unmarshal([]byte(al.ok("builds", "dbg", "-o", "json")), &builds); err != nil || len(builds) != 1 ||
		builds[0].LogLevel != "debug" || builds[0].Status != "succeeded" {
		t.Fatalf("builds: %+v, %v", builds, err)
	}
	// A normal build: none.
	al.ok("stop", "dbg", "--wait")
	normalLog := al.ok("logs", "dbg")
	if strings.Contains(normalLog, "[DEBUG]") || strings.Contains(normalLog, "[TRACE]") || !strings.Contains(normalLog, "Apply complete") {
		t.Fatalf("the normal build's log:\n%s", normalLog)
	}
	if got := al.fail("start", "dbg", "--log-level", "loud"); !strings.Contains(got, "log_level: must be \"info\" or \"debug\"") {
		t.Errorf("a bad --log-level: %q", got)
	}

	// The audit log, to the admin: alice's actions with their targets, outcomes and builds.
	table := admin.ok("audit", "--actor", "alice")
	for _, want := range []string{"workspace.create", "workspace alice/dbg", "log_level=debug", "transition=start", "workspace.transition",
		"transition=stop", "failure", "log_level: must be"} {
		if !strings.Contains(table, want) {
			t.Errorf("hangar audit --actor alice lacks %q:\n%s", want, table)
		}
	}
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
		t.Errorf("hangar audit --actor alice: want a header and 3 entries:\n%s", table)
	}
	var page sdk.AuditPage
	if err := json.Unmarshal([]byte(admin.ok("audit", "--target", "dbg", "--action", "workspace.transition", "--since", "1h", "-o", "json")), &page); err != nil ||
		len(page.Entries) != 2 || page.Entries[0].Outcome != "failure" || page.Entries[1].Details["to"] != "Stopped" {
		t.Errorf("hangar audit -o json: %+v, %v", page, err)
	}
	r := admin.run("audit", "--limit", "2")
	if r.code != 0 || len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 3 || !strings.Contains(r.stderr, "More entries: add --before ") {
		t.Errorf("hangar audit --limit 2: %+v", r)
	}
	if got := admin.fail("audit", "--since", "yesterday"); !strings.Contains(got, "since: must be an RFC 3339 time") {
		t.Errorf("a bad --since: %q", got)
	}
	if got := al.fail("audit"); got != "error: only an admin may do this\n" {
		t.Errorf("alice's audit: %q", got)
	}
}
