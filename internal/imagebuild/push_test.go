//go:build linux

package imagebuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hangar-dev/hangar/internal/clock"
)

// TestPushTreatsTheWorkDirectoryAsHostile: what push reads from the work directory may have been
// written by the user's steps (the build container runs them as root, with that directory
// mounted). A config.json with other fields than Env, User, WorkingDir and Labels, one over the
// bound, a bad Env entry, a layer that is not gzip, a symbolic link (to the credential, say) or a
// fifo in place of a file: each is refused on one line, and nothing is written to the registry. A
// gzip that holds no tar is pushed as the blob it is, never extracted, under the tag of the
// command line, with only the config fields taken.
func TestPushTreatsTheWorkDirectoryAsHostile(t *testing.T) {
	_, reg, base := newBase(t)
	spec := Spec{Base: base, Steps: []Step{{Op: OpRun, Args: []string{"true"}}}}
	image := Ref(reg.Host+"/hangar/builds", spec.Hash())
	specFile := filepath.Join(t.TempDir(), "spec.json")
	b, _ := json.Marshal(spec)
	must(t, os.WriteFile(specFile, b, 0o644))
	secret := filepath.Join(t.TempDir(), "config.json")
	must(t, os.WriteFile(secret, []byte(`{"auths":{"registry":{"auth":"c2VjcmV0"}}}`), 0o600))

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprint(zw, "not a tar at all")
	must(t, zw.Close())
	goodConfig := `{"env":["PATH=/bin","A=1"],"user":"dev","working_dir":"/w","labels":{"l":"v"}}`
	file := func(content string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(content), 0o644) }
	}

	push := func(t *testing.T, config, layer func(string) error) (int, string) {
		t.Helper()
		dir := t.TempDir()
		must(t, config(filepath.Join(dir, workConfig)))
		must(t, layer(filepath.Join(dir, workLayer)))
		var out bytes.Buffer
		x := &Executor{Out: &out, Clock: clock.NewFake(buildTime)}
		code := Main(context.Background(), x, Invocation{Phase: PhasePush, Spec: specFile, Image: image, Dir: dir})
		t.Logf("push exited %d:\n%s", code, out.String())
		return code, out.String()
	}
	for _, tc := range []struct {
		name          string
		config, layer func(string) error
		want          string
	}{
		{"a config with another field", file(`{"env":["A=1"],"entrypoint":["/evil"]}`), file(gz.String()),
			`the build's config.json: json: unknown field "entrypoint"`},
		{"a config over the bound", file(`{"labels":{"big":"` + strings.Repeat("x", maxWorkConfig) + `"}}`), file(gz.String()),
			fmt.Sprintf("the build's config.json: more than %d bytes: refused", maxWorkConfig)},
		{"an env entry without a name", file(`{"env":["=oops"]}`), file(gz.String()),
			`the build's config.json: env[0]: "=oops" is not NAME=value`},
		{"two JSON values", file(goodConfig + `{"user":"root"}`), file(gz.String()),
			"the build's config.json: more than one JSON value"},
		{"a layer that is not gzip", file(goodConfig), file("plain tar bytes"),
			"the build's layer.tar.gz is not gzip: refused"},
		{"a layer that links to the credential", file(goodConfig), func(p string) error { return os.Symlink(secret, p) },
			"the build's layer.tar.gz: not a regular file (L---------): refused"},
		{"a config that links to the credential", func(p string) error { return os.Symlink(secret, p) }, file(gz.String()),
			"the build's config.json: not a regular file (L---------): refused"},
		{"a fifo for a layer", file(goodConfig), func(p string) error { return syscall.Mkfifo(p, 0o644) },
			"the build's layer.tar.gz: not a regular file (p---------): refused"},
		{"no layer", file(goodConfig), func(string) error { return nil },
			"the build's layer.tar.gz: statat layer.tar.gz: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writes := reg.Writes.Load()
			code, out := push(t, tc.config, tc.layer)
			if code != 1 || lastLine(out) != tc.want {
				t.Errorf("exit %d, last line %q; want 1 and %q", code, lastLine(out), tc.want)
			}
			if n := reg.Writes.Load() - writes; n != 0 {
				t.Errorf("%d writes to the registry, want none", n)
			}
		})
	}

	// Confined: a gzip of anything is the layer's blob, as it is; the config has the base's fields
	// with only the four the build sets replaced.
	code, out := push(t, file(goodConfig), file(gz.String()))
	if code != 0 || !strings.HasPrefix(lastLine(out), "pushed "+image+" (sha256:") {
		t.Fatalf("push: exit %d, output %q", code, out)
	}
	ref, err := name.ParseReference(image)
	must(t, err)
	img, err := remote.Image(ref)
	must(t, err)
	layers, err := img.Layers()
	must(t, err)
	d, err := layers[len(layers)-1].Digest()
	must(t, err)
	if want := fmt.Sprintf("sha256:%x", sha256.Sum256(gz.Bytes())); d.String() != want {
		t.Errorf("the layer's digest is %s, want the file's %s", d, want)
	}
	cfg, err := img.ConfigFile()
	must(t, err)
	if c := cfg.Config; strings.Join(c.Env, " ") != "PATH=/bin A=1" || c.User != "dev" || c.WorkingDir != "/w" || len(c.Labels) != 1 || c.Labels["l"] != "v" || len(c.Entrypoint) > 0 {
		t.Errorf("config %+v: want only the work directory's Env, User, WorkingDir and Labels", c)
	}
}

// TestPhasesFlags: each phase's last line names the flag it lacks, and run and push do nothing
// when prepare found the image (the work directory says cached).
func TestPhasesFlags(t *testing.T) {
	specFile := filepath.Join(t.TempDir(), "spec.json")
	must(t, os.WriteFile(specFile, []byte(`{"base":"registry.test:5000/base:1"}`), 0o644))
	cached := t.TempDir()
	must(t, os.WriteFile(filepath.Join(cached, workCached), nil, 0o644))
	for _, tc := range []struct {
		inv  Invocation
		code int
		want string
	}{
		{Invocation{Phase: PhasePrepare, Spec: specFile, Image: "registry.test:5000/b:1"}, 1, "--dir: a directory is required"},
		{Invocation{Phase: PhasePush, Spec: specFile, Dir: cached}, 1, "--image: a reference is required"},
		{Invocation{Phase: PhaseRun, Dir: cached}, 1, "--spec: a file is required"},
		{Invocation{Phase: PhaseRun, Spec: specFile, Dir: filepath.Join(cached, "none")}, 1, "--dir " + filepath.Join(cached, "none") + ": not a directory"},
		{Invocation{Phase: PhaseRun, Spec: specFile, Dir: cached}, 0, ""},
		{Invocation{Phase: PhasePush, Spec: specFile, Image: "registry.test:5000/b:1", Dir: cached}, 0, ""},
	} {
		var out bytes.Buffer
		x := &Executor{Root: t.TempDir(), Mountinfo: "/proc/self/mountinfo", Out: &out, Transport: noRegistry{t}}
		code := Main(context.Background(), x, tc.inv)
		if got := strings.TrimSuffix(out.String(), "\n"); code != tc.code || got != tc.want {
			t.Errorf("%+v: exit %d, output %q; want %d and %q", tc.inv, code, got, tc.code, tc.want)
		}
	}
}
