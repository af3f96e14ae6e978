package main_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

var errEnough = errors.New("enough lines")

// TestCancelAndKillLeaveNoResource runs a workspace of the chaos template (six marker-file
// resources) through start and stop builds, and in each build, at a random point of its log,
// cancels it or kills the provisioner (SIGKILL) and starts it again, or lets it be. After each
// build, every marker file must be in the state the server keeps (no created resource is
// forgotten); after the final delete, no marker may remain. The seed is logged; HANGAR_CHAOS_SEED
// replays a run, HANGAR_CHAOS_ROUNDS sets how many builds (default 14).
func TestCancelAndKillLeaveNoResource(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir, "HANGAR_PROVISIONERS=0")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	out := h.must("provisioners", "create", "chaos")
	token := regexp.MustCompile(`hgp_[A-Za-z0-9_-]+`).FindString(out)
	tokenFile := filepath.Join(h.dir, "provisioner.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join(h.dir, "provisioner")
	var logs []*syncBuffer
	startProvisioner := func() *exec.Cmd {
		cmd := exec.Command(h.bin, "provisioner", "--server", h.url, "--token-file", tokenFile, "--identity", "chaos", "--work-dir", workDir)
		cmd.Env = append(append(os.Environ(), "MARKER_DIR="+markerDir), templateTestEnv...)
		buf := &syncBuffer{}
		cmd.Stderr = buf
		logs = append(logs, buf)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	prov := startProvisioner()
	defer func() {
		_ = prov.Process.Kill()
		_ = prov.Wait()
		if t.Failed() {
			for i, l := range logs {
				t.Logf("provisioner run %d:\n%s", i+1, l.String())
			}
		}
	}()

	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("HANGAR_CHAOS_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &seed); err != nil {
			t.Fatalf("HANGAR_CHAOS_SEED=%q: %v", v, err)
		}
	}
	rounds := 14
	if v := os.Getenv("HANGAR_CHAOS_ROUNDS"); v != "" {
		if _, err := fmt.Sscan(v, &rounds); err != nil {
			t.Fatalf("HANGAR_CHAOS_ROUNDS=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (HANGAR_CHAOS_SEED replays this run), %d rounds", seed, rounds)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	h.must("templates", "push", "chaos", "--directory", "testdata/chaos")
	c, err := sdk.New(h.url, h.token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "c1", Template: "chaos"}); err != nil {
		t.Fatal(err)
	}
	waitEnd := func(number int) sdk.Build {
		t.Helper()
		if err := c.BuildLogs(ctx, "c1", number, 0, true, func(sdk.BuildLog) error { return nil }); err != nil {
			t.Fatalf("follow build #%d: %v", number, err)
		}
		b, err := c.Build(ctx, "c1", number)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	actions := map[string]int{}
	for round := 0; round < rounds; round++ {
		b, err := c.Build(ctx, "c1", 0)
		if err != nil {
			t.Fatal(err)
		}
		// Act at a random line of the build's log (or at its end, if it has fewer).
		k := rng.IntN(60)
		n := 0
		err = c.BuildLogs(ctx, "c1", b.Number, 0, true, func(sdk.BuildLog) error {
			if n++; n >= k {
				return errEnough
			}
			return nil
		})
		if err != nil && !errors.Is(err, errEnough) {
			t.Fatal(err)
		}
		switch action := rng.IntN(3); action {
		case 0:
			actions["cancel"]++
			if _, err := c.CancelBuild(ctx, "c1", b.Number); err != nil && !strings.Contains(err.Error(), "409") {
				t.Fatalf("cancel build #%d: %v", b.Number, err)
			}
		case 1:
			actions["kill"]++
			_ = prov.Process.Signal(syscall.SIGKILL)
			_ = prov.Wait()
			prov = startProvisioner()
		default:
			actions["none"]++
		}
		b = waitEnd(b.Number)
		how := ""
		_ = c.BuildLogs(ctx, "c1", b.Number, 0, false, func(l sdk.BuildLog) error {
			if l.Stage == "Recovering" && how == "" {
				how = ", adopted after the kill"
				actions["adopted"]++
			}
			if l.Stage == "Abandoned" {
				how = ", abandoned (killed before terraform ran)"
			}
			return nil
		})
		t.Logf("round %d: build #%d %s at line %d: %s%s (%s)", round, b.Number, b.Transition, k, b.Status, how, firstOf(b.Error))
		checkMarkersInState(ctx, t, c, markerDir)

		next := "Running"
		if b.Transition == "start" && b.Status == "succeeded" {
			next = "Stopped"
		}
		if _, err := c.UpdateWorkspace(ctx, "c1", sdk.UpdateWorkspaceRequest{DesiredState: next}); err != nil {
			t.Fatalf("round %d: to %s: %v", round, next, err)
		}
	}
	t.Logf("actions: %v", actions)
	b, err := c.Build(ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitEnd(b.Number)
	checkMarkersInState(ctx, t, c, markerDir)
	h.must("delete", "c1", "--yes", "--wait", "--timeout", "2m")
	wantMarkers(t, markerDir)
}

// checkMarkersInState fails when a marker file exists that the workspace's latest state does not
// list: a resource Terraform created and Hangar forgot.
func checkMarkersInState(ctx context.Context, t *testing.T, c *sdk.Client, dir string) {
	t.Helper()
	state, _, err := c.PullState(ctx, "c1", 0)
	if err != nil && !strings.Contains(err.Error(), "404") {
		t.Fatal(err)
	}
	for _, m := range markers(t, dir) {
		if !strings.Contains(string(state), `"`+m+`"`) {
			t.Fatalf("marker %s exists but the state does not list it: a forgotten resource\nstate: %s", m, state)
		}
	}
}

func firstOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if s == "" {
		return "no error"
	}
	return s
}
