package terraform

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecoverSaysWhetherTerraformStarted: an adopted run whose work directory holds no trace of
// apply or destroy (no pid, exit status or output: the provisioner stopped during the module's
// extraction or terraform init) is NotStarted, with the state it started from; one whose command
// left a trace is not, even if its process is gone: ended with status 0, it is adopted; with no
// exit status, it was killed.
func TestRecoverSaysWhetherTerraformStarted(t *testing.T) {
	r := &Runner{WorkRoot: t.TempDir()}
	state := []byte(`{"version":4,"terraform_version":"1.11.0","serial":3,"lineage":"l","resources":[]}`)
	job := func(id string, files ...string) {
		t.Helper()
		dir := filepath.Join(r.WorkRoot, id)
		if err := os.MkdirAll(filepath.Join(dir, "module"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "module", "terraform.tfstate"), state, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("0\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	job("init-only")
	job("applied", runStdout, runExit)
	job("killed", runStdout)

	res, found := r.Recover(context.Background(), nil, "init-only", func(Line) {})
	if !found || !res.NotStarted || res.Err == nil || !strings.Contains(res.Err.Error(), "before terraform applied anything") || string(res.State) != string(state) {
		t.Fatalf("a run that never started apply: found %v, %+v", found, res)
	}
	res, found = r.Recover(context.Background(), nil, "applied", func(Line) {})
	if !found || res.NotStarted || res.Err != nil || string(res.State) != string(state) {
		t.Fatalf("a run whose apply ended with status 0: found %v, %+v", found, res)
	}
	res, found = r.Recover(context.Background(), nil, "killed", func(Line) {})
	if !found || res.NotStarted || res.Err == nil || !strings.Contains(res.Err.Error(), "without an exit status") {
		t.Fatalf("a run whose apply left output and no exit status: found %v, %+v", found, res)
	}
}
