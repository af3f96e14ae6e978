package devcontainer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// repoOptions are testOptions for a definition at .devcontainer/devcontainer.json of a repository.
func repoOptions(files fstest.MapFS) Options {
	o := testOptions()
	o.Repo, o.Dir, o.FromRepository = files, ".devcontainer", true
	return o
}

func testRepo() fstest.MapFS {
	return fstest.MapFS{
		".devcontainer/Dockerfile": {Data: []byte("ARG VARIANT=bullseye\nFROM mcr.microsoft.com/devcontainers/base:${VARIANT} AS base\n" +
			"ARG NODE\nRUN echo node=$NODE\nFROM base AS dev\nCOPY package.json /tmp/\nFROM base AS prod\nRUN prod\n")},
		"package.json":      {Data: []byte("{}\n")},
		"docker/Dockerfile": {Data: []byte("FROM debian:12\nRUN echo legacy\n")},
	}
}

// build: the Dockerfile named relative to the devcontainer.json, the context (its parent here),
// the args (devcontainer variables expanded), the target and --build-arg in options; the
// workspace runs the build's base until the image build is wired.
func TestBuild(t *testing.T) {
	r, err := Translate([]byte(`{
		"build": {"dockerfile": "Dockerfile", "context": "..", "target": "dev",
			"args": {"VARIANT": "bookworm", "NODE": "${localWorkspaceFolderBasename}"},
			"options": ["--build-arg", "EXTRA=1", "--pull"], "cacheFrom": "ghcr.io/x/y"}
	}`), repoOptions(testRepo()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Build == nil || r.Build.Base != "mcr.microsoft.com/devcontainers/base:bookworm" || len(r.Build.Steps) != 2 {
		t.Fatalf("build: %+v", r.Build)
	}
	if s := r.Build.Steps[0]; s.Op != imagebuild.OpRun || !slices.Equal(s.Env, []string{"NODE=demo"}) {
		t.Errorf("the base stage's RUN: %+v", s)
	}
	if s := r.Build.Steps[1]; s.Op != imagebuild.OpCopy || len(s.Files) != 1 || s.Files[0].Path != "/tmp/package.json" {
		t.Errorf("the dev stage's COPY: %+v", s)
	}
	if !strings.Contains(string(r.Devfile), `"image": "mcr.microsoft.com/devcontainers/base:bookworm"`) {
		t.Errorf("the devfile's image is not the build's base:\n%s", r.Devfile)
	}
	for _, w := range []string{
		"build.options --pull is ignored",
		"build.cacheFrom is ignored",
		"the build argument EXTRA is not used",
		".devcontainer/Dockerfile: 1 of its 3 stages are not built",
	} {
		if !slices.ContainsFunc(r.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no warning %q in %q", w, r.Warnings)
		}
	}

	// The legacy dockerFile and context, at the repository's root.
	o := repoOptions(testRepo())
	o.Dir = "."
	r, err = Translate([]byte(`{"dockerFile": "docker/Dockerfile", "context": "docker"}`), o)
	if err != nil || r.Build.Base != "debian:12" || r.Build.Steps[0].Args[2] != "echo legacy" {
		t.Fatalf("legacy: %+v, %v", r, err)
	}
}

// What cannot be built is refused naming the field.
func TestBuildRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"build": {"dockerfile": "Dockerfile", "target": "test"}}`, `devcontainer.build.target: .devcontainer/Dockerfile: has no stage named "test" (its stages: base, dev, prod)`},
		{`{"build": {"dockerfile": "Nope"}}`, "devcontainer.build.dockerfile: the repository has no .devcontainer/Nope"},
		{`{"build": {"dockerfile": "../../Dockerfile"}}`, `devcontainer.build.dockerfile: "../../Dockerfile" is outside the repository`},
		{`{"build": {"dockerfile": "Dockerfile", "context": "nope"}}`, "devcontainer.build.context: the repository has no folder .devcontainer/nope"},
		{`{"build": {"dockerfile": "Dockerfile", "options": ["--network=host"]}}`, "devcontainer.build.options[0]: --network is refused: of docker build's options Hangar honours --build-arg only"},
		{`{"build": {"dockerfile": "Dockerfile", "args": {"A": 1}}}`, "devcontainer.build.args.A: must be a string"},
		{`{"build": {"context": ".."}}`, "devcontainer.build.dockerfile: is required with build"},
		{`{"build": "Dockerfile"}`, "devcontainer.build: must be an object"},
		{`{"image": "debian:12", "build": {"dockerfile": "Dockerfile"}}`, "devcontainer.image: and build.dockerfile both say what the workspace runs"},
		{`{"build": {"dockerfile": "Dockerfile", "target": "dev"}}`, "devcontainer.build.dockerfile: .devcontainer/Dockerfile:6: COPY package.json: not found in the build context"},
	} {
		_, err := Translate([]byte(c.text), repoOptions(testRepo()))
		var ve *workspace.ValidationError
		if !errors.As(err, &ve) || !slices.ContainsFunc(ve.Problems, func(p workspace.FieldError) bool { return strings.HasPrefix(p.Field+": "+p.Detail, c.want) }) {
			t.Errorf("%s: got %v, want %q", c.text, err, c.want)
		}
	}
}
