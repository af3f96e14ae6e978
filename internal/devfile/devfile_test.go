package devfile

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/workspace"
)

func TestParseDefault(t *testing.T) {
	d := mustParse(t, Default())
	if port, _, ok := d.PublicEndpoint(); !ok || port != 3000 {
		t.Errorf("PublicEndpoint() = %d, %v; want 3000, true", port, ok)
	}
	c := d.containers[d.main]
	if c.name != "main" || !strings.Contains(c.image, "ubuntu") || c.memoryLimit != nil || c.cpuLimit != nil || !c.keepAlive {
		t.Errorf("main container = %+v; want main, an ubuntu image, no resources (the agent's defaults apply), kept alive", c)
	}
	if c.endpoints[0].name != "editor" {
		t.Errorf("endpoint = %q, want editor", c.endpoints[0].name)
	}
	// Default returns a copy: changing it does not change the next one.
	b := Default()
	b[0] = 'X'
	if Default()[0] == 'X' {
		t.Error("Default shares its bytes")
	}
}

func TestParseRich(t *testing.T) {
	d := mustParse(t, readFile(t, "rich.devfile.yaml"))
	if got := d.containers[d.main].name; got != "tools" {
		t.Errorf("main = %q, want tools (marked by attribute)", got)
	}
	if port, _, ok := d.PublicEndpoint(); !ok || port != 8080 {
		t.Errorf("PublicEndpoint() = %d, %v; want 8080, true", port, ok)
	}
	if len(d.containers) != 2 || len(d.volumes) != 3 {
		t.Errorf("%d containers, %d volumes; want 2, 3", len(d.containers), len(d.volumes))
	}
}

func TestMainContainer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yaml     string
		main     string
		port     int
		hasPort  bool
		errField string
	}{
		{
			name: "first container when none is marked",
			yaml: `
- name: vol
  volume: {}
- name: first
  container: {image: busybox}
- name: second
  container: {image: busybox, endpoints: [{name: web, targetPort: 80}]}`,
			// The main container has no public endpoint: the URL is the first public one of another.
			main: "first", port: 80, hasPort: true,
		},
		{
			name: "marked one",
			yaml: `
- name: first
  container: {image: busybox}
- name: second
  attributes: {hangar.dev/main: true}
  container: {image: busybox, endpoints: [{name: web, targetPort: 80}, {name: api, targetPort: 81}]}`,
			main: "second", port: 80, hasPort: true,
		},
		{
			name: "string true counts",
			yaml: `
- name: first
  container: {image: busybox}
- name: second
  attributes: {hangar.dev/main: "true"}
  container: {image: busybox}`,
			main: "second",
		},
		{
			name: "explicit false is not main",
			yaml: `
- name: first
  attributes: {hangar.dev/main: false}
  container: {image: busybox}
- name: second
  container: {image: busybox}`,
			main: "first",
		},
		{
			name: "two marked",
			yaml: `
- name: first
  attributes: {hangar.dev/main: true}
  container: {image: busybox}
- name: second
  attributes: {hangar.dev/main: true}
  container: {image: busybox}`,
			errField: `devfile.components[1].attributes["hangar.dev/main"]`,
		},
		{
			name: "not a boolean",
			yaml: `
- name: first
  attributes: {hangar.dev/main: maybe}
  container: {image: busybox}`,
			errField: `devfile.components[0].attributes["hangar.dev/main"]`,
		},
		{
			name: "on a volume",
			yaml: `
- name: first
  container: {image: busybox}
- name: vol
  attributes: {hangar.dev/main: true}
  volume: {}`,
			errField: `devfile.components[1].attributes["hangar.dev/main"]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte("schemaVersion: 2.2.0\ncomponents:" + tc.yaml))
			if tc.errField != "" {
				wantProblem(t, err, tc.errField)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := d.containers[d.main].name; got != tc.main {
				t.Errorf("main = %q, want %q", got, tc.main)
			}
			port, _, ok := d.PublicEndpoint()
			if port != tc.port || ok != tc.hasPort {
				t.Errorf("PublicEndpoint() = %d, %v; want %d, %v", port, ok, tc.port, tc.hasPort)
			}
		})
	}
}

// wantProblem fails unless err is a *workspace.ValidationError with a problem on field.
func wantProblem(t *testing.T, err error, field string) {
	t.Helper()
	var ve *workspace.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v (%T), want a *workspace.ValidationError", err, err)
	}
	for _, p := range ve.Problems {
		if p.Field == field {
			if p.Detail == "" {
				t.Errorf("problem on %s has no detail", field)
			}
			return
		}
	}
	t.Errorf("no problem on %s; got %v", field, ve)
}

const okContainer = `
  - name: main
    container:
      image: busybox
`

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		field string
	}{
		{"no schemaVersion", "components:" + okContainer, "devfile.schemaVersion"},
		{"schemaVersion 1.0.0", "schemaVersion: 1.0.0\ncomponents:" + okContainer, "devfile.schemaVersion"},
		{"schemaVersion 2.4.0", "schemaVersion: 2.4.0\ncomponents:" + okContainer, "devfile.schemaVersion"},
		{"schemaVersion 3.0.0", "schemaVersion: 3.0.0\ncomponents:" + okContainer, "devfile.schemaVersion"},
		{"parent", "schemaVersion: 2.2.0\nparent:\n  uri: https://example.com/devfile.yaml\ncomponents:" + okContainer, "devfile.parent"},
		{"dependentProjects", "schemaVersion: 2.2.0\ndependentProjects:\n  - name: p\n    zip: {location: https://example.com/p.zip}\ncomponents:" + okContainer, "devfile.dependentProjects[0].zip"},
		{"events", "schemaVersion: 2.2.0\nevents:\n  postStart: [build]\ncomponents:" + okContainer, "devfile.events.postStart[0]"},
		{"kubernetes", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: k\n    kubernetes:\n      inlined: 'kind: Pod'\n", "devfile.components[1].kubernetes"},
		{"openshift", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: o\n    openshift:\n      uri: route.yaml\n", "devfile.components[1].openshift"},
		{"image", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: i\n    image:\n      imageName: foo\n      dockerfile: {uri: Dockerfile}\n", "devfile.components[1].image"},
		{"custom", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: c\n    custom:\n      componentClass: x\n      embeddedResource: {}\n", "devfile.components[1].custom"},
		{"plugin", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: p\n    plugin:\n      uri: https://example.com/plugin.yaml\n", "devfile.components[1].plugin"},
		{"no kind", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: nothing\n", "devfile.components[1]"},
		{"two kinds", "schemaVersion: 2.2.0\ncomponents:\n  - name: both\n    container: {image: busybox}\n    volume: {}\n", "devfile.components[0]"},
		{"no container", "schemaVersion: 2.2.0\ncomponents:\n  - name: v\n    volume: {}\n", "devfile.components"},
		{"no components", "schemaVersion: 2.2.0\n", "devfile.components"},
		{"reserved component name", "schemaVersion: 2.2.0\ncomponents:\n  - name: hangar-main\n    container: {image: busybox}\n", "devfile.components[0].name"},
		{"bad component name", "schemaVersion: 2.2.0\ncomponents:\n  - name: Main_1\n    container: {image: busybox}\n", "devfile.components[0].name"},
		{"duplicate component name", "schemaVersion: 2.2.0\ncomponents:" + okContainer + okContainer, "devfile.components[1].name"},
		{"unknown hangar attribute", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    attributes: {hangar.dev/mian: true}\n    container: {image: busybox}\n", `devfile.components[0].attributes["hangar.dev/mian"]`},
		{"no image", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: ''}\n", "devfile.components[0].container.image"},
		{"image with space", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: 'busy box'}\n", "devfile.components[0].container.image"},
		{"dedicatedPod", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, dedicatedPod: true}\n", "devfile.components[0].container.dedicatedPod"},
		{"reserved env", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, env: [{name: HANGAR_WORKSPACE_NAME, value: x}]}\n", "devfile.components[0].container.env[0].name"},
		{"reserved env lowercase", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, env: [{name: ok, value: x}, {name: hangar_x, value: x}]}\n", "devfile.components[0].container.env[1].name"},
		{"bad env name", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, env: [{name: '1A=', value: x}]}\n", "devfile.components[0].container.env[0].name"},
		{"duplicate env", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, env: [{name: A, value: x}, {name: A, value: z}]}\n", "devfile.components[0].container.env[1].name"},
		{"reserved endpoint", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: hangar-ui, targetPort: 80}]}\n", "devfile.components[0].container.endpoints[0].name"},
		{"port 0", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: web, targetPort: 0}]}\n", "devfile.components[0].container.endpoints[0].targetPort"},
		{"port 65536", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: web, targetPort: 65536}]}\n", "devfile.components[0].container.endpoints[0].targetPort"},
		{"duplicate port across containers", "schemaVersion: 2.2.0\ncomponents:\n  - name: a\n    container: {image: busybox, endpoints: [{name: web, targetPort: 80}]}\n  - name: b\n    container: {image: busybox, endpoints: [{name: web2, targetPort: 80}]}\n", "devfile.components[1].container.endpoints[0].targetPort"},
		{"duplicate endpoint name across containers", "schemaVersion: 2.2.0\ncomponents:\n  - name: a\n    container: {image: busybox, endpoints: [{name: web, targetPort: 80}]}\n  - name: b\n    container: {image: busybox, endpoints: [{name: web, targetPort: 81}]}\n", "devfile.components[1].container.endpoints[0].name"},
		{"bad protocol", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: web, targetPort: 80, protocol: sctp}]}\n", "devfile.components[0].container.endpoints[0].protocol"},
		{"unknown volume", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, volumeMounts: [{name: nope}]}\n", "devfile.components[0].container.volumeMounts[0].name"},
		{"relative mount path", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, volumeMounts: [{name: v, path: cache}]}\n  - name: v\n    volume: {}\n", "devfile.components[0].container.volumeMounts[0].path"},
		{"reserved volume name", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: data\n    volume: {size: 100Gi}\n", "devfile.components[1].name"},
		{"bad volume size", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "  - name: v\n    volume: {size: lots}\n", "devfile.components[1].volume.size"},
		{"bad cpu", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, cpuLimit: two}\n", "devfile.components[0].container.cpuLimit"},
		{"negative memory", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, memoryRequest: -1Gi}\n", "devfile.components[0].container.memoryRequest"},
		{"request over limit", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, memoryRequest: 2Gi, memoryLimit: 1Gi}\n", "devfile.components[0].container.memoryRequest"},
		{"relative sourceMapping", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, sourceMapping: src}\n", "devfile.components[0].container.sourceMapping"},
		{"unknown field", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, imagePullPolicy: Always}\n", "devfile.components[0].container.imagePullPolicy"},
		{"wrong type", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: web, targetPort: eighty}]}\n", "devfile.components[0].container.endpoints[0].targetPort"},
		{"YAML 1.1 boolean", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, env: [{name: A, value: yes}]}\n", "devfile.components[0].container.env[0].value"},
		{"not a mapping", "- just\n- a list\n", "devfile"},
		{"duplicate key", "schemaVersion: 2.2.0\nschemaVersion: 2.2.1\ncomponents:" + okContainer, "devfile.schemaVersion"},
		{"empty", "", "devfile.schemaVersion"},
		{"second document", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "---\nschemaVersion: 2.2.0\n", "devfile"},
		{"indented root cut short", "  schemaVersion: 2.2.0\ncomponents:" + okContainer, "devfile"},
		{"document end then more", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "...\nprojects: []\n", "devfile"},
		{"exec on a missing component", "schemaVersion: 2.2.0\ncommands:\n  - id: b\n    exec: {component: nope, commandLine: make}\ncomponents:" + okContainer, "devfile.commands[0].exec.component"},
		{"apply of a missing component", "schemaVersion: 2.2.0\ncommands:\n  - id: b\n    apply: {component: nope}\ncomponents:" + okContainer, "devfile.commands[0].apply.component"},
		{"composite of a missing command", "schemaVersion: 2.2.0\ncommands:\n  - id: all\n    composite: {commands: [nope]}\ncomponents:" + okContainer, "devfile.commands[0].composite.commands[0]"},
		{"postStop", "schemaVersion: 2.2.0\ncommands:\n  - id: b\n    exec: {component: main, commandLine: make}\nevents: {postStop: [b]}\ncomponents:" + okContainer, "devfile.events.postStop[0]"},
		{"file project", "schemaVersion: 2.2.0\nprojects:\n  - name: p\n    git: {remotes: {origin: 'file:///srv/p.git'}}\ncomponents:" + okContainer, `devfile.projects[0].git.remotes.origin`},
		{"ssh project without a path", "schemaVersion: 2.2.0\nprojects:\n  - name: p\n    git: {remotes: {origin: 'git@example.com:'}}\ncomponents:" + okContainer, `devfile.projects[0].git.remotes.origin`},
		{"remote as an option", "schemaVersion: 2.2.0\nprojects:\n  - name: p\n    git: {remotes: {origin: '-uhost:p'}}\ncomponents:" + okContainer, `devfile.projects[0].git.remotes.origin`},
		{"zip project", "schemaVersion: 2.2.0\nprojects:\n  - name: p\n    zip: {location: https://example.com/p.zip}\ncomponents:" + okContainer, "devfile.projects[0].zip"},
		{"undefined variable in an image", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: '{{registry}}/app'}\n", "devfile.components[0]"},
		{"kubernetes used by a run command", "schemaVersion: 2.2.0\ncommands:\n  - id: r\n    apply: {component: k, group: {kind: run}}\ncomponents:" + okContainer + "  - name: k\n    kubernetes: {inlined: 'kind: Pod'}\n", "devfile.components[1].kubernetes"},
		{"privileged override", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    attributes: {container-overrides: {securityContext: {privileged: true}}}\n    container: {image: busybox}\n", `devfile.components[0].attributes["container-overrides"].securityContext.privileged`},
		{"root override", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    attributes: {container-overrides: {securityContext: {runAsUser: 0}}}\n    container: {image: busybox}\n", `devfile.components[0].attributes["container-overrides"].securityContext.runAsUser`},
		{"pod spec override", "schemaVersion: 2.2.0\nattributes: {pod-overrides: {spec: {hostNetwork: true}}}\ncomponents:" + okContainer, `devfile.attributes["pod-overrides"].spec.hostNetwork`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(tc.yaml))
			if d != nil {
				t.Errorf("Parse returned a devfile with the error")
			}
			wantProblem(t, err, tc.field)
		})
	}
}

func TestParseWarnings(t *testing.T) {
	d := mustParse(t, []byte(`schemaVersion: 2.2.0
starterProjects:
  - name: s
    git: {remotes: {origin: https://example.com/s.git}}
commands:
  - id: build-image
    apply: {component: img}
  - id: deploy
    composite: {commands: [build-image], group: {kind: deploy}}
components:
  - name: main
    container: {image: busybox}
  - name: img
    image: {imageName: app, dockerfile: {uri: Dockerfile}}
`))
	w := d.Warnings()
	if len(w) != 2 || !strings.Contains(w[0], "starterProjects") || !strings.Contains(w[1], `components[1] (image "img") is ignored`) {
		t.Errorf("warnings = %q, want one for starterProjects and one for the image component", w)
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`schemaVersion: 1.0.0
parent: {id: x}
events: {preStart: [a]}
components:
  - name: k
    kubernetes: {uri: k.yaml}
`))
	for _, f := range []string{"devfile.schemaVersion", "devfile.parent", "devfile.events.preStart[0]", "devfile.components[0].kubernetes", "devfile.components"} {
		wantProblem(t, err, f)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"2.2.1", "schemaVersion: 2.2.1\ncomponents:" + okContainer},
		{"2.0.0", "schemaVersion: 2.0.0\ncomponents:" + okContainer},
		{"2.1.0", "schemaVersion: 2.1.0\ncomponents:" + okContainer},
		{"2.3.0", "schemaVersion: 2.3.0\ncomponents:" + okContainer},
		{"git project", "schemaVersion: 2.2.0\nprojects:\n  - name: p\n    git: {remotes: {origin: https://example.com/p.git}}\ncomponents:" + okContainer},
		{"starterProjects", "schemaVersion: 2.2.0\nstarterProjects:\n  - name: p\n    zip: {location: https://example.com/p.zip}\ncomponents:" + okContainer},
		{"variables", "schemaVersion: 2.2.0\nvariables:\n  version: \"1\"\ncomponents:" + okContainer},
		{"container annotation", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, annotation: {deployment: {a: b}}}\n"},
		{"long endpoint name", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: a-very-long-endpoint, targetPort: 80}]}\n"},
		{"numeric endpoint name", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: '8080', targetPort: 80}]}\n"},
		{"a volume mounted at /projects replaces the data volume there", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, volumeMounts: [{name: v, path: /projects}]}\n  - name: v\n    volume: {}\n"},
		{"empty trailing document", "schemaVersion: 2.2.0\ncomponents:" + okContainer + "---\n"},
		{"kubernetes used only by deploy", "schemaVersion: 2.2.0\ncommands:\n  - id: k8s\n    apply: {component: k}\n  - id: deploy\n    composite: {commands: [k8s], group: {kind: deploy}}\ncomponents:" + okContainer + "  - name: k\n    kubernetes: {uri: deploy.yaml}\n"},
		{"metadata with any keys and values", "schemaVersion: 2.2.0\nmetadata: {name: x, version: 2, projectType: Go, whatever: [1, 2]}\ncomponents:" + okContainer},
		{"commands are ignored", "schemaVersion: 2.2.0\ncommands:\n  - id: build\n    exec: {component: main, commandLine: make}\n  - id: all\n    composite: {commands: [build]}\ncomponents:" + okContainer},
		{"empty projects", "schemaVersion: 2.2.0\nprojects: []\ncomponents:" + okContainer},
		{"metadata and attributes", "schemaVersion: 2.2.0\nmetadata: {name: x, version: 1.0.0, tags: [go]}\nattributes: {a: {b: c}}\ncomponents:" + okContainer},
		{"JSON", `{"schemaVersion": "2.2.0", "components": [{"name": "main", "container": {"image": "busybox"}}]}`},
		{"endpoint exposure and paths", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: web, targetPort: 80, exposure: public, secure: true, path: /ui}]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.yaml)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Default())
	f.Add(readFile(f, "rich.devfile.yaml"))
	f.Add(readFile(f, "editor.devfile.yaml"))
	f.Add(readFile(f, "build.devfile.yaml"))
	f.Add([]byte("schemaVersion: 2.2.0\ncomponents:\n- name: a\n  container: {image: x, endpoints: [{name: b, targetPort: 1}]}\n- name: v\n  volume: {size: 1Gi}\n"))
	f.Add([]byte("\x00\xff{{[[::"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("schemaVersion: 2.2.0\ncomponents: {}\n"))
	f.Add([]byte(strings.Repeat("[", 1000)))
	f.Add([]byte("schemaVersion: 2.2.0\ncomponents: []\n---\nschemaVersion: 2.2.0\n"))
	f.Add([]byte("  schemaVersion: 2.2.0\ncomponents: []\n"))
	// Every real devfile of the corpus seeds the fuzzer.
	for _, c := range readCorpus(f) {
		f.Add(readFile(f, filepath.Join("corpus", filepath.FromSlash(c.file))))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			var ve *workspace.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("error is not a ValidationError with problems: %v", err)
			}
			for _, p := range ve.Problems {
				if !strings.HasPrefix(p.Field, "devfile") {
					t.Fatalf("field %q does not start with devfile", p.Field)
				}
			}
			return
		}
		// Whatever Parse accepts, Generate must turn into objects, on an agent that builds images.
		p := Params{
			WorkspaceID: "w", WorkspaceName: "w", Owner: "o", AgentID: "1", Namespace: "ns",
			DesiredState: workspace.Running, Agent: workspace.AgentConfig{ImageBuild: workspace.ImageBuild{Registry: "registry.test:5000/builds"}}.WithDefaults(),
		}
		if _, err := Generate(d, p); err != nil {
			t.Fatalf("Generate on an accepted devfile: %v", err)
		}
	})
}

func TestParseHostileInput(t *testing.T) {
	// Deep nesting and alias expansion must fail quickly, not exhaust the stack or memory.
	for name, data := range map[string]string{
		"deep flow":   strings.Repeat("[", 100000),
		"deep block":  strings.Repeat("- ", 20000) + "x",
		"billion lol": "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(data)); err == nil {
				t.Error("accepted")
			}
		})
	}
}
