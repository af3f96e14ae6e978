package devfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/devfile/api/v2/pkg/attributes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// Eclipse Che's attributes that patch the generated container and pod. Hangar applies the parts that
// keep a workspace within its security rules and refuses the rest by name.
const (
	containerOverridesAttribute = "container-overrides"
	podOverridesAttribute       = "pod-overrides"
)

type containerSecurity struct {
	runAsUser, runAsGroup  *int64
	readOnlyRootFilesystem *bool
}

type podOverrides struct {
	labels, annotations            map[string]string
	runAsUser, runAsGroup, fsGroup *int64
	supplementalGroups             []int64
	// hostAliases are names the pod's /etc/hosts maps to loopback: a docker-compose
	// devcontainer's services, which share the pod's network (internal/devcontainer).
	hostAliases []corev1.HostAlias
	fields      []string // where they came from, for messages
}

// applyOverrides reads a container component's container-overrides: resources (cpu and memory,
// positive, replacing the devfile's values) and securityContext.runAsUser, runAsGroup (not root) and readOnlyRootFilesystem.
func (c *container) applyOverrides(v *workspace.ValidationError, f string, attrs attributes.Attributes) {
	if !attrs.Exists(containerOverridesAttribute) {
		return
	}
	f = fmt.Sprintf("%s.attributes[%q]", f, containerOverridesAttribute)
	m, ok := attrMap(v, f, attrs, containerOverridesAttribute)
	if !ok {
		return
	}
	resourcesSet := false
	eachKey(v, f, m, func(k, kf string, val any) {
		switch k {
		case "resources":
			eachKey(v, kf, val, func(which, wf string, list any) {
				if which != "requests" && which != "limits" {
					v.Add(wf, "is not supported: container-overrides resources may set requests and limits")
					return
				}
				eachKey(v, wf, list, func(name, nf string, q any) {
					switch rn := corev1.ResourceName(name); {
					case !workspace.IsQualifiedKey(name):
						v.Add(nf, "is not a Kubernetes resource name such as cpu or memory")
					case rn != corev1.ResourceCPU && rn != corev1.ResourceMemory:
						// Other resources (nvidia.com/gpu, hugepages-2Mi, ephemeral-storage) have no
						// cap in the agent's configuration: a devfile could take a node's GPUs.
						v.Add(nf, "is not supported: container-overrides may set cpu and memory, which the agent caps; other resources (GPUs, hugepages, ephemeral-storage) have no cap yet")
					default:
						if q, ok := overrideQuantity(v, nf, q); ok {
							c.setResource(which, rn, q)
							resourcesSet = true
						}
					}
				})
			})
		case "securityContext":
			eachKey(v, kf, val, func(s, sf string, x any) {
				switch s {
				case "runAsUser":
					c.security.runAsUser = nonRootID(v, sf, x)
				case "runAsGroup":
					c.security.runAsGroup = nonRootID(v, sf, x)
				case "readOnlyRootFilesystem":
					if b, ok := x.(bool); ok {
						c.security.readOnlyRootFilesystem = &b
					} else {
						v.Add(sf, "must be true or false")
					}
				default:
					v.Add(sf, "is not supported: workspaces run unprivileged, without added capabilities; container-overrides may set securityContext.runAsUser, runAsGroup and readOnlyRootFilesystem")
				}
			})
		default:
			v.Add(kf, "is not supported: container-overrides may set resources and securityContext (runAsUser, runAsGroup, readOnlyRootFilesystem); use the devfile's own fields for the rest")
		}
	})
	if !resourcesSet {
		return // parseContainer checked the devfile's own values
	}
	// The overrides replace the devfile's values: the pair must still be valid.
	for _, r := range []struct {
		name     string
		req, lim *resource.Quantity
	}{{"cpu", c.cpuRequest, c.cpuLimit}, {"memory", c.memoryRequest, c.memoryLimit}} {
		if r.req != nil && r.lim != nil && r.req.Cmp(*r.lim) > 0 {
			v.Add(f+".resources", "makes the %s request %s more than the %s limit %s", r.name, r.req.String(), r.name, r.lim.String())
		}
	}
}

// eachKey calls fn for each key of the mapping val, in sorted order, with the key's field path; a
// val that is not a mapping is reported on f.
func eachKey(v *workspace.ValidationError, f string, val any, fn func(key, field string, val any)) {
	m, ok := asMap(v, f, val)
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fn(k, fieldPath(f, k), m[k])
	}
}

// setResource records a container-overrides quantity of cpu or memory: it replaces the devfile's value.
func (c *container) setResource(which string, name corev1.ResourceName, q resource.Quantity) {
	switch {
	case name == corev1.ResourceCPU && which == "requests":
		c.cpuRequest = &q
	case name == corev1.ResourceCPU:
		c.cpuLimit = &q
	case name == corev1.ResourceMemory && which == "requests":
		c.memoryRequest = &q
	case name == corev1.ResourceMemory:
		c.memoryLimit = &q
	}
}

// parsePodOverrides reads a pod-overrides attribute (of a container component or of the devfile):
// metadata.labels and annotations, and spec.securityContext.runAsUser, runAsGroup, fsGroup and
// supplementalGroups (not root). Several are merged in devfile order; later values win.
func parsePodOverrides(v *workspace.ValidationError, f string, attrs attributes.Attributes, p podOverrides) podOverrides {
	if !attrs.Exists(podOverridesAttribute) {
		return p
	}
	f = fmt.Sprintf("%s[%q]", f, podOverridesAttribute)
	m, ok := attrMap(v, f, attrs, podOverridesAttribute)
	if !ok {
		return p
	}
	p.fields = append(p.fields, f)
	eachKey(v, f, m, func(k, kf string, sub any) {
		switch k {
		case "metadata":
			eachKey(v, kf, sub, func(mk, mf string, x any) {
				switch mk {
				case "labels":
					p.labels = stringMap(v, mf, x, p.labels, true)
				case "annotations":
					p.annotations = stringMap(v, mf, x, p.annotations, false)
				default:
					v.Add(mf, "is not supported: pod-overrides may set metadata.labels and metadata.annotations")
				}
			})
		case "spec":
			eachKey(v, kf, sub, func(sk, sf string, x any) {
				if sk == "hostAliases" {
					p.hostAliases = loopbackAliases(v, sf, x)
					return
				}
				if sk != "securityContext" {
					v.Add(sf, "is not supported: Hangar sets the workspace pod's spec (service account, volumes, scheduling from the agent's configuration); pod-overrides may set spec.securityContext.runAsUser, runAsGroup, fsGroup and supplementalGroups, and spec.hostAliases to loopback")
					return
				}
				eachKey(v, sf, x, func(s, scf string, id any) {
					switch s {
					case "runAsUser":
						p.runAsUser = nonRootID(v, scf, id)
					case "runAsGroup":
						p.runAsGroup = nonRootID(v, scf, id)
					case "fsGroup":
						p.fsGroup = nonRootID(v, scf, id)
					case "supplementalGroups":
						l, ok := id.([]any)
						if !ok {
							v.Add(scf, "must be a list of group ids")
							return
						}
						p.supplementalGroups = nil
						for i, g := range l {
							if gid := nonRootID(v, fmt.Sprintf("%s[%d]", scf, i), g); gid != nil {
								p.supplementalGroups = append(p.supplementalGroups, *gid)
							}
						}
					default:
						v.Add(scf, "is not supported: workspaces run unprivileged and non-root; pod-overrides may set runAsUser, runAsGroup, fsGroup and supplementalGroups")
					}
				})
			})
		default:
			v.Add(kf, "is not supported: pod-overrides may set metadata (labels, annotations) and spec.securityContext")
		}
	})
	return p
}

// maxHostAliases bounds the names pod-overrides may add to the pod's /etc/hosts.
const maxHostAliases = 100

var hostnameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// loopbackAliases reads pod-overrides spec.hostAliases: [{ip, hostnames}]. Only loopback
// addresses are accepted: a name that means the pod itself reaches nothing the pod could not reach
// already, while a name pointing elsewhere could make a workspace's tools talk to an address the
// user did not mean (and would need the network policy's review).
func loopbackAliases(v *workspace.ValidationError, f string, val any) []corev1.HostAlias {
	list, ok := val.([]any)
	if !ok {
		v.Add(f, "must be a list of {ip, hostnames}, got %s", describe(val))
		return nil
	}
	var out []corev1.HostAlias
	n := 0
	for i, e := range list {
		ef := fmt.Sprintf("%s[%d]", f, i)
		var ha corev1.HostAlias
		eachKey(v, ef, e, func(k, kf string, x any) {
			switch k {
			case "ip":
				if s, _ := x.(string); s == "127.0.0.1" || s == "::1" {
					ha.IP = s
				} else {
					v.Add(kf, "must be 127.0.0.1 or ::1: pod-overrides may map names to the pod itself only, got %s", describe(x))
				}
			case "hostnames":
				names, ok := x.([]any)
				if !ok {
					v.Add(kf, "must be a list of host names")
					return
				}
				for j, h := range names {
					s, _ := h.(string)
					if n++; len(s) > 253 || !hostnameRe.MatchString(s) {
						v.Add(fmt.Sprintf("%s[%d]", kf, j), "must be a lowercase DNS name such as db, got %s", describe(h))
						continue
					}
					ha.Hostnames = append(ha.Hostnames, s)
				}
			default:
				v.Add(kf, "is not supported: a host alias has ip and hostnames")
			}
		})
		if ha.IP == "" || len(ha.Hostnames) == 0 {
			if _, isMap := e.(map[string]any); isMap {
				v.Add(ef, "needs an ip (127.0.0.1) and at least one host name")
			}
			continue
		}
		out = append(out, ha)
	}
	if n > maxHostAliases {
		v.Add(f, "names %d hosts; at most %d", n, maxHostAliases)
	}
	return out
}

func attrMap(v *workspace.ValidationError, f string, attrs attributes.Attributes, name string) (map[string]any, bool) {
	var m map[string]any
	raw, err := json.Marshal(attrs[name])
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil || m == nil {
		v.Add(f, "must be a mapping")
		return nil, false
	}
	return m, true
}

func asMap(v *workspace.ValidationError, f string, val any) (map[string]any, bool) {
	m, ok := val.(map[string]any)
	if !ok {
		v.Add(f, "must be a mapping, got %s", describe(val))
	}
	return m, ok
}

func stringMap(v *workspace.ValidationError, f string, val any, into map[string]string, isLabel bool) map[string]string {
	m, ok := asMap(v, f, val)
	if !ok {
		return into
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok {
			v.Add(fieldPath(f, k), "must be a string, got %s", describe(m[k]))
			continue
		}
		if problem := userKeyProblem(k, isLabel); problem != "" {
			v.Add(fieldPath(f, k), "%s", problem)
			continue
		}
		if into == nil {
			into = map[string]string{}
		}
		into[k] = s
	}
	return into
}

// plainKeyRe is an annotation key Hangar accepts from a devfile: a plain name, without a prefix and
// without dots.
var plainKeyRe = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_]{0,61}[A-Za-z0-9])?$`)

// userKeyProblem says why a label or annotation key from a devfile (pod-overrides, a container's
// annotation.deployment and annotation.service) is refused, or returns "" when it is accepted.
//
// The rule fails closed. Annotations are read by the cluster's components: the kubelet (AppArmor
// profiles), container runtimes (io.kubernetes.cri-o.Devices, run.oci.*), network plugins
// (k8s.v1.cni.cncf.io/networks, cni.projectcalico.org/ipAddrs), service meshes
// (sidecar.istio.io/inject), DNS controllers (external-dns.alpha.kubernetes.io/hostname). No list of
// dangerous prefixes is ever complete, so only plain names without a prefix or a dot (`my-note`) are
// accepted, which no such component reads. Labels are refused altogether: in a shared namespace,
// and through namespace selectors in any namespace, a pod label (`app: payments-api`) makes the
// workspace match other applications' Services and NetworkPolicies. An allow-list of prefixes in the
// agent's configuration is a later step.
func userKeyProblem(k string, isLabel bool) string {
	switch {
	case strings.HasPrefix(k, workspace.ReservedPrefix) || strings.Contains(k, "."+workspace.ReservedPrefix):
		return fmt.Sprintf("uses the prefix %q, which is reserved for Hangar", workspace.ReservedPrefix)
	case !workspace.IsQualifiedKey(k):
		return "is not a valid Kubernetes key"
	case isLabel:
		return "is not supported: a label on the workspace pod could make it match other applications' Services and NetworkPolicies; Hangar sets the pod's labels itself"
	case !plainKeyRe.MatchString(k):
		return "is not supported: annotations from a devfile must be plain names without a prefix or dots (such as my-note); prefixed and dotted annotations configure the cluster's components (kubelet, container runtime, network plugins, service meshes, DNS controllers)"
	}
	return ""
}

func nonRootID(v *workspace.ValidationError, f string, val any) *int64 {
	n, ok := val.(float64)
	if !ok || n != math.Trunc(n) || n < 1 || n > math.MaxInt32 {
		v.Add(f, "must be a user or group id from 1 to 2147483647 (workspaces never run as root), got %s", describe(val))
		return nil
	}
	id := int64(n)
	return &id
}

func overrideQuantity(v *workspace.ValidationError, f string, val any) (resource.Quantity, bool) {
	var s string
	switch x := val.(type) {
	case string:
		s = x
	case float64:
		s = fmt.Sprint(x)
	}
	q, err := resource.ParseQuantity(s)
	// Zero is refused too: a limit of 0 is no limit to the kubelet, which would escape the caps.
	if err != nil || q.Sign() <= 0 {
		v.Add(f, "must be a positive Kubernetes quantity such as 500m or 2Gi, got %s", describe(val))
		return q, false
	}
	_ = q.String()
	return q, true
}
