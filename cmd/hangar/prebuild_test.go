package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// TestPrebuildEndToEnd: the real binary — `hangar server` with its reconciler every second
// (--prebuild-interval, here by its environment variable) and its in-process provisioner running
// the real terraform with Hangar's provider — and the CLI: a preset's pool is built with
// is_prebuild, `hangar create --preset` claims it (is_prebuild_claim, seen by the hangar_workspace
// data source), the pool refills, and a deleted preset's prebuilt workspace is destroyed.
func TestPrebuildEndToEnd(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir, "HANGAR_PREBUILD_INTERVAL=1s")
	h.must("templates", "push", "pb", "--directory", "testdata/prebuild")
	h.must("templates", "preset", "pb", "small", "--instances", "1")

	// pool reads the preset's pool until cond holds (the reconciler runs on its own, in real time).
	pool := func(what string, cond func(sdk.PresetPool) bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var ps []sdk.Preset
			out := h.must("templates", "presets", "pb", "-o", "json")
			if err := json.Unmarshal([]byte(out), &ps); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if len(ps) == 1 && cond(ps[0].Pool) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waited 2 minutes for %s: %s", what, out)
			}
			time.Sleep(200 * time.Millisecond) // a real server on a real clock: poll, as --wait does
		}
	}
	pool("one ready prebuilt workspace", func(p sdk.PresetPool) bool { return p.Ready == 1 })
	wantMarkers(t, markerDir, "machine-is-prebuild-true")
	if out := h.must("list"); strings.Contains(out, "hangar-prebuilds") {
		t.Fatalf("list shows the prebuilt workspace:\n%s", out)
	}
	if out := h.must("list", "--prebuilds"); !strings.Contains(out, "hangar-prebuilds") {
		t.Fatalf("list --prebuilds:\n%s", out)
	}

	out := h.must("create", "mine", "--template", "pb", "--preset", "small", "--wait", "--timeout", "2m")
	if !strings.Contains(out, "Workspace mine is Running") {
		t.Fatalf("create --preset --wait:\n%s", out)
	}
	// The machine was not set up again (its resource came with the prebuilt workspace's state);
	// the user's part ran at the claim.
	wantMarkers(t, markerDir, "claimed-by-admin", "machine-is-prebuild-true")
	var builds []sdk.Build
	if err := json.Unmarshal([]byte(h.must("builds", "mine", "-o", "json")), &builds); err != nil {
		t.Fatal(err)
	}
	if len(builds) != 2 || !builds[0].IsPrebuildClaim || !builds[1].IsPrebuild || builds[0].Initiator != "admin" || builds[1].Initiator != "hangar-prebuilds" {
		t.Fatalf("mine's builds: %+v", builds)
	}
	pool("the refill", func(p sdk.PresetPool) bool { return p.Ready == 1 })

	h.must("templates", "preset", "pb", "small", "--delete")
	deadline := time.Now().Add(2 * time.Minute)
	for strings.Contains(h.must("list", "--prebuilds"), "hangar-prebuilds") {
		if time.Now().After(deadline) {
			t.Fatal("the deleted preset's prebuilt workspace is still there after 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(markerDir, "claimed-by-admin")); err != nil {
		t.Fatal(err)
	}
	if out := h.must("show", "mine"); !strings.Contains(out, "Running") {
		t.Fatalf("mine after its preset's delete:\n%s", out)
	}
}
