// Package devfile turns a user's devfile (schemaVersion 2.2) into the Kubernetes objects the server
// sends to the agent as `config_to_apply`.
//
// Parse accepts the subset of the devfile format Hangar can run — container and volume components —
// and refuses everything else by name, so that a user learns at creation time what will not work
// instead of watching a workspace fail later. Generate is a pure function of a parsed devfile and the
// workspace's parameters; its output is deterministic byte for byte, so that the server can compare
// and the agent can apply it idempotently.
package devfile

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// MainAttribute marks the main container component: `attributes: {hangar.dev/main: true}`.
const MainAttribute = workspace.ReservedPrefix + "main"

// reservedName is the prefix of component, endpoint and environment variable names that Hangar keeps
// for its own (compared without regard to case).
const reservedName = "hangar"

// projectsPath is where the workspace's data volume is mounted unless a container says otherwise.
const projectsPath = "/projects"

//go:embed default.yaml
var defaultDevfile []byte

// Default returns the devfile used when the user gives none: one main container with a
// general-purpose image, an "editor" endpoint on port 3000, and CPU and memory requests and limits.
func Default() []byte {
	return append([]byte(nil), defaultDevfile...)
}

// Devfile is a parsed, validated devfile. It keeps the decoded github.com/devfile/api/v2 types and the
// model Generate works from, computed once so that generating for many workspaces is cheap.
type Devfile struct {
	spec       v1alpha2.Devfile
	containers []container
	volumes    []volume
	main       int // index into containers
}

type container struct {
	name         string
	image        string
	command      []string
	args         []string
	env          []corev1.EnvVar
	endpoints    []endpoint
	mounts       []corev1.VolumeMount // devfile volume mounts, in devfile order
	mountSources bool
	sourcePath   string
	// Requests and limits the devfile sets; nil when unset (the agent's defaults apply).
	cpuRequest, cpuLimit, memoryRequest, memoryLimit *resource.Quantity
}

type endpoint struct {
	name     string
	port     int32
	protocol corev1.Protocol
}

type volume struct {
	name      string
	size      resource.Quantity
	ephemeral bool
}

// MainEndpoint returns the port of the first endpoint of the main container (false if none).
func (d *Devfile) MainEndpoint() (port int, ok bool) {
	eps := d.containers[d.main].endpoints
	if len(eps) == 0 {
		return 0, false
	}
	return int(eps[0].port), true
}

var (
	schemaVersionRe = regexp.MustCompile(`^2\.2\.[0-2]$`)
	// Kubernetes accepts these environment variable names on every version still supported.
	envNameRe = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)
	// An IANA service name: what Kubernetes requires of container and Service port names.
	ianaNameRe   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	ianaLetterRe = regexp.MustCompile(`[a-z]`)
)

// Names of volume components that would collide with the objects Generate names `<workspace>-<suffix>`.
var reservedVolumeNames = map[string]bool{"data": true, "env": true, "inventory": true}

const supported = "Hangar supports container and volume components"

// Parse decodes devfile YAML into the devfile/api v2 types and validates it. Every problem is reported
// in one *workspace.ValidationError whose fields start with "devfile".
func Parse(data []byte) (*Devfile, error) {
	v := &workspace.ValidationError{}
	var spec v1alpha2.Devfile
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Type != nil && te.Field != "" {
			hint := ""
			if te.Type.Kind() == reflect.String {
				hint = " (YAML reads unquoted numbers, yes, no, on, off, true and false as such: quote the value)"
			}
			v.Add("devfile."+jsonPath(te.Field), "must be %s, got %s%s", kindName(te.Type.Kind()), te.Value, hint)
		} else {
			v.Add("devfile", "is not a valid devfile: %s", cleanDecodeError(err))
		}
		return nil, v
	}
	d := &Devfile{spec: spec}

	switch sv := spec.SchemaVersion; {
	case sv == "":
		v.Add("devfile.schemaVersion", "is required; Hangar supports 2.2.0, 2.2.1 and 2.2.2")
	case !schemaVersionRe.MatchString(sv):
		v.Add("devfile.schemaVersion", "%q is not supported; Hangar supports 2.2.0, 2.2.1 and 2.2.2", sv)
	}
	if spec.Parent != nil {
		v.Add("devfile.parent", "is not supported: write the complete devfile; Hangar does not fetch parent devfiles")
	}
	if len(spec.Projects) > 0 {
		v.Add("devfile.projects", "is not supported: clone repositories from inside the workspace")
	}
	if len(spec.StarterProjects) > 0 {
		v.Add("devfile.starterProjects", "is not supported: clone repositories from inside the workspace")
	}
	if len(spec.DependentProjects) > 0 {
		v.Add("devfile.dependentProjects", "is not supported: clone repositories from inside the workspace")
	}
	if spec.Events != nil {
		v.Add("devfile.events", "is not supported: Hangar runs no preStart, postStart, preStop or postStop commands; start processes from the container's command or args")
	}
	if len(spec.Variables) > 0 {
		v.Add("devfile.variables", "is not supported: Hangar does not substitute {{variables}}; write the values in place")
	}
	// commands are accepted and ignored: they are for tools run inside the workspace, not for Hangar.

	d.parseComponents(v, spec.Components)
	if err := v.Err(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Devfile) parseComponents(v *workspace.ValidationError, comps []v1alpha2.Component) {
	names := map[string]bool{}
	ports := map[int]string{}          // target port -> field that first used it
	endpointNames := map[string]bool{} // unique across the workspace: they are Service port names
	type pendingMount struct {
		field string
		name  string
	}
	var mounts []pendingMount
	mainField := ""
	d.main = -1

	for i, c := range comps {
		f := fmt.Sprintf("devfile.components[%d]", i)
		switch {
		case !workspace.IsDNSLabel(c.Name, 63):
			v.Add(f+".name", "must be a DNS label (lowercase letters, digits and '-', at most 63 characters), got %q", c.Name)
		case hasReservedPrefix(c.Name):
			v.Add(f+".name", "%q starts with %q, which is reserved for Hangar", c.Name, reservedName)
		case names[c.Name]:
			v.Add(f+".name", "%q is used by another component; component names must be unique", c.Name)
		}
		names[c.Name] = true

		isMain := false
		for _, key := range slices.Sorted(maps.Keys(c.Attributes)) {
			if strings.HasPrefix(key, workspace.ReservedPrefix) && key != MainAttribute {
				v.Add(fmt.Sprintf("%s.attributes[%q]", f, key), "is not a known attribute; the only %q attribute is %q", workspace.ReservedPrefix, MainAttribute)
			}
		}
		if c.Attributes.Exists(MainAttribute) {
			var err error
			isMain = c.Attributes.GetBoolean(MainAttribute, &err)
			if err != nil {
				v.Add(fmt.Sprintf("%s.attributes[%q]", f, MainAttribute), "must be true or false")
				isMain = false
			}
		}

		kinds := componentKinds(c.ComponentUnion)
		if len(kinds) != 1 {
			if len(kinds) == 0 {
				v.Add(f, "must set exactly one of container or volume; %s", supported)
			} else {
				v.Add(f, "sets %s; a component must have exactly one kind", strings.Join(kinds, " and "))
			}
			continue
		}
		switch kind := kinds[0]; kind {
		case "container":
			ctr := parseContainer(v, f+".container", c.Name, c.Container, ports, endpointNames)
			for j, m := range ctr.mounts {
				mounts = append(mounts, pendingMount{field: fmt.Sprintf("%s.container.volumeMounts[%d].name", f, j), name: m.Name})
			}
			if isMain {
				if mainField != "" {
					v.Add(fmt.Sprintf("%s.attributes[%q]", f, MainAttribute), "%s already marks the main container; mark exactly one", mainField)
				} else {
					mainField = f
					d.main = len(d.containers)
				}
			}
			d.containers = append(d.containers, ctr)
		case "volume":
			if isMain {
				v.Add(fmt.Sprintf("%s.attributes[%q]", f, MainAttribute), "only a container component can be the main one")
			}
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
			if c.Volume.Ephemeral != nil && *c.Volume.Ephemeral {
				vol.ephemeral = true
			}
			d.volumes = append(d.volumes, vol)
		default:
			v.Add(f+"."+kind, "%s components are not supported; %s", kind, supported)
		}
	}

	if len(d.containers) == 0 {
		v.Add("devfile.components", "must include at least one container component")
		return
	}
	if d.main < 0 {
		d.main = 0
	}
	volumeNames := map[string]bool{}
	for _, vol := range d.volumes {
		volumeNames[vol.name] = true
	}
	for _, m := range mounts {
		if !volumeNames[m.name] {
			v.Add(m.field, "%q is not the name of a volume component", m.name)
		}
	}
}

// componentKinds names the union members a component sets, in the devfile's own words.
func componentKinds(u v1alpha2.ComponentUnion) []string {
	var kinds []string
	if u.Container != nil {
		kinds = append(kinds, "container")
	}
	if u.Volume != nil {
		kinds = append(kinds, "volume")
	}
	if u.Kubernetes != nil {
		kinds = append(kinds, "kubernetes")
	}
	if u.Openshift != nil {
		kinds = append(kinds, "openshift")
	}
	if u.Image != nil {
		kinds = append(kinds, "image")
	}
	if u.Plugin != nil {
		kinds = append(kinds, "plugin")
	}
	if u.Custom != nil {
		kinds = append(kinds, "custom")
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
		v.Add(f+".annotation", "is not supported: Hangar sets the annotations of the objects it creates")
	}
	if c.SourceMapping != "" {
		if !path.IsAbs(c.SourceMapping) || path.Clean(c.SourceMapping) != c.SourceMapping {
			v.Add(f+".sourceMapping", "must be a clean absolute path such as /projects, got %q", c.SourceMapping)
		}
		ctr.sourcePath = c.SourceMapping
	}

	envNames := map[string]bool{}
	for i, e := range c.Env {
		ef := fmt.Sprintf("%s.env[%d].name", f, i)
		switch {
		case !envNameRe.MatchString(e.Name):
			v.Add(ef, "must be letters, digits, '_', '-' or '.' and not start with a digit, got %q", e.Name)
		case hasReservedPrefix(e.Name):
			v.Add(ef, "%q starts with %q, which is reserved for the variables Hangar sets (HANGAR_WORKSPACE_NAME and others)", e.Name, strings.ToUpper(reservedName))
		case envNames[e.Name]:
			v.Add(ef, "%q is set twice in this container", e.Name)
		}
		envNames[e.Name] = true
		ctr.env = append(ctr.env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}

	for i, ep := range c.Endpoints {
		ef := fmt.Sprintf("%s.endpoints[%d]", f, i)
		switch {
		case len(ep.Name) > 15 || !ianaNameRe.MatchString(ep.Name) || !ianaLetterRe.MatchString(ep.Name) || strings.Contains(ep.Name, "--"):
			v.Add(ef+".name", "must be at most 15 lowercase letters, digits and '-', with at least one letter (a Kubernetes port name), got %q", ep.Name)
		case hasReservedPrefix(ep.Name):
			v.Add(ef+".name", "%q starts with %q, which is reserved for Hangar", ep.Name, reservedName)
		case endpointNames[ep.Name]:
			v.Add(ef+".name", "%q is used by another endpoint; endpoint names must be unique in the workspace", ep.Name)
		}
		endpointNames[ep.Name] = true
		if ep.TargetPort < 1 || ep.TargetPort > 65535 {
			v.Add(ef+".targetPort", "must be between 1 and 65535, got %d", ep.TargetPort)
		} else if prev, dup := ports[ep.TargetPort]; dup {
			v.Add(ef+".targetPort", "port %d is already used by %s; target ports must be unique in the workspace", ep.TargetPort, prev)
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
		ctr.endpoints = append(ctr.endpoints, endpoint{name: ep.Name, port: int32(ep.TargetPort), protocol: proto})
	}

	paths := map[string]string{}
	if ctr.mountSources {
		paths[ctr.sourcePath] = "the workspace data volume"
	}
	for i, m := range c.VolumeMounts {
		mf := fmt.Sprintf("%s.volumeMounts[%d]", f, i)
		p := m.Path
		if p == "" {
			p = "/" + m.Name
		}
		if !path.IsAbs(p) || path.Clean(p) != p {
			v.Add(mf+".path", "must be a clean absolute path such as /cache, got %q", m.Path)
		} else if prev, dup := paths[p]; dup {
			v.Add(mf+".path", "%s is already mounted at %s", prev, p)
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

// jsonPath turns encoding/json's path to a field ("DevWorkspaceTemplateSpec.components.Container.env")
// into the devfile's own words ("components.env") by dropping the Go names of embedded structs.
func jsonPath(goPath string) string {
	parts := strings.Split(goPath, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && !(p[0] >= 'A' && p[0] <= 'Z') {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	default:
		return "a mapping"
	}
}

// cleanDecodeError drops the layers of wrapping sigs.k8s.io/yaml adds so the user reads the cause.
func cleanDecodeError(err error) string {
	s := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		s = strings.TrimPrefix(s, prefix)
	}
	return s
}
