package devcontainer

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus.golden")

// manifest reads testdata/corpus/MANIFEST.tsv: file, repo, path, commit, license.
func manifest(t *testing.T) map[string][3]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][3]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "\t")
		if i == 0 {
			if strings.Join(f, ",") != "file,repo,path,commit,license" {
				t.Fatalf("MANIFEST.tsv header %q, want file, repo, path, commit, license", line)
			}
			continue
		}
		if len(f) != 5 || len(f[3]) != 40 || !strings.Contains(f[1], "/") || f[2] == "" || f[4] == "" {
			t.Fatalf("MANIFEST.tsv line %d: want a file, a repository owner/name, a path, a 40-character commit and a license: %q", i+1, line)
		}
		out[f[0]] = [3]string{f[1], f[2], f[3]}
	}
	return out
}

// TestCorpus translates every real devcontainer.json of testdata/corpus (each listed in
// MANIFEST.tsv with where it came from) and compares the outcome with testdata/corpus.golden
// (-update rewrites it): accepted, with what the workspace runs (image, user, ports, environment,
// volumes, lifecycle commands) and the warnings; or refused, with every problem. Each accepted one
// is also checked against the file itself, read on its own: its image, ports, environment and
// commands are in the pod.
func TestCorpus(t *testing.T) {
	listed := manifest(t)
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("%d corpus files, want at least 100", len(files))
	}
	var out strings.Builder
	for _, p := range files {
		name := filepath.Base(p)
		if _, ok := listed[name]; !ok {
			t.Errorf("%s is not listed in MANIFEST.tsv", name)
		}
		delete(listed, name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Translate(data, testOptions())
		if err != nil {
			var ve *workspace.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Errorf("%s: not a ValidationError: %v", name, err)
				continue
			}
			fmt.Fprintf(&out, "%s: refused\n", name)
			for _, pr := range ve.Problems {
				if !strings.HasPrefix(pr.Field, "devcontainer") {
					t.Errorf("%s: problem %q names no devcontainer field", name, pr.Field)
				}
				fmt.Fprintf(&out, "  error %s: %s\n", pr.Field, pr.Detail)
			}
			continue
		}
		g := generate(t, string(data))
		fmt.Fprintf(&out, "%s: accepted\n%s", name, summary(g))
		checkFaithful(t, name, data, g)
	}
	for f := range listed {
		t.Errorf("MANIFEST.tsv lists %s, which is missing", f)
	}
	golden := filepath.Join("testdata", "corpus.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != out.String() {
		t.Errorf("outcomes differ from %s (run with -update and review the diff):\n%s", golden, out.String())
	}
}

// summary is what the workspace runs, one fact a line.
func summary(g pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  image %s\n", g.main.Image)
	if g.build != nil {
		fmt.Fprintf(&b, "  built from %s\n", g.build.Base)
		for _, f := range g.build.Features {
			opts, _ := json.Marshal(f.Options)
			fmt.Fprintf(&b, "  feature %s %s\n", f.Ref, opts)
		}
	}
	fmt.Fprintf(&b, "  uid %d\n", *g.security.RunAsUser)
	for _, e := range g.devfile.Endpoints() {
		if !strings.HasPrefix(e.Name, "hangar") {
			fmt.Fprintf(&b, "  port %d %s %s\n", e.Port, e.Name, e.Exposure)
		}
	}
	for _, e := range g.main.Env {
		if !strings.HasPrefix(e.Name, "HANGAR_") {
			fmt.Fprintf(&b, "  env %s=%s\n", e.Name, e.Value)
		}
	}
	for _, e := range g.remoteEnv {
		fmt.Fprintf(&b, "  remoteEnv %s=%s\n", e.Name, e.Value)
	}
	for _, m := range g.main.VolumeMounts {
		if !strings.HasPrefix(m.Name, "hangar") {
			fmt.Fprintf(&b, "  mount %s %s\n", m.Name, m.MountPath)
		}
	}
	for _, c := range g.postStart {
		when := "each start"
		if c.OncePerWorkspace {
			when = "once"
		}
		fmt.Fprintf(&b, "  command %s (%s): %s\n", c.ID, when, strconv.Quote(c.CommandLine))
	}
	for _, w := range g.warnings {
		fmt.Fprintf(&b, "  warning %s\n", w)
	}
	return b.String()
}

// checkFaithful reads the file on its own and checks that what it asks for is in the pod.
func checkFaithful(t *testing.T, name string, data []byte, g pod) {
	t.Helper()
	js, err := standardize(data)
	if err != nil {
		t.Fatal(err)
	}
	var dc struct {
		Image             string            `json:"image"`
		ForwardPorts      []any             `json:"forwardPorts"`
		ContainerEnv      map[string]string `json:"containerEnv"`
		RemoteUser        string            `json:"remoteUser"`
		PostCreateCommand any               `json:"postCreateCommand"`
		PostStartCommand  any               `json:"postStartCommand"`
	}
	if err := json.Unmarshal(js, &dc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	image := g.main.Image
	if g.build != nil {
		image = g.build.Base
		if want := imagebuild.Ref(testRegistry, g.build.Hash()); g.main.Image != want {
			t.Errorf("%s: builds, but runs the image %q, not the build's %q", name, g.main.Image, want)
		}
	}
	if !strings.Contains(dc.Image, "${") && image != dc.Image {
		t.Errorf("%s: image %q, want %q", name, image, dc.Image)
	}
	for _, p := range dc.ForwardPorts {
		if n, ok := p.(float64); ok && !slices.ContainsFunc(g.main.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == int32(n) }) {
			t.Errorf("%s: forwardPorts %v is not a port of the container", name, n)
		}
	}
	for k := range dc.ContainerEnv {
		if _, ok := g.env(k); !ok {
			t.Errorf("%s: containerEnv %s is not in the container's environment", name, k)
		}
	}
	if uid, ok := knownUsers[dc.RemoteUser]; ok && *g.security.RunAsUser != uid {
		t.Errorf("%s: remoteUser %s runs as %d, want %d", name, dc.RemoteUser, *g.security.RunAsUser, uid)
	}
	for _, c := range []struct {
		cmd  any
		id   string
		once bool
	}{{dc.PostCreateCommand, "post-create", true}, {dc.PostStartCommand, "post-start", false}} {
		s, ok := c.cmd.(string)
		if !ok || strings.TrimSpace(s) == "" || strings.Contains(s, "${") { // an empty command runs nothing
			continue
		}
		i := slices.IndexFunc(g.postStart, func(p workspace.PostStartCommand) bool { return p.ID == c.id })
		if i < 0 || g.postStart[i].OncePerWorkspace != c.once || !strings.Contains(g.postStart[i].CommandLine, s) {
			t.Errorf("%s: %s %q is not run by the helper (once: %v): %+v", name, c.id, s, c.once, g.postStart)
		}
	}
}
