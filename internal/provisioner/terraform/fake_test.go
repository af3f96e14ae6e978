package terraform

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/build"
)

// fakeTerraform writes a shell script that answers like terraform: `version -json` and `init`
// succeed, and apply and destroy record their environment, arguments and CLI config under out,
// write a state, then run tail (shell code).
func fakeTerraform(t *testing.T, out, tail string) string {
	t.Helper()
	script := `#!/bin/sh
case "$1" in
version) echo '{"terraform_version":"1.11.4","platform":"linux_amd64","provider_selections":{},"terraform_outdated":false}' ;;
init) echo "fake init" ;;
apply|destroy)
	env > '` + out + `/env'
	printf '%s\n' "$@" > '` + out + `/args'
	cat "$TF_CLI_CONFIG_FILE" > '` + out + `/rc'
	for a in "$@"; do case "$a" in -var-file=*) cp "${a#-var-file=}" '` + out + `/vars'; stat -c %a "${a#-var-file=}" > '` + out + `/vars-mode' ;; esac; done
	echo '{"fake":"state"}' > terraform.tfstate
	echo "fake $1"
	` + tail + `
	;;
*) echo "unexpected command $1" >&2; exit 2 ;;
esac
`
	p := filepath.Join(t.TempDir(), "terraform")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunEnvironmentAndConfig(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	mirror := filepath.Join(t.TempDir(), "mirror ${x}")
	r := &Runner{TerraformPath: fakeTerraform(t, out, ""), WorkRoot: t.TempDir(), PluginMirror: mirror}
	vars := hangarVariables("1", "/markers")
	res, lines := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "markers"), Variables: vars}, nil)
	if res.Err != nil || string(res.State) != "{\"fake\":\"state\"}\n" {
		t.Fatalf("Result = %+v", res)
	}
	checkSecrets(t, lines, vars)

	env := read(t, filepath.Join(out, "env"))
	for _, want := range []string{"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_CLI_CONFIG_FILE=" + r.WorkRoot} {
		if !strings.Contains(env, want) {
			t.Errorf("environment lacks %s:\n%s", want, env)
		}
	}
	for _, l := range strings.Split(env, "\n") {
		k, v, _ := strings.Cut(l, "=")
		if strings.HasPrefix(k, "TF_VAR_") || strings.HasPrefix(k, "TF_CLI_ARGS") || strings.HasPrefix(k, "TF_LOG") && v != "" {
			t.Errorf("terraform got %s", l)
		}
	}

	args := strings.Split(strings.TrimSpace(read(t, filepath.Join(out, "args"))), "\n")
	for _, want := range []string{"apply", "-no-color", "-auto-approve", "-input=false"} {
		if !slices.Contains(args, want) {
			t.Errorf("arguments %q lack %q", args, want)
		}
	}
	// Variables travel in a file only the provisioner's user reads, never on the command line.
	for _, a := range args {
		if strings.Contains(a, "secret-workspace-name-42") || strings.HasPrefix(a, "-var=") {
			t.Errorf("a variable is on the command line: %s", a)
		}
	}
	var passed map[string]string
	if err := json.Unmarshal([]byte(read(t, filepath.Join(out, "vars"))), &passed); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"marker_dir": "/markers", "start_count": "1", "workspace_name": "secret-workspace-name-42"}
	if !maps.Equal(passed, want) {
		t.Errorf("variables passed %v, want only the declared ones %v", passed, want)
	}
	if mode := strings.TrimSpace(read(t, filepath.Join(out, "vars-mode"))); mode != "600" {
		t.Errorf("variable file mode %s, want 600", mode)
	}

	rc := read(t, filepath.Join(out, "rc"))
	for _, want := range []string{`path    = "` + strings.ReplaceAll(mirror, "${", "$${") + `"`, `include = ["hangar.dev/*/*"]`, `exclude = ["hangar.dev/*/*"]`, "filesystem_mirror", "direct"} {
		if !strings.Contains(rc, want) {
			t.Errorf("CLI config lacks %s:\n%s", want, rc)
		}
	}
}

// TestRunGracePeriod: a terraform that ignores the interrupt is killed after the grace period,
// and the state it wrote is still returned.
func TestRunGracePeriod(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	r := &Runner{
		TerraformPath: fakeTerraform(t, out, `trap '' INT; echo ignoring-interrupts; exec sleep 30`),
		WorkRoot:      t.TempDir(),
		GracePeriod:   200 * time.Millisecond,
	}
	cancel := make(chan struct{})
	begin := time.Now()
	res, lines := runBuild(t, r, testContext(t), cancel, Request{Transition: build.Delete, Archive: packTestdata(t, "onlycount"), State: []byte("{}")}, func(l Line) {
		if l.Output == "ignoring-interrupts" {
			close(cancel)
		}
	})
	if elapsed := time.Since(begin); elapsed > 20*time.Second {
		t.Errorf("Run took %v: terraform was not killed after the grace period", elapsed)
	}
	if !res.Canceled || !errors.Is(res.Err, ErrCanceled) || !strings.Contains(res.Err.Error(), "terraform destroy") || !strings.Contains(res.Err.Error(), "killed") {
		t.Fatalf("Result = %+v, want canceled, killed", res)
	}
	if string(res.State) != "{\"fake\":\"state\"}\n" {
		t.Errorf("State = %q", res.State)
	}
	if !hasLine(lines, func(l Line) bool {
		return l.Stage == StageDestroy && l.Level == LevelError && strings.Contains(l.Output, "killed")
	}) {
		t.Error("the kill was not logged")
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunHidesHangarConfiguration: Hangar's own configuration (a Postgres URL with its password,
// tokens) and anything else of the provisioner's environment (a cloud credential, its HOME) never
// reaches terraform, its providers or local-exec, unless named in PassEnv; the facts for Hangar's
// provider do. This holds without a sandbox too (the scrub applies in every mode).
func TestRunHidesHangarConfiguration(t *testing.T) {
	t.Setenv("HANGAR_POSTGRES_URL", "postgres://hangar:db-password@db/hangar")
	t.Setenv("HANGAR_TOKEN", "hgu_secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
	t.Setenv("GIVEN_ON_PURPOSE", "passed-value")
	t.Setenv("HOME", "/root-home-of-the-server")
	out := t.TempDir()
	r := &Runner{TerraformPath: fakeTerraform(t, out, ""), WorkRoot: t.TempDir(), PassEnv: []string{"GIVEN_ON_PURPOSE", "HANGAR_TOKEN"}}
	res, _ := runBuild(t, r, testContext(t), nil, Request{Transition: build.Start, Archive: packTestdata(t, "onlycount"),
		Variables: map[string]string{"start_count": "1"}, Env: map[string]string{"HANGAR_WORKSPACE_NAME": "w1"}}, nil)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	env := read(t, filepath.Join(out, "env"))
	for _, secret := range []string{"db-password", "hgu_secret", "aws-secret", "root-home-of-the-server"} {
		if strings.Contains(env, secret) {
			t.Errorf("terraform's environment holds %s:\n%s", secret, env)
		}
	}
	if !strings.Contains(env, "GIVEN_ON_PURPOSE=passed-value") || !strings.Contains(env, "PATH=") {
		t.Errorf("terraform's environment lacks PATH or what PassEnv names:\n%s", env)
	}
	if !strings.Contains(env, "HANGAR_WORKSPACE_NAME=w1") {
		t.Errorf("terraform's environment lacks the workspace facts:\n%s", env)
	}
}

// TestReadStateCutShort: a state file terraform was killed while rewriting is not reported; its
// backup is, and with no backup, no state (the build keeps the one it started from).
func TestReadStateCutShort(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(stateFile, `{"version":4,"serial":3`)
	if state, _, err := readState(dir); err == nil || state != nil {
		t.Fatalf("cut-short state without a backup: %q %v", state, err)
	}
	write(stateFile+".backup", `{"version":4,"serial":2}`)
	if state, note, err := readState(dir); err != nil || string(state) != `{"version":4,"serial":2}` || note == "" {
		t.Fatalf("cut-short state with a backup: %q %q %v", state, note, err)
	}
	write(stateFile, `{"version":4,"serial":3}`)
	if state, note, err := readState(dir); err != nil || string(state) != `{"version":4,"serial":3}` || note != "" {
		t.Fatalf("whole state: %q %q %v", state, note, err)
	}
}
