package kubetest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var gitImageLoads = struct {
	sync.Mutex
	done map[string]bool // cluster directories whose node has WorkspaceGitImage
}{done: map[string]bool{}}

// LoadWorkspaceGitImage makes WorkspaceGitImage runnable on the real node: it builds the image
// with scripts/build-workspace-git-image (cached outside the clone: under a second when nothing
// changed, a few seconds otherwise) and loads it with scripts/kube-load-image, once per cluster
// in a test binary. Pods then name it with imagePullPolicy IfNotPresent or Never.
func (c *Cluster) LoadWorkspaceGitImage(t testing.TB) {
	t.Helper()
	gitImageLoads.Lock()
	defer gitImageLoads.Unlock()
	if gitImageLoads.done[c.Dir] {
		return
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	build := exec.Command(filepath.Join(root, "scripts", "build-workspace-git-image"))
	var stderr strings.Builder
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("kubetest: scripts/build-workspace-git-image: %v\n%s", err, stderr.String())
	}
	archive := strings.TrimSpace(string(out))
	load, err := exec.Command(filepath.Join(root, "scripts", "kube-load-image"), c.Dir, archive).CombinedOutput()
	if err != nil {
		t.Fatalf("kubetest: scripts/kube-load-image %s %s: %v\n%s", c.Dir, archive, err, load)
	}
	if !strings.Contains(string(load), WorkspaceGitImage) {
		t.Fatalf("kubetest: scripts/kube-load-image did not load %s:\n%s", WorkspaceGitImage, load)
	}
	gitImageLoads.done[c.Dir] = true
}
