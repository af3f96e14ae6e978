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
	// The build is three init containers, after hangar-tools (whose binary the build container
	// runs) and before the project clone; the kubelet pulls the main container's image, the
	// build's result, only once the init containers have ended. ImagePrepareContainerName and
	// ImagePushContainerName run the tools image with the push credential and no code of the
	// user's; ImageBuildContainerName runs the user's steps in the build's Base, as root with
	// ImageBuildCapabilities, with neither the credential nor the workspace's env.
	ImagePrepareContainerName = protocol.ImagePrepareContainerName
	ImageBuildContainerName   = protocol.ImageBuildContainerName
	ImagePushContainerName    = protocol.ImagePushContainerName
	// The ConfigMap <name>-image-build holds the Spec (key ImageBuildSpecKey), mounted at
	// ImageBuildDir.
	ImageBuildDir     = "/hangar/build"
	ImageBuildSpecKey = "spec.json"
	imageBuildVolume  = "hangar-image-build"
	// The three share an emptyDir at ImageBuildWorkDir: prepare writes the base's config and the
	// features, the build the layer and its config, which push reads as hostile.
	ImageBuildWorkDir = "/hangar/work"
	imageBuildWork    = "hangar-image-work"
	// The push secret (image_build.push_secret), its .dockerconfigjson as config.json, is mounted
	// at ImageBuildDockerDir, which DOCKER_CONFIG names, in prepare and push only.
	ImageBuildDockerDir = "/hangar/docker"
	imageBuildDocker    = "hangar-image-build-docker"
)

// isImageBuild says whether an init container is one of the image build's three.
func isImageBuild(name string) bool {
	return name == ImagePrepareContainerName || name == ImageBuildContainerName || name == ImagePushContainerName
}

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

// imageBuildContainer is the init container that runs the user's part of the build: `hangar
// image-build run` (the binary hangar-tools copied) in an image of the build's Base, as root with
// ImageBuildCapabilities, no privilege escalation and the runtime's seccomp profile. It has no
// registry credential and needs no registry: prepare fetched what it installs. Its log's tail is
// the message when it fails: the reason the user sees.
func imageBuildContainer(a workspace.AgentConfig) container {
	r := buildResources(a.ImageBuild.Resources, a.MaxResources)
	return container{
		name:    ImageBuildContainerName,
		image:   "", // the build's Base: set by podContainers
		command: []string{HelperBinary, "image-build", "run", "--spec", ImageBuildDir + "/" + ImageBuildSpecKey, "--dir", ImageBuildWorkDir},
		mounts: []corev1.VolumeMount{
			{Name: toolsVolume, MountPath: HelperDir, ReadOnly: true},
			{Name: imageBuildVolume, MountPath: ImageBuildDir, ReadOnly: true},
			{Name: imageBuildWork, MountPath: ImageBuildWorkDir},
		},
		cpuRequest:    optQuantity(r.Requests.CPU),
		cpuLimit:      optQuantity(r.Limits.CPU),
		memoryRequest: optQuantity(r.Requests.Memory),
		memoryLimit:   optQuantity(r.Limits.Memory),
		logsAsMessage: true,
		imageBuild:    true,
	}
}

// imageRegistryContainer is prepare's or push's init container (phase "prepare" or "push"):
// `hangar image-build PHASE` from the agent's tools image, which runs no code of the user's, with
// the push credential (DOCKER_CONFIG) and the pod's restricted security context, as hangar-tools.
// Its resources are small: it streams the base's config, the features and the layer.
func imageRegistryContainer(a workspace.AgentConfig, name, phase, ref string) container {
	argv := []string{ToolsBinary, "image-build", phase, "--spec", ImageBuildDir + "/" + ImageBuildSpecKey, "--image", ref, "--dir", ImageBuildWorkDir}
	for _, r := range a.ImageBuild.InsecureRegistries {
		argv = append(argv, "--insecure-registry", r)
	}
	mounts := []corev1.VolumeMount{
		{Name: imageBuildVolume, MountPath: ImageBuildDir, ReadOnly: true},
		{Name: imageBuildWork, MountPath: ImageBuildWorkDir},
	}
	var env []corev1.EnvVar
	if a.ImageBuild.PushSecret != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: imageBuildDocker, MountPath: ImageBuildDockerDir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: ImageBuildDockerDir})
	}
	r := buildResources(workspace.Resources{
		Requests: workspace.ResourceList{CPU: "50m", Memory: "64Mi"},
		Limits:   workspace.ResourceList{CPU: "1", Memory: "256Mi"},
	}, a.MaxResources)
	return container{
		name:          name,
		image:         a.ToolsImage,
		command:       argv,
		env:           env,
		mounts:        mounts,
		cpuRequest:    optQuantity(r.Requests.CPU),
		cpuLimit:      optQuantity(r.Limits.CPU),
		memoryRequest: optQuantity(r.Requests.Memory),
		memoryLimit:   optQuantity(r.Limits.Memory),
		logsAsMessage: true,
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

// buildResources is withinCaps with each request kept at or below its limit too: a cap may have
// lowered the limit below the request.
func buildResources(r workspace.Resources, caps workspace.Resources) workspace.Resources {
	r = withinCaps(r, caps)
	return withinCaps(r, workspace.Resources{Requests: r.Limits})
}
