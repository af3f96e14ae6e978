package devfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// Labels and annotations Hangar sets on every object of a workspace.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByValue     = "hangar"
	LabelAgentID       = workspace.ReservedPrefix + "agent-id"
	LabelWorkspaceID   = workspace.ReservedPrefix + "workspace-id"
	LabelWorkspaceName = workspace.ReservedPrefix + "workspace-name"
	// LabelInventory marks the ConfigMap that lists a workspace's objects (data key InventoryKey).
	LabelInventory = workspace.ReservedPrefix + "inventory"
	InventoryKey   = "objects"
	// AnnotationHostTemplate is what the proxy routes by: `{{.port}}-<name>.<dns_zone>`.
	AnnotationHostTemplate = workspace.ReservedPrefix + "host-template"
	// AnnotationResourceHash on the pod template changes when the effective resources do.
	AnnotationResourceHash = workspace.ReservedPrefix + "resource-hash"
)

// Params are the facts about one workspace that Generate needs beyond its devfile.
type Params struct {
	WorkspaceID   string // uuid
	WorkspaceName string // DNS-1123 label, <= 40 chars
	Owner         string // username
	AgentID       string
	Namespace     string                // computed by the server: per-workspace namespace or the agent's shared one
	DesiredState  workspace.State       // Running => replicas 1; Stopped, RestartRequested, Terminated => replicas 0
	Agent         workspace.AgentConfig // already WithDefaults()+Validate()d
}

const (
	projectsVolume  = "hangar-projects" // pod volume name; devfile names cannot start with "hangar"
	projectsSize    = "50Gi"
	runAsUser       = 5001
	progressSeconds = 600
)

// object is one generated Kubernetes object with the identity the inventory lists.
type object struct {
	apiVersion, kind, namespace, name string
	v                                 any
}

func (o object) inventoryLine() string {
	return o.apiVersion + "/" + o.kind + "/" + o.namespace + "/" + o.name
}

// Generate returns the workspace's Kubernetes objects as a multi-document YAML stream ("---\n"
// between documents), deterministic byte for byte.
//
// It returns a *workspace.ValidationError when the devfile's containers, with the agent's defaults
// merged under their own resources, do not fit the agent's max_resources_per_workspace, and a plain
// error when p is not what the server should pass.
func Generate(d *Devfile, p Params) (string, error) {
	objs, err := buildObjects(d, p)
	if err != nil {
		return "", err
	}
	buf := buffers.Get().(*buffer)
	defer buffers.Put(buf)
	out := buf.out[:0]
	for i, o := range objs {
		if i > 0 {
			out = append(out, "---\n"...)
		}
		buf.js.Reset()
		if err := buf.enc.Encode(o.v); err != nil {
			return "", fmt.Errorf("generate workspace %s: encode %s %s: %w", p.WorkspaceName, o.kind, o.name, err)
		}
		if out, err = appendYAML(out, cleanJSON(buf.js.Bytes(), o.apiVersion, o.kind)); err != nil {
			return "", fmt.Errorf("generate workspace %s: %s %s: %w", p.WorkspaceName, o.kind, o.name, err)
		}
	}
	buf.out = out
	return string(out), nil
}

// buffer is the scratch space of one Generate call, reused through a pool because a full reconcile
// generates for thousands of workspaces in a row.
type buffer struct {
	out []byte
	js  bytes.Buffer
	enc *json.Encoder
}

var buffers = sync.Pool{New: func() any {
	b := &buffer{out: make([]byte, 0, 16<<10)}
	b.enc = json.NewEncoder(&b.js)
	b.enc.SetEscapeHTML(false)
	return b
}}

// cleanJSON tidies one object's JSON before it becomes YAML: apiVersion goes before kind (TypeMeta
// declares them the other way round), and the empty `status` every typed object carries is dropped,
// as is an empty `spec` (a Namespace's). encoding/json writes status last and spec just before it;
// the patterns are anchored at the end of the document and cannot match inside a string value, where
// quotes are escaped.
func cleanJSON(js []byte, apiVersion, kind string) []byte {
	js = bytes.TrimRight(js, "\n")
	// Same length both ways round, so the swap happens in place.
	typeMeta := `{"kind":"` + kind + `","apiVersion":"` + apiVersion + `",`
	if bytes.HasPrefix(js, []byte(typeMeta)) {
		copy(js, `{"apiVersion":"`+apiVersion+`","kind":"`+kind+`",`)
	}
	for _, suffix := range []string{`,"status":{}}`, `,"status":{"loadBalancer":{}}}`, `,"spec":{}}`} {
		if bytes.HasSuffix(js, []byte(suffix)) {
			js = js[:len(js)-len(suffix)+1]
			js[len(js)-1] = '}'
		}
	}
	return js
}

func checkParams(p Params) error {
	switch {
	case !workspace.IsDNSLabel(p.WorkspaceName, 40):
		return fmt.Errorf("workspace name %q is not a DNS label of at most 40 characters", p.WorkspaceName)
	case !workspace.IsDNSLabel(p.Namespace, 63):
		return fmt.Errorf("namespace %q is not a DNS label", p.Namespace)
	case !isLabelValue(p.WorkspaceID) || p.WorkspaceID == "":
		return fmt.Errorf("workspace id %q is not a label value", p.WorkspaceID)
	case !isLabelValue(p.AgentID) || p.AgentID == "":
		return fmt.Errorf("agent id %q is not a label value", p.AgentID)
	case p.Agent.NetworkPolicy.Enabled == nil:
		return fmt.Errorf("agent config has no defaults: call WithDefaults")
	}
	return nil
}

func isLabelValue(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || i == len(s)-1 || (b != '-' && b != '_' && b != '.')) {
			return false
		}
	}
	return true
}

func buildObjects(d *Devfile, p Params) ([]object, error) {
	if err := checkParams(p); err != nil {
		return nil, fmt.Errorf("generate workspace: %w", err)
	}
	var replicas int32
	switch p.DesiredState {
	case workspace.Running:
		replicas = 1
	case workspace.Stopped, workspace.RestartRequested, workspace.Terminated:
	default:
		return nil, fmt.Errorf("generate workspace %s: %q is not a desired state", p.WorkspaceName, p.DesiredState)
	}

	name, ns, a := p.WorkspaceName, p.Namespace, p.Agent
	hostTemplate := "{{.port}}-" + name + "." + a.DNSZone

	labels := make(map[string]string, len(a.Labels)+4)
	for k, v := range a.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = ManagedByValue
	labels[LabelAgentID] = p.AgentID
	labels[LabelWorkspaceID] = p.WorkspaceID
	labels[LabelWorkspaceName] = name
	annotations := make(map[string]string, len(a.Annotations)+1)
	for k, v := range a.Annotations {
		annotations[k] = v
	}
	annotations[AnnotationHostTemplate] = hostTemplate
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels, Annotations: annotations}
	}
	selector := map[string]string{LabelWorkspaceID: p.WorkspaceID}

	containers, hash, err := d.podContainers(name, a)
	if err != nil {
		return nil, err
	}

	var objs []object
	add := func(apiVersion, kind, namespace, n string, v any) {
		objs = append(objs, object{apiVersion: apiVersion, kind: kind, namespace: namespace, name: n, v: v})
	}

	perWorkspace := a.NamespaceMode == workspace.NamespacePerWorkspace
	if perWorkspace {
		// The pod spec below meets the "restricted" Pod Security Standard; say so, so that the cluster
		// refuses anything less in this namespace. An agent label may choose another level.
		nsLabels := make(map[string]string, len(labels)+1)
		nsLabels["pod-security.kubernetes.io/enforce"] = "restricted"
		for k, v := range labels {
			nsLabels[k] = v
		}
		add("v1", "Namespace", "", ns, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: nsLabels, Annotations: annotations},
		})
	}

	pullSecrets := []corev1.LocalObjectReference{}
	seen := map[string]bool{}
	for _, s := range a.ImagePullSecrets {
		if !seen[s.Name] {
			seen[s.Name] = true
			pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s.Name})
		}
	}
	if len(pullSecrets) == 0 {
		pullSecrets = nil
	}
	add("v1", "ServiceAccount", ns, name, &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   meta(name),
		AutomountServiceAccountToken: ptr(false),
		ImagePullSecrets:             pullSecrets,
	})

	inventoryIndex := len(objs)
	invLabels := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		invLabels[k] = v
	}
	invLabels[LabelInventory] = "true"
	inventory := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-inventory", Namespace: ns, Labels: invLabels, Annotations: annotations},
	}
	add("v1", "ConfigMap", ns, name+"-inventory", inventory)

	envSecret := name + "-env"
	add("v1", "Secret", ns, envSecret, &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(envSecret),
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{
			"HANGAR_WORKSPACE_NAME":            name,
			"HANGAR_WORKSPACE_ID":              p.WorkspaceID,
			"HANGAR_WORKSPACE_OWNER":           p.Owner,
			"HANGAR_WORKSPACE_DOMAIN_TEMPLATE": hostTemplate,
		},
	})

	volumes := make([]corev1.Volume, 0, 1+len(d.volumes))
	volumes = append(volumes, corev1.Volume{Name: projectsVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-data"},
	}})
	add("v1", "PersistentVolumeClaim", ns, name+"-data", pvc(meta(name+"-data"), resource.MustParse(projectsSize)))
	for _, vol := range d.volumes {
		if vol.ephemeral {
			size := vol.size
			volumes = append(volumes, corev1.Volume{Name: vol.name, VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size},
			}})
			continue
		}
		claim := name + "-" + vol.name
		volumes = append(volumes, corev1.Volume{Name: vol.name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		add("v1", "PersistentVolumeClaim", ns, claim, pvc(meta(claim), vol.size))
	}

	podAnnotations := make(map[string]string, len(annotations)+2)
	for k, v := range annotations {
		podAnnotations[k] = v
	}
	podAnnotations[AnnotationResourceHash] = hash
	podAnnotations["kubectl.kubernetes.io/default-container"] = d.containers[d.main].name
	for i := range containers {
		containers[i].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: envSecret}}}}
	}
	add("apps/v1", "Deployment", ns, name, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(name),
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: selector},
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			ProgressDeadlineSeconds: ptr(int32(progressSeconds)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName:           name,
					AutomountServiceAccountToken: ptr(false),
					// Service links would put every Service of a shared namespace into the environment.
					EnableServiceLinks: ptr(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(runAsUser)),
						FSGroup:        ptr(int64(runAsUser)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: containers,
					Volumes:    volumes,
				},
			},
		},
	})

	var ports []corev1.ServicePort
	for _, c := range d.containers {
		for _, ep := range c.endpoints {
			ports = append(ports, corev1.ServicePort{Name: ep.name, Protocol: ep.protocol, Port: ep.port, TargetPort: intstr.FromInt32(ep.port)})
		}
	}
	if len(ports) > 0 {
		add("v1", "Service", ns, name, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta(name),
			Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
		})
	}

	if *a.NetworkPolicy.Enabled {
		add("networking.k8s.io/v1", "NetworkPolicy", ns, name, networkPolicy(meta(name), selector, a))
	}

	// A ResourceQuota covers its whole namespace, so in a shared namespace it would cap the sum of
	// every workspace there. podContainers has checked the limits already; the quota is the cluster's
	// own guard where it is exact.
	if max := a.MaxResources; max != (workspace.Resources{}) && perWorkspace {
		hard := corev1.ResourceList{}
		setQuantity(hard, corev1.ResourceLimitsCPU, max.Limits.CPU)
		setQuantity(hard, corev1.ResourceLimitsMemory, max.Limits.Memory)
		setQuantity(hard, corev1.ResourceRequestsCPU, max.Requests.CPU)
		setQuantity(hard, corev1.ResourceRequestsMemory, max.Requests.Memory)
		add("v1", "ResourceQuota", ns, name, &corev1.ResourceQuota{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
			ObjectMeta: meta(name),
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		})
	}

	lines := make([]string, 0, len(objs)-1)
	for i, o := range objs {
		if i != inventoryIndex {
			lines = append(lines, o.inventoryLine())
		}
	}
	slices.Sort(lines)
	inventory.Data = map[string]string{InventoryKey: strings.Join(lines, "\n") + "\n"}
	return objs, nil
}

func pvc(meta metav1.ObjectMeta, size resource.Quantity) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

func networkPolicy(meta metav1.ObjectMeta, selector map[string]string, a workspace.AgentConfig) *networkingv1.NetworkPolicy {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns := intstr.FromInt32(53)
	egress := []networkingv1.NetworkPolicyEgressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
	}}
	for _, r := range a.NetworkPolicy.Egress {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: r.Allow, Except: r.Except}}},
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": a.ProxyNamespace},
				}}},
			}},
			Egress: egress,
		},
	}
}

// podContainers builds the containers with their effective resources — the devfile's own values,
// with the agent's defaults merged under them — and returns a short hash of those resources.
func (d *Devfile) podContainers(name string, a workspace.AgentConfig) ([]corev1.Container, string, error) {
	def := a.DefaultResources
	defCPUReq, defCPULim := optQuantity(def.Requests.CPU), optQuantity(def.Limits.CPU)
	defMemReq, defMemLim := optQuantity(def.Requests.Memory), optQuantity(def.Limits.Memory)

	var sumCPUReq, sumCPULim, sumMemReq, sumMemLim resource.Quantity
	missing := map[corev1.ResourceName]bool{}
	h := sha256.New()
	out := make([]corev1.Container, len(d.containers))
	for i, c := range d.containers {
		cpuReq, cpuLim := merge(c.cpuRequest, c.cpuLimit, defCPUReq, defCPULim)
		memReq, memLim := merge(c.memoryRequest, c.memoryLimit, defMemReq, defMemLim)
		res := corev1.ResourceRequirements{}
		for _, r := range []struct {
			list  *corev1.ResourceList
			name  corev1.ResourceName
			q     *resource.Quantity
			sum   *resource.Quantity
			quota corev1.ResourceName
		}{
			{&res.Requests, corev1.ResourceCPU, cpuReq, &sumCPUReq, corev1.ResourceRequestsCPU},
			{&res.Limits, corev1.ResourceCPU, cpuLim, &sumCPULim, corev1.ResourceLimitsCPU},
			{&res.Requests, corev1.ResourceMemory, memReq, &sumMemReq, corev1.ResourceRequestsMemory},
			{&res.Limits, corev1.ResourceMemory, memLim, &sumMemLim, corev1.ResourceLimitsMemory},
		} {
			if r.q == nil {
				missing[r.quota] = true
				continue
			}
			if *r.list == nil {
				*r.list = corev1.ResourceList{}
			}
			(*r.list)[r.name] = *r.q
			r.sum.Add(*r.q)
		}
		fmt.Fprintf(h, "%s cpu=%s/%s memory=%s/%s\n", c.name, qstr(cpuReq), qstr(cpuLim), qstr(memReq), qstr(memLim))

		mounts := make([]corev1.VolumeMount, 0, 1+len(c.mounts))
		if c.mountSources {
			mounts = append(mounts, corev1.VolumeMount{Name: projectsVolume, MountPath: c.sourcePath})
		}
		mounts = append(mounts, c.mounts...)
		var ports []corev1.ContainerPort
		for _, ep := range c.endpoints {
			ports = append(ports, corev1.ContainerPort{Name: ep.name, ContainerPort: ep.port, Protocol: ep.protocol})
		}
		out[i] = corev1.Container{
			Name:         c.name,
			Image:        c.image,
			Command:      c.command,
			Args:         c.args,
			Ports:        ports,
			Env:          c.env,
			Resources:    res,
			VolumeMounts: mounts,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}
	}

	v := &workspace.ValidationError{}
	max := a.MaxResources
	for _, m := range []struct {
		quota   corev1.ResourceName
		max     string
		sum     resource.Quantity
		devfile string
	}{
		{corev1.ResourceLimitsCPU, max.Limits.CPU, sumCPULim, "cpuLimit"},
		{corev1.ResourceLimitsMemory, max.Limits.Memory, sumMemLim, "memoryLimit"},
		{corev1.ResourceRequestsCPU, max.Requests.CPU, sumCPUReq, "cpuRequest"},
		{corev1.ResourceRequestsMemory, max.Requests.Memory, sumMemReq, "memoryRequest"},
	} {
		q := optQuantity(m.max)
		switch {
		case q == nil:
		case missing[m.quota]:
			v.Add("devfile.components", "every container needs %s because the agent caps %s at %s per workspace; set it in the devfile or in the agent's default_resources_per_workspace_container", m.devfile, m.quota, m.max)
		case m.sum.Cmp(*q) > 0:
			v.Add("devfile.components", "the containers' %s add up to %s (devfile values over the agent's defaults), more than the agent's max_resources_per_workspace %s of %s", m.devfile, m.sum.String(), m.quota, m.max)
		}
	}
	if err := v.Err(); err != nil {
		return nil, "", err
	}
	sum := h.Sum(nil)
	return out, hex.EncodeToString(sum[:8]), nil
}

// merge returns a container's effective request and limit: the devfile's own values where set, the
// defaults elsewhere. A default never makes the pair invalid: when the devfile's request is above the
// default limit, the limit rises to the request; when its limit is below the default request, the
// request falls to the limit.
func merge(req, lim, defReq, defLim *resource.Quantity) (*resource.Quantity, *resource.Quantity) {
	switch {
	case req != nil && lim != nil:
		return req, lim
	case req != nil:
		if defLim != nil && req.Cmp(*defLim) > 0 {
			return req, req
		}
		return req, defLim
	case lim != nil:
		if defReq != nil && defReq.Cmp(*lim) > 0 {
			return lim, lim
		}
		return defReq, lim
	default:
		return defReq, defLim
	}
}

func optQuantity(s string) *resource.Quantity {
	if s == "" {
		return nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil // Validate refused it; treat as unset rather than panic
	}
	return &q
}

func qstr(q *resource.Quantity) string {
	if q == nil {
		return "-"
	}
	return q.String()
}

func setQuantity(l corev1.ResourceList, name corev1.ResourceName, s string) {
	if q := optQuantity(s); q != nil {
		l[name] = *q
	}
}

func ptr[T any](v T) *T { return &v }
