package devcontainer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// composeOptions are testOptions for a devcontainer.json in .devcontainer/ of a repository
// holding files.
func composeOptions(files map[string]string) Options {
	o := testOptions()
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	o.Repo, o.Dir, o.FromRepository = fsys, ".devcontainer", true
	return o
}

// composePod translates a compose devcontainer and returns the pod the workspace runs.
func composePod(t *testing.T, dc string, files map[string]string) (corev1.PodSpec, []string) {
	t.Helper()
	r, err := Translate([]byte(dc), composeOptions(files))
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	d, err := devfile.Parse(r.Devfile)
	if err != nil {
		t.Fatalf("Parse of the translation: %v\n%s", err, r.Devfile)
	}
	out, err := devfile.Generate(d, devfile.Params{WorkspaceID: testOptions().ID, WorkspaceName: "demo", Owner: "alice", AgentID: "1",
		Namespace: "hangar-demo", DesiredState: workspace.Running, Agent: workspace.AgentConfig{}.WithDefaults()})
	if err != nil {
		t.Fatalf("Generate: %v\n%s", err, r.Devfile)
	}
	for doc := range strings.SplitSeq(out, "---\n") {
		if strings.Contains(doc, "kind: Deployment") {
			var dep appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &dep); err != nil {
				t.Fatal(err)
			}
			return dep.Spec.Template.Spec, d.Warnings()
		}
	}
	t.Fatalf("no Deployment in\n%s", out)
	return corev1.PodSpec{}, nil
}

func refusedCompose(t *testing.T, dc string, files map[string]string) []string {
	t.Helper()
	_, err := Translate([]byte(dc), composeOptions(files))
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

func container(spec corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

func mountAt(c *corev1.Container, p string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == p {
			return m.Name
		}
	}
	return ""
}

func envOf(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// The devcontainers/templates shape: devcontainer.json names the compose file and the primary
// service, which binds the repository's parent at /workspaces and sleeps; a postgres sidecar
// with a named volume, environment (map and list, env_file) and a published port.
const templateDC = `{
	"name": "app",
	"dockerComposeFile": "docker-compose.yml",
	"service": "app",
	"workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
	"forwardPorts": [3000, "db:5432"],
	"containerEnv": {"FROM_DC": "dc", "SHARED": "dc-wins"},
	"shutdownAction": "stopCompose"
}`

var templateFiles = map[string]string{
	".devcontainer/docker-compose.yml": `
x-env: &env
  TZ: UTC
services:
  app:
    image: mcr.microsoft.com/devcontainers/go:1
    volumes:
      - ../..:/workspaces:cached
      - gocache:/home/vscode/.cache
    command: sleep infinity
    environment:
      <<: *env
      SHARED: compose
      DB_URL: postgres://postgres@db:5432/app
  db:
    image: postgres:16
    restart: unless-stopped
    user: "999:999"
    env_file: db.env
    environment: ["POSTGRES_DB=app", "PRICE=$$5"]
    volumes: [pgdata:/var/lib/postgresql/data, gocache:/cache]
    ports: ["5433:5432"]
    expose: [9187]
    command: ["postgres", "-c", "log_statement=all"]
    mem_limit: 512m
    cpus: "0.5"
    depends_on: [app]
volumes:
  pgdata:
  gocache: {}
`,
	".devcontainer/db.env": "# the database\nPOSTGRES_PASSWORD='secret'\nexport POSTGRES_USER=postgres\n",
}

func TestComposePrimaryAndSidecar(t *testing.T) {
	spec, warnings := composePod(t, templateDC, templateFiles)
	main, db := container(spec, "devcontainer"), container(spec, "db")
	if main == nil || db == nil {
		t.Fatalf("containers %v, want devcontainer and db", spec.Containers)
	}
	if main.Image != "mcr.microsoft.com/devcontainers/go:1" || db.Image != "postgres:16" {
		t.Errorf("images %q %q", main.Image, db.Image)
	}
	// The primary: the helper is its command (compose's sleep is not run), its environment is
	// compose's under containerEnv's, the repository is cloned under /workspaces.
	if len(main.Command) < 2 || main.Command[1] != "workspace-helper" || slices.Contains(main.Command, "sleep") {
		t.Errorf("main command %q, want the helper alone", main.Command)
	}
	for k, want := range map[string]string{"TZ": "UTC", "SHARED": "dc-wins", "FROM_DC": "dc", "DB_URL": "postgres://postgres@db:5432/app", "PROJECTS_ROOT": "/workspaces"} {
		if got, _ := envOf(main, k); got != want {
			t.Errorf("main env %s = %q, want %q", k, got, want)
		}
	}
	if mountAt(main, "/workspaces") == "" {
		t.Errorf("main mounts %v: no data volume at /workspaces", main.VolumeMounts)
	}
	if *spec.SecurityContext.RunAsUser != 1000 {
		t.Errorf("pod uid %d, want vscode's 1000", *spec.SecurityContext.RunAsUser)
	}
	// The sidecar: its command as args to the image's entrypoint, its environment (env_file under
	// environment; $$ is a literal $, kept from Kubernetes' $(VAR) expansion), its user, limits,
	// no repository.
	if db.Command != nil || !slices.Equal(db.Args, []string{"postgres", "-c", "log_statement=all"}) {
		t.Errorf("db command %q args %q", db.Command, db.Args)
	}
	for k, want := range map[string]string{"POSTGRES_DB": "app", "POSTGRES_PASSWORD": "secret", "POSTGRES_USER": "postgres", "PRICE": "$$5"} {
		if got, _ := envOf(db, k); got != want {
			t.Errorf("db env %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := envOf(db, "PROJECTS_ROOT"); ok || mountAt(db, "/workspaces") != "" {
		t.Errorf("db mounts the repository: %v", db.VolumeMounts)
	}
	if db.SecurityContext.RunAsUser == nil || *db.SecurityContext.RunAsUser != 999 || *db.SecurityContext.RunAsGroup != 999 {
		t.Errorf("db security %+v, want uid and gid 999", db.SecurityContext)
	}
	if db.Resources.Limits.Memory().String() != "512Mi" || db.Resources.Limits.Cpu().String() != "500m" {
		t.Errorf("db limits %v", db.Resources.Limits)
	}
	// The named volume both mount is one volume of the workspace.
	if v := mountAt(db, "/cache"); v == "" || v != mountAt(main, "/home/vscode/.cache") {
		t.Errorf("gocache: db mounts %q, main %q; want one volume", v, mountAt(main, "/home/vscode/.cache"))
	}
	if mountAt(db, "/var/lib/postgresql/data") == "" {
		t.Errorf("db mounts %v: no pgdata", db.VolumeMounts)
	}
	// Ports: 5432 once (forwardPorts' db:5432), 3000 on main, 9187 in the pod only.
	ports := map[int32]string{}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if _, dup := ports[p.ContainerPort]; dup {
				t.Errorf("port %d twice", p.ContainerPort)
			}
			ports[p.ContainerPort] = c.Name
		}
	}
	if ports[3000] != "devcontainer" || ports[5432] != "devcontainer" || ports[9187] != "db" {
		t.Errorf("ports %v", ports)
	}
	// Each service's name is 127.0.0.1.
	if len(spec.HostAliases) != 1 || spec.HostAliases[0].IP != "127.0.0.1" || !slices.Equal(spec.HostAliases[0].Hostnames, []string{"app", "db"}) {
		t.Errorf("hostAliases %+v", spec.HostAliases)
	}
	for _, w := range []string{"shutdownAction is ignored", "services.db.restart is ignored", "services.db.depends_on is ignored", "(app, db) is 127.0.0.1"} {
		if !hasSubstring(warnings, w) {
			t.Errorf("no warning %q in %q", w, warnings)
		}
	}
}

// Two files: the second overrides the first as docker compose merges them (keys replaced,
// environment by name, lists appended, volumes by target, command replaced, !reset); runServices
// picks what runs; relative paths are the first file's.
func TestComposeOverrides(t *testing.T) {
	files := map[string]string{
		"docker-compose.yml": `
services:
  web:
    image: nginx:1
    environment: {A: "1", B: "1"}
    ports: ["8080:80"]
    command: ["nginx", "-g", "daemon off;"]
  dev:
    image: busybox:1
    volumes: ["data:/data"]
  worker:
    image: busybox:1
  tools:
    image: busybox:1
    profiles: [debug]
volumes: {data: {}}
`,
		".devcontainer/docker-compose.extend.yml": `
services:
  dev:
    volumes: [".:/workspaces/demo:cached", "other:/data"]
    user: "1001"
  web:
    environment: ["B=2", "C=3"]
    ports: ["8443:443"]
    command: nginx-debug -g 'daemon off;'
    mem_limit: !reset null
volumes: {other: {}}
`,
	}
	dc := `{"dockerComposeFile": ["../docker-compose.yml", "docker-compose.extend.yml"], "service": "dev", "runServices": ["web"], "workspaceFolder": "/workspaces/demo"}`
	spec, _ := composePod(t, dc, files)
	names := []string{}
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"devcontainer", "web", devfile.EditorContainerName}) && !slices.Equal(names, []string{"devcontainer", "web"}) {
		t.Errorf("containers %q: want devcontainer and web (runServices), not worker or tools", names)
	}
	web, dev := container(spec, "web"), container(spec, "devcontainer")
	for k, want := range map[string]string{"A": "1", "B": "2", "C": "3"} {
		if got, _ := envOf(web, k); got != want {
			t.Errorf("web env %s = %q, want %q", k, got, want)
		}
	}
	if !slices.Equal(web.Args, []string{"nginx-debug", "-g", "daemon off;"}) {
		t.Errorf("web args %q: want the override's command, split as a shell splits it", web.Args)
	}
	var ports []int32
	for _, p := range web.Ports {
		ports = append(ports, p.ContainerPort)
	}
	if !slices.Equal(ports, []int32{80, 443}) {
		t.Errorf("web ports %v, want 80 and 443 (appended)", ports)
	}
	if v := mountAt(dev, "/data"); !strings.HasPrefix(v, "other") {
		t.Errorf("dev /data is %q, want the override's volume other", v)
	}
	if *spec.SecurityContext.RunAsUser != 1001 {
		t.Errorf("pod uid %d, want the primary's user 1001", *spec.SecurityContext.RunAsUser)
	}
	if mountAt(dev, "/workspaces") == "" {
		t.Errorf("dev mounts %v: the repository (.. of the first file's folder is its parent? no: . is the repository) must be under /workspaces", dev.VolumeMounts)
	}
}

// Each refusal names its field.
func TestComposeRefusals(t *testing.T) {
	const dc = `{"dockerComposeFile": "compose.yml", "service": "app"}`
	cases := []struct {
		name, compose string
		want          []string
	}{
		{"privileged and friends", `
services:
  app: {image: i}
  db:
    image: postgres
    privileged: true
    cap_add: [NET_ADMIN]
    security_opt: [seccomp:unconfined]
    network_mode: host
    pid: host
    ipc: host
    devices: ["/dev/fuse"]
    sysctls: {net.core.somaxconn: "1024"}
`, []string{
			composeField + ".services.db.privileged: is refused",
			composeField + ".services.db.cap_add: is refused",
			composeField + ".services.db.security_opt: is refused",
			composeField + ".services.db.network_mode: is refused",
			composeField + ".services.db.pid: is refused",
			composeField + ".services.db.ipc: is refused",
			composeField + ".services.db.devices: is refused",
			composeField + ".services.db.sysctls: is refused",
		}},
		{"build of a sidecar", "services:\n  app: {image: i}\n  db: {build: ., image: db}\n", []string{composeField + ".services.db.build: is refused: an image build is only for the main container"}},
		{"build of the primary without its Dockerfile", "services:\n  app: {build: {context: .}}\n", []string{composeField + ".services.app.build.dockerfile: the repository has no .devcontainer/Dockerfile"}},
		{"build of the primary with an option Hangar does not honour", "services:\n  app: {build: {context: ., network: host}}\n", []string{composeField + ".services.app.build.network: is not supported in a Hangar image build"}},
		{"host bind", "services:\n  app:\n    image: i\n    volumes: [/var/run/docker.sock:/var/run/docker.sock]\n", []string{composeField + `.services.app.volumes[0]: binds "/var/run/docker.sock" of the host`}},
		{"part of the repository", "services:\n  app: {image: i}\n  web:\n    image: nginx\n    volumes: [./nginx.conf:/etc/nginx/nginx.conf]\n", []string{composeField + `.services.web.volumes[0]: binds "./nginx.conf", a part of the repository`}},
		{"outside the repository", "services:\n  app:\n    image: i\n    volumes: [../../..:/src]\n", []string{composeField + `.services.app.volumes[0]: binds "../../..", outside the repository`}},
		{"root", "services:\n  app: {image: i}\n  db: {image: postgres, user: root}\n", []string{composeField + `.services.db.user: is "root": workspaces never run as root`}},
		{"a port twice", "services:\n  app: {image: i, expose: [\"80\"]}\n  web: {image: nginx, ports: [\"8080:80\"]}\n", []string{composeField + ".services.web.ports[0]: port 80 is declared by the services app and web"}},
		{"Hangar's port", "services:\n  app: {image: i}\n  web: {image: nginx, ports: [\"60022\"]}\n", []string{composeField + ".services.web.ports[0]: port 60022 is Hangar's own"}},
		{"extends from another file", "services:\n  app: {image: i, extends: {file: base.yml, service: x}}\n", []string{composeField + `.services.app.extends.file: is refused: Hangar merges a service extending another of the same compose files, not of "base.yml"`}},
		{"extends in a cycle", "services:\n  app: {image: i, extends: b}\n  b: {image: j, extends: {service: app}}\n", []string{composeField + `.services.app.extends: extends "b", which extends it back`}},
		{"undeclared volume", "services:\n  app: {image: i, volumes: [\"cache:/c\"]}\n", []string{composeField + `.services.app.volumes[0]: names the volume "cache", which the compose files do not declare`}},
		{"over the caps", "services:\n  app: {image: i}\n  db: {image: postgres, mem_limit: 64g}\n", []string{composeField + ".services.db.mem_limit: asks for 64Gi memory, more than this agent allows"}},
		{"repository not under its name", "services:\n  app:\n    image: i\n    volumes: [\"..:/workspace:cached\"]\n", []string{composeField + `.services.app.volumes[0]: puts the repository at "/workspace": Hangar clones it into a folder named after it (demo)`}},
		{"no such service", "services:\n  web: {image: nginx}\n", []string{`devcontainer.service: "app" is not a service of the compose files (they have web)`}},
		{"billion laughs", laughs(), []string{composeField + ": .devcontainer/compose.yml: expands to more than 100000 values"}},
		{"secrets", "services:\n  app: {image: i}\nsecrets: {s: {file: ./s.txt}}\n", []string{composeField + ".secrets: is refused"}},
		{"two documents", "services: {app: {image: i}}\n---\nx: 1\n", []string{composeField + ": .devcontainer/compose.yml: holds more than one YAML document"}},
		{"unterminated quote", "services:\n  app: {image: i}\n  w: {image: j, command: \"sh -c 'x\"}\n", []string{composeField + ".services.w.command: has an unterminated ' quote"}},
		{"required variable", "services:\n  app: {image: \"${IMG:?set IMG}\"}\n", []string{composeField + ": .devcontainer/compose.yml: line 2: ${IMG} is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := refusedCompose(t, dc, map[string]string{".devcontainer/compose.yml": c.compose})
			for _, w := range c.want {
				if !hasPrefix(got, w) {
					t.Errorf("no problem %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// laughs is a "billion laughs" compose file: nine levels of ten aliases each.
func laughs() string {
	var b strings.Builder
	b.WriteString("x-l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		p := "*l" + string(rune('0'+i-1))
		b.WriteString("x-l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(p+", ", 9) + p + "]\n")
	}
	b.WriteString("services:\n  app: {image: i}\n")
	return b.String()
}

// The compose file is read from the repository: without one (a devcontainer.json given on its
// own), or when it is missing or too large, the refusal says so.
func TestComposeNeedsTheRepository(t *testing.T) {
	const dc = `{"dockerComposeFile": "compose.yml", "service": "app"}`
	if got := refused(t, dc); !hasPrefix(got, composeField+": names docker-compose files of the repository: Hangar reads them only when the workspace is created from its repository") {
		t.Errorf("without a repository: %q", got)
	}
	if got := refusedCompose(t, dc, nil); !hasPrefix(got, composeField+": .devcontainer/compose.yml: no such file in the repository") {
		t.Errorf("missing: %q", got)
	}
	big := "services: {app: {image: i}}\n#" + strings.Repeat("x", MaxComposeBytes)
	if got := refusedCompose(t, dc, map[string]string{".devcontainer/compose.yml": big}); !hasPrefix(got, composeField+": .devcontainer/compose.yml: is larger than") {
		t.Errorf("too large: %q", got)
	}
	if got := refusedCompose(t, `{"dockerComposeFile": "../../x.yml", "service": "app"}`, nil); !hasPrefix(got, composeField+`: "../../x.yml" is outside the repository`) {
		t.Errorf("outside: %q", got)
	}
	if got := refusedCompose(t, `{"dockerComposeFile": "compose.yml"}`, nil); !hasPrefix(got, "devcontainer.service: is required") {
		t.Errorf("no service: %q", got)
	}
}

// Interpolation from the project's .env, tmpfs, an entrypoint, and a primary whose command is
// more than a keep-alive (not run, with a warning).
func TestComposeInterpolationAndTmpfs(t *testing.T) {
	files := map[string]string{
		".devcontainer/.env": "PG=15\n",
		".devcontainer/compose.yml": `
services:
  app:
    image: "busybox:${TAG:-1.36}"
    command: npm run dev
  db:
    image: postgres:${PG}
    entrypoint: /entry.sh
    command: ["-c", "x=$${HOME}"]
    tmpfs: [/run/pg]
    environment: {EMPTY: "${MISSING}"}
`,
	}
	spec, warnings := composePod(t, `{"dockerComposeFile": "compose.yml", "service": "app"}`, files)
	main, db := container(spec, "devcontainer"), container(spec, "db")
	if main.Image != "busybox:1.36" || db.Image != "postgres:15" {
		t.Errorf("images %q %q", main.Image, db.Image)
	}
	if !slices.Equal(db.Command, []string{"/entry.sh"}) || !slices.Equal(db.Args, []string{"-c", "x=$${HOME}"}) {
		t.Errorf("db command %q args %q", db.Command, db.Args)
	}
	v := mountAt(db, "/run/pg")
	found := false
	for _, vol := range spec.Volumes {
		if vol.Name == v && vol.EmptyDir != nil {
			found = true
		}
	}
	if !found {
		t.Errorf("tmpfs /run/pg is %q, not an emptyDir: %v", v, spec.Volumes)
	}
	for _, w := range []string{"services.app.command is not run", "uses ${MISSING}, which the project's .env does not set"} {
		if !hasSubstring(warnings, w) {
			t.Errorf("no warning %q in %q", w, warnings)
		}
	}
	if hasSubstring(warnings, "${TAG}") {
		t.Errorf("a warning for ${TAG:-1.36}, which has a default: %q", warnings)
	}
}

// A service extending another of the same file gets its definition, its own fields merged over it.
func TestComposeExtends(t *testing.T) {
	files := map[string]string{".devcontainer/compose.yml": `
services:
  base:
    image: busybox:1
    environment: {A: "1", B: "1"}
  app:
    extends: base
  worker:
    extends: {service: base}
    environment: {B: "2"}
    command: ["sh", "-c", "work"]
`}
	spec, _ := composePod(t, `{"dockerComposeFile": "compose.yml", "service": "app"}`, files)
	if c := container(spec, "devcontainer"); c.Image != "busybox:1" {
		t.Errorf("app image %q, want base's", c.Image)
	}
	w := container(spec, "worker")
	if w == nil {
		t.Fatalf("no worker container in %v", spec.Containers)
	}
	a, _ := envOf(w, "A")
	b, _ := envOf(w, "B")
	if w.Image != "busybox:1" || a != "1" || b != "2" || !slices.Equal(w.Args, []string{"sh", "-c", "work"}) {
		t.Errorf("worker image %q A=%q B=%q args %q", w.Image, a, b, w.Args)
	}
}

func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		`a b  c`:                         {"a", "b", "c"},
		`sh -c 'echo "hi there"'`:        {"sh", "-c", `echo "hi there"`},
		`x "a\"b" c\ d ''`:               {"x", `a"b`, "c d", ""},
		"  ":                             nil,
		`bundle exec rails s -b 0.0.0.0`: {"bundle", "exec", "rails", "s", "-b", "0.0.0.0"},
	} {
		got, err := splitWords(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// BenchmarkComposeBillionLaughs: the refusal of a "billion laughs" compose file costs the
// budget's 100 000 steps, not the 10^10 values the file stands for.
func BenchmarkComposeBillionLaughs(b *testing.B) {
	data := []byte(laughs())
	for b.Loop() {
		if _, _, err := decodeCompose(data, nil); err == nil {
			b.Fatal("accepted")
		}
	}
}

// The primary service's build is the workspace's image build, as a devcontainer's `build` is: its
// context relative to the compose file's folder, its Dockerfile relative to the context, its args.
func TestComposePrimaryBuild(t *testing.T) {
	dc := `{"dockerComposeFile": "compose.yml", "service": "app", "workspaceFolder": "/workspaces/demo"}`
	files := map[string]string{
		".devcontainer/compose.yml":    "services:\n  app:\n    build:\n      context: ..\n      dockerfile: .devcontainer/app.Dockerfile\n      args: [FLAVOUR=mint]\n    volumes: [..:/workspaces/demo]\n  db: {image: db:1}\n",
		".devcontainer/app.Dockerfile": "FROM base:1\nARG FLAVOUR=plain\nRUN echo $FLAVOUR > /etc/flavour\nCOPY tool.sh /usr/local/bin/\n",
		"tool.sh":                      "#!/bin/sh\n",
	}
	r, err := Translate([]byte(dc), composeOptions(files))
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	if r.Build == nil || r.Build.Base != "base:1" || len(r.Build.Steps) != 2 {
		t.Fatalf("the build: %+v, want base:1 and the RUN and COPY steps", r.Build)
	}
	if run := r.Build.Steps[0]; run.Op != "run" || !slices.Contains(run.Env, "FLAVOUR=mint") {
		t.Errorf("the RUN step %+v, want the compose build argument FLAVOUR=mint", run)
	}
	if cp := r.Build.Steps[1]; cp.Op != "copy" || len(cp.Files) != 1 || cp.Files[0].Path != "/usr/local/bin/tool.sh" || string(cp.Files[0].Data) != "#!/bin/sh\n" {
		t.Errorf("the COPY step %+v, want tool.sh from the repository's root (the context)", cp)
	}
}
