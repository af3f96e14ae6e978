package devcontainer

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// pod is what the workspace runs for a devcontainer.json: the main container, the pod's security
// context, the postStart commands the helper gets, the remote environment, and the warnings.
type pod struct {
	main      corev1.Container
	security  *corev1.PodSecurityContext
	volumes   []corev1.Volume
	postStart []workspace.PostStartCommand
	remoteEnv []workspace.EnvVar
	warnings  []string
	devfile   *devfile.Devfile
	text      string // the translation
	inits     []corev1.Container
	build     *imagebuild.Spec // the translation's image build, nil when none
	objects   string           // the generated stream
}

func (p pod) env(name string) (string, bool) {
	for _, e := range p.main.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func testOptions() Options {
	return Options{Basename: "demo", ID: "6f1c2a3e-9b7d-4c1e-8f2a-0d5e4b3c2a19",
		Caps: workspace.Resources{Limits: workspace.ResourceList{CPU: "4", Memory: "8Gi"}, Requests: workspace.ResourceList{CPU: "4", Memory: "8Gi"}}}
}

// testRegistry is where testAgent's builds go.
const testRegistry = "registry.test:5000/hangar/builds"

// testAgent is an agent that builds images (into testRegistry).
func testAgent() workspace.AgentConfig {
	return workspace.AgentConfig{ImageBuild: workspace.ImageBuild{Registry: testRegistry}}.WithDefaults()
}

// generate translates text, parses the devfile and generates the workspace's objects, as the server
// does at creation.
func generate(t *testing.T, text string) pod {
	t.Helper()
	r, err := Translate([]byte(text), testOptions())
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	d, err := devfile.Parse(r.Devfile)
	if err != nil {
		t.Fatalf("Parse of the translation: %v\n%s", err, r.Devfile)
	}
	a := testAgent()
	out, err := devfile.Generate(d, devfile.Params{WorkspaceID: testOptions().ID, WorkspaceName: "demo", Owner: "alice", AgentID: "1",
		Namespace: "hangar-demo", DesiredState: workspace.Running, Agent: a})
	if err != nil {
		t.Fatalf("Generate: %v\n%s", err, r.Devfile)
	}
	p := pod{warnings: d.Warnings(), devfile: d, text: string(r.Devfile), build: r.Build, objects: out}
	if !slices.Equal(r.Warnings, p.warnings) {
		t.Errorf("Translate's warnings %q are not the devfile's %q", r.Warnings, p.warnings)
	}
	for doc := range strings.SplitSeq(out, "---\n") {
		if !strings.Contains(doc, "kind: Deployment") {
			continue
		}
		var dep appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &dep); err != nil {
			t.Fatal(err)
		}
		spec := dep.Spec.Template.Spec
		p.main, p.security, p.volumes, p.inits = spec.Containers[0], spec.SecurityContext, spec.Volumes, spec.InitContainers
	}
	if v, ok := p.env(devfile.HelperPostStartEnv); ok {
		if err := json.Unmarshal([]byte(v), &p.postStart); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := p.env(devfile.HelperRemoteEnvEnv); ok {
		if err := json.Unmarshal([]byte(v), &p.remoteEnv); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// refused translates text and returns every problem as "field: detail".
func refused(t *testing.T, text string) []string {
	t.Helper()
	_, err := Translate([]byte(text), testOptions())
	var ve *workspace.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Field+": "+p.Detail)
	}
	return out
}

func hasPrefix(list []string, prefix string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func hasSubstring(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

func TestMaxBytesIsTheDevfileCap(t *testing.T) {
	if MaxBytes != sdk.MaxDevfileBytes {
		t.Fatalf("MaxBytes %d, sdk.MaxDevfileBytes %d: a devcontainer.json has the cap of a devfile", MaxBytes, sdk.MaxDevfileBytes)
	}
}

func TestImageAndJSONC(t *testing.T) {
	p := generate(t, `// comment
{
	/* the image */ "image": "mcr.microsoft.com/devcontainers/base:ubuntu", // trailing
	"name": "x",
}`)
	if p.main.Image != "mcr.microsoft.com/devcontainers/base:ubuntu" {
		t.Errorf("image %q", p.main.Image)
	}
	if p.devfile.Definition() != devfile.DefinitionDevcontainer {
		t.Errorf("definition %q", p.devfile.Definition())
	}
	if len(p.warnings) != 0 {
		t.Errorf("warnings %q", p.warnings)
	}
	if !p.devfile.HasEditor() {
		t.Error("no web editor")
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{"image": "x"`, "devcontainer: ends before the object is complete"},
		{`{"image": "x" /* open`, "unterminated /* comment"},
		{`{"image": "x`, "unterminated string"},
		{`[1]`, "must be a JSON object"},
		{`null`, "must be a JSON object, got null"},
		{`{"image":"x"} {}`, "text after the object"},
		{strings.Repeat("[", MaxDepth+1), "nested more than 32 levels deep"},
		{`{"image":"` + strings.Repeat("a", MaxBytes) + `"}`, "the limit is 262144"},
		{`{"image": 3}`, "devcontainer.image: must be a string"},
		{`{}`, "devcontainer.image: is required"},
	} {
		got := refused(t, tc.text)
		if !hasSubstring(got, tc.want) {
			t.Errorf("%.40q: got %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestPorts(t *testing.T) {
	p := generate(t, `{"image": "i",
		"forwardPorts": [3000, "8080", "localhost:9000", "db:5432", 3000],
		"portsAttributes": {"3000": {"label": "Web App", "protocol": "https", "onAutoForward": "openBrowser"}, "9000": {"onAutoForward": "ignore"}, "5000-5010": {"label": "range"}},
		"otherPortsAttributes": {"onAutoForward": "silent"}}`)
	got := map[int]devfile.Endpoint{}
	for _, e := range p.devfile.Endpoints() {
		got[e.Port] = e
	}
	if e := got[3000]; e.Name != "web-app" || !e.Public() {
		t.Errorf("3000: %+v, want web-app, public", e)
	}
	if e := got[8080]; e.Name != "port-8080" || !e.Public() {
		t.Errorf("8080: %+v", e)
	}
	if e := got[9000]; e.Exposure != "internal" {
		t.Errorf("9000 (onAutoForward ignore): %+v, want internal", e)
	}
	if _, ok := got[5432]; ok {
		t.Error("db:5432, another host's port, became an endpoint")
	}
	for _, w := range []string{`forwardPorts[3] "db:5432" forwards a port of another host`, `forwardPorts[4]: port 3000 is listed twice`, `portsAttributes["5000-5010"] names no port of forwardPorts`} {
		if !hasPrefix(p.warnings, w) {
			t.Errorf("warnings %q, want %q", p.warnings, w)
		}
	}
	ports := map[int32]bool{}
	for _, cp := range p.main.Ports {
		ports[cp.ContainerPort] = true
	}
	if !ports[3000] || !ports[8080] || !ports[9000] {
		t.Errorf("container ports %v", p.main.Ports)
	}
	for _, tc := range []struct{ text, want string }{
		{`{"image":"i","forwardPorts":[0]}`, "devcontainer.forwardPorts[0]: must be between 1 and 65535, got 0"},
		{`{"image":"i","forwardPorts":[1, "x:y"]}`, `devcontainer.forwardPorts[1]: must be a port number or "host:port", got "x:y"`},
		{`{"image":"i","forwardPorts":[1, 2, 60022]}`, "devcontainer.forwardPorts[2]: port 60022 is Hangar's own"},
		{`{"image":"i","forwardPorts":[80],"portsAttributes":{"80":{"protocol":"udp"}}}`, `devcontainer.portsAttributes["80"].protocol: must be http or https, got "udp"`},
		{`{"image":"i","forwardPorts":[80],"otherPortsAttributes":{"onAutoForward":"sometimes"}}`, `devcontainer.otherPortsAttributes.onAutoForward: must be`},
	} {
		if got := refused(t, tc.text); !hasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestEnv(t *testing.T) {
	p := generate(t, `{"image": "i",
		"containerEnv": {"GOPATH": "/go", "BIN": "${containerEnv:GOPATH}/bin", "WS": "${containerWorkspaceFolder}", "HOMEX": "${containerEnv:HOME}"},
		"remoteEnv": {"PATH": "${containerEnv:PATH}:${containerEnv:GOPATH}/bin", "LOCAL": "${localEnv:USER:nobody}", "GONE": null},
		"runArgs": ["-e", "FROM_RUN=1", "--env=OTHER=two"]}`)
	for name, want := range map[string]string{"GOPATH": "/go", "BIN": "$(GOPATH)/bin", "WS": "/workspaces/demo", "HOMEX": "", "FROM_RUN": "1", "OTHER": "two"} {
		if got, ok := p.env(name); !ok || got != want {
			t.Errorf("container env %s = %q (%v), want %q", name, got, ok, want)
		}
	}
	if _, ok := p.env("PATH"); ok {
		t.Error("remoteEnv's PATH is in the container's own environment")
	}
	want := []workspace.EnvVar{{Name: "LOCAL", Value: "nobody"}, {Name: "PATH", Value: "${PATH}:${GOPATH}/bin"}}
	if !slices.Equal(p.remoteEnv, want) {
		t.Errorf("remote env %+v, want %+v", p.remoteEnv, want)
	}
	for _, w := range []string{`remoteEnv.LOCAL uses ${localEnv:USER}: there is no local machine, so it is "nobody"`, "containerEnv.HOMEX uses ${containerEnv:HOME}", "remoteEnv.GONE is null"} {
		if !hasPrefix(p.warnings, w) {
			t.Errorf("warnings %q, want %q", p.warnings, w)
		}
	}
	if got := refused(t, `{"image":"i","containerEnv":{"HANGAR_X":"1","1A":"2"}}`); !hasPrefix(got, `devcontainer.containerEnv.HANGAR_X: "HANGAR_X" starts with HANGAR`) || !hasPrefix(got, `devcontainer.containerEnv["1A"]: must be letters`) {
		t.Errorf("got %q", got)
	}
}

func TestUser(t *testing.T) {
	for _, tc := range []struct {
		text    string
		uid     int64
		warning string
	}{
		{`{"image":"i","remoteUser":"vscode"}`, 1000, ""},
		{`{"image":"i","containerUser":"node"}`, 1000, ""},
		{`{"image":"i","remoteUser":"1234:1234"}`, 1234, ""},
		{`{"image":"i","remoteUser":"dev"}`, 5001, `remoteUser "dev" is not a user whose uid Hangar knows`},
		{`{"image":"i","remoteUser":"vscode","containerUser":"1001"}`, 1000, `remoteUser "vscode" and containerUser "1001" differ`},
		{`{"image":"i"}`, 5001, ""},
		{`{"image":"mcr.microsoft.com/devcontainers/base:ubuntu"}`, 1000, ""},
	} {
		p := generate(t, tc.text)
		if p.security.RunAsUser == nil || *p.security.RunAsUser != tc.uid || p.security.RunAsNonRoot == nil || !*p.security.RunAsNonRoot {
			t.Errorf("%s: pod security %+v, want uid %d, non-root", tc.text, p.security, tc.uid)
		}
		if (tc.warning == "") != (len(p.warnings) == 0) || tc.warning != "" && !hasPrefix(p.warnings, tc.warning) {
			t.Errorf("%s: warnings %q, want %q", tc.text, p.warnings, tc.warning)
		}
	}
	for _, text := range []string{`{"image":"i","remoteUser":"root"}`, `{"image":"i","containerUser":"0"}`, `{"image":"i","containerUser":"root:root"}`} {
		got := refused(t, text)
		if !hasSubstring(got, "workspaces never run as root") || !(hasPrefix(got, "devcontainer.remoteUser:") || hasPrefix(got, "devcontainer.containerUser:")) {
			t.Errorf("%s: got %q", text, got)
		}
	}
}

func TestWorkspaceFolderAndMount(t *testing.T) {
	p := generate(t, `{"image":"i","workspaceMount":"source=${localWorkspaceFolder},target=/src,type=bind,consistency=cached","workspaceFolder":"/src/${localWorkspaceFolderBasename}",
		"postStartCommand":"pwd"}`)
	if v, _ := p.env("PROJECTS_ROOT"); v != "/src" {
		t.Errorf("PROJECTS_ROOT %q, want the workspaceMount's target /src", v)
	}
	if len(p.postStart) != 1 || !strings.Contains(p.postStart[0].CommandLine, `cd "/src/demo"`) {
		t.Errorf("postStart %+v, want it run in the workspaceFolder /src/demo", p.postStart)
	}
	p = generate(t, `{"image":"i","workspaceMount":"source=${localWorkspaceFolder},target=/src,type=bind","postStartCommand":"pwd"}`)
	if len(p.postStart) != 1 || !strings.Contains(p.postStart[0].CommandLine, `cd "/src"`) {
		t.Errorf("postStart %+v, want it run in the workspaceMount's target without a workspaceFolder", p.postStart)
	}
	p = generate(t, `{"image":"i"}`)
	if v, _ := p.env("PROJECTS_ROOT"); v != "/workspaces/demo" {
		t.Errorf("default workspace folder %q, want /workspaces/demo", v)
	}
	for _, tc := range []struct{ text, want string }{
		{`{"image":"i","workspaceMount":"source=/etc,target=/src,type=bind"}`, `devcontainer.workspaceMount: binds "/etc" of the host: bind mounts are refused`},
		{`{"image":"i","workspaceMount":"source=x,target=/src","workspaceFolder":"/elsewhere"}`, `devcontainer.workspaceFolder: "/elsewhere" is not inside the workspaceMount's target "/src"`},
		{`{"image":"i","workspaceFolder":"relative"}`, `devcontainer.workspaceFolder: must be an absolute path`},
	} {
		if got := refused(t, tc.text); !hasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestMounts(t *testing.T) {
	p := generate(t, `{"image":"i","mounts":["source=gocache,target=/home/vscode/.cache,type=volume", {"source":"npm","target":"/npm","type":"volume"}]}`)
	mounts := map[string]string{}
	for _, m := range p.main.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts["/home/vscode/.cache"] != "gocache" || mounts["/npm"] != "npm" {
		t.Errorf("mounts %v", mounts)
	}
	claims := 0
	for _, v := range p.volumes {
		if v.PersistentVolumeClaim != nil && (v.Name == "gocache" || v.Name == "npm") {
			claims++
		}
	}
	if claims != 2 {
		t.Errorf("volumes %+v, want a claim for gocache and npm", p.volumes)
	}
	got := refused(t, `{"image":"i","mounts":["source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind", "type=volume,source=x"]}`)
	if !hasPrefix(got, `devcontainer.mounts[0]: binds "/var/run/docker.sock" of the host: bind mounts are refused`) || !hasPrefix(got, `devcontainer.mounts[1]: needs an absolute target`) {
		t.Errorf("got %q", got)
	}
}

func TestLifecycleCommands(t *testing.T) {
	p := generate(t, `{"image":"i",
		"onCreateCommand": "echo on-create",
		"postCreateCommand": ["npm", "install", "it's"],
		"postStartCommand": {"server": "echo server", "watch": ["echo", "watch"]},
		"postAttachCommand": "echo attach ${containerEnv:HOME}"}`)
	type cmd struct {
		id   string
		once bool
	}
	var got []cmd
	for _, c := range p.postStart {
		got = append(got, cmd{c.ID, c.OncePerWorkspace})
	}
	want := []cmd{{"on-create", true}, {"post-create", true}, {"post-start", false}, {"post-attach", false}}
	if !slices.Equal(got, want) {
		t.Fatalf("postStart commands %+v, want %+v", got, want)
	}
	if !strings.Contains(p.postStart[1].CommandLine, `npm install 'it'\''s'`) {
		t.Errorf("array form: %q", p.postStart[1].CommandLine)
	}
	if cl := p.postStart[2].CommandLine; !strings.Contains(cl, "echo server\n) &") || !strings.Contains(cl, "echo watch\n) &") || !strings.Contains(cl, "wait $p1") {
		t.Errorf("object form is not run in parallel: %q", cl)
	}
	if cl := p.postStart[3].CommandLine; !strings.Contains(cl, "echo attach ${HOME}") || !strings.Contains(cl, "nohup /bin/sh -c") || !strings.HasSuffix(cl, "/workspaces/demo/.hangar/post-attach.log 2>&1 < /dev/null &") {
		t.Errorf("${containerEnv:HOME} is not left to the shell: %q", p.postStart[3].CommandLine)
	}
	if !hasPrefix(p.warnings, "postAttachCommand runs at each start of the workspace") {
		t.Errorf("warnings %q", p.warnings)
	}
	if got := refused(t, `{"image":"i","postCreateCommand":{"a":3}}`); !hasPrefix(got, `devcontainer.postCreateCommand.a: must be a string or a list of strings`) {
		t.Errorf("got %q", got)
	}
	if got := refused(t, `{"image":"i","postStartCommand":3}`); !hasPrefix(got, `devcontainer.postStartCommand: must be a string`) {
		t.Errorf("got %q", got)
	}
}

func TestHostRequirements(t *testing.T) {
	p := generate(t, `{"image":"i","hostRequirements":{"cpus":2,"memory":"4gb","storage":"32gb","gpu":"optional"}}`)
	// The main container's own requests (the web editor it runs adds its own on top).
	if !strings.Contains(p.text, `"cpuRequest": "2"`) || !strings.Contains(p.text, `"memoryRequest": "4Gi"`) {
		t.Errorf("devfile %s, want cpuRequest 2 and memoryRequest 4Gi", p.text)
	}
	if q := p.main.Resources.Requests[corev1.ResourceCPU]; q.MilliValue() < 2000 {
		t.Errorf("cpu request %s", q.String())
	}
	if !hasPrefix(p.warnings, "hostRequirements.gpu is optional") {
		t.Errorf("warnings %q", p.warnings)
	}
	got := refused(t, `{"image":"i","hostRequirements":{"cpus":16,"memory":"64gb","storage":"1tb","gpu":true}}`)
	for _, w := range []string{
		"devcontainer.hostRequirements.cpus: asks for 16 CPUs, more than this agent allows a workspace (4)",
		"devcontainer.hostRequirements.memory: asks for 64Gi of memory, more than this agent allows a workspace (8Gi)",
		"devcontainer.hostRequirements.storage: asks for 1Ti of storage, more than this agent allows a workspace (50Gi)",
		"devcontainer.hostRequirements.gpu: asks for a GPU",
	} {
		if !hasPrefix(got, w) {
			t.Errorf("got %q, want %q", got, w)
		}
	}
	if got := refused(t, `{"image":"i","hostRequirements":{"memory":"lots"}}`); !hasPrefix(got, `devcontainer.hostRequirements.memory: must be a size such as 8gb`) {
		t.Errorf("got %q", got)
	}
}

// TestRefused: what cannot run in an unprivileged pod, or needs a build, is refused naming the
// field, every one at once.
func TestRefused(t *testing.T) {
	got := refused(t, `{
		"build": {"dockerfile": "Dockerfile"},
		"features": {"ghcr.io/devcontainers/features/node:1": {}, "ghcr.io/devcontainers/features/docker-in-docker:2": {}},
		"dockerComposeFile": "compose.yml", "service": "app",
		"privileged": true, "capAdd": ["SYS_PTRACE"], "securityOpt": ["seccomp=unconfined"],
		"initializeCommand": "echo local",
		"runArgs": ["--init", "--cap-add=NET_ADMIN", "--device", "/dev/fuse", "--hostname", "dev", "--shm-size=1g", "--weird"]
	}`)
	want := []string{
		"devcontainer.build: builds the image from the Dockerfile Dockerfile and its build context, files of the repository: Hangar reads them only when the workspace is created from its repository (hangar create --repo URL); create it from the repository, or use `image`",
		`devcontainer.features["ghcr.io/devcontainers/features/docker-in-docker:2"]: docker-in-docker runs Docker, and Docker cannot run in a Hangar workspace, which is unprivileged`,
		"devcontainer.dockerComposeFile: names docker-compose files of the repository: Hangar reads them only when the workspace is created from its repository",
		"devcontainer.privileged: is refused: workspaces run unprivileged",
		"devcontainer.capAdd: is refused",
		"devcontainer.securityOpt: is refused",
		"devcontainer.initializeCommand: is refused: it runs on the user's own machine",
		"devcontainer.runArgs[1]: --cap-add is refused",
		"devcontainer.runArgs[2]: --device is refused",
		"devcontainer.runArgs[7]: --weird is refused: Hangar honours -e/--env, --init, --label, --hostname and --shm-size",
	}
	for _, w := range want {
		if !hasPrefix(got, w) {
			t.Errorf("missing %q", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	// Empty ones are no request at all.
	generate(t, `{"image":"i","features":{},"capAdd":[],"privileged":false}`)
}

func TestUnknownFieldsAndCustomizations(t *testing.T) {
	p := generate(t, `{"image":"i","shutdownAction":"none","somethingNew":1,"updateRemoteUserUID":true,
		"customizations":{"vscode":{"extensions":["golang.go","ms-python.python"],"settings":{"a":1}},"codespaces":{}}}`)
	for _, w := range []string{
		"customizations.codespaces is ignored",
		"customizations.vscode.extensions (golang.go, ms-python.python) are not installed",
		"shutdownAction is ignored",
		"somethingNew is not supported by Hangar and is ignored",
		"updateRemoteUserUID is ignored",
	} {
		if !hasPrefix(p.warnings, w) {
			t.Errorf("warnings %q, want %q", p.warnings, w)
		}
	}
}

// TestVSCodeSettings: customizations.vscode.settings become the web editor's user settings,
// written at the first start unless the user has some already.
func TestVSCodeSettings(t *testing.T) {
	p := generate(t, `{"image":"i","customizations":{"vscode":{"settings":{"editor.tabSize":3,"files.exclude":{"**/.git":true},"quote":"it's"}}},"postCreateCommand":"true"}`)
	if len(p.postStart) != 2 || p.postStart[0].ID != "vscode-settings" || !p.postStart[0].OncePerWorkspace {
		t.Fatalf("postStart %+v, want vscode-settings first, once per workspace", p.postStart)
	}
	if hasSubstring(p.warnings, "settings") {
		t.Errorf("warnings %q mention the settings, which are applied", p.warnings)
	}
	// Run it as the helper would, with the workspace folder in a temporary directory.
	dir := t.TempDir()
	line := strings.ReplaceAll(p.postStart[0].CommandLine, "/workspaces/demo", dir)
	file := filepath.Join(dir, ".hangar", "code-server", "data", "User", "settings.json")
	if line == p.postStart[0].CommandLine || !strings.Contains(line, file) {
		t.Fatalf("the command does not write %s: %q", devfile.EditorSettingsFile("/workspaces/demo"), p.postStart[0].CommandLine)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-c", line).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got map[string]any
	b, _ := os.ReadFile(file)
	if err := json.Unmarshal(b, &got); err != nil || got["editor.tabSize"] != 3.0 || got["quote"] != "it's" {
		t.Fatalf("settings.json %s (%v)", b, err)
	}
	// The user's own settings are kept.
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-c", line).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile(file); string(b) != "{}" {
		t.Errorf("the user's settings were overwritten: %s", b)
	}
}

func TestVariables(t *testing.T) {
	p := generate(t, `{"image":"i","workspaceFolder":"/w/${localWorkspaceFolderBasename}",
		"containerEnv":{"A":"${containerWorkspaceFolderBasename}","B":"${devcontainerId}","C":"${localWorkspaceFolder}","D":"${containerWorkspaceFolder}","E":"${unknown}"}}`)
	for name, want := range map[string]string{"A": "demo", "B": testOptions().ID, "C": "/workspaces/demo", "D": "/w/demo", "E": "${unknown}"} {
		if got, _ := p.env(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// From a repository, the repository is the workspace folder, as in VS Code: the data volume at
// its parent, the repository cloned into it under its own name; a workspaceMount elsewhere must
// still end in that name.
func TestFromRepository(t *testing.T) {
	o := testOptions()
	o.FromRepository = true
	for _, tc := range []struct{ in, mapping, wantErr string }{
		{`{"image": "x", "postCreateCommand": "make"}`, "/workspaces", ""},
		{`{"image": "x", "workspaceMount": "source=${localWorkspaceFolder},target=/src/demo,type=bind", "workspaceFolder": "/src/demo"}`, "/src", ""},
		{`{"image": "x", "workspaceMount": "source=${localWorkspaceFolder},target=/src,type=bind", "workspaceFolder": "/src"}`, "", "devcontainer.workspaceMount: puts the repository at \"/src\""},
	} {
		r, err := Translate([]byte(tc.in), o)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !strings.Contains(string(r.Devfile), `"sourceMapping": "`+tc.mapping+`"`) {
			t.Errorf("%s: the devfile mounts the data at %s? %s", tc.in, tc.mapping, r.Devfile)
		}
	}
}

// TestFeatures: a devcontainer.json's features become the image build's Spec, in the order given,
// with their options in each form the spec allows; the workspace runs the build's image.
func TestFeatures(t *testing.T) {
	g := generate(t, `{
		"image": "mcr.microsoft.com/devcontainers/base:ubuntu",
		"features": {
			"ghcr.io/devcontainers/features/python:1": {"version": "3.12", "installTools": true, "optimize": false},
			"ghcr.io/devcontainers/features/node:1": "20",
			"ghcr.io/devcontainers/features/github-cli:1": {},
			"ghcr.io/devcontainers-contrib/features/poetry@sha256:`+strings.Repeat("a", 64)+`": true,
			"registry.test:5000/team/features/tool:2": {"level": 3}
		},
		"overrideFeatureInstallOrder": ["ghcr.io/devcontainers/features/node", "ghcr.io/devcontainers/features/python:1"],
		"remoteUser": "vscode", "containerUser": "vscode"
	}`)
	want := imagebuild.Spec{
		Base: "mcr.microsoft.com/devcontainers/base:ubuntu",
		Features: []imagebuild.Feature{
			{Ref: "ghcr.io/devcontainers/features/python:1", Options: map[string]any{"version": "3.12", "installTools": true, "optimize": false}},
			{Ref: "ghcr.io/devcontainers/features/node:1", Options: map[string]any{"version": "20"}},
			{Ref: "ghcr.io/devcontainers/features/github-cli:1"},
			{Ref: "ghcr.io/devcontainers-contrib/features/poetry@sha256:" + strings.Repeat("a", 64)},
			{Ref: "registry.test:5000/team/features/tool:2", Options: map[string]any{"level": "3"}},
		},
		FeatureOrder:  []string{"ghcr.io/devcontainers/features/node", "ghcr.io/devcontainers/features/python:1"},
		RemoteUser:    "vscode",
		ContainerUser: "vscode",
	}
	if g.build == nil {
		t.Fatal("no image build")
	}
	gotJSON, _ := json.Marshal(g.build)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("build\n got %s\nwant %s", gotJSON, wantJSON)
	}
	// The devfile carries the same build, which the generator runs.
	if spec, hash := g.devfile.ImageBuild(); spec == nil || hash != want.Hash() {
		t.Errorf("the devfile's build hash is %q, want %s", hash, want.Hash())
	}
	if ref := imagebuild.Ref(testRegistry, want.Hash()); g.main.Image != ref {
		t.Errorf("main image %q, want the build's %q", g.main.Image, ref)
	}
	if len(g.inits) < 4 || g.inits[1].Name != devfile.ImagePrepareContainerName || g.inits[2].Name != devfile.ImageBuildContainerName || g.inits[2].Image != want.Base || g.inits[3].Name != devfile.ImagePushContainerName {
		t.Errorf("init containers %v: want hangar-tools, then the build's prepare, the build in the base image, and its push", g.inits)
	}
	if w := g.warnings; len(w) == 0 || !strings.Contains(w[len(w)-1], "build hash "+want.Hash()) {
		t.Errorf("warnings %q do not give the build hash", w)
	}

	// No features, no build: the image runs as it is.
	if g := generate(t, `{"image":"mcr.microsoft.com/devcontainers/base:ubuntu","features":{}}`); g.build != nil || g.main.Image != "mcr.microsoft.com/devcontainers/base:ubuntu" {
		t.Errorf("empty features: build %v, image %s", g.build, g.main.Image)
	}
}

// TestFeaturesRefused: features that cannot be built are refused naming the feature.
func TestFeaturesRefused(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"docker-in-docker", `{"image":"debian:12","features":{"ghcr.io/devcontainers/features/docker-in-docker:2":{}}}`,
			`devcontainer.features["ghcr.io/devcontainers/features/docker-in-docker:2"]: docker-in-docker runs Docker, and Docker cannot run in a Hangar workspace, which is unprivileged`},
		{"docker-outside-of-docker", `{"image":"debian:12","features":{"ghcr.io/devcontainers/features/docker-outside-of-docker:1":{}}}`,
			`devcontainer.features["ghcr.io/devcontainers/features/docker-outside-of-docker:1"]: docker-outside-of-docker runs Docker`},
		{"docker-from-docker", `{"image":"debian:12","features":{"ghcr.io/devcontainers/features/docker-from-docker@sha256:` + strings.Repeat("b", 64) + `":{}}}`,
			`devcontainer.features["ghcr.io/devcontainers/features/docker-from-docker@sha256:` + strings.Repeat("b", 64) + `"]: docker-from-docker runs Docker`},
		{"local folder", `{"image":"debian:12","features":{"./local-features/x":{}}}`,
			`devcontainer.features["./local-features/x"]: "./local-features/x" is not an OCI reference`},
		{"tarball URL", `{"image":"debian:12","features":{"https://example.com/f.tgz":{}}}`,
			`devcontainer.features["https://example.com/f.tgz"]: "https://example.com/f.tgz" is not an OCI reference`},
		{"option list", `{"image":"debian:12","features":{"ghcr.io/devcontainers/features/node:1":{"v":[1]}}}`,
			`devcontainer.features["ghcr.io/devcontainers/features/node:1"]: must be an object of options`},
		{"false", `{"image":"debian:12","features":{"ghcr.io/devcontainers/features/node:1":false}}`,
			`devcontainer.features["ghcr.io/devcontainers/features/node:1"]: must be an object of options`},
		{"not an object", `{"image":"debian:12","features":["node"]}`, `devcontainer.features: must be an object`},
		{"order names no feature", `{"image":"debian:12","features":{"ghcr.io/devcontainers/features/node:1":{}},"overrideFeatureInstallOrder":["ghcr.io/devcontainers/features/go"]}`,
			`devcontainer.overrideFeatureInstallOrder[0]: "ghcr.io/devcontainers/features/go" is not one of the features`},
		{"order without features", `{"image":"debian:12","overrideFeatureInstallOrder":["x"]}`, `devcontainer.overrideFeatureInstallOrder: orders features, but the definition has none`},
		{"image with a variable", `{"image":"mcr.microsoft.com/devcontainers/base:${templateOption:v}","features":{"ghcr.io/devcontainers/features/node:1":{}}}`,
			`devcontainer.image: must be a full image reference for features to be installed on`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refused(t, tc.text)
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("got %q, want one problem %q", got, tc.want)
			}
		})
	}
}
