package devfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hangar-dev/hangar/internal/workspace"
)

func TestCommandIDsNameInitContainers(t *testing.T) {
	src := func(id string) string {
		return "schemaVersion: 2.2.0\ncommands:\n  - id: " + id + "\n    exec: {component: main, commandLine: make}\nevents: {preStart: [" + id + "]}\ncomponents:" + okContainer
	}
	for id, want := range map[string]string{
		"BuildApp":                          `must be a DNS label (lowercase letters, digits and '-', at most 63 characters), got "BuildApp"`,
		"build_app":                         `must be a DNS label`,
		"'" + strings.Repeat("a", 64) + "'": `must be a DNS label`,
		"hangar-warm":                       `"hangar-warm" starts with "hangar", which is reserved for Hangar`,
	} {
		if got := refusal(t, src(id), "devfile.commands[0].id"); !strings.Contains(got, want) {
			t.Errorf("id %s: %q, want %q", id, got, want)
		}
	}
	// The project clone's init container is in the duplicate check too.
	// (The hangar prefix keeps a devfile from naming one so; this is the check behind that rule.)
	d := &Devfile{projects: []project{{Name: "app", Path: "app"}}, inits: []container{{name: CloneContainerName}}}
	v := &workspace.ValidationError{}
	d.checkInitNames(v, map[string]*componentInfo{}, nil)
	if got := v.Error(); !strings.Contains(got, `init container "hangar-project-clone" has the name of another container or init container`) {
		t.Errorf("problems %q, want the clone container's name refused as a duplicate", got)
	}
}

// The generated hook and init container scripts are run by /bin/sh, with the values a devfile gives.
func TestGeneratedScriptsRunInShell(t *testing.T) {
	spec, _ := generatedPod(t, `schemaVersion: 2.2.0
commands:
  - id: first
    exec:
      component: main
      workingDir: ${PROJECT_SOURCE}/sub dir
      env: [{name: GREETING, value: 'say "hi" \ `+"`no`"+` $HOME_X $(echo ran)'}, {name: _under, value: x}]
      commandLine: printf '%s|%s\n' "$GREETING" "$_under" > out.txt
  - id: second
    exec: {component: main, commandLine: "echo second >> \"$PROJECT_SOURCE/sub dir/out.txt\"\n"}
  - id: both
    composite: {commands: [first, second]}
  - id: seed
    exec: {component: main, workingDir: $PROJECT_SOURCE, commandLine: echo seeded > seed.txt}
events:
  postStart: [both]
  preStart: [seed]
components:
  - name: main
    container: {image: busybox, command: [sleep], args: [infinity]}
`, nil)
	runScript := func(name string, cmd []string) string {
		t.Helper()
		if len(cmd) != 3 || cmd[0] != "/bin/sh" || cmd[1] != "-c" {
			t.Fatalf("%s: %q is not /bin/sh -c", name, cmd)
		}
		if out, err := exec.Command("/bin/sh", "-n", "-c", cmd[2]).CombinedOutput(); err != nil {
			t.Fatalf("%s: /bin/sh -n refuses the script: %v\n%s\n%s", name, err, out, cmd[2])
		}
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "sub dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		sh := exec.Command("/bin/sh", "-c", cmd[2])
		sh.Env = []string{"PROJECT_SOURCE=" + dir, "PATH=" + os.Getenv("PATH"), "HOME_X=home"}
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: the script fails: %v\n%s\n%s", name, err, out, cmd[2])
		}
		return dir
	}
	script, err := postStartScript(spec.Containers[0])
	if err != nil || script == "" {
		t.Fatalf("no postStart: %q %v", script, err)
	}
	dir := runScript("postStart", []string{"/bin/sh", "-c", script})
	b, _ := os.ReadFile(filepath.Join(dir, "sub dir", "out.txt"))
	// Backslashes, quotes and backquotes are literal; $VAR and $(...) expand as in the commandLine.
	if want := "say \"hi\" \\ `no` home ran|x\nsecond\n"; string(b) != want {
		t.Errorf("out.txt = %q, want %q", b, want)
	}
	var seed *corev1.Container
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == "seed" {
			seed = &spec.InitContainers[i]
		}
	}
	if seed == nil {
		t.Fatalf("no seed init container in %+v", spec.InitContainers)
	}
	dir = runScript("seed", seed.Command)
	if b, _ := os.ReadFile(filepath.Join(dir, "seed.txt")); string(b) != "seeded\n" {
		t.Errorf("seed.txt = %q", b)
	}
}

func TestExecEnvNamesAreShellNames(t *testing.T) {
	for _, name := range []string{"my-var", "my.var", "1A"} {
		src := "schemaVersion: 2.2.0\ncommands:\n  - id: c\n    exec: {component: main, commandLine: make, env: [{name: '" + name + "', value: x}]}\nevents: {postStart: [c]}\ncomponents:" + okContainer
		if got := refusal(t, src, "devfile.commands[0].exec.env[0].name"); !strings.Contains(got, "must be letters, digits and '_'") || !strings.Contains(got, "/bin/sh") {
			t.Errorf("%s: %q, want the shell's rule", name, got)
		}
	}
}

// The same devfile gives the same problems in the same order, every time.
func TestProblemOrderIsDeterministic(t *testing.T) {
	src := []byte(`schemaVersion: 2.2.0
commands:
  - id: a
    composite: {commands: [nope-a]}
  - id: b
    composite: {commands: [b]}
  - id: c
    composite: {commands: [nope-c]}
  - id: d
    composite: {commands: [nope-d, nope-e]}
  - id: e
    composite: {commands: [nope-f]}
components:` + okContainer)
	_, err := Parse(src)
	if err == nil {
		t.Fatal("accepted")
	}
	first := err.Error()
	for i := 0; i < 50; i++ {
		if _, err := Parse(src); err.Error() != first {
			t.Fatalf("run %d: %q\nfirst: %q", i, err, first)
		}
	}
	if i, j := strings.Index(first, "commands[0]"), strings.Index(first, "commands[4]"); i < 0 || j < i {
		t.Errorf("problems not in devfile order: %q", first)
	}
}
