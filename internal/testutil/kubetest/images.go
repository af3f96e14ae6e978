package kubetest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var builtImages = struct {
	sync.Mutex
	loaded map[[2]string]bool // {cluster directory, image}: the node has it
}{loaded: map[[2]string]bool{}}

// LoadWorkspaceGitImage makes WorkspaceGitImage runnable on the real node: the image built by
// scripts/build-workspace-git-image (cached outside the clone: under a second when nothing
// changed, a few seconds otherwise). Pods then name it with imagePullPolicy IfNotPresent or Never.
func (c *Cluster) LoadWorkspaceGitImage(t testing.TB) {
	t.Helper()
	c.LoadBuiltImage(t, "build-workspace-git-image", WorkspaceGitImage)
}

// LoadBuiltImage runs scripts/SCRIPT, which prints the path of a docker-archive tarball holding
// image (building it if its cache lacks it), and loads that archive into the real node with
// scripts/kube-load-image, once per cluster and image in a test binary.
func (c *Cluster) LoadBuiltImage(t testing.TB, script, image string) {
	t.Helper()
	builtImages.Lock()
	defer builtImages.Unlock()
	key := [2]string{c.Dir, image}
	if builtImages.loaded[key] {
		return
	}
	archive := BuildImageArchive(t, script)
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	load, err := exec.Command(filepath.Join(root, "scripts", "kube-load-image"), c.Dir, archive).CombinedOutput()
	if err != nil {
		t.Fatalf("kubetest: scripts/kube-load-image %s %s: %v\n%s", c.Dir, archive, err, load)
	}
	if !strings.Contains(string(load), image) {
		t.Fatalf("kubetest: scripts/kube-load-image did not load %s:\n%s", image, load)
	}
	builtImages.loaded[key] = true
}

// BuildImageArchive runs scripts/SCRIPT (such as build-workspace-git-image), which prints the path
// of an image archive it builds or finds in its cache, and returns that path: what LoadBuiltImage
// loads into the node, and what a test may push to a registry (registrytest) instead.
func BuildImageArchive(t testing.TB, script string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	build := exec.Command(filepath.Join(root, "scripts", script))
	var stderr strings.Builder
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("kubetest: scripts/%s: %v\n%s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
