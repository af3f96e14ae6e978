// Package helmcharts locates the Helm charts of this directory (hangar-server, hangar-agent,
// hangar-proxy) and the helm binary scripts/build-helm builds from the pinned helm.sh/helm/v3, for
// the charts' checks (charts_test.go) and the end-to-end test that installs them (internal/e2e).
package helmcharts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// Root is the repository's root directory: the nearest directory above the working directory (a
// package directory under go test) that holds scripts/build-helm. Not the path of this source file:
// -trimpath, which .ci/run gives every go command, leaves only its import path.
func Root() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("helmcharts: the working directory: %v", err))
	}
	for d := wd; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, "scripts", "build-helm")); err == nil && !fi.IsDir() {
			return d
		}
		if filepath.Dir(d) == d {
			panic(fmt.Sprintf("helmcharts: no scripts/build-helm in %s or above it: run from a checkout of hangar", wd))
		}
	}
}

// ChartDir is the directory of a chart of this repository, such as "hangar-agent".
func ChartDir(name string) string {
	return filepath.Join(Root(), "deploy", "helm", name)
}

// Binary returns the path of the helm binary, building it on first use (scripts/build-helm: a
// cached build is found at once; .ci/run builds it before the tests).
func Binary() (string, error) {
	helmOnce.Do(func() {
		var stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(Root(), "scripts", "build-helm"))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("scripts/build-helm: %v\n%s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	return helmPath, helmErr
}
