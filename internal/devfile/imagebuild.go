package devfile

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Names and paths of the image build in a workspace pod (docs/decisions.md, "Image builds in the
// cluster: wiring").
const (
	// ImageBuildContainerName is the init container that builds the main container's image: it runs
	// after hangar-tools (whose binary it runs) and before the project clone, and the kubelet pulls
	// the main container's image, the build's result, only once the init containers have ended.
	ImageBuildContainerName = protocol.ImageBuildContainerName
	// The ConfigMap <name>-image-build holds the Spec (key ImageBuildSpecKey), mounted at
	// ImageBuildDir.
	ImageBuildDir     = "/hangar/build"
	ImageBuildSpecKey = "spec.json"
	imageBuildVolume  = "hangar-image-build"
	// The push secret (image_build.push_secret), its .dockerconfigjson as config.json, is mounted
	// at ImageBuildDockerDir, which DOCKER_CONFIG names.
	ImageBuildDockerDir = "/hangar/docker"
	imageBuildDocker    = "hangar-image-build-docker"
)

// imageBuildProgressSeconds is the progress deadline of a Deployment whose pod builds its image:
// an hour, for a first build; a build found in the registry ends at once.
const imageBuildProgressSeconds = 3600

// ImageBuildCapabilities are the capabilities the build container adds back after dropping all:
// what a package manager running as root needs to create users and give files their owners
// (chown, setuid binaries, reading and writing files of other users), and no more. The "baseline"
// Pod Security Standard allows exactly these and a few others, not "restricted".
var ImageBuildCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"}

// buildPlan is what Generate does with a devfile's image build, for one agent.
type buildPlan struct {
	// image replaces the main container's image: the build's Ref or the prebuilt image ("": no
	// build).
	image string
	// spec is the Spec's JSON when the pod builds image (else empty: a prebuilt image, or none).
	spec []byte
}

// planBuild decides how the main container gets its built image with the agent's image_build: the
// prebuilt image mapped to the build's hash, else a build pushed to the agent's registry. With
// neither, the definition is refused, naming the field the user wrote and the hash an admin maps.
func (d *Devfile) planBuild(a workspace.AgentConfig) (buildPlan, error) {
	if d.build == nil {
		return buildPlan{}, nil
	}
	if img, ok := a.ImageBuild.PrebuiltImage(d.buildHash); ok {
		return buildPlan{image: img}, nil
	}
	if a.ImageBuild.Registry != "" {
		spec, _ := json.Marshal(d.build) // parsed from JSON: cannot fail
		return buildPlan{image: imagebuild.Ref(a.ImageBuild.Registry, d.buildHash), spec: spec}, nil
	}
	var fields []string
	switch {
	case d.definition != DefinitionDevcontainer:
		fields = []string{fmt.Sprintf("devfile.attributes[%q]", ImageBuildAttribute)}
	case len(d.build.Steps) > 0 || len(d.build.Features) == 0:
		fields = append(fields, "devcontainer.build")
		if len(d.build.Features) > 0 {
			fields = append(fields, "devcontainer.features")
		}
	default:
		fields = []string{"devcontainer.features"}
	}
	v := &workspace.ValidationError{}
	for _, f := range fields {
		v.Add(f, "needs an image build (build hash %s), and this agent does not build images: an admin sets the agent's image_build.registry, "+
			"or maps this hash to an image built elsewhere in image_build.prebuilt", d.buildHash)
	}
	return buildPlan{}, v
}

// imageBuildContainer is the init container that runs the build: `hangar image-build` (the binary
// hangar-tools copied) in an image of the build's Base, as root with ImageBuildCapabilities, no
// privilege escalation and the runtime's seccomp profile. Its log's tail is the message when it
// fails: the reason the user sees.
func imageBuildContainer(a workspace.AgentConfig, ref string) container {
	argv := []string{HelperBinary, "image-build", "--spec", ImageBuildDir + "/" + ImageBuildSpecKey, "--image", ref}
	for _, r := range a.ImageBuild.InsecureRegistries {
		argv = append(argv, "--insecure-registry", r)
	}
	mounts := []corev1.VolumeMount{
		{Name: toolsVolume, MountPath: HelperDir, ReadOnly: true},
		{Name: imageBuildVolume, MountPath: ImageBuildDir, ReadOnly: true},
	}
	var env []corev1.EnvVar
	if a.ImageBuild.PushSecret != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: imageBuildDocker, MountPath: ImageBuildDockerDir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: ImageBuildDockerDir})
	}
	r := withinCaps(a.ImageBuild.Resources, a.MaxResources)
	for _, p := range []struct{ req, lim *string }{{&r.Requests.CPU, &r.Limits.CPU}, {&r.Requests.Memory, &r.Limits.Memory}} {
		if q, l := optQuantity(*p.req), optQuantity(*p.lim); q != nil && l != nil && q.Cmp(*l) > 0 {
			*p.req = *p.lim // a cap lowered the limit below the request
		}
	}
	return container{
		name:          ImageBuildContainerName,
		image:         "", // the build's Base: set by podContainers
		command:       argv,
		env:           env,
		mounts:        mounts,
		cpuRequest:    optQuantity(r.Requests.CPU),
		cpuLimit:      optQuantity(r.Limits.CPU),
		memoryRequest: optQuantity(r.Requests.Memory),
		memoryLimit:   optQuantity(r.Limits.Memory),
		logsAsMessage: true,
		imageBuild:    true,
	}
}

// imageBuildSecurity is the build container's security context.
func imageBuildSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr(int64(0)),
		RunAsGroup:               ptr(int64(0)),
		RunAsNonRoot:             ptr(false),
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: ImageBuildCapabilities},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// withinCaps returns r with each value kept at or below the agent's per-workspace cap of the same
// resource.
func withinCaps(r workspace.Resources, caps workspace.Resources) workspace.Resources {
	clamp := func(v *string, limit string) {
		d, l := optQuantity(*v), optQuantity(limit)
		if d != nil && l != nil && d.Cmp(*l) > 0 {
			*v = limit
		}
	}
	clamp(&r.Limits.CPU, caps.Limits.CPU)
	clamp(&r.Limits.Memory, caps.Limits.Memory)
	clamp(&r.Requests.CPU, caps.Requests.CPU)
	clamp(&r.Requests.Memory, caps.Requests.Memory)
	return r
}
