// Package devfile turns a user's devfile (schemaVersion 2.0 to 2.3) into the Kubernetes objects the
// server sends to the agent as `config_to_apply`.
//
// Parse accepts what real devfiles use and does what they say: container and volume components,
// endpoints by exposure, projects (cloned by an init container), preStart, postStart and preStop
// events, variables, and Eclipse Che's container-overrides and pod-overrides attributes. What only
// build or deploy tooling uses (image, kubernetes and openshift components behind build and deploy
// commands, starterProjects) is ignored with a warning. Everything else is refused, every field at
// once with its list indices, so that a user learns at creation time what will not work instead of
// watching a workspace fail later. Generate is a pure function of a parsed devfile and the
// workspace's parameters; its output is deterministic byte for byte, so that the server can compare
// and the agent can apply it idempotently.
package devfile

import (
	_ "embed"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"
	"github.com/devfile/api/v2/pkg/attributes"
	"github.com/devfile/api/v2/pkg/validation/variables"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// MainAttribute marks the main container component: `attributes: {hangar.dev/main: true}`.
const MainAttribute = workspace.ReservedPrefix + "main"

// GitLabMainAttribute is GitLab's mark of the main container (its editor is injected there); Hangar
// reads it the same way when no component has MainAttribute, so GitLab's devfiles run unchanged,
// and injects its own editor for it (EditorAttribute).
const GitLabMainAttribute = "gl/inject-editor"

// EditorAttribute on a container component asks for the web editor: `hangar.dev/editor:
// code-server` injects it (as `gl/inject-editor: true` does), `none` leaves it out even where
// gl/inject-editor asks for it. See editor.go.
const EditorAttribute = workspace.ReservedPrefix + "editor"

// DefinitionAttribute, at the top of a devfile, names what the workspace was defined with: a
// devfile (unset) or DefinitionDevcontainer, when internal/devcontainer translated a
// devcontainer.json into this devfile. DefinitionWarningsAttribute (a list of strings) carries that
// translation's warnings, which Warnings lists first, so that they are shown with the workspace.
const (
	DefinitionAttribute         = workspace.ReservedPrefix + "definition"
	DefinitionWarningsAttribute = workspace.ReservedPrefix + "definition-warnings"
	DefinitionDevfile           = "devfile"
	DefinitionDevcontainer      = "devcontainer.json"
)

// DefinitionFromAttribute, at the top of a Kubernetes template's devfile, set to
// DefinitionFromRepository, says that a workspace created from a repository with the template is
// defined by the repository's own definition (its devfile or devcontainer.json) when it has one,
// and by this devfile, the fallback, otherwise; the template's policies apply either way. Without
// a repository the devfile is used as any template's.
const (
	DefinitionFromAttribute  = workspace.ReservedPrefix + "definition-from"
	DefinitionFromRepository = "repository"
)

// RemoteEnvAttribute on the main container component is a list of environment variables
// ({name, value}) for what its helper runs: SSH sessions, postStart commands and the web editor,
// not the container's own command (devcontainer.json's remoteEnv). A value's ${NAME} is expanded
// by the helper from the container's environment, so that PATH can be extended.
const RemoteEnvAttribute = workspace.ReservedPrefix + "remote-env"

// parseRemoteEnv reads RemoteEnvAttribute of a container component.
func parseRemoteEnv(v *workspace.ValidationError, f string, attrs attributes.Attributes) []workspace.EnvVar {
	if !attrs.Exists(RemoteEnvAttribute) {
		return nil
	}
	f = fmt.Sprintf("%s.attributes[%q]", f, RemoteEnvAttribute)
	var env []workspace.EnvVar
	if err := attrs.GetInto(RemoteEnvAttribute, &env); err != nil {
		v.Add(f, "must be a list of {name, value}")
		return nil
	}
	seen := map[string]bool{}
	for i, e := range env {
		checkEnvName(v, fmt.Sprintf("%s[%d].name", f, i), e.Name, seen, "in remote-env")
	}
	return env
}

// MetadataAttribute and ResourcesMonitoringAttribute on the main container component declare what
// its helper reports beside the workspace's CPU, memory and volumes (docs/decisions.md, "Inside
// the workspace: metadata and resource alerts"): custom metadata commands, a list of {key,
// display_name, script, interval, timeout} (seconds), and the thresholds of the resource alerts,
// {memory: PERCENT, volumes: [{path, threshold}]} (0 turns one off). protocol.MetadataSpec is
// their form and its Validate their rules.
const (
	MetadataAttribute            = workspace.ReservedPrefix + "metadata"
	ResourcesMonitoringAttribute = workspace.ReservedPrefix + "resources-monitoring"
)

// parseMetadata reads MetadataAttribute and ResourcesMonitoringAttribute of a container component
// (nil when it has neither).
func parseMetadata(v *workspace.ValidationError, f string, attrs attributes.Attributes) *protocol.MetadataSpec {
	if !attrs.Exists(MetadataAttribute) && !attrs.Exists(ResourcesMonitoringAttribute) {
		return nil
	}
	var spec protocol.MetadataSpec
	if attrs.Exists(MetadataAttribute) {
		if err := attrs.GetInto(MetadataAttribute, &spec.Items); err != nil {
			v.Add(fmt.Sprintf("%s.attributes[%q]", f, MetadataAttribute), "must be a list of {key, display_name, script, interval, timeout}")
			return nil
		}
	}
	if attrs.Exists(ResourcesMonitoringAttribute) {
		if err := attrs.GetInto(ResourcesMonitoringAttribute, &spec.Monitoring); err != nil {
			v.Add(fmt.Sprintf("%s.attributes[%q]", f, ResourcesMonitoringAttribute), "must be {memory: PERCENT, volumes: [{path, threshold}]}")
			return nil
		}
	}
	if err := spec.Validate(); err != nil {
		// Validate names the field within the spec: items[2].key, resources_monitoring.memory.
		field, detail, _ := strings.Cut(err.Error(), ": ")
		attr, rest := MetadataAttribute, strings.TrimPrefix(field, "items")
		if after, ok := strings.CutPrefix(field, "resources_monitoring"); ok {
			attr, rest = ResourcesMonitoringAttribute, strings.TrimPrefix(after, ".")
			if rest != "" && !strings.HasPrefix(rest, "[") {
				rest = "." + rest
			}
		}
		v.Add(fmt.Sprintf("%s.attributes[%q]%s", f, attr, rest), "%s", detail)
		return nil
	}
	return &spec
}

// StartupBehaviorAttribute on the main container component says whether its postStart commands
// hold the workspace back (Coder's startup_script_behavior): "blocking" (the default: the helper
// serves SSH, the pod's readiness, once they ended, so the workspace is Running only then) or
// "non-blocking" (the workspace is Running at once; the commands run beside, their step shown
// running until they end).
const StartupBehaviorAttribute = workspace.ReservedPrefix + "startup-behavior"

// The values of StartupBehaviorAttribute.
const (
	StartupBlocking    = "blocking"
	StartupNonBlocking = "non-blocking"
)

// OncePerWorkspaceAttribute on an exec command that a postStart event runs makes it run at the
// workspace's first start only (devcontainer.json's onCreate, updateContent and postCreate
// commands): the helper records its success on the workspace's data volume.
const OncePerWorkspaceAttribute = workspace.ReservedPrefix + "once-per-workspace"

// reservedName is the prefix of component, endpoint and environment variable names that Hangar keeps
// for its own (compared without regard to case).
const reservedName = "hangar"

// projectsPath is where the workspace's data volume is mounted unless a container says otherwise.
const projectsPath = "/projects"

//go:embed default.yaml
var defaultDevfile []byte

// Default returns the devfile used when the user gives none: one main container with a
// general-purpose image and an "editor" endpoint on port 3000. It sets no resources, so the agent's
// defaults (kept within its caps) apply.
func Default() []byte {
	return append([]byte(nil), defaultDevfile...)
}

// Devfile is a parsed, validated devfile: the model Generate works from, computed once so that
// generating for many workspaces is cheap. It is never changed after Parse.
type Devfile struct {
	containers []container // the pod's containers, in devfile order
	inits      []container // preStart commands, in event order (the project clone goes before them)
	volumes    []volume
	projects   []project // projects, then dependentProjects
	source     string    // PROJECT_SOURCE relative to PROJECTS_ROOT: the first project's directory, or ""
	main       int       // index into containers
	pod        podOverrides
	warnings   []string
	// helper: the main container runs `hangar workspace-helper` (SSH), copied in by the
	// hangar-tools init container. False when it cannot be wrapped (args without a command: the
	// image's entrypoint runs them) or when an endpoint takes the helper's port; a warning says so.
	helper bool
	// ephemeralData: the workspace data volume is an emptyDir, not a claim
	// (controller.devfile.io/storage-type: ephemeral).
	ephemeralData bool
	// definition is what the user gave: DefinitionDevfile, or DefinitionDevcontainer (the devfile
	// is internal/devcontainer's translation).
	definition string
	// build is the image build of the main container (ImageBuildAttribute), nil when it runs its
	// image as it is; buildHash is its hash.
	build     *imagebuild.Spec
	buildHash string

	// fromRepository: DefinitionFromAttribute says "repository" (a template's fallback devfile).
	fromRepository bool
	// editor: the workspace gets the web editor: in the main container, run by its helper
	// (editorInMain, the main container's editor), else as the last of containers
	// (EditorContainerName).
	editor, editorInMain bool
}

type container struct {
	name      string
	image     string
	command   []string
	args      []string
	keepAlive bool // the main container sets neither command nor args: keep it running
	env       []corev1.EnvVar
	// remoteEnv (RemoteEnvAttribute) is for the helper's sessions and postStart commands only.
	remoteEnv []workspace.EnvVar
	// nonBlocking: its postStart commands do not hold the workspace back (StartupBehaviorAttribute).
	nonBlocking bool
	// metadata (MetadataAttribute, ResourcesMonitoringAttribute) is for the helper: nil, none.
	metadata     *protocol.MetadataSpec
	endpoints    []endpoint
	mounts       []corev1.VolumeMount // devfile volume mounts, in devfile order
	mountSources bool
	ownSources   bool // a devfile volume is mounted at sourcePath: it replaces the data volume there
	sourcePath   string
	// Requests and limits the devfile sets; nil when unset (the agent's defaults apply).
	cpuRequest, cpuLimit, memoryRequest, memoryLimit *resource.Quantity
	security                                         containerSecurity
	postStart, preStop                               []execCommand
	deploymentAnnotations, serviceAnnotations        map[string]string
	// logsAsMessage: when the container fails without a termination message, the tail of its log
	// is the message (the project clone's error reaches the user through the pod's status).
	logsAsMessage bool
	// imageBuild: the image build's container (imageBuildContainer), root with a few capabilities.
	imageBuild bool
	readiness  *corev1.Probe // Hangar's own only: the helper's SSH port, the editor's /healthz
	// editor, on the main container, is the web editor its helper runs (editor.go); extra is
	// what it needs on top of the container's own requests and limits.
	editor               *workspace.EditorProcess
	extraReq, extraLimit corev1.ResourceList
}

type endpoint struct {
	name     string
	port     int32
	protocol corev1.Protocol
	exposure v1alpha2.EndpointExposure // public, internal or none
	path     string
}

type volume struct {
	name      string
	size      resource.Quantity
	ephemeral bool
}

type execCommand struct {
	id, commandLine, workingDir string
	env                         []corev1.EnvVar
	// oncePerWorkspace: a postStart command that runs at the first start only (OncePerWorkspaceAttribute).
	oncePerWorkspace bool
}

// project is a git repository cloned into PROJECTS_ROOT before the workspace starts.
type project struct {
	Name     string            `json:"name"`
	Path     string            `json:"path"` // relative to PROJECTS_ROOT
	Remotes  map[string]string `json:"remotes"`
	Remote   string            `json:"remote,omitempty"`   // which remote to check out from
	Revision string            `json:"revision,omitempty"` // branch, tag or commit
}

// PublicEndpoint returns the endpoint the workspace URL points at: the injected editor's, else the
// main container's first public endpoint, else the first public endpoint of any container in devfile
// order (false if none).
func (d *Devfile) PublicEndpoint() (port int, urlPath string, ok bool) {
	if d.editor {
		return EditorPort, "", true
	}
	order := append([]int{d.main}, slices.Collect(func(yield func(int) bool) {
		for i := range d.containers {
			if i != d.main && !yield(i) {
				return
			}
		}
	})...)
	for _, i := range order {
		for _, ep := range d.containers[i].endpoints {
			if ep.exposure == v1alpha2.PublicEndpointExposure {
				return int(ep.port), ep.path, true
			}
		}
	}
	return 0, "", false
}

// Endpoint is an endpoint the devfile declares (or the injected editor's).
type Endpoint struct {
	Name, Container string
	Port            int
	// Exposure is public (the access proxy serves it), internal or none.
	Exposure string
	Path     string
}

// Public reports whether the access proxy serves e.
func (e Endpoint) Public() bool { return e.Exposure == string(v1alpha2.PublicEndpointExposure) }

// Endpoints lists the declared endpoints, by container in devfile order.
func (d *Devfile) Endpoints() []Endpoint {
	var out []Endpoint
	for _, c := range d.containers {
		for _, ep := range c.endpoints {
			out = append(out, Endpoint{Name: ep.name, Container: c.name, Port: int(ep.port), Exposure: string(ep.exposure), Path: ep.path})
		}
	}
	return out
}

// IsPublicPort reports whether port is the port of a public endpoint: the only ports the access
// proxy routes to.
func (d *Devfile) IsPublicPort(port int) bool {
	for _, c := range d.containers {
		for _, ep := range c.endpoints {
			if ep.exposure == v1alpha2.PublicEndpointExposure && int(ep.port) == port {
				return true
			}
		}
	}
	return false
}

// Warnings lists what Parse accepted but Hangar ignores (starterProjects, components only build or
// deploy commands use, ...), for the user to read.
func (d *Devfile) Warnings() []string { return slices.Clone(d.warnings) }

var (
	schemaVersionRe = regexp.MustCompile(`^2\.[0-3]\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	// Kubernetes accepts these environment variable names on every version still supported.
	envNameRe = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)
	// An IANA service name: what Kubernetes requires of a container port's name.
	ianaNameRe   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	ianaLetterRe = regexp.MustCompile(`[a-z]`)
)

// Names of volume components that would collide with the objects Generate names `<workspace>-<suffix>`.
var reservedVolumeNames = map[string]bool{"data": true, "env": true, "inventory": true}

const supported = "Hangar runs container and volume components"

// Parse decodes devfile YAML into the devfile/api v2 types and validates it. Every problem is reported
// in one *workspace.ValidationError whose fields start with "devfile".
func Parse(data []byte) (*Devfile, error) {
	v := &workspace.ValidationError{}
	spec, ok := decode(v, data)
	if !ok {
		return nil, v
	}
	d := &Devfile{}

	switch sv := spec.SchemaVersion; {
	case sv == "":
		v.Add("devfile.schemaVersion", "is required; Hangar supports 2.0.x, 2.1.x, 2.2.x and 2.3.x")
	case !schemaVersionRe.MatchString(sv):
		v.Add("devfile.schemaVersion", "%q is not supported; Hangar supports 2.0.x, 2.1.x, 2.2.x and 2.3.x", sv)
	}
	if spec.Parent != nil {
		v.Add("devfile.parent", "is not supported: write the complete devfile; Hangar does not fetch parent devfiles")
	}
	undefinedInCommands := substituteVariables(v, &spec)
	if n := len(spec.StarterProjects); n > 0 {
		d.warnings = append(d.warnings, fmt.Sprintf("starterProjects (%d) are ignored: they seed new projects; list the repositories to clone under projects", n))
	}
	d.parseProjects(v, spec.Projects, spec.DependentProjects)

	comps := d.parseComponents(v, spec.Components)
	cmds := parseCommands(v, spec.Commands, comps)
	d.parseEvents(v, spec.Events, cmds, comps, undefinedInCommands)
	d.checkOtherComponents(v, spec.Components, cmds, comps)
	d.pod = parsePodOverrides(v, "devfile.attributes", spec.Attributes, d.pod)
	d.parseDevWorkspaceAttributes(v, spec.Attributes)
	d.parseDefinition(v, spec.Attributes)
	d.finishContainers(v, comps)
	d.parseImageBuild(v, spec.Attributes)

	if err := v.Err(); err != nil {
		return nil, err
	}
	return d, nil
}

// substituteVariables replaces {{name}} with the devfile's variables, with devfile/api's own code.
// A reference to an undefined variable is refused where Hangar uses the value, and ignored (with the
// rest of that command) where it does not.
func substituteVariables(v *workspace.ValidationError, spec *v1alpha2.Devfile) (undefinedInCommands map[string][]string) {
	for _, k := range slices.Sorted(maps.Keys(spec.Variables)) {
		if !variableNameRe.MatchString(k) {
			v.Add(fieldPath("devfile.variables", k), "must be letters, digits, '_', '-' or '.'")
		}
	}
	w := variables.ValidateAndReplaceGlobalVariable(&spec.DevWorkspaceTemplateSpec)
	undefined := func(names []string) string {
		return "uses undefined variables: " + strings.Join(names, ", ") + " (define them under devfile.variables)"
	}
	for i, c := range spec.Components {
		// Only container and volume components are used as they are; image, kubernetes and
		// openshift ones are ignored or refused on their own (checkOtherComponents), and the
		// tools that build or deploy them read their variables.
		if kinds := componentKinds(c.ComponentUnion); len(kinds) == 1 && kinds[0] != "container" && kinds[0] != "volume" {
			continue
		}
		if keys, bad := w.Components[c.Name]; bad {
			v.Add(fmt.Sprintf("devfile.components[%d]", i), "%s", undefined(keys))
		}
	}
	for i, p := range spec.Projects {
		if keys, bad := w.Projects[p.Name]; bad {
			v.Add(fmt.Sprintf("devfile.projects[%d]", i), "%s", undefined(keys))
		}
	}
	for i, p := range spec.DependentProjects {
		if keys, bad := w.DependentProjects[p.Name]; bad {
			v.Add(fmt.Sprintf("devfile.dependentProjects[%d]", i), "%s", undefined(keys))
		}
	}
	// Commands with undefined variables are refused only where events run them (parseEvents): the
	// others are for tools inside the workspace, which Hangar does not run.
	return w.Commands
}

var variableNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// componentInfo is what commands and events need to know about a component.
type componentInfo struct {
	index     int
	kind      string // container, volume, image, kubernetes, openshift, plugin, custom
	container *container
	attrs     attributes.Attributes
	initOnly  bool // a preStart event applies it: it runs as an init container only
}

func (d *Devfile) parseComponents(v *workspace.ValidationError, comps []v1alpha2.Component) map[string]*componentInfo {
	infos := map[string]*componentInfo{}
	ports := map[int]string{}          // target port -> field that first used it
	endpointNames := map[string]bool{} // unique across the workspace: they are Service port names
	for i, c := range comps {
		f := fmt.Sprintf("devfile.components[%d]", i)
		switch {
		case !workspace.IsDNSLabel(c.Name, 63):
			v.Add(f+".name", "must be a DNS label (lowercase letters, digits and '-', at most 63 characters), got %q", c.Name)
		case hasReservedPrefix(c.Name):
			v.Add(f+".name", "%q starts with %q, which is reserved for Hangar", c.Name, reservedName)
		case infos[c.Name] != nil:
			v.Add(f+".name", "%q is used by another component; component names must be unique", c.Name)
		}
		for _, key := range slices.Sorted(maps.Keys(c.Attributes)) {
			if known := []string{MainAttribute, EditorAttribute, RemoteEnvAttribute, MetadataAttribute, ResourcesMonitoringAttribute, StartupBehaviorAttribute}; strings.HasPrefix(key, workspace.ReservedPrefix) && !slices.Contains(known, key) {
				v.Add(fmt.Sprintf("%s.attributes[%q]", f, key), "is not a known attribute; the %q attributes are %q", workspace.ReservedPrefix, known)
			}
		}
		info := &componentInfo{index: i, attrs: c.Attributes}
		kinds := componentKinds(c.ComponentUnion)
		switch len(kinds) {
		case 0:
			v.Add(f, "must set exactly one of container, volume, image, kubernetes or openshift; %s", supported)
		case 1:
			info.kind = kinds[0]
		default:
			v.Add(f, "sets %s; a component must have exactly one kind", strings.Join(kinds, " and "))
		}
		if info.kind != "container" && info.kind != "" {
			for _, a := range []string{MainAttribute, EditorAttribute, containerOverridesAttribute, podOverridesAttribute} {
				if c.Attributes.Exists(a) {
					v.Add(fmt.Sprintf("%s.attributes[%q]", f, a), "only applies to a container component")
				}
			}
		}
		if _, dup := infos[c.Name]; !dup {
			infos[c.Name] = info
		}
		switch info.kind {
		case "container":
			ctr := parseContainer(v, f+".container", c.Name, c.Container, ports, endpointNames)
			d.warnEndpointFields(i, c.Container.Endpoints)
			ctr.applyOverrides(v, f, c.Attributes)
			ctr.remoteEnv = parseRemoteEnv(v, f, c.Attributes)
			ctr.metadata = parseMetadata(v, f, c.Attributes)
			if c.Attributes.Exists(StartupBehaviorAttribute) {
				var bad error
				b := c.Attributes.GetString(StartupBehaviorAttribute, &bad)
				if bad != nil || (b != StartupBlocking && b != StartupNonBlocking) {
					v.Add(fmt.Sprintf("%s.attributes[%q]", f, StartupBehaviorAttribute), "must be %q or %q, got %q", StartupBlocking, StartupNonBlocking, b)
				}
				ctr.nonBlocking = b == StartupNonBlocking
			}
			d.pod = parsePodOverrides(v, f+".attributes", c.Attributes, d.pod)
			info.container = &ctr
		case "volume":
			vol := volume{name: c.Name, size: resource.MustParse("1Gi")}
			if reservedVolumeNames[c.Name] {
				v.Add(f+".name", "%q is reserved for a volume Hangar creates itself (the workspace data volume is mounted at %s); choose another name", c.Name, projectsPath)
			}
			if s := c.Volume.Size; s != "" {
				q, err := resource.ParseQuantity(s)
				if err != nil || q.Sign() <= 0 {
					v.Add(f+".volume.size", "must be a positive Kubernetes quantity such as 10Gi, got %q", s)
				} else {
					vol.size = q
				}
			}
			_ = vol.size.String() // see parseQuantity
			vol.ephemeral = c.Volume.Ephemeral != nil && *c.Volume.Ephemeral
			d.volumes = append(d.volumes, vol)
		case "plugin", "custom":
			v.Add(f+"."+info.kind, "%s components are not supported; %s", info.kind, supported)
		}
	}
	return infos
}

// Definition is what the workspace was defined with: DefinitionDevfile or DefinitionDevcontainer.
func (d *Devfile) Definition() string { return d.definition }

// DefinitionFromRepository reports whether the devfile is a template's fallback for the
// repository's own definition (DefinitionFromAttribute).
func (d *Devfile) DefinitionFromRepository() bool { return d.fromRepository }

// parseDefinition reads DefinitionAttribute and DefinitionWarningsAttribute.
func (d *Devfile) parseDefinition(v *workspace.ValidationError, attrs attributes.Attributes) {
	d.definition = DefinitionDevfile
	if attrs.Exists(DefinitionAttribute) {
		var err error
		switch def := attrs.GetString(DefinitionAttribute, &err); {
		case err == nil && (def == DefinitionDevfile || def == DefinitionDevcontainer):
			d.definition = def
		default:
			v.Add(fmt.Sprintf("devfile.attributes[%q]", DefinitionAttribute), "must be %q or %q", DefinitionDevfile, DefinitionDevcontainer)
		}
	}
	if attrs.Exists(DefinitionFromAttribute) {
		var err error
		if from := attrs.GetString(DefinitionFromAttribute, &err); err != nil || from != DefinitionFromRepository {
			v.Add(fmt.Sprintf("devfile.attributes[%q]", DefinitionFromAttribute), "must be %q (a template's devfile that is the fallback of the repository's own definition)", DefinitionFromRepository)
		} else {
			d.fromRepository = true
		}
	}
	if attrs.Exists(DefinitionWarningsAttribute) {
		var ws []string
		if err := attrs.GetInto(DefinitionWarningsAttribute, &ws); err != nil {
			v.Add(fmt.Sprintf("devfile.attributes[%q]", DefinitionWarningsAttribute), "must be a list of strings")
		}
		d.warnings = append(ws, d.warnings...)
	}
}

// ImageBuildAttribute, at the top of a devfile, is the image build its main container runs
// (an imagebuild.Spec as JSON): internal/devcontainer writes it for a devcontainer.json's
// `features` and `build`. Generate runs the build in the workspace's pod, or gives the main
// container the agent's prebuilt image for the build's hash.
//
// A hand-written devfile may carry it too: it is checked as the translator checks it, its Base must
// be the main container's image, and the build runs in the same fixed, unprivileged container
// whatever the Spec says, so it grants nothing a devcontainer.json's Dockerfile does not
// (docs/decisions.md, "Image builds in the cluster: wiring").
const ImageBuildAttribute = workspace.ReservedPrefix + "image-build"

// parseImageBuild reads ImageBuildAttribute, once the main container is known.
func (d *Devfile) parseImageBuild(v *workspace.ValidationError, attrs attributes.Attributes) {
	if !attrs.Exists(ImageBuildAttribute) {
		return
	}
	f := fmt.Sprintf("devfile.attributes[%q]", ImageBuildAttribute)
	var spec imagebuild.Spec
	if err := attrs.GetInto(ImageBuildAttribute, &spec); err != nil {
		v.Add(f, "must be an image build: an object with base, steps and features")
		return
	}
	n := len(v.Problems)
	spec.Check(func(field, detail string) { v.Add(f+"."+field, "%s", detail) })
	if d.main >= 0 && d.main < len(d.containers) && spec.Base != d.containers[d.main].image {
		v.Add(f+".base", "is %q, but the main container's image is %q: the build starts from the main container's image", spec.Base, d.containers[d.main].image)
	}
	if len(v.Problems) > n {
		return
	}
	d.build, d.buildHash = &spec, spec.Hash()
	d.warnings = append(d.warnings, fmt.Sprintf("the workspace's image is built in the cluster from %s (build hash %s), once for every workspace with the same definition; "+
		"an admin can map this hash to a prebuilt image instead (the agent's image_build.prebuilt)", spec.Base, d.buildHash))
}

// ImageBuild returns the image build the devfile's main container runs and its hash, or nil.
func (d *Devfile) ImageBuild() (*imagebuild.Spec, string) { return d.build, d.buildHash }

// DevWorkspace operator attributes of the devfile that Hangar reads.
const (
	storageTypeAttribute = "controller.devfile.io/storage-type"
	sccAttribute         = "controller.devfile.io/scc"
)

// parseDevWorkspaceAttributes honours storage-type ephemeral (the data volume is an emptyDir) and
// says what it does not honour.
func (d *Devfile) parseDevWorkspaceAttributes(v *workspace.ValidationError, attrs attributes.Attributes) {
	if attrs.Exists(storageTypeAttribute) {
		f := fmt.Sprintf("devfile.attributes[%q]", storageTypeAttribute)
		var err error
		switch st := attrs.GetString(storageTypeAttribute, &err); {
		case err != nil:
			v.Add(f, "must be a string: ephemeral, per-workspace, per-user, common or async")
		case st == "ephemeral":
			d.ephemeralData = true
		case st == "per-workspace":
			// What Hangar does anyway: one claim per workspace.
		case st == "per-user" || st == "common" || st == "async":
			d.warnings = append(d.warnings, fmt.Sprintf("attributes[%q] is %q, which is ignored: each workspace gets its own data volume claim (per-workspace)", storageTypeAttribute, st))
		default:
			v.Add(f, "must be ephemeral, per-workspace, per-user, common or async, got %q", st)
		}
	}
	if attrs.Exists(sccAttribute) {
		d.warnings = append(d.warnings, fmt.Sprintf("attributes[%q] is ignored: workspace pods run unprivileged under the restricted Pod Security Standard, with no OpenShift SecurityContextConstraints", sccAttribute))
	}
}

// warnEndpointFields says which endpoint fields Hangar ignores: annotation, secure and attributes.
func (d *Devfile) warnEndpointFields(comp int, eps []v1alpha2.Endpoint) {
	for j, ep := range eps {
		var ignored []string
		if len(ep.Annotations) > 0 {
			ignored = append(ignored, "annotation (for an Ingress or Route: Hangar creates none per endpoint)")
		}
		if ep.Secure != nil {
			ignored = append(ignored, "secure (the proxy's access rules are the same for every public endpoint of a workspace)")
		}
		if len(ep.Attributes) > 0 {
			ignored = append(ignored, "attributes "+strings.Join(slices.Sorted(maps.Keys(ep.Attributes)), ", ")+" (Eclipse Che's)")
		}
		if len(ignored) > 0 {
			d.warnings = append(d.warnings, fmt.Sprintf("components[%d].container.endpoints[%d] (%q): ignored: %s", comp, j, ep.Name, strings.Join(ignored, "; ")))
		}
	}
}

// componentKinds names the union members a component sets, in the devfile's own words.
func componentKinds(u v1alpha2.ComponentUnion) []string {
	var kinds []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"container", u.Container != nil}, {"volume", u.Volume != nil}, {"kubernetes", u.Kubernetes != nil},
		{"openshift", u.Openshift != nil}, {"image", u.Image != nil}, {"plugin", u.Plugin != nil}, {"custom", u.Custom != nil},
	} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	return kinds
}

func parseContainer(v *workspace.ValidationError, f, name string, c *v1alpha2.ContainerComponent, ports map[int]string, endpointNames map[string]bool) container {
	ctr := container{
		name:         name,
		image:        c.Image,
		command:      c.Command,
		args:         c.Args,
		mountSources: c.GetMountSources(),
		sourcePath:   projectsPath,
	}
	if c.Image == "" || strings.IndexFunc(c.Image, isSpaceOrControl) >= 0 {
		v.Add(f+".image", "must be a container image reference such as docker.io/library/ubuntu:24.04, got %q", c.Image)
	}
	if c.DedicatedPod != nil && *c.DedicatedPod {
		v.Add(f+".dedicatedPod", "is not supported: every container of a workspace runs in one pod")
	}
	if c.Annotation != nil {
		ctr.deploymentAnnotations = checkAnnotations(v, f+".annotation.deployment", c.Annotation.Deployment)
		ctr.serviceAnnotations = checkAnnotations(v, f+".annotation.service", c.Annotation.Service)
	}
	if c.SourceMapping != "" {
		if !path.IsAbs(c.SourceMapping) || path.Clean(c.SourceMapping) != c.SourceMapping || c.SourceMapping == "/" {
			v.Add(f+".sourceMapping", "must be a clean absolute path such as /projects, got %q", c.SourceMapping)
		}
		ctr.sourcePath = c.SourceMapping
	}

	envNames := map[string]bool{}
	for i, e := range c.Env {
		ef := fmt.Sprintf("%s.env[%d].name", f, i)
		checkEnvName(v, ef, e.Name, envNames, "in this container")
		ctr.env = append(ctr.env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}

	for i, ep := range c.Endpoints {
		ef := fmt.Sprintf("%s.endpoints[%d]", f, i)
		switch {
		case !workspace.IsDNSLabel(ep.Name, 63):
			v.Add(ef+".name", "must be a DNS label (lowercase letters, digits and '-', at most 63 characters), got %q", ep.Name)
		case hasReservedPrefix(ep.Name):
			v.Add(ef+".name", "%q starts with %q, which is reserved for Hangar", ep.Name, reservedName)
		case endpointNames[ep.Name]:
			v.Add(ef+".name", "%q is used by another endpoint; endpoint names must be unique in the workspace", ep.Name)
		}
		endpointNames[ep.Name] = true
		if ep.TargetPort < 1 || ep.TargetPort > 65535 {
			v.Add(ef+".targetPort", "must be between 1 and 65535, got %d", ep.TargetPort)
		} else if prev, dup := ports[ep.TargetPort]; dup {
			v.Add(ef+".targetPort", "port %d is already used by %s; the containers of a workspace share one network, so target ports must be unique in the workspace", ep.TargetPort, prev)
		} else {
			ports[ep.TargetPort] = ef
		}
		proto := corev1.ProtocolTCP
		switch ep.Protocol {
		case "", v1alpha2.HTTPEndpointProtocol, v1alpha2.HTTPSEndpointProtocol, v1alpha2.WSEndpointProtocol, v1alpha2.WSSEndpointProtocol, v1alpha2.TCPEndpointProtocol:
		case v1alpha2.UDPEndpointProtocol:
			proto = corev1.ProtocolUDP
		default:
			v.Add(ef+".protocol", "must be one of http, https, ws, wss, tcp or udp, got %q", ep.Protocol)
		}
		exposure := ep.Exposure
		switch exposure {
		case "":
			exposure = v1alpha2.PublicEndpointExposure
		case v1alpha2.PublicEndpointExposure, v1alpha2.InternalEndpointExposure, v1alpha2.NoneEndpointExposure:
		default:
			v.Add(ef+".exposure", "must be public, internal or none, got %q", ep.Exposure)
		}
		urlPath := ep.Path
		if urlPath != "" && !strings.HasPrefix(urlPath, "/") {
			urlPath = "/" + urlPath
		}
		if strings.IndexFunc(urlPath, isSpaceOrControl) >= 0 {
			v.Add(ef+".path", "must be a URL path such as /ui, got %q", ep.Path)
		}
		ctr.endpoints = append(ctr.endpoints, endpoint{name: ep.Name, port: int32(ep.TargetPort), protocol: proto, exposure: exposure, path: urlPath})
	}

	paths := map[string]string{}
	for i, m := range c.VolumeMounts {
		mf := fmt.Sprintf("%s.volumeMounts[%d]", f, i)
		p := m.Path
		if p == "" {
			p = "/" + m.Name
		}
		if !path.IsAbs(p) || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
			v.Add(mf+".path", "must be an absolute path such as /cache, got %q", m.Path)
		} else if p = path.Clean(p); p == "/" {
			v.Add(mf+".path", "cannot be /: mount the volume on a directory such as /cache")
		} else if prev, dup := paths[p]; dup {
			v.Add(mf+".path", "%s is already mounted at %s", prev, p)
		}
		if p == ctr.sourcePath && ctr.mountSources {
			ctr.ownSources = true
		}
		paths[p] = fmt.Sprintf("volume %q", m.Name)
		ctr.mounts = append(ctr.mounts, corev1.VolumeMount{Name: m.Name, MountPath: p})
	}

	ctr.cpuRequest = parseQuantity(v, f+".cpuRequest", c.CpuRequest, "500m")
	ctr.cpuLimit = parseQuantity(v, f+".cpuLimit", c.CpuLimit, "2")
	ctr.memoryRequest = parseQuantity(v, f+".memoryRequest", c.MemoryRequest, "512Mi")
	ctr.memoryLimit = parseQuantity(v, f+".memoryLimit", c.MemoryLimit, "4Gi")
	if ctr.cpuRequest != nil && ctr.cpuLimit != nil && ctr.cpuRequest.Cmp(*ctr.cpuLimit) > 0 {
		v.Add(f+".cpuRequest", "%s is more than cpuLimit %s", c.CpuRequest, c.CpuLimit)
	}
	if ctr.memoryRequest != nil && ctr.memoryLimit != nil && ctr.memoryRequest.Cmp(*ctr.memoryLimit) > 0 {
		v.Add(f+".memoryRequest", "%s is more than memoryLimit %s", c.MemoryRequest, c.MemoryLimit)
	}
	return ctr
}

func checkEnvName(v *workspace.ValidationError, field, name string, seen map[string]bool, where string) {
	switch {
	case !envNameRe.MatchString(name):
		v.Add(field, "must be letters, digits, '_', '-' or '.' and not start with a digit, got %q", name)
	case hasReservedPrefix(name):
		v.Add(field, "%q starts with %q, which is reserved for the variables Hangar sets (HANGAR_WORKSPACE_NAME and others)", name, strings.ToUpper(reservedName))
	case seen[name]:
		v.Add(field, "%q is set twice %s", name, where)
	}
	seen[name] = true
}

func checkAnnotations(v *workspace.ValidationError, field string, m map[string]string) map[string]string {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if problem := userKeyProblem(k, false); problem != "" {
			v.Add(fieldPath(field, k), "%s", problem)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// finishContainers picks the main container and checks what needs the whole devfile: mounts name
// volume components, names are unique among containers and init containers.
func (d *Devfile) finishContainers(v *workspace.ValidationError, comps map[string]*componentInfo) {
	d.main = -1
	mainField, mainByGitLab := "", -1
	var fields []string // devfile.components[i] of each container
	names := slices.Sorted(maps.Keys(comps))
	slices.SortFunc(names, func(a, b string) int { return comps[a].index - comps[b].index })
	for _, n := range names {
		info := comps[n]
		if info.container == nil || info.initOnly {
			continue
		}
		f := fmt.Sprintf("devfile.components[%d]", info.index)
		d.containers = append(d.containers, *info.container)
		fields = append(fields, f)
		if isMain, err := info.boolAttr(MainAttribute); err != nil {
			v.Add(fmt.Sprintf("%s.attributes[%q]", f, MainAttribute), "must be true or false")
		} else if isMain {
			if mainField != "" {
				v.Add(fmt.Sprintf("%s.attributes[%q]", f, MainAttribute), "%s already marks the main container; mark exactly one", mainField)
			} else {
				mainField, d.main = f, len(d.containers)-1
			}
		}
		if isMain, _ := info.boolAttr(GitLabMainAttribute); isMain && mainByGitLab < 0 {
			mainByGitLab = len(d.containers) - 1
		}
	}
	for _, n := range names {
		if info := comps[n]; info.container != nil && info.initOnly {
			for _, a := range []string{MainAttribute, GitLabMainAttribute} {
				if m, _ := info.boolAttr(a); m {
					v.Add(fmt.Sprintf("devfile.components[%d].attributes[%q]", info.index, a), "marks a component that runs as an init container (a preStart event applies it); the main container must keep running")
				}
			}
		}
	}
	if len(d.containers) == 0 {
		v.Add("devfile.components", "must include at least one container component that is not only a preStart init container")
		return
	}
	if d.main < 0 {
		d.main = max(mainByGitLab, 0)
	}
	if m := &d.containers[d.main]; len(m.command) == 0 && len(m.args) == 0 {
		m.keepAlive = true
	}
	d.helper = true
	if m := d.containers[d.main]; len(m.command) == 0 && len(m.args) > 0 {
		d.helper = false
		d.warnings = append(d.warnings, fmt.Sprintf("%s (%q), the main container, gives args but no command: its image's entrypoint runs them, and Hangar cannot run its helper around an entrypoint it does not know, so SSH is not available in this workspace; give the command too", strings.TrimPrefix(fields[d.main], "devfile."), m.name))
	}
	for i, c := range d.containers {
		for _, ep := range c.endpoints {
			if ep.port == HelperSSHPort {
				d.helper = false
				d.warnings = append(d.warnings, fmt.Sprintf("%s (%q) has an endpoint on port %d, the port of Hangar's SSH helper, so SSH is not available in this workspace", strings.TrimPrefix(fields[i], "devfile."), c.name, HelperSSHPort))
			}
		}
	}

	d.injectEditor(v, comps, fields)

	volumeNames := map[string]bool{}
	for _, vol := range d.volumes {
		volumeNames[vol.name] = true
	}
	for _, n := range names {
		info := comps[n]
		if info.container == nil {
			continue
		}
		for j, m := range info.container.mounts {
			if !volumeNames[m.Name] {
				v.Add(fmt.Sprintf("devfile.components[%d].container.volumeMounts[%d].name", info.index, j), "%q is not the name of a volume component", m.Name)
			}
		}
	}
}

// boolAttr reads a true/false attribute ("true" and "false" strings count); unset is false.
func (c *componentInfo) boolAttr(key string) (bool, error) {
	if !c.attrs.Exists(key) {
		return false, nil
	}
	var err error
	b := c.attrs.GetBoolean(key, &err)
	return b, err
}

func parseQuantity(v *workspace.ValidationError, field, s, example string) *resource.Quantity {
	if s == "" {
		return nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		v.Add(field, "must be a positive Kubernetes quantity such as %s, got %q", example, s)
		return nil
	}
	_ = q.String() // fill the cached form now: String writes it, and Generate may run concurrently
	return &q
}

func hasReservedPrefix(name string) bool {
	return len(name) >= len(reservedName) && strings.EqualFold(name[:len(reservedName)], reservedName)
}

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f
}
