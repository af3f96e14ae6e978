//go:build linux

package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
)

// buildTime is the builds' clock.
var buildTime = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// baseEnv and baseLabels are the base image's config.
var (
	baseEnv    = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "FROM_BASE=1"}
	baseLabels = map[string]string{"org.example.base": "busybox"}
)

// newBase is a busybox root and a registry holding it as the image REGISTRY/base:1.
func newBase(t *testing.T) (root string, reg *buildtest.Registry, base string) {
	t.Helper()
	root = buildtest.BusyboxRoot(t)
	reg = buildtest.NewRegistry(t)
	base = reg.Host + "/base:1"
	buildtest.PushDir(t, base, root, baseEnv, baseLabels)
	return root, reg, base
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// build runs a build's three phases as the workspace's init containers do, one after the other on
// one work directory, and returns the exit code and output of the first that fails (else 0 and
// all their output). Run gets a transport that fails the test if it is used: it must need no
// registry.
func build(t *testing.T, root string, spec Spec, image string) (int, string) {
	t.Helper()
	b, err := json.Marshal(spec)
	must(t, err)
	specFile := filepath.Join(t.TempDir(), "spec.json")
	must(t, os.WriteFile(specFile, b, 0o644))
	dir := t.TempDir()
	var out bytes.Buffer
	for _, phase := range []string{PhasePrepare, PhaseRun, PhasePush} {
		x := &Executor{Root: root, Mountinfo: "/proc/self/mountinfo", Out: &out, Clock: clock.NewFake(buildTime), OutputDelay: 100 * time.Millisecond}
		inv := Invocation{Phase: phase, Spec: specFile, Image: image, Dir: dir}
		if phase == PhaseRun {
			x.Transport, inv.Image = noRegistry{t}, ""
		}
		if code := Main(context.Background(), x, inv); code != 0 {
			t.Logf("image-build %s exited %d:\n%s", phase, code, out.String())
			return code, out.String()
		}
	}
	t.Logf("image-build:\n%s", out.String())
	return 0, out.String()
}

// noRegistry is the transport of the build's run phase, which must make no request.
type noRegistry struct{ t *testing.T }

func (n noRegistry) RoundTrip(r *http.Request) (*http.Response, error) {
	n.t.Errorf("the run phase made a registry request: %s %s", r.Method, r.URL)
	return nil, errors.New("the run phase has no registry")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// layerFiles reads an image's last layer: headers by path, and regular files' contents.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	layers, err := img.Layers()
	must(t, err)
	rc, err := layers[len(layers)-1].Uncompressed()
	must(t, err)
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		n := strings.TrimSuffix(h.Name, "/")
		hdrs[n] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			must(t, err)
			data[n] = string(b)
		}
	}
	return hdrs, data
}

// extractImage writes an image's whole filesystem (all layers, whiteouts applied) to a new
// directory, as a node would run it.
func extractImage(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		must(t, err)
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			must(t, os.MkdirAll(p, fs.FileMode(h.Mode)&fs.ModePerm))
		case tar.TypeSymlink:
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.Symlink(h.Linkname, p))
		case tar.TypeReg:
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(h.Mode)&fs.ModePerm)
			must(t, err)
			_, err = io.Copy(f, tr)
			must(t, err)
			must(t, f.Close())
		}
		if h.Typeflag != tar.TypeSymlink {
			must(t, os.Lchown(p, h.Uid, h.Gid))
		}
	}
}

// runIn runs argv chrooted into dir as uid:gid, as the workspace's container would.
func runIn(t *testing.T, dir string, uid, gid uint32, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v in the built image: %v\n%s", argv, err, out)
	}
	return string(out)
}

// A Dockerfile's steps and two features from their public sources build one layer on the base,
// pushed with the config the steps set; the image runs what the features installed; the same
// definition a second time pushes nothing.
func TestBuildStepsAndFeaturesIntoOneLayerAndCache(t *testing.T) {
	root, reg, base := newBase(t)
	buildtest.PublishFeature(t, reg.Host+"/features/hello:1", buildtest.Feature(t, "hello"))
	buildtest.PublishFeature(t, reg.Host+"/features/color:1", buildtest.Feature(t, "color"))
	spec := Spec{
		Base: base,
		Steps: []Step{
			{Line: 3, Op: OpRun, Args: []string{"/bin/sh", "-c", "mkdir -p /opt/app && echo built > /opt/app/built.txt && rm /etc/motd"}},
			{Line: 4, Op: OpCopy, Files: []File{
				{Path: "/opt/app/config.txt", Mode: 0o640, Data: []byte("key=value\n"), User: "dev", Group: "staff"},
				{Path: "/opt/app/bin/run.sh", Mode: 0o755, Data: []byte("#!/bin/sh\necho run\n"), UID: 1000, GID: 1000},
				{Path: "/opt/app/current", Mode: uint32(fs.ModeSymlink | 0o777), Target: "config.txt"},
			}},
			{Line: 5, Op: OpEnv, Key: "GREETING_TARGET", Value: "world"},
			{Line: 6, Op: OpUser, Value: "dev"},
			{Line: 7, Op: OpWorkdir, Value: "/home/dev/project"},
			{Line: 8, Op: OpRun, Args: []string{"/bin/sh", "-c", "id -u > whoami.txt; id -G >> whoami.txt; pwd >> whoami.txt; echo $GREETING_TARGET $BUILD_ARG $HOME >> whoami.txt"}, Env: []string{"BUILD_ARG=arg1"}},
			{Line: 9, Op: OpLabel, Key: "org.example.team", Value: "platform"},
		},
		Features: []Feature{
			{Ref: reg.Host + "/features/hello:1", Options: map[string]any{"greeting": "howdy"}},
			{Ref: reg.Host + "/features/color:1", Options: map[string]any{"favorite": "green"}},
		},
		RemoteUser: "dev",
	}
	image := Ref(reg.Host+"/hangar/builds", spec.Hash())
	code, out := build(t, root, spec, image)
	if code != 0 {
		t.Fatalf("image-build exited %d: %s", code, lastLine(out))
	}
	for _, want := range []string{
		"step 1/7: RUN mkdir -p /opt/app && echo built > /opt/app/built.txt && rm /etc/motd (Dockerfile:3)\n",
		"step 2/7: COPY 3 files to /opt/app (Dockerfile:4)\n",
		"step 7/7: LABEL org.example.team=platform (Dockerfile:9)\n",
		"feature 1/2: " + reg.Host + "/features/hello:1\n",
		"    The provided greeting is: howdy\n",
		"    The effective dev container remoteUser is 'dev'\n",
		"    The effective dev container remoteUser's home directory is '/home/dev'\n",
		"feature 2/2: " + reg.Host + "/features/color:1\n",
		"    The provided favorite color is: green\n",
		"pushed " + image + " (sha256:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// The lines the agent shows as the build's progress (IsProgress): one per phase, step and
	// feature, in order, and none of the commands' own output.
	var progress []string
	for _, l := range strings.Split(out, "\n") {
		if IsProgress(l) {
			progress = append(progress, l)
		}
	}
	wantProgress := []string{"building " + image + " from " + spec.Base + ":", "step 1/7: ", "step 2/7: ", "step 3/7: ", "step 4/7: ", "step 5/7: ", "step 6/7: ", "step 7/7: ",
		"feature 1/2: ", "feature 2/2: ", "pushing " + image, "pushed " + image + " ("}
	ok := len(progress) == len(wantProgress)
	for i := 0; ok && i < len(progress); i++ {
		ok = strings.HasPrefix(progress[i], wantProgress[i])
	}
	if !ok {
		t.Errorf("progress lines\n%q\nwant their beginnings\n%q", progress, wantProgress)
	}

	ref, err := name.ParseReference(image)
	must(t, err)
	img, err := remote.Image(ref)
	must(t, err)
	cfg, err := img.ConfigFile()
	must(t, err)
	if !cfg.Created.Time.Equal(buildTime) {
		t.Errorf("the image was created at %s, want the build's clock's %s", cfg.Created.Time, buildTime)
	}
	if cfg.Config.User != "dev" || cfg.Config.WorkingDir != "/home/dev/project" {
		t.Errorf("config User %q WorkingDir %q, want dev and /home/dev/project", cfg.Config.User, cfg.Config.WorkingDir)
	}
	env := strings.Join(cfg.Config.Env, "\n")
	for _, want := range []string{"FROM_BASE=1", "GREETING_TARGET=world", "PATH=/usr/local/sbin:"} {
		if !strings.Contains(env, want) {
			t.Errorf("config Env %q lacks %s", cfg.Config.Env, want)
		}
	}
	if strings.Contains(env, "BUILD_ARG") {
		t.Errorf("config Env %q has a RUN's build argument", cfg.Config.Env)
	}
	if cfg.Config.Labels["org.example.base"] != "busybox" || cfg.Config.Labels["org.example.team"] != "platform" {
		t.Errorf("labels %v: want the base's and the LABEL's", cfg.Config.Labels)
	}
	var meta []map[string]any
	if err := json.Unmarshal([]byte(cfg.Config.Labels[MetadataLabel]), &meta); err != nil || len(meta) != 2 || meta[0]["id"] != reg.Host+"/features/hello:1" || meta[1]["id"] != reg.Host+"/features/color:1" {
		t.Errorf("label %s = %s (%v): want the two features in order", MetadataLabel, cfg.Config.Labels[MetadataLabel], err)
	}
	layers, err := img.Layers()
	must(t, err)
	if len(layers) != 2 {
		t.Fatalf("%d layers, want the base's and one more", len(layers))
	}

	hdrs, data := layerFiles(t, img)
	for p, want := range map[string]struct {
		uid, gid int
		mode     int64
	}{
		"opt/app/config.txt":          {1000, 50, 0o640},
		"opt/app/bin/run.sh":          {1000, 1000, 0o755},
		"home/dev/project":            {1000, 1000, 0o755},
		"home/dev/project/whoami.txt": {1000, 1000, 0o644},
		"usr/local/bin/hello":         {0, 0, 0o755},
		"usr/local/bin/color":         {0, 0, 0o755},
	} {
		h, ok := hdrs[p]
		if !ok {
			t.Errorf("the layer lacks %s", p)
			continue
		}
		if h.Uid != want.uid || h.Gid != want.gid || h.Mode != want.mode {
			t.Errorf("%s: %d:%d %o, want %d:%d %o", p, h.Uid, h.Gid, h.Mode, want.uid, want.gid, want.mode)
		}
	}
	if h := hdrs["opt/app/current"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "config.txt" {
		t.Errorf("opt/app/current: %+v, want a symlink to config.txt", h)
	}
	if _, ok := hdrs["etc/.wh.motd"]; !ok {
		t.Errorf("the layer has no whiteout of the deleted /etc/motd")
	}
	if got, want := data["home/dev/project/whoami.txt"], "1000\n1000 50\n/home/dev/project\nworld arg1 /home/dev\n"; got != want {
		t.Errorf("whoami.txt = %q, want %q (the RUN as USER dev with its groups, in WORKDIR, with ENV and its build arg)", got, want)
	}
	for p := range hdrs {
		if strings.HasPrefix(p, "tmp/hangar-image-build") || p == "bin/busybox" || p == "etc/passwd" {
			t.Errorf("the layer has %s, which the build did not change or removed", p)
		}
	}

	// What a user sees: the image, unpacked, runs what the features installed.
	fsys := extractImage(t, img)
	if got := runIn(t, fsys, 1000, 1000, "/usr/local/bin/hello"); !strings.Contains(got, "howdy, dev!") {
		t.Errorf("hello says %q, want the greeting howdy to dev", got)
	}
	if got := runIn(t, fsys, 1000, 1000, "/usr/local/bin/color"); got != "my favorite color is green\n" {
		t.Errorf("color says %q", got)
	}
	if _, err := os.Lstat(filepath.Join(fsys, "etc/motd")); !os.IsNotExist(err) {
		t.Errorf("/etc/motd is in the image: %v", err)
	}

	// The second start of the same definition.
	writes := reg.Writes.Load()
	code, out = build(t, root, spec, image)
	if code != 0 || out != "image "+image+" is built already (cached)\n" {
		t.Errorf("second build: exit %d, output %q; want 0 and the cached line alone", code, out)
	}
	if n := reg.Writes.Load() - writes; n != 0 {
		t.Errorf("the second build made %d writes to the registry, want none", n)
	}
}

// A RUN that fails ends the log with one line naming the Dockerfile line, the command and the
// exit status; nothing is pushed.
func TestBuildFailingRunEndsWithOneLine(t *testing.T) {
	root, reg, base := newBase(t)
	spec := Spec{Base: base, Steps: []Step{
		{Line: 2, Op: OpRun, Args: []string{"echo", "fine"}}, // the exec form: echo is found in the image's PATH
		{Line: 7, Op: OpRun, Args: []string{"/bin/sh", "-c", "echo trying; exit 100"}},
		{Line: 9, Op: OpRun, Args: []string{"/bin/sh", "-c", "echo never"}},
	}}
	image := Ref(reg.Host+"/hangar/builds", spec.Hash())
	code, out := build(t, root, spec, image)
	if code == 0 {
		t.Fatal("the build succeeded")
	}
	if got, want := lastLine(out), "Dockerfile:7: RUN echo trying; exit 100: exit status 100"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	if !strings.Contains(out, "step 1/3: RUN [\"echo\",\"fine\"] (Dockerfile:2)\n    fine\n") || !strings.Contains(out, "    trying\n") || strings.Contains(out, "never") {
		t.Errorf("output %q: want the failing step's output and nothing after it", out)
	}
	ref, err := name.ParseReference(image)
	must(t, err)
	if _, err := remote.Head(ref); !isNotFound(err) {
		t.Errorf("HEAD %s after a failed build: %v, want not found", image, err)
	}
}

// docker-in-docker (its real metadata) is refused before anything runs, naming it and why.
func TestBuildRefusesPrivilegedFeature(t *testing.T) {
	root, reg, base := newBase(t)
	buildtest.PublishFeature(t, reg.Host+"/features/hello:1", buildtest.Feature(t, "hello"))
	buildtest.PublishFeature(t, reg.Host+"/devcontainers/features/docker-in-docker:2", buildtest.Feature(t, "docker-in-docker"))
	spec := Spec{Base: base,
		Steps:    []Step{{Line: 2, Op: OpRun, Args: []string{"/bin/sh", "-c", "echo step ran"}}},
		Features: []Feature{{Ref: reg.Host + "/features/hello:1"}, {Ref: reg.Host + "/devcontainers/features/docker-in-docker:2"}},
	}
	code, out := build(t, root, spec, Ref(reg.Host+"/hangar/builds", spec.Hash()))
	if code == 0 {
		t.Fatal("the build succeeded")
	}
	want := "feature " + reg.Host + "/devcontainers/features/docker-in-docker:2 (docker-in-docker) needs privileges (privileged: true), which Hangar's image build and workspaces never have: Docker cannot run in a Hangar workspace"
	if got := lastLine(out); got != want {
		t.Errorf("last line %q\nwant      %q", got, want)
	}
	if strings.Contains(out, "step ran") || strings.Contains(out, "must not run") || strings.Contains(out, "Activating feature") {
		t.Errorf("something ran before the refusal: %q", out)
	}
}

// Features that dependsOn each other are a cycle, named; so are installsAfter cycles.
func TestBuildRefusesFeatureCycle(t *testing.T) {
	root, reg, base := newBase(t)
	a, b, c, d := reg.Host+"/f/a:1", reg.Host+"/f/b:1", reg.Host+"/f/c", reg.Host+"/f/d"
	buildtest.PublishFeature(t, a, buildtest.SmallFeature(t, "a", map[string]any{"dependsOn": map[string]any{b: map[string]any{}}}))
	buildtest.PublishFeature(t, b, buildtest.SmallFeature(t, "b", map[string]any{"dependsOn": map[string]any{a: map[string]any{}}}))
	buildtest.PublishFeature(t, c+":1", buildtest.SmallFeature(t, "c", map[string]any{"installsAfter": []string{d}}))
	buildtest.PublishFeature(t, d+":1", buildtest.SmallFeature(t, "d", map[string]any{"installsAfter": []string{c}}))
	for _, tc := range []struct {
		features []Feature
		want     string
	}{
		{[]Feature{{Ref: a}}, "the features depend on each other in a cycle (dependsOn or installsAfter): " + a + " -> " + b + " -> " + a},
		{[]Feature{{Ref: c + ":1"}, {Ref: d + ":1"}}, "the features depend on each other in a cycle (dependsOn or installsAfter): " + c + ":1 -> " + d + ":1 -> " + c + ":1"},
	} {
		spec := Spec{Base: base, Features: tc.features}
		code, out := build(t, root, spec, Ref(reg.Host+"/hangar/builds", spec.Hash()))
		if code == 0 || lastLine(out) != tc.want {
			t.Errorf("exit %d, last line %q\nwant %q", code, lastLine(out), tc.want)
		}
		if strings.Contains(out, "installed") {
			t.Errorf("a feature was installed: %q", out)
		}
	}
}

// A feature's dependsOn is fetched and installed first, its options' defaults reach install.sh,
// its containerEnv goes into the image's Env (expanding the Env before it), and what the build
// does not run (lifecycle commands, entrypoint) is said in the log and kept in the label.
func TestBuildFeatureDependenciesEnvAndHooks(t *testing.T) {
	root, reg, base := newBase(t)
	dep, tool := reg.Host+"/f/dep:1", reg.Host+"/f/tool:1"
	buildtest.PublishFeature(t, dep, map[string]string{
		"devcontainer-feature.json": `{"id":"dep","version":"1.0.0","options":{"flavour":{"type":"string","default":"plain"},"with-docs":{"type":"boolean","default":false}}}`,
		"install.sh":                "#!/bin/sh\nset -e\nmkdir -p /opt/dep\necho \"$FLAVOUR $WITH_DOCS $_REMOTE_USER $_REMOTE_USER_HOME\" > /opt/dep/installed\n",
	})
	buildtest.PublishFeature(t, tool, map[string]string{
		"devcontainer-feature.json": `{"id":"tool","version":"2.0.0","dependsOn":{"` + dep + `":{"flavour":"spicy"}},
			"containerEnv":{"TOOL_HOME":"/opt/tool","PATH":"/opt/tool/bin:${PATH}"},
			"postCreateCommand":"tool init","postStartCommand":["tool","serve"],"entrypoint":"/opt/tool/start.sh"}`,
		"install.sh": "#!/bin/sh\nset -e\ntest -f /opt/dep/installed\nmkdir -p /opt/tool/bin\nprintf '#!/bin/sh\\necho tool ok\\n' > /opt/tool/bin/tool\nchmod 755 /opt/tool/bin/tool\n",
	})
	spec := Spec{Base: base, Features: []Feature{{Ref: tool}}, RemoteUser: "dev"}
	image := Ref(reg.Host+"/hangar/builds", spec.Hash())
	code, out := build(t, root, spec, image)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, lastLine(out))
	}
	for _, want := range []string{
		"feature 1/2: " + dep + "\n",
		"feature 2/2: " + tool + "\n",
		"    postCreateCommand, postStartCommand of feature tool: kept in the image's devcontainer.metadata label, not run by the build\n",
		"    entrypoint of feature tool: not honoured in a Hangar workspace (kept in the devcontainer.metadata label)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	ref, err := name.ParseReference(image)
	must(t, err)
	img, err := remote.Image(ref)
	must(t, err)
	cfg, err := img.ConfigFile()
	must(t, err)
	env := strings.Join(cfg.Config.Env, "\n")
	for _, want := range []string{"TOOL_HOME=/opt/tool", "PATH=/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"} {
		if !strings.Contains(env, want) {
			t.Errorf("Env %q lacks %s", cfg.Config.Env, want)
		}
	}
	var meta []map[string]any
	must(t, json.Unmarshal([]byte(cfg.Config.Labels[MetadataLabel]), &meta))
	if len(meta) != 2 || meta[1]["postCreateCommand"] != "tool init" || meta[1]["entrypoint"] != "/opt/tool/start.sh" || meta[1]["containerEnv"].(map[string]any)["TOOL_HOME"] != "/opt/tool" {
		t.Errorf("label %s = %s", MetadataLabel, cfg.Config.Labels[MetadataLabel])
	}
	_, data := layerFiles(t, img)
	if got, want := data["opt/dep/installed"], "spicy false dev /home/dev\n"; got != want {
		t.Errorf("dep's install.sh saw %q, want %q (dependsOn's options, the defaults, the remote user)", got, want)
	}
	if got := runIn(t, extractImage(t, img), 1000, 1000, "/opt/tool/bin/tool"); got != "tool ok\n" {
		t.Errorf("tool says %q", got)
	}
}

// A step that leaves a process running (a daemon started for the step) is done when its command
// exits: the process is ended, and the build neither hangs on its output nor snapshots its writes.
func TestBuildEndsWhatAStepLeftRunning(t *testing.T) {
	root, reg, base := newBase(t)
	spec := Spec{Base: base, Steps: []Step{
		{Line: 2, Op: OpRun, Args: []string{"/bin/sh", "-c", "(while true; do date > /tmp/daemon.out; sleep 0.05; done) & echo started"}},
		{Line: 3, Op: OpRun, Args: []string{"/bin/sh", "-c", "echo next"}},
	}}
	image := Ref(reg.Host+"/hangar/builds", spec.Hash())
	code, out := build(t, root, spec, image)
	if code != 0 || !strings.Contains(out, "    started\n") || !strings.Contains(out, "    next\n") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	// The loop is gone: its file does not change any more.
	before, err := os.ReadFile(filepath.Join(root, "tmp/daemon.out"))
	must(t, err)
	for range 3 {
		runIn(t, root, 0, 0, "/bin/sleep", "0.1") // a real wait for a process that should be dead
	}
	after, err := os.ReadFile(filepath.Join(root, "tmp/daemon.out"))
	must(t, err)
	if !bytes.Equal(before, after) {
		t.Errorf("the step's background loop still runs: /tmp/daemon.out went from %q to %q", before, after)
	}
}

// The parser's side of the Spec (spec.go) as the executor honours it: an ENV naming the image's
// environment (${PATH}, $$ for a literal $), a one-file COPY without a trailing / onto a directory
// the image has (the file goes into it under its name), and --chown with a user alone (the group is
// the number of the user's uid, as in Docker, not the user's primary group).
func TestBuildFollowsTheParsersSpec(t *testing.T) {
	root, reg, base := newBase(t)
	spec := Spec{
		Base: base,
		Steps: []Step{
			{Line: 2, Op: OpRun, Args: []string{"/bin/sh", "-c", "echo 'svc:x:1500:50::/:/bin/sh' >> /etc/passwd && mkdir -p /opt/tools"}},
			{Line: 3, Op: OpEnv, Key: "PATH", Value: "${PATH}:/opt/tools"},
			{Line: 4, Op: OpEnv, Key: "PRICE", Value: "$$5 ${UNSET}and ${FROM_BASE}"},
			{Line: 5, Op: OpCopy, Value: "tool.sh", Files: []File{{Path: "/opt/tools", Mode: 0o755, Data: []byte("#!/bin/sh\necho tool\n"), User: "svc"}}},
			{Line: 6, Op: OpCopy, Value: "notes.txt", Files: []File{{Path: "/opt/notes", Mode: 0o644, Data: []byte("notes\n")}}},
		},
	}
	image := Ref(reg.Host+"/hangar/builds", spec.Hash())
	if code, out := build(t, root, spec, image); code != 0 {
		t.Fatalf("image-build exited %d: %s", code, lastLine(out))
	}
	ref, err := name.ParseReference(image)
	must(t, err)
	img, err := remote.Image(ref)
	must(t, err)
	cfg, err := img.ConfigFile()
	must(t, err)
	env := strings.Join(cfg.Config.Env, "\n")
	for _, want := range []string{"\nPATH=/usr/local/sbin:", ":/opt/tools\n", "PRICE=$5 and 1"} {
		if !strings.Contains("\n"+env+"\n", want) {
			t.Errorf("config Env %q lacks %q", cfg.Config.Env, want)
		}
	}
	if strings.Contains(env, "${PATH}") {
		t.Errorf("config Env %q keeps ${PATH} unexpanded", cfg.Config.Env)
	}
	hdrs, data := layerFiles(t, img)
	if h := hdrs["opt/tools/tool.sh"]; h == nil || h.Uid != 1500 || h.Gid != 1500 || data["opt/tools/tool.sh"] != "#!/bin/sh\necho tool\n" {
		t.Errorf("opt/tools/tool.sh: %+v, want the file in the directory, owned 1500:1500", h)
	}
	if data["opt/notes"] != "notes\n" {
		t.Errorf("opt/notes (no directory there): %q, want the file itself", data["opt/notes"])
	}
}

func TestExpandStepEnv(t *testing.T) {
	env := []string{"A=1", "B=two"}
	for in, want := range map[string]string{
		"plain": "plain", "${A}": "1", "x${B}y": "xtwoy", "$$A": "$A", "$A": "$A", "${NONE}-": "-", "${A": "${A", "end$": "end$", "$$$$": "$$",
	} {
		if got := expandStepEnv(in, env); got != want {
			t.Errorf("expandStepEnv(%q) = %q, want %q", in, got, want)
		}
	}
}
