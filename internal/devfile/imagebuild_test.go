package devfile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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

// TestImageBuildSeparatesTheCredential: the user's steps run in hangar-image-build, which has
// neither the push secret's volume nor DOCKER_CONFIG nor the workspace's env; the credential is
// only in hangar-image-prepare and hangar-image-push, which run the tools image as the pod's
// non-root user with every capability dropped. The three share the work emptyDir, which no other
// container mounts, and each one's log tail is its failure message.
func TestImageBuildSeparatesTheCredential(t *testing.T) {
	var params Params
	for _, tc := range generateCases(t) {
		if tc.name == "image-build-per-workspace" {
			params = tc.params
		}
	}
	out, err := Generate(mustParse(t, readFile(t, "build.devfile.yaml")), params)
	if err != nil {
		t.Fatal(err)
	}
	spec := readBack(t, out).deployment.Spec.Template.Spec
	var names []string
	inits := map[string]corev1.Container{}
	for _, c := range spec.InitContainers {
		names = append(names, c.Name)
		inits[c.Name] = c
	}
	if want := []string{ToolsContainerName, ImagePrepareContainerName, ImageBuildContainerName, ImagePushContainerName, CloneContainerName}; !slices.Equal(names, want) {
		t.Fatalf("init containers %q, want %q", names, want)
	}
	secretVolumes := map[string]bool{}
	var work string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secretVolumes[v.Name] = true
		}
		if v.EmptyDir != nil && v.Name == imageBuildWork {
			work = v.Name
		}
	}
	if work == "" {
		t.Fatalf("no emptyDir %s among the volumes %v", imageBuildWork, spec.Volumes)
	}
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot || spec.SecurityContext.RunAsUser == nil || *spec.SecurityContext.RunAsUser == 0 {
		t.Fatalf("pod security context %+v: want runAsNonRoot and a non-root runAsUser", spec.SecurityContext)
	}
	mounts := func(c corev1.Container, volume string) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume })
	}
	build := inits[ImageBuildContainerName]
	if build.Image != "mcr.microsoft.com/devcontainers/base:ubuntu" || !slices.Equal(build.Command[1:3], []string{"image-build", "run"}) {
		t.Errorf("%s: image %s command %q, want the base running image-build run", build.Name, build.Image, build.Command)
	}
	for _, m := range build.VolumeMounts {
		if secretVolumes[m.Name] {
			t.Errorf("%s mounts the secret volume %s at %s", build.Name, m.Name, m.MountPath)
		}
	}
	for _, e := range build.Env {
		if e.Name == "DOCKER_CONFIG" {
			t.Errorf("%s has DOCKER_CONFIG=%s", build.Name, e.Value)
		}
	}
	if len(build.EnvFrom) > 0 {
		t.Errorf("%s gets the workspace's env %v", build.Name, build.EnvFrom)
	}
	if sc := build.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || !slices.Equal(sc.Capabilities.Add, ImageBuildCapabilities) {
		t.Errorf("%s: security context %+v, want root with the build's capabilities", build.Name, sc)
	}
	for _, name := range []string{ImagePrepareContainerName, ImagePushContainerName} {
		c := inits[name]
		phase := strings.TrimPrefix(name, "hangar-image-")
		if c.Image != params.Agent.ToolsImage || !slices.Equal(c.Command[:3], []string{ToolsBinary, "image-build", phase}) {
			t.Errorf("%s: image %s command %q, want the tools image running image-build %s", name, c.Image, c.Command, phase)
		}
		if !mounts(c, imageBuildDocker) || !slices.Contains(c.Env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: ImageBuildDockerDir}) {
			t.Errorf("%s: mounts %v env %v, want the push secret and DOCKER_CONFIG", name, c.VolumeMounts, c.Env)
		}
		sc := c.SecurityContext
		if sc == nil || sc.RunAsUser != nil || sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: security context %+v, want the pod's non-root user, no escalation, every capability dropped", name, sc)
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("%s gets the workspace's env %v", name, c.EnvFrom)
		}
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		inBuild := isImageBuild(c.Name)
		if mounts(c, work) != inBuild {
			t.Errorf("%s: mounts the work volume %v, want %v", c.Name, mounts(c, work), inBuild)
		}
		if mounts(c, imageBuildDocker) && c.Name != ImagePrepareContainerName && c.Name != ImagePushContainerName {
			t.Errorf("%s mounts the push secret", c.Name)
		}
		if inBuild && c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("%s: terminationMessagePolicy %q, want FallbackToLogsOnError (its last log line is the reason the user sees)", c.Name, c.TerminationMessagePolicy)
		}
	}
}
