package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/registrytest"
)

// TestImageBuildWorkspace: issue 22's "features and build through one unprivileged image build in
// the cluster", on the real node. A real registry runs inside the cluster's namespace (the node
// pulls from it over plain HTTP; the host never dials it); the workspace-git image is pushed there
// as the base, and two Features are published there from their public source
// (devcontainers/feature-starter's hello and color). The agent builds into that registry.
//
//   - dana creates a workspace from her private repository whose devcontainer.json names the base
//     image and both Features: the build runs as the pod's init container, the workspace runs the
//     built image, and `hello` and `color` work in it with the options she gave.
//   - A second workspace from a repository with a Dockerfile (ARG, RUN, COPY of a file of the
//     repository, ENV, a Feature on top): the Dockerfile's steps and the Feature are in its image.
//   - A third workspace with the first's definition reuses its image: its build container says the
//     image was built already, and the registry received no second push of it.
//   - docker-in-docker is refused at create, naming the Feature.
//   - What the user sees of a build: create --wait says how far it is while it runs; show lists
//     the steps (prepare, build, push) with their times and progress; logs shows each one's log;
//     a failed step shows the end of its log.
//   - A Dockerfile whose RUN fails: the workspace reports the build's failure with its line.
//
// It runs alone (no t.Parallel): create --wait shows a build step only if it sees it running, a
// window of a few seconds (each step's container status, reported by the kubelet, then the agent)
// that the other tests' load closed in a parallel run (no step line at all, a 10 s build).
func TestImageBuildWorkspace(t *testing.T) {
	parallel(t)
	e, forge := setUpWithForge(t, time.Hour)
	reg := registrytest.StartInCluster(t, e.cluster)
	registrytest.PushWorkspaceGitImage(t, reg)
	base := withUsrLocalBin(t, reg)
	hello := registrytest.PublishFeature(t, reg, registrytest.FeaturesDir()+"/hello", "devcontainers/features/hello", "1")
	color := registrytest.PublishFeature(t, reg, registrytest.FeaturesDir()+"/color", "devcontainers/features/color", "1")
	loadEditor(t, e.cluster) // a devcontainer workspace has the web editor
	ctx := context.Background()
	if _, err := e.admin.UpdateAgent(ctx, e.agent, sdk.UpdateAgentRequest{Config: map[string]any{"image_build": map[string]any{
		"registry":            reg.Ref("hangar/builds"),
		"insecure_registries": []string{reg.InsideAddr},
		"resources":           map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"cpu": "1", "memory": "1Gi"}},
	}}}); err != nil {
		t.Fatal(err)
	}

	forge.AddUser(forgetest.User{Login: "dana", FullName: "Dana Scully", Email: "dana@example.com"})
	token, api := e.user(t, "dana")
	du := cliUser{url: e.srv.URL, token: token, home: t.TempDir()}
	link(t, e.srv.URL, forge, du, token, "dana")
	must := func(args ...string) string { t.Helper(); return du.must(t, args...) }
	mustSSH := func(ws, script string) string {
		t.Helper()
		out, errOut, code := sshWhenReachable(t, du, ws, script)
		if code != 0 {
			t.Fatalf("hangar ssh %s -- %s: exit %d\nstdout %s\nstderr %s", ws, script, code, out, errOut)
		}
		return out
	}
	// The build's log as the user reads it: `hangar logs` shows the startup steps the agent
	// reported (prepare, build, push), each with its log.
	buildLog := func(ws string) string {
		t.Helper()
		return must("logs", ws)
	}
	pushes := func() int {
		n := 0
		for _, r := range reg.Requests() {
			if r.Method == "PUT" && strings.HasPrefix(r.Path, "/v2/hangar/builds/manifests/") {
				n++
			}
		}
		return n
	}

	// 1. Features on an image.
	featuresDC := `{
  // dana's team environment: an image and two Features
  "image": "` + base + `",
  "features": {
    "` + hello + `": {"greeting": "Howdy"},
    "` + color + `": {"favorite": "green"}
  },
  "postCreateCommand": "hello > /workspaces/greeted.txt"
}
`
	forge.CreateRepo("dana", "app", true, map[string]string{".devcontainer/devcontainer.json": featuresDC})
	begin := time.Now()
	must("create", "app", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/dana/app.git", "--wait", "--timeout", "8m")
	firstBuild := time.Since(begin)
	shown := must("show", "app")
	for _, want := range []string{"Startup:", "image-prepare done in ", ": building " + reg.Ref("hangar/builds"), "image-build   done in ", ": feature 2/2: " + color,
		"image-push    done in ", ": pushed " + reg.Ref("hangar/builds")} {
		if !strings.Contains(shown, want) {
			t.Errorf("hangar show app lacks %q:\n%s", want, shown)
		}
	}
	if out := mustSSH("app", "hello; color; cat /workspaces/greeted.txt; id -u"); !strings.Contains(out, "Howdy, ") || !strings.Contains(out, "my favorite color is green") || !strings.Contains(out, "\n5001\n") {
		t.Fatalf("in the built workspace: %q, want hello's Howdy (twice), color's green, and the non-root user", out)
	}
	if log := buildLog("app"); !strings.Contains(log, "== image-build: done (feature 2/2: "+color+")\nfeature 1/2: "+hello+"\n") ||
		!strings.Contains(log, "    The provided greeting is: Howdy\n") || !strings.Contains(log, "== image-push: done (pushed ") {
		t.Fatalf("the build's log does not show the Features' installs:\n%s", log)
	}
	afterFirst := pushes()
	if afterFirst == 0 {
		t.Fatalf("no image was pushed to hangar/builds: %v", reg.Requests())
	}

	// 2. The same definition again: the image is reused.
	forge.CreateRepo("dana", "again", true, map[string]string{".devcontainer/devcontainer.json": featuresDC})
	begin = time.Now()
	must("create", "again", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/dana/again.git", "--wait", "--timeout", "5m")
	cached := time.Since(begin)
	if log := buildLog("again"); !strings.Contains(log, "== image-prepare: done (image "+reg.Ref("hangar/builds")) || !strings.Contains(log, "is built already (cached)") {
		t.Fatalf("the second build's log does not say the image was reused:\n%s", log)
	}
	if pushes() != afterFirst {
		t.Fatalf("the same definition pushed again: %d manifest pushes, want %d", pushes(), afterFirst)
	}
	if out := mustSSH("again", "hello"); !strings.Contains(out, "Howdy, ") {
		t.Fatalf("hello in the reused image: %q", out)
	}

	// 3. A Dockerfile from the repository, with a Feature on top. One of its steps waits until the
	// test lets it go (a file in the build container), so that what the user sees of a running
	// build is seen for sure: create --wait says how far the build is, and show has the step
	// running with its progress line.
	forge.CreateRepo("dana", "built", true, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"FLAVOUR": "mint"}},
  "features": {"` + color + `": {"favorite": "gold"}}}`,
		".devcontainer/Dockerfile": "ARG BASE=" + base + "\nFROM ${BASE}\nARG FLAVOUR=plain\nUSER root\nRUN echo \"flavour $FLAVOUR\" > /etc/flavour\n" +
			"RUN echo waiting for the test && while [ ! -e /tmp/go ]; do sleep 0.1; done && rm /tmp/go\n" +
			"COPY motd.txt /etc/motd\nENV TEAM_TOOL=/opt/tool\nUSER 5001\n",
		"motd.txt": "welcome to the built image\n",
	})
	create := du.cmd("create", "built", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/dana/built.git", "--wait", "--timeout", "8m")
	// Read while create writes: a buffer with a lock.
	var waited, waitErr outputBuffer
	create.Stdout, create.Stderr = &waited, &waitErr
	if err := create.Start(); err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() { created <- create.Wait() }()
	t.Cleanup(func() { _ = create.Process.Kill() })
	kubetest.Eventually(t, 4*time.Minute, "the waiting step shown running", func(context.Context) error {
		// Until create has sent its request, there is no workspace to show.
		shown, errOut, _ := du.run(t, "show", "built")
		if !strings.Contains(shown, "image-build   running for ") || !strings.Contains(shown, ": RUN echo waiting for the test && ") {
			return fmt.Errorf("hangar show built:\n%s%s", shown, errOut)
		}
		return nil
	})
	if out := must("logs", "built"); !strings.Contains(out, "== image-build: running (step 3/6: RUN echo waiting for the test && ") || !strings.Contains(out, "\n    waiting for the test\n") {
		t.Errorf("hangar logs built, while it builds:\n%s", out)
	}
	// create --wait reads the workspace every half second; on a loaded machine one read can take
	// seconds: the build goes on only once create has said where it is.
	const waitingLine = "actual=Starting  image-build: step 3/6: RUN echo waiting for the test && "
	kubetest.Eventually(t, time.Minute, "create --wait to show the running step", func(context.Context) error {
		if out := waited.output(); !strings.Contains(out, waitingLine) {
			return fmt.Errorf("create --wait printed:\n%s", out)
		}
		return nil
	})
	builtWS, err := api.Workspace(ctx, "built")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.cluster.Client.CoreV1().Pods(builtWS.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pods of built: %v (%d)", err, len(pods.Items))
	}
	if _, errOut, err := e.cluster.Exec(ctx, builtWS.Namespace, pods.Items[0].Name, "hangar-image-build", "touch", "/tmp/go"); err != nil {
		t.Fatalf("let the build go: %v: %s", err, errOut)
	}
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("create built --wait: %v\n%s%s", err, waited.output(), waitErr.output())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("create built --wait did not end:\n%s%s", waited.output(), waitErr.output())
	}
	if out := mustSSH("built", "cat /etc/flavour /etc/motd; echo $TEAM_TOOL; color"); out != "flavour mint\nwelcome to the built image\n/opt/tool\nmy favorite color is gold\n" {
		t.Fatalf("in the Dockerfile's workspace: %q", out)
	}

	// 4. docker-in-docker: refused at create, naming the Feature.
	forge.CreateRepo("dana", "dind", true, map[string]string{".devcontainer.json": `{"image": "` + base + `", "features": {"ghcr.io/devcontainers/features/docker-in-docker:2": {}}}`})
	if out, errOut, code := du.run(t, "create", "dind", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/dana/dind.git"); code == 0 || !strings.Contains(errOut, "docker-in-docker") {
		t.Fatalf("docker-in-docker: exit %d, want refused naming it\n%s%s", code, out, errOut)
	}

	// 5. A failing RUN: the workspace says so, with the Dockerfile's line.
	forge.CreateRepo("dana", "broken", true, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
		".devcontainer/Dockerfile":        "FROM " + base + "\nUSER root\nRUN echo about to fail && false\n",
	})
	must("create", "broken", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/dana/broken.git")
	kubetest.Eventually(t, 4*time.Minute, "the broken build to be reported", func(context.Context) error {
		shown = must("show", "broken")
		if !strings.Contains(shown, "Dockerfile:3") || !strings.Contains(shown, "image-build   failed in ") || !strings.Contains(shown, "    about to fail\n") {
			return fmt.Errorf("hangar show broken:\n%s", shown)
		}
		return nil
	})
	if log := buildLog("broken"); !strings.Contains(log, "== image-build: failed (step 2/2: RUN echo about to fail && false (Dockerfile:3))\n") || !strings.Contains(log, "about to fail\n") {
		t.Errorf("hangar logs broken:\n%s", log)
	}
	t.Logf("a failed build, as `hangar show` says it:\n%s", shown)
	t.Logf("create --repo to Running: features built %v, the same definition again (cached) %v", firstBuild.Round(time.Millisecond), cached.Round(time.Millisecond))
	for _, ws := range []string{"app", "again", "built", "broken"} {
		must("delete", ws, "--yes", "--wait")
	}
}

// withUsrLocalBin pushes the workspace-git image (registrytest.PushWorkspaceGitImage pushed it)
// with a layer adding /usr/local/bin, which every real base image has and the Features' install
// scripts write into (devcontainers/feature-starter's `cat > /usr/local/bin/hello`), and returns its
// reference for pods.
func withUsrLocalBin(t *testing.T, reg *registrytest.Registry) string {
	t.Helper()
	ref, err := name.ParseReference(reg.LocalRef(registrytest.WorkspaceGitRepo), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	withBin, _ := registrytest.AppendFiles(t, img, registrytest.File{Name: "usr/local/", Mode: 0o755}, registrytest.File{Name: "usr/local/bin/", Mode: 0o755})
	registrytest.PushImage(t, reg, withBin, "hangar/workspace-base:dev")
	return reg.Ref("hangar/workspace-base:dev")
}
