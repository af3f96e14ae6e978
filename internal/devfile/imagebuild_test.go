package devfile

import (
	"errors"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// problems returns every problem of a ValidationError as "field: detail".
func problems(t *testing.T, err error) []string {
	t.Helper()
	var ve *workspace.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Field+": "+p.Detail)
	}
	return out
}

// TestImageBuildWithoutRegistry: an agent that neither builds images nor has the build's hash
// mapped refuses the definition, naming the field the user wrote and the hash an admin maps.
func TestImageBuildWithoutRegistry(t *testing.T) {
	build := string(readFile(t, "build.devfile.yaml"))
	hash := buildHash(t)
	for _, tc := range []struct {
		name, devfile string
		fields        []string
	}{
		{"features", build, []string{"devcontainer.features"}},
		{"dockerfile steps", strings.Replace(build, "    remote_user: vscode\n", "    remote_user: vscode\n    steps:\n      - op: run\n        args: [/bin/sh, -c, \"apt-get update\"]\n", 1), []string{"devcontainer.build", "devcontainer.features"}},
		{"hand-written devfile", strings.Replace(build, "  hangar.dev/definition: devcontainer.json\n", "", 1), []string{`devfile.attributes["hangar.dev/image-build"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, []byte(tc.devfile))
			_, h := d.ImageBuild()
			_, err := Generate(d, defaultParams(t))
			got := problems(t, err)
			if len(got) != len(tc.fields) {
				t.Fatalf("got %q, want problems on %q", got, tc.fields)
			}
			for i, f := range tc.fields {
				if !strings.HasPrefix(got[i], f+": needs an image build (build hash "+h+"), and this agent does not build images: an admin sets the agent's image_build.registry") {
					t.Errorf("problem %d: %q, want one on %s with the hash", i, got[i], f)
				}
			}
			if tc.name == "features" && h != hash {
				t.Errorf("hash %s, want %s", h, hash)
			}
		})
	}
	// The hash is shown with the workspace (its warnings) so that a user can ask for a mapping.
	if w := mustParse(t, []byte(build)).Warnings(); len(w) != 1 || !strings.Contains(w[0], "build hash "+hash) || !strings.Contains(w[0], "image_build.prebuilt") {
		t.Errorf("warnings %q do not give the build hash", w)
	}
}

// TestImageBuildAttributeChecked: a devfile's hangar.dev/image-build is checked as the translator
// checks a devcontainer.json, so a hand-written one asks for nothing a devcontainer.json could not.
func TestImageBuildAttributeChecked(t *testing.T) {
	build := string(readFile(t, "build.devfile.yaml"))
	const f = `devfile.attributes["hangar.dev/image-build"]`
	for _, tc := range []struct{ name, from, to, want string }{
		{"base is not the main image", "    base: mcr.microsoft.com/devcontainers/base:ubuntu", "    base: debian:12", f + `.base: is "debian:12", but the main container's image is "mcr.microsoft.com/devcontainers/base:ubuntu"`},
		{"docker-in-docker", "ghcr.io/devcontainers/features/node:1", "ghcr.io/devcontainers/features/docker-in-docker:2", f + ".features[0].ref: docker-in-docker runs Docker, and Docker cannot run in a Hangar workspace"},
		{"local feature", "ghcr.io/devcontainers/features/node:1", "./local-features/cli", f + `.features[0].ref: "./local-features/cli" is not an OCI reference`},
		{"option number", `version: "20"`, `version: 20`, f + `.features[0].options["version"]: must be a string or true/false`},
		{"unknown step", "    remote_user: vscode\n", "    remote_user: vscode\n    steps:\n      - op: mount\n", f + ".steps[0].op: must be one of run, copy, env, workdir, user, label"},
		{"order names no feature", "      - ghcr.io/devcontainers/features/github-cli\n", "      - ghcr.io/devcontainers/features/go\n", f + `.feature_order[0]: names "ghcr.io/devcontainers/features/go", which is not one of the features`},
		{"not an object", "  hangar.dev/image-build:\n", "  hangar.dev/image-build: [1]\n  x-build:\n", f + ": must be an image build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(build, tc.from, tc.to, 1)
			if text == build {
				t.Fatalf("%q is not in build.devfile.yaml", tc.from)
			}
			_, err := Parse([]byte(text))
			got := problems(t, err)
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("got %q, want one problem %q", got, tc.want)
			}
		})
	}
}
