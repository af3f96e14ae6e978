package main_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
