package tfprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestMain serves the provider when terraform starts this test binary as the plugin (tfModule's
// mirror offers it, as the provisioner offers the hangar executable).
func TestMain(m *testing.M) {
	if IsPlugin() {
		os.Exit(Serve())
	}
	os.Exit(m.Run())
}

// tfModule is a directory where the real terraform runs a module with Hangar's provider, served by
// this test binary from a filesystem mirror, in the environment a provisioner gives it (env: more
// variables, such as the helper's token and URL).
type tfModule struct {
	t   *testing.T
	dir string
	env []string
}

func newTFModule(t *testing.T, env ...string) *tfModule {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatal("these tests run the real terraform, which is not on PATH (scripts/install-deps installs it)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	mirror, err := Mirror(filepath.Join(root, "mirror"), exe)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "terraformrc")
	rc := "disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path    = \"" + mirror + "\"\n    include = [\"hangar.dev/*/*\"]\n  }\n}\n"
	if err := os.WriteFile(config, []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &tfModule{t: t, dir: filepath.Join(root, "module"), env: append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + root, "TF_CLI_CONFIG_FILE=" + config, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
	}, env...)}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// write replaces the module's main.tf.
func (m *tfModule) write(body string) {
	m.t.Helper()
	main := "terraform {\n  required_providers {\n    hangar = { source = \"hangar.dev/hangar/hangar\" }\n  }\n}\n" + body
	if err := os.WriteFile(filepath.Join(m.dir, "main.tf"), []byte(main), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// run runs terraform with args (and more environment env) and returns its stdout and exit status;
// a status other than 0 and 2 (plan -detailed-exitcode's "changes") fails the test unless
// allowFail.
func (m *tfModule) run(allowFail bool, env []string, args ...string) (string, int) {
	m.t.Helper()
	cmd := exec.Command("terraform", append([]string{"-chdir=" + m.dir}, args...)...)
	cmd.Env = append(append([]string{}, m.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		m.t.Fatalf("terraform %v: %v", args, err)
	}
	if code != 0 && !(code == 2 && slices.Contains(args, "-detailed-exitcode")) && !allowFail {
		m.t.Fatalf("terraform %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
	}
	return stdout.String(), code
}

func (m *tfModule) must(args ...string) string {
	m.t.Helper()
	out, _ := m.run(false, nil, args...)
	return out
}

// outputs are the module's outputs, sensitive ones included.
func (m *tfModule) outputs() map[string]string {
	m.t.Helper()
	var outs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(m.must("output", "-json")), &outs); err != nil {
		m.t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range outs {
		s, _ := v.Value.(string)
		got[k] = s
	}
	return got
}
