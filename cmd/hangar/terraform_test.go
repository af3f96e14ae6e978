package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// markers lists the marker files in dir: the resources of the marker template that exist.
func markers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != "delay" {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

func wantMarkers(t *testing.T, dir string, want ...string) {
	t.Helper()
	if got := markers(t, dir); !slices.Equal(got, want) {
		t.Fatalf("marker files %v, want %v", got, want)
	}
}

// TestTerraformEndToEnd drives a terraform template through the real binary — `hangar server` with
// its in-process provisioner running the real terraform, and the CLI — through create, stop, start,
// restart, cancel, state pull/push, orphan delete and delete. The template's resources are marker
// files, so the test sees what exists outside Terraform.
func TestTerraformEndToEnd(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir)
	hangar, must := h.hangar, h.must
	wait := []string{"--wait", "--timeout", "2m"}

	out := must("templates", "push", "markers", "--directory", "testdata/markers")
	if !strings.Contains(out, "version 1") || !strings.Contains(out, "start_count, workspace_name") {
		t.Fatalf("templates push:\n%s", out)
	}
	if out := must("templates", "list"); !strings.Contains(out, "markers") || !strings.Contains(out, "terraform") {
		t.Fatalf("templates list:\n%s", out)
	}

	// create → Running: the start build ran terraform apply; its stages were shown.
	out = must(append([]string{"create", "tf1", "--template", "markers"}, wait...)...)
	for _, want := range []string{"==> Initializing Terraform", "==> Applying", "Build #1 succeeded", "Workspace tf1 is Running"} {
		if !strings.Contains(out, want) {
			t.Fatalf("create --wait does not show %q:\n%s", want, out)
		}
	}
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2")

	// stop → Stopped: start_count 0 removes the markers; start brings them back.
	must(append([]string{"stop", "tf1"}, wait...)...)
	wantMarkers(t, markerDir)
	must(append([]string{"start", "tf1"}, wait...)...)
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2")

	// restart: a stop build, then a start build, back to Running.
	out = must(append([]string{"restart", "tf1"}, wait...)...)
	if !strings.Contains(out, "Workspace tf1 is Running") {
		t.Fatalf("restart --wait:\n%s", out)
	}
	var builds []sdk.Build
	if err := json.Unmarshal([]byte(must("builds", "tf1", "-o", "json")), &builds); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for i := len(builds) - 1; i >= 0; i-- {
		seq = append(seq, builds[i].Transition+":"+builds[i].Status)
	}
	if want := []string{"start:succeeded", "stop:succeeded", "start:succeeded", "stop:succeeded", "start:succeeded"}; !slices.Equal(seq, want) {
		t.Fatalf("builds %v, want %v", seq, want)
	}
	if builds[0].Reason != "restart" || builds[0].StateSource != "previous" || !builds[0].HasState {
		t.Fatalf("restart's start build: %+v", builds[0])
	}

	// state pull, and state push --no-build (nothing runs) and with a build.
	statePath := filepath.Join(h.dir, "tf1.tfstate")
	must("state", "pull", "tf1", statePath)
	state, err := os.ReadFile(statePath)
	if err != nil || !strings.Contains(string(state), "terraform_data") || !strings.Contains(string(state), "tf1-2") {
		t.Fatalf("pulled state (%v):\n%s", err, state)
	}
	if out := must("state", "pull", "tf1", "--build", "4"); !strings.Contains(out, `"resources": []`) {
		t.Fatalf("state of build 4 (a stop) should have no resources:\n%s", out)
	}
	// The pulled state as it is does not follow the saved one (the same serial): refused unless
	// --force.
	if out, err := hangar("state", "push", "tf1", statePath, "--no-build"); err == nil || !strings.Contains(out, "serial: is ") {
		t.Fatalf("state push --no-build of the saved state itself (%v):\n%s", err, out)
	}
	must("state", "push", "tf1", statePath, "--no-build", "--force")
	if err := json.Unmarshal([]byte(must("builds", "tf1", "-o", "json")), &builds); err != nil || len(builds) != 5 {
		t.Fatalf("state push --no-build ran a build: %d builds (%v)", len(builds), err)
	}
	must(append([]string{"state", "push", "tf1", statePath}, wait...)...)
	if err := json.Unmarshal([]byte(must("builds", "tf1", "-o", "json")), &builds); err != nil || builds[0].StateSource != "explicit" || builds[0].Status != "succeeded" {
		t.Fatalf("state push: latest build %+v (%v)", builds[0], err)
	}
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2")

	// cancel a running start: Terraform is interrupted, and the state it wrote is kept, so the
	// markers it made are destroyed by the delete that follows.
	must(append([]string{"stop", "tf1"}, wait...)...)
	if err := os.WriteFile(filepath.Join(markerDir, "delay"), []byte("60"), 0o644); err != nil {
		t.Fatal(err)
	}
	must("start", "tf1")
	// Follow the build's log until Terraform starts the slow resource: the markers are made by then.
	follow := exec.Command(h.bin, "logs", "tf1", "-f")
	follow.Env = h.env
	logs, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(logs)
	for sc.Scan() && !strings.Contains(sc.Text(), "terraform_data.slow[0]: Creating...") {
	}
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2")
	out = must("cancel", "tf1")
	if !strings.Contains(out, "canceling") && !strings.Contains(out, "canceled") {
		t.Fatalf("cancel:\n%s", out)
	}
	// The followed log ends when the build does.
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	if err := follow.Wait(); err != nil || last != "Build canceled." {
		t.Fatalf("logs -f ended with %q (%v)", last, err)
	}
	var ws sdk.Workspace
	if err := json.Unmarshal([]byte(must("show", "tf1", "-o", "json")), &ws); err != nil || ws.ActualState != "Canceled" || ws.Error == nil || ws.Error.Type != "canceled" || !strings.Contains(ws.Error.Message, "canceled") {
		t.Fatalf("after cancel: %+v (%v)", ws, err)
	}
	if err := json.Unmarshal([]byte(must("builds", "tf1", "-o", "json")), &builds); err != nil || builds[0].Status != "canceled" || !builds[0].StateCapturedOnCancel {
		t.Fatalf("canceled build: %+v (%v)", builds[0], err)
	}
	if out := must("logs", "tf1"); !strings.Contains(out, "Canceled by admin") {
		t.Fatalf("the log does not say who canceled:\n%s", out)
	}
	_ = os.Remove(filepath.Join(markerDir, "delay"))

	// delete → Terminated with no marker left.
	must(append([]string{"delete", "tf1", "--yes"}, wait...)...)
	wantMarkers(t, markerDir)
	if out, err := hangar("start", "tf1"); err == nil || !strings.Contains(out, "permanent") {
		t.Fatalf("start after delete: %v\n%s", err, out)
	}

	// orphan delete: no Terraform runs; the resources stay (and are the user's to clean up).
	must(append([]string{"create", "tf2", "--template", "markers"}, wait...)...)
	wantMarkers(t, markerDir, "tf2-0", "tf2-1", "tf2-2")
	out = must(append([]string{"delete", "tf2", "--orphan", "--yes"}, wait...)...)
	if !strings.Contains(out, "Terminated") {
		t.Fatalf("delete --orphan:\n%s", out)
	}
	wantMarkers(t, markerDir, "tf2-0", "tf2-1", "tf2-2")
	if err := json.Unmarshal([]byte(must("builds", "tf2", "-o", "json")), &builds); err != nil || !builds[0].Orphan || builds[0].Status != "succeeded" || builds[0].StateSource != "orphan" {
		t.Fatalf("orphan delete build: %+v (%v)", builds[0], err)
	}
}

// TestWaitInterruptCancels: Ctrl-C during `hangar start --wait` of a terraform workspace, run from
// a terminal, asks whether to cancel the build; answering y cancels it, and the wait ends with the
// reason. The server's metrics count the builds by transition and result. (Without a terminal,
// Ctrl-C ends the wait at once: internal/cli TestInterruptEndsTheWaitWithoutATerminal.)
func TestWaitInterruptCancels(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir)
	h.must("templates", "push", "markers", "--directory", "testdata/markers")
	h.must("create", "ci1", "--template", "markers", "--wait", "--timeout", "2m")
	h.must("stop", "ci1", "--wait", "--timeout", "2m")
	if err := os.WriteFile(filepath.Join(markerDir, "delay"), []byte("60"), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(h.bin, "start", "ci1", "--wait", "--timeout", "2m")
	cmd.Env = h.env
	// stdin is a terminal, as for a user at a shell: only then is there someone to ask.
	stdin, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	cmd.Stdin = tty
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	go io.Copy(io.Discard, stdin) // the terminal's echo
	var seen strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Split(bufio.ScanRunes) // the prompt has no newline
	until := func(s string) {
		t.Helper()
		for !strings.Contains(seen.String(), s) {
			if !sc.Scan() {
				t.Fatalf("output ended before %q:\n%s", s, seen.String())
			}
			seen.WriteString(sc.Text())
		}
	}
	until("==> Applying")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	until("[y/N] ")
	if _, err := stdin.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		seen.WriteString(sc.Text())
	}
	err = cmd.Wait()
	out := seen.String()
	if err == nil || !strings.Contains(out, "Canceling: Terraform stops") || !strings.Contains(out, "was canceled") {
		t.Fatalf("start --wait interrupted (%v):\n%s", err, out)
	}
	var builds []sdk.Build
	if err := json.Unmarshal([]byte(h.must("builds", "ci1", "-o", "json")), &builds); err != nil || builds[0].Status != "canceled" {
		t.Fatalf("builds after Ctrl-C: %+v (%v)", builds, err)
	}

	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`hangar_workspace_builds_total{result="succeeded",transition="start"} 1`,
		`hangar_workspace_builds_total{result="succeeded",transition="stop"} 1`,
		`hangar_workspace_builds_total{result="canceled",transition="start"} 1`,
		`hangar_provisioner_job_duration_seconds_count{result="succeeded",transition="start"} 1`,
		`hangar_provisioner_jobs{status="pending"} 0`,
		`hangar_provisioner_daemons_connected 1`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestHangarProvider: a template reads its workspace from data.hangar_workspace — Hangar's own
// provider, served by the hangar binary through the provisioner's filesystem mirror — with no
// registry and no variables.
func TestHangarProvider(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir)
	if out := h.must("templates", "push", "withprovider", "--directory", "testdata/provider"); !strings.Contains(out, "variables: none") {
		t.Fatalf("templates push:\n%s", out)
	}
	out, err := h.hangar("create", "pv1", "--template", "withprovider", "--wait", "--timeout", "2m")
	if err != nil {
		t.Fatalf("create: %v\n%s\n%s", err, out, h.must("logs", "pv1"))
	}
	wantMarkers(t, markerDir, "pv1-admin-start")
	// The provider comes from the server's mirror with its checksum in the lock file: terraform does
	// not warn that it had to compute it.
	if logs := h.must("logs", "pv1"); strings.Contains(logs, "Incomplete lock file information") || !strings.Contains(logs, "Installed hangar.dev/hangar/hangar") {
		t.Errorf("the build's log:\n%s", logs)
	}
	h.must("stop", "pv1", "--wait", "--timeout", "2m")
	wantMarkers(t, markerDir)
	h.must("delete", "pv1", "--yes", "--wait", "--timeout", "2m")
}
