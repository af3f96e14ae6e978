package helmcharts

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRootFindsTheCheckout: Root is the checkout's root, from which the charts and
// scripts/build-helm are found, also in a test binary built with -trimpath (as .ci/run builds
// every one), where the source file's path is only its import path. Before, Root came from
// runtime.Caller, and under -trimpath every chart test failed with "fork/exec
// github.com/hangar-dev/hangar/scripts/build-helm: no such file or directory".
func TestRootFindsTheCheckout(t *testing.T) {
	root := Root()
	if !filepath.IsAbs(root) {
		t.Fatalf("Root() = %q, want an absolute path", root)
	}
	for _, p := range []string{filepath.Join(root, "scripts", "build-helm"), filepath.Join(ChartDir("hangar-server"), "Chart.yaml")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Root() = %q: %v", root, err)
		}
	}
}
