package main_test

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/imagebuild/buildtest"
)

// `hangar image-build`, the built binary, as a build init container runs it: flags, credentials
// from $DOCKER_CONFIG for a registry that requires them, a feature from that registry, the push,
// then the cached second start; a bad invocation's last line names the flag.
func TestImageBuildCommand(t *testing.T) {
	bin := buildHangar(t)
	root := buildtest.BusyboxRoot(t)
	reg := buildtest.NewPrivateRegistry(t, "builder", "s3cret")
	dockerConfig := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("builder:s3cret"))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dockerConfig) // this test's pushes, and the command's
	base := reg.Host + "/base:1"
	buildtest.PushDir(t, base, root, []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, nil)
	buildtest.PublishFeature(t, reg.Host+"/features/hello:1", buildtest.Feature(t, "hello"))

	spec := imagebuild.Spec{
		Base:     base,
		Steps:    []imagebuild.Step{{Line: 2, Op: imagebuild.OpRun, Args: []string{"/bin/sh", "-c", "echo built > /etc/built"}}},
		Features: []imagebuild.Feature{{Ref: reg.Host + "/features/hello:1", Options: map[string]any{"greeting": "hi"}}},
	}
	b, _ := json.Marshal(spec)
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	image := imagebuild.Ref(reg.Host+"/hangar/builds", spec.Hash())
	run := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("hangar %s:\n%s", strings.Join(args, " "), out.String())
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}
	args := []string{"image-build", "--spec", specFile, "--image", image, "--root", root, "--insecure-registry", reg.Host}
	last := func(s string) string {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		return lines[len(lines)-1]
	}

	// Without the registry's credentials: refused, on one line naming the image.
	code, out := run([]string{"DOCKER_CONFIG=" + t.TempDir()}, args...)
	if code == 0 || !strings.HasPrefix(last(out), "look up "+image+" in its registry: ") || !strings.HasSuffix(last(out), ": the registry answered 401 Unauthorized: the build has no credentials for it, or wrong ones (a docker config.json in $DOCKER_CONFIG)") {
		t.Errorf("without credentials: exit %d, last line %q", code, last(out))
	}
	code, out = run([]string{"DOCKER_CONFIG=" + dockerConfig}, args...)
	if code != 0 || !strings.Contains(out, "step 1/1: RUN echo built > /etc/built (Dockerfile:2)\n") ||
		!strings.Contains(out, "    The provided greeting is: hi\n") || !strings.HasPrefix(last(out), "pushed "+image+" (sha256:") {
		t.Fatalf("build: exit %d, output %q", code, out)
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatalf("pull %s: %v", image, err)
	}
	if c, err := img.ConfigFile(); err != nil || !strings.Contains(c.Config.Labels[imagebuild.MetadataLabel], "/features/hello:1") {
		t.Errorf("the image's labels %v (%v): want the hello feature in %s", c.Config.Labels, err, imagebuild.MetadataLabel)
	}
	writes := reg.Writes.Load()
	if code, out = run([]string{"DOCKER_CONFIG=" + dockerConfig}, args...); code != 0 || out != "image "+image+" is built already (cached)\n" {
		t.Errorf("second start: exit %d, output %q", code, out)
	}
	if n := reg.Writes.Load() - writes; n != 0 {
		t.Errorf("the second start wrote %d times to the registry", n)
	}
	if code, out = run(nil, "image-build", "--image", image); code != 1 || last(out) != "--spec: a file is required" {
		t.Errorf("without --spec: exit %d, last line %q", code, last(out))
	}
}

// The build as the workspace's three build init containers run it, on one work directory:
// `prepare` and `push` as a non-root user with the registry's credential ($DOCKER_CONFIG), and
// between them `run` with neither, `--root /` (no chroot by the build), uid 0 with only the
// capabilities the pod gives it (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, SETUID, SETGID, KILL) and
// no_new_privs, the hangar binary, the spec and the work directory on their own mounts, /proc and
// /dev mounted, the build the first process of its PID namespace (what a step leaves running is
// ended). The pod is played by a mount namespace, chroot and setpriv (util-linux) on the busybox
// root; the build must leave its mounts out of the layer and work without any other privilege.
func TestImageBuildWithThePodsPrivileges(t *testing.T) {
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test plays the build pod with util-linux's %s: %v", tool, err)
		}
	}
	bin := buildHangar(t)
	root := buildtest.BusyboxRoot(t)
	// setpriv and its libraries go in the root, to drop the capabilities after the chroot.
	setpriv, _ := exec.LookPath("setpriv")
	files := []string{setpriv}
	ldd, err := exec.Command("ldd", setpriv).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", setpriv, err)
	}
	for _, f := range strings.Fields(string(ldd)) {
		if strings.HasPrefix(f, "/") {
			files = append(files, f)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"proc", "dev", "hangar/bin", "hangar/build", "hangar/work"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// prepare and push run as nobody, as the pod's non-root user: what they read is theirs to read.
	shared := func() string {
		d, err := os.MkdirTemp("", "hangar-image-build-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, 0o777); err != nil { // an emptyDir's mode
			t.Fatal(err)
		}
		return d
	}
	reg := buildtest.NewPrivateRegistry(t, "builder", "s3cret")
	dockerConfig := shared()
	auth := base64.StdEncoding.EncodeToString([]byte("builder:s3cret"))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dockerConfig) // this test's pushes
	base := reg.Host + "/base:1"
	buildtest.PushDir(t, base, root, []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, nil)
	buildtest.PublishFeature(t, reg.Host+"/features/hello:1", buildtest.Feature(t, "hello"))
	spec := imagebuild.Spec{
		Base: base,
		Steps: []imagebuild.Step{
			{Line: 2, Op: imagebuild.OpRun, Args: []string{"/bin/sh", "-c", "grep CapBnd /proc/self/status; if chroot / /bin/true 2>/dev/null; then echo chroot allowed; else echo chroot refused; fi"}},
			{Line: 3, Op: imagebuild.OpCopy, Files: []imagebuild.File{{Path: "/home/dev/notes.txt", Mode: 0o600, Data: []byte("mine\n"), User: "dev", Group: "staff"}}},
			{Line: 4, Op: imagebuild.OpUser, Value: "dev"},
			{Line: 5, Op: imagebuild.OpRun, Args: []string{"/bin/sh", "-c", "id -u > /home/dev/uid && cat /home/dev/notes.txt"}},
			{Line: 6, Op: imagebuild.OpUser, Value: "root"},
			// A daemon in a session of its own (setsid): out of the step's process group.
			{Line: 7, Op: imagebuild.OpRun, Args: []string{"/bin/sh", "-c", "setsid sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/daemon.count; sleep 0.05; done' >/dev/null 2>&1 < /dev/null & while [ ! -s /tmp/daemon.count ]; do sleep 0.01; done; echo daemon started"}},
			{Line: 8, Op: imagebuild.OpRun, Args: []string{"/bin/sh", "-c", "set -e; a=$(cat /tmp/daemon.count); sleep 0.3; b=$(cat /tmp/daemon.count); if [ \"$a\" = \"$b\" ]; then echo daemon ended; else echo daemon still runs; fi"}},
			{Line: 9, Op: imagebuild.OpRun, Args: []string{"/bin/sh", "-c", "if [ -e /hangar/docker ] || env | grep -q DOCKER_CONFIG; then echo credential here; else echo no credential; fi"}},
		},
		Features:   []imagebuild.Feature{{Ref: reg.Host + "/features/hello:1"}},
		RemoteUser: "dev",
	}
	b, _ := json.Marshal(spec)
	hostBin, buildDir, workDir := shared(), shared(), shared()
	hb, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostBin, "hangar"), hb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buildDir, "spec.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	image := imagebuild.Ref(reg.Host+"/hangar/builds", spec.Hash())
	asNobody := func(phase string) string {
		cmd := exec.Command(filepath.Join(hostBin, "hangar"), "image-build", phase, "--spec", filepath.Join(buildDir, "spec.json"), "--image", image, "--dir", workDir, "--insecure-registry", reg.Host)
		cmd.Env = []string{"DOCKER_CONFIG=" + dockerConfig, "HOME=/nonexistent"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		t.Logf("%s as nobody:\n%s", phase, out)
		if err != nil {
			t.Fatalf("%s failed: %v", phase, err)
		}
		return string(out)
	}
	asNobody("prepare")
	// /dev as a pod's: a tmpfs with null, zero and urandom.
	script := `mount -t proc proc "$1/proc" && mount -t tmpfs -o mode=755 tmpfs "$1/dev" &&
mknod -m 666 "$1/dev/null" c 1 3 && mknod -m 666 "$1/dev/zero" c 1 5 && mknod -m 666 "$1/dev/urandom" c 1 9 &&
mount --bind "$2" "$1/hangar/bin" && mount -o bind,ro "$3" "$1/hangar/build" && mount --bind "$4" "$1/hangar/work" &&
exec chroot "$1" ` + setpriv + ` --bounding-set=-all,+chown,+dac_override,+fowner,+fsetid,+setuid,+setgid,+kill --inh-caps=-all --no-new-privs \
  /hangar/bin/hangar image-build run --spec /hangar/build/spec.json --dir /hangar/work`
	// A PID namespace of its own too, where the build is the first process, as in a container.
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "/bin/sh", "-c", script, "sh", root, hostBin, buildDir, workDir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	t.Logf("the build pod:\n%s", out)
	if err != nil {
		t.Fatalf("the build failed: %v", err)
	}
	out = append(out, asNobody("push")...)
	// CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, FSETID 4, KILL 5, SETGID 6, SETUID 7.
	for _, want := range []string{"    CapBnd:\t00000000000000fb\n", "    chroot refused\n", "    mine\n", "    Activating feature 'hello'\n", "    daemon started\n", "    daemon ended\n", "    no credential\n", "pushed " + image} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the build's output lacks %q", want)
		}
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatalf("pull %s: %v", image, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	seen := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen[strings.TrimSuffix(h.Name, "/")] = h
	}
	for p := range seen {
		if strings.HasPrefix(p, "proc/") || strings.HasPrefix(p, "dev/") || strings.HasPrefix(p, "hangar/") || strings.HasPrefix(p, "tmp/hangar-") {
			t.Errorf("the layer has %s, which is a mount or the build's own", p)
		}
	}
	if h := seen["home/dev/notes.txt"]; h == nil || h.Uid != 1000 || h.Gid != 50 || h.Mode != 0o600 {
		t.Errorf("home/dev/notes.txt: %+v, want 1000:50 0600", h)
	}
	for _, p := range []string{"usr/local/bin/hello", "home/dev/uid"} {
		if seen[p] == nil {
			t.Errorf("the layer lacks %s", p)
		}
	}
}
