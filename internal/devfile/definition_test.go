package devfile

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestDefinitionAttributes: a devfile says what defined the workspace and carries that
// translation's warnings first; a postStart command may run once per workspace, which the helper
// is told; the main container's remote-env reaches the helper. Wrong values are refused naming the
// attribute.
func TestDefinitionAttributes(t *testing.T) {
	d := mustParse(t, []byte(`schemaVersion: 2.2.0
attributes:
  hangar.dev/definition: devcontainer.json
  hangar.dev/definition-warnings: ["first"]
  controller.devfile.io/scc: x
components:
  - name: main
    attributes:
      hangar.dev/remote-env: [{name: PATH, value: "${PATH}:/x"}]
    container: {image: busybox}
commands:
  - id: create
    attributes: {hangar.dev/once-per-workspace: true}
    exec: {component: main, commandLine: make}
  - id: start
    exec: {component: main, commandLine: run}
events:
  postStart: [create, start]
`))
	if d.Definition() != DefinitionDevcontainer {
		t.Errorf("definition %q", d.Definition())
	}
	if w := d.Warnings(); len(w) != 2 || w[0] != "first" {
		t.Errorf("warnings %q, want the translation's first", w)
	}
	out, err := Generate(d, defaultParams(t))
	if err != nil {
		t.Fatal(err)
	}
	g := readBack(t, out)
	env := map[string]string{}
	for _, e := range g.deployment.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	var cmds []workspace.PostStartCommand
	if err := json.Unmarshal([]byte(env[HelperPostStartEnv]), &cmds); err != nil || len(cmds) != 2 || !cmds[0].OncePerWorkspace || cmds[1].OncePerWorkspace {
		t.Errorf("postStart %s (%v), want create once per workspace and start not", env[HelperPostStartEnv], err)
	}
	if env[HelperRemoteEnvEnv] != `[{"name":"PATH","value":"${PATH}:/x"}]` {
		t.Errorf("remote env %q", env[HelperRemoteEnvEnv])
	}
	if d := mustParse(t, []byte("schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox}\n")); d.Definition() != DefinitionDevfile {
		t.Errorf("a plain devfile: definition %q", d.Definition())
	} else if d.DefinitionFromRepository() {
		t.Errorf("a plain devfile says its definition is from the repository")
	}
	// A template's fallback of the repository's definition.
	if d := mustParse(t, []byte("schemaVersion: 2.2.0\nattributes: {hangar.dev/definition-from: repository}\ncomponents:\n  - name: main\n    container: {image: busybox}\n")); !d.DefinitionFromRepository() {
		t.Errorf("definition-from: repository not read")
	}

	_, err = Parse([]byte(`schemaVersion: 2.2.0
attributes:
  hangar.dev/definition: compose
  hangar.dev/definition-warnings: 3
  hangar.dev/definition-from: git
components:
  - name: main
    attributes:
      hangar.dev/remote-env: [{name: HANGAR_X, value: "1"}]
    container: {image: busybox}
commands:
  - id: stop
    attributes: {hangar.dev/once-per-workspace: true}
    exec: {component: main, commandLine: x}
events:
  preStop: [stop]
`))
	var ve *workspace.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.Field+": "+p.Detail)
	}
	for _, want := range []string{
		`devfile.attributes["hangar.dev/definition"]: must be "devfile" or "devcontainer.json"`,
		`devfile.attributes["hangar.dev/definition-warnings"]: must be a list of strings`,
		`devfile.attributes["hangar.dev/definition-from"]: must be "repository"`,
		`devfile.components[0].attributes["hangar.dev/remote-env"][0].name: "HANGAR_X" starts with "HANGAR"`,
		`devfile.commands[0].attributes["hangar.dev/once-per-workspace"]: applies to commands of the postStart event only`,
	} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("problems %q, want %q", got, want)
		}
	}
}

// The main container's metadata commands and alert thresholds reach its helper as one JSON
// specification (protocol.HelperMetadataEnv), with their defaults; wrong values are refused naming
// the field within the attribute.
func TestMetadataAttributes(t *testing.T) {
	d := mustParse(t, []byte(`schemaVersion: 2.2.0
components:
  - name: dev
    attributes:
      hangar.dev/metadata:
        - {key: branch, display_name: Branch, script: git -C /projects/app branch --show-current, interval: 30}
      hangar.dev/resources-monitoring: {memory: 80, volumes: [{path: /projects, threshold: 95}]}
    container:
      image: debian:12
`))
	got, err := Generate(d, defaultParams(t))
	if err != nil {
		t.Fatal(err)
	}
	want := "name: HANGAR_HELPER_METADATA\n          value: " + strconv.Quote(`{"items":[{"key":"branch","display_name":"Branch","script":"git -C /projects/app branch --show-current","interval":30,"timeout":5}],"resources_monitoring":{"memory":80,"volumes":[{"path":"/projects","threshold":95}]}}`)
	if !strings.Contains(got, want) {
		t.Fatalf("the config lacks\n%s\n%s", want, got)
	}
	if plain, _ := Generate(mustParse(t, Default()), defaultParams(t)); strings.Contains(plain, "HANGAR_HELPER_METADATA") {
		t.Error("a devfile without the attributes gives the helper a specification")
	}
	for attrs, field := range map[string]string{
		`hangar.dev/metadata: [{key: "Bad", script: x}]`:                         `devfile.components[0].attributes["hangar.dev/metadata"][0].key`,
		`hangar.dev/metadata: [{key: a, script: x, interval: 2, timeout: 3}]`:    `devfile.components[0].attributes["hangar.dev/metadata"][0].timeout`,
		`hangar.dev/metadata: {key: a}`:                                          `devfile.components[0].attributes["hangar.dev/metadata"]`,
		`hangar.dev/resources-monitoring: {memory: 120}`:                         `devfile.components[0].attributes["hangar.dev/resources-monitoring"].memory`,
		`hangar.dev/resources-monitoring: {volumes: [{path: x, threshold: 90}]}`: `devfile.components[0].attributes["hangar.dev/resources-monitoring"].volumes[0].path`,
	} {
		_, err := Parse([]byte("schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    attributes:\n      " + attrs + "\n    container:\n      image: debian:12\n"))
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: %v, want an error naming %s", attrs, err, field)
		}
	}
}

// The main container's hangar.dev/startup-behavior: non-blocking has its helper serve SSH (the
// readiness) without waiting for the postStart commands; blocking (the default) says nothing; any
// other value is refused naming the attribute.
func TestStartupBehaviorAttribute(t *testing.T) {
	devfile := func(behavior string) string {
		return `schemaVersion: 2.2.0
components:
  - name: dev
    attributes:
      hangar.dev/startup-behavior: ` + behavior + `
    container:
      image: debian:12
commands:
  - id: setup
    exec: {component: dev, commandLine: make setup}
events:
  postStart: [setup]
`
	}
	got, err := Generate(mustParse(t, []byte(devfile("non-blocking"))), defaultParams(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "name: "+HelperPostStartBlockingEnv+"\n          value: \"false\"") {
		t.Fatalf("non-blocking: the helper is not told:\n%s", got)
	}
	if got, _ := Generate(mustParse(t, []byte(devfile("blocking"))), defaultParams(t)); strings.Contains(got, HelperPostStartBlockingEnv) {
		t.Error("blocking: the helper is told otherwise")
	}
	if _, err := Parse([]byte(devfile("sometimes"))); err == nil || !strings.Contains(err.Error(), `devfile.components[0].attributes["hangar.dev/startup-behavior"]: must be "blocking" or "non-blocking", got "sometimes"`) {
		t.Fatalf("a bad value: %v", err)
	}
}
