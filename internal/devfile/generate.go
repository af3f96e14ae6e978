package devfile

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Labels and annotations Hangar sets on every object of a workspace, besides protocol's (which the
// agent and the access proxy read back).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "hangar"
	// AnnotationResourceHash on the pod template changes when the effective resources do.
	AnnotationResourceHash = workspace.ReservedPrefix + "resource-hash"
)

// Params are the facts about one workspace that Generate needs beyond its devfile.
type Params struct {
	WorkspaceID   string // uuid
	WorkspaceName string // DNS-1123 label, <= 40 chars: the name its owner gave it
	// KubeName names the workspace's objects (workspace.KubeName; "" means WorkspaceName, as for
	// workspaces from before cluster names).
	KubeName     string
	Owner        string // username
	AgentID      string
	Namespace    string                // computed by the server: per-workspace namespace or the agent's shared one
	DesiredState workspace.State       // Running => replicas 1; Stopped, RestartRequested, Terminated => replicas 0
	Agent        workspace.AgentConfig // already WithDefaults()+Validate()d
	// HelperHostKey (workspace.HelperHostKey) is put in the <name>-ssh Secret for the helper, which
	// then serves with it; nil leaves the helper to make its own (a key the proxy cannot pin).
	HelperHostKey ed25519.PrivateKey
	// HelperToken (workspace.KubeHelperToken) and ServerURL, when both are set, let the helper
	// report to the server (startup steps, dotfiles, metadata): the token goes in the <name>-ssh
	// Secret, never in the pod spec, and the helper reads it from its file.
	HelperToken, ServerURL string
	// HelperGit, with HelperToken and ServerURL, has the helper and the project clone ask the
	// server for the owner's git credentials too (the server has forges); without it the helper
	// sets up no credential helper and the clone asks nothing (HelperGitCredentialsEnv).
	HelperGit bool
	// OwnerFullName and OwnerEmail are the owner's profile: the main container's git identity
	// (GIT_AUTHOR_NAME and the like; the name falls back to Owner, the email to none). Not secret.
	OwnerFullName, OwnerEmail string
	// DotfilesRepo is the owner's dotfiles repository (URL[#ref], workspace.CheckDotfilesRepo),
	// which the helper installs at the workspace's first start ("": none).
	DotfilesRepo string
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
	case p.KubeName != "" && !workspace.IsDNSLabel(p.KubeName, workspace.MaxKubeNameLength):
		return fmt.Errorf("cluster name %q is not a DNS label of at most %d characters", p.KubeName, workspace.MaxKubeNameLength)
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

	name, ns, a := cmp.Or(p.KubeName, p.WorkspaceName), p.Namespace, p.Agent
	hostTemplate := ""
	if p.Owner != "" && workspace.CheckNameForOwner(p.WorkspaceName, p.Owner) == "" {
		hostTemplate = workspace.HostTemplate(p.WorkspaceName, p.Owner, a.DNSZone)
	}

	labels := make(map[string]string, len(a.Labels)+4)
	for k, v := range a.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = ManagedByValue
	labels[protocol.LabelAgentID] = p.AgentID
	labels[protocol.LabelWorkspaceID] = p.WorkspaceID
	labels[protocol.LabelWorkspaceName] = name
	annotations := make(map[string]string, len(a.Annotations)+1)
	for k, v := range a.Annotations {
		annotations[k] = v
	}
	if hostTemplate != "" {
		annotations[protocol.AnnotationHostTemplate] = hostTemplate
	}
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels, Annotations: annotations}
	}
	selector := map[string]string{protocol.LabelWorkspaceID: p.WorkspaceID}

	helperServer := ""
	if p.HelperToken != "" && p.ServerURL != "" {
		helperServer = p.ServerURL
	}
	gitName := p.OwnerFullName
	if gitName == "" {
		gitName = p.Owner
	}
	plan, err := d.planBuild(a)
	if err != nil {
		return nil, err
	}
	pod, err := d.podContainers(a, helperOptions{hostKey: p.HelperHostKey != nil, serverURL: helperServer, git: helperServer != "" && p.HelperGit,
		gitName: gitName, gitEmail: p.OwnerEmail, dotfiles: p.DotfilesRepo}, plan)
	if err != nil {
		return nil, err
	}
	var hostKeyPEM string
	if p.HelperHostKey != nil {
		// PKCS #8, not OpenSSH's format: that one holds random check bytes, and the same key must
		// give the same Secret (the agent applies only what changed).
		der, err := x509.MarshalPKCS8PrivateKey(p.HelperHostKey)
		if err != nil {
			return nil, fmt.Errorf("helper host key: %w", err)
		}
		hostKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
	containers, inits := pod.containers, pod.inits

	var objs []object
	add := func(apiVersion, kind, namespace, n string, v any) {
		objs = append(objs, object{apiVersion: apiVersion, kind: kind, namespace: namespace, name: n, v: v})
	}

	perWorkspace := a.NamespaceMode == workspace.NamespacePerWorkspace
	if perWorkspace {
		// The pod spec below meets the "restricted" Pod Security Standard; say so, so that the cluster
		// refuses anything less in this namespace. An agent label may choose another level.
		nsLabels := make(map[string]string, len(labels)+3)
		nsLabels["pod-security.kubernetes.io/enforce"] = "restricted"
		if plan.spec != nil {
			// The image build runs as root with a few capabilities, which "restricted" forbids and
			// "baseline" allows; the workspace's own containers still meet "restricted", which the
			// cluster checks and reports (warn, audit) without refusing the build.
			nsLabels["pod-security.kubernetes.io/enforce"] = "baseline"
			nsLabels["pod-security.kubernetes.io/warn"] = "restricted"
			nsLabels["pod-security.kubernetes.io/audit"] = "restricted"
		}
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
	secrets := a.ImagePullSecrets
	if plan.spec != nil && a.ImageBuild.PushSecret != nil {
		// The built image is pulled from the registry the build pushed to, with the same Secret.
		secrets = append(slices.Clip(secrets), *a.ImageBuild.PushSecret)
	}
	for _, s := range secrets {
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
	invLabels[protocol.LabelInventory] = "true"
	inventory := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-inventory", Namespace: ns, Labels: invLabels, Annotations: annotations},
	}
	add("v1", "ConfigMap", ns, name+"-inventory", inventory)

	if plan.spec != nil {
		add("v1", "ConfigMap", ns, name+"-image-build", &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(name + "-image-build"),
			Data:       map[string]string{ImageBuildSpecKey: string(plan.spec)},
		})
	}

	envSecret := name + "-env"
	env := map[string]string{
		"HANGAR_WORKSPACE_NAME":  p.WorkspaceName,
		"HANGAR_WORKSPACE_ID":    p.WorkspaceID,
		"HANGAR_WORKSPACE_OWNER": p.Owner,
	}
	if hostTemplate != "" {
		env["HANGAR_WORKSPACE_DOMAIN_TEMPLATE"] = hostTemplate
	}
	add("v1", "Secret", ns, envSecret, &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(envSecret),
		Type:       corev1.SecretTypeOpaque,
		StringData: env,
	})
	sshSecret := name + "-ssh"
	if d.helper {
		// The keys the helper trusts: the access proxy's. None refuses everyone (the helper fails
		// closed). The kubelet updates the mounted file when the agent's keys change; the helper
		// re-reads it at every login.
		keys := ""
		if len(a.ProxySSHPublicKeys) > 0 {
			keys = strings.Join(a.ProxySSHPublicKeys, "\n") + "\n"
		}
		sshData := map[string]string{AuthorizedKeysKey: keys}
		if p.HelperHostKey != nil {
			sshData[HostKeyKey] = hostKeyPEM
		}
		if helperServer != "" {
			sshData[HelperTokenKey] = p.HelperToken
		}
		add("v1", "Secret", ns, sshSecret, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta(sshSecret),
			Type:       corev1.SecretTypeOpaque,
			StringData: sshData,
		})
	}

	volumes := make([]corev1.Volume, 0, 3+len(d.volumes))
	if d.ephemeralData {
		// controller.devfile.io/storage-type: ephemeral: nothing of the workspace outlives its pod.
		size := resource.MustParse(projectsSize)
		volumes = append(volumes, corev1.Volume{Name: projectsVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size},
		}})
	} else {
		volumes = append(volumes, corev1.Volume{Name: projectsVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-data"},
		}})
		add("v1", "PersistentVolumeClaim", ns, name+"-data", pvc(meta(name+"-data"), resource.MustParse(projectsSize)))
	}
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
	if d.helper || plan.spec != nil {
		size := resource.MustParse(toolsSize)
		volumes = append(volumes, corev1.Volume{Name: toolsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}})
	}
	if d.helper {
		volumes = append(volumes, corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: sshSecret}}})
	}
	if plan.spec != nil {
		volumes = append(volumes, corev1.Volume{Name: imageBuildVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name + "-image-build"}}}})
		// No size limit: the layer is as large as what the build writes, as its root filesystem.
		volumes = append(volumes, corev1.Volume{Name: imageBuildWork, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		if s := a.ImageBuild.PushSecret; s != nil {
			volumes = append(volumes, corev1.Volume{Name: imageBuildDocker, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: s.Name, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}}}}})
		}
	}
	if d.editorInMain {
		size := resource.MustParse(editorVolumeSize)
		volumes = append(volumes, corev1.Volume{Name: editorVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}})
	}

	podLabels, podAnnotations := labels, make(map[string]string, len(annotations)+2)
	if len(d.pod.labels) > 0 {
		podLabels = make(map[string]string, len(labels)+len(d.pod.labels))
		maps.Copy(podLabels, d.pod.labels)
		maps.Copy(podLabels, labels) // Hangar's own labels win
	}
	maps.Copy(podAnnotations, d.pod.annotations)
	deploymentAnnotations := annotations
	for _, c := range d.containers {
		maps.Copy(podAnnotations, c.deploymentAnnotations)
		if len(c.deploymentAnnotations) > 0 {
			if len(deploymentAnnotations) == len(annotations) {
				deploymentAnnotations = maps.Clone(annotations)
			}
			maps.Copy(deploymentAnnotations, c.deploymentAnnotations)
			maps.Copy(deploymentAnnotations, annotations)
		}
	}
	maps.Copy(podAnnotations, annotations)
	podAnnotations[AnnotationResourceHash] = pod.hash
	podAnnotations["kubectl.kubernetes.io/default-container"] = d.containers[d.main].name
	envFrom := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: envSecret}}}}
	for i := range containers {
		containers[i].EnvFrom = envFrom
	}
	for i := range inits {
		if !isImageBuild(inits[i].Name) { // a build depends on its Spec only: it is shared
			inits[i].EnvFrom = envFrom
		}
	}
	podSecurity := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      ptr(int64(runAsUser)),
		FSGroup:        ptr(int64(runAsUser)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if d.pod.runAsUser != nil {
		podSecurity.RunAsUser = d.pod.runAsUser
	}
	podSecurity.RunAsGroup = d.pod.runAsGroup
	if d.pod.fsGroup != nil {
		podSecurity.FSGroup = d.pod.fsGroup
	}
	podSecurity.SupplementalGroups = d.pod.supplementalGroups
	var nodeSelector map[string]string
	if len(a.NodeSelector) > 0 {
		nodeSelector = a.NodeSelector
	}
	var tolerations []corev1.Toleration
	for _, t := range a.Tolerations {
		tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	// A build runs before the pod can be ready, and a first build (compilers, language runtimes)
	// may take longer than the usual deadline: the Deployment would say ProgressDeadlineExceeded,
	// and the workspace would be Failed while its build is still working.
	progress := progressSeconds
	if plan.spec != nil {
		progress = imageBuildProgressSeconds
	}
	deployMeta := meta(name)
	deployMeta.Annotations = deploymentAnnotations
	add("apps/v1", "Deployment", ns, name, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: deployMeta,
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: selector},
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			ProgressDeadlineSeconds: ptr(int32(progress)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName:           name,
					AutomountServiceAccountToken: ptr(false),
					// Service links would put every Service of a shared namespace into the environment.
					EnableServiceLinks: ptr(false),
					SecurityContext:    podSecurity,
					InitContainers:     inits,
					Containers:         containers,
					Volumes:            volumes,
					NodeSelector:       nodeSelector,
					Tolerations:        tolerations,
					HostAliases:        d.pod.hostAliases,
				},
			},
		},
	})

	// Public and internal endpoints get a Service port; none endpoints stay inside the pod, but for
	// the helper's SSH port, which the proxy finds through the Service's EndpointSlice.
	var ports []corev1.ServicePort
	var public []string
	var publicPorts, internalPorts []networkingv1.NetworkPolicyPort
	serviceAnnotations := annotations
	for _, c := range d.containers {
		for _, ep := range c.endpoints {
			if ep.exposure == v1alpha2.NoneEndpointExposure {
				continue
			}
			ports = append(ports, corev1.ServicePort{Name: ep.name, Protocol: ep.protocol, Port: ep.port, TargetPort: intstr.FromInt32(ep.port)})
			npPort := networkingv1.NetworkPolicyPort{Protocol: ptr(ep.protocol), Port: ptr(intstr.FromInt32(ep.port))}
			if ep.exposure == v1alpha2.PublicEndpointExposure {
				public = append(public, strconv.Itoa(int(ep.port)))
				publicPorts = append(publicPorts, npPort)
			} else {
				internalPorts = append(internalPorts, npPort)
			}
		}
		if len(c.serviceAnnotations) > 0 {
			if len(serviceAnnotations) == len(annotations) {
				serviceAnnotations = maps.Clone(annotations)
			}
			maps.Copy(serviceAnnotations, c.serviceAnnotations)
			maps.Copy(serviceAnnotations, annotations)
		}
	}
	if d.helper {
		// In the NetworkPolicy for the proxy only (below), never a public port.
		ports = append(ports, corev1.ServicePort{Name: protocol.HelperSSHPortName, Protocol: corev1.ProtocolTCP, Port: HelperSSHPort, TargetPort: intstr.FromInt32(HelperSSHPort)})
	}
	if len(ports) > 0 {
		svcMeta := meta(name)
		svcMeta.Annotations = maps.Clone(serviceAnnotations)
		svcMeta.Annotations[protocol.AnnotationPublicPorts] = strings.Join(public, ",")
		add("v1", "Service", ns, name, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: svcMeta,
			Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
		})
	}

	if *a.NetworkPolicy.Enabled {
		proxyPorts := publicPorts
		if d.helper {
			// The helper's SSH port: for the proxy only, never a public endpoint.
			proxyPorts = append(slices.Clone(publicPorts), networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(HelperSSHPort))})
		}
		add("networking.k8s.io/v1", "NetworkPolicy", ns, name, networkPolicy(meta(name), selector, a, proxyPorts, internalPorts))
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
	inventory.Data = map[string]string{protocol.InventoryKey: strings.Join(lines, "\n") + "\n"}
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

// networkPolicy admits the proxy's pods (proxy_pod_selector in the proxy namespace) to public
// endpoints and the helper's SSH port only (public), and every other namespace of the cluster to internal endpoints only; none
// endpoints get no rule, so nothing outside the pod reaches them. Egress: DNS plus the agent's CIDRs.
func networkPolicy(meta metav1.ObjectMeta, selector map[string]string, a workspace.AgentConfig, public, internal []networkingv1.NetworkPolicyPort) *networkingv1.NetworkPolicy {
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
	ingress := []networkingv1.NetworkPolicyIngressRule{}
	if len(public) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: a.ProxyNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(a.ProxyPodSelector)},
			}},
			Ports: public,
		})
	}
	if len(internal) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{a.ProxyNamespace}}},
			}}},
			Ports: internal,
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egress,
		},
	}
}

const namespaceNameLabel = "kubernetes.io/metadata.name"

// Names and paths of what Hangar adds to a workspace pod.
const (
	// CloneContainerName is the init container that clones the devfile's projects.
	CloneContainerName = protocol.ProjectCloneContainerName
	// ToolsBinary is where a tools image holds the hangar binary.
	ToolsBinary = "/usr/local/bin/hangar"
	// ProjectsEnv carries the projects to clone, as JSON, to `hangar project-clone`.
	ProjectsEnv = "HANGAR_PROJECTS"
	// KeepAliveScript keeps a main container without a command running until it is stopped (when
	// the helper cannot run there).
	KeepAliveScript = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"

	// ToolsContainerName is the init container that copies the hangar binary (`hangar install-self`)
	// into the toolsVolume, mounted at HelperDir in the main container.
	ToolsContainerName = "hangar-tools"
	toolsVolume        = "hangar-tools"
	toolsSize          = "256Mi"
	// HelperDir holds the copied binary, HelperBinary; also the helper's state directory
	// (HelperDir/state) when the main container does not mount the data volume.
	HelperDir    = "/hangar/bin"
	HelperBinary = HelperDir + "/hangar"
	// HelperSSHPort is where the helper serves SSH (HANGAR_HELPER_SSH_ADDR): a port of the
	// workspace's Service (the proxy finds the pod by it) admitted from the proxy's pods only, never
	// public. High, so that it seldom clashes with a devfile's.
	HelperSSHPort = 60022
	// The Secret <name>-ssh, key AuthorizedKeysKey, is mounted read-only at HelperSSHDir.
	sshVolume         = "hangar-ssh"
	HelperSSHDir      = "/hangar/ssh"
	AuthorizedKeysKey = "authorized_keys"
	// HelperTokenKey is the helper's token for the server in the same Secret (Params.HelperToken).
	HelperTokenKey = "helper-token"
	// HostKeyKey is the helper's host key in the same Secret (Params.HelperHostKey), when given.
	HostKeyKey = "ssh_host_ed25519_key"
)

type podSpec struct {
	containers, inits []corev1.Container
	hash              string
}

// podContainers builds the containers and init containers with their effective resources — the
// devfile's own values, with the agent's defaults merged under them, each default kept within the
// agent's caps — checks the caps, and returns a short hash of those resources.
func (d *Devfile) podContainers(a workspace.AgentConfig, helper helperOptions, plan buildPlan) (podSpec, error) {
	def := defaultsWithinCaps(a)
	var out podSpec
	h := sha256.New()
	type spent struct {
		name string
		res  corev1.ResourceRequirements
		from map[corev1.ResourceName]string // where each value came from, for messages
	}
	build := func(c container, isInit bool) (corev1.Container, spent) {
		r, from := c.resources(def)
		fmt.Fprintf(h, "%s init=%v %v %v\n", c.name, isInit, r.Requests, r.Limits)
		return d.kubeContainer(c, r, a), spent{c.name, r, from}
	}
	var app, init []spent
	for i, c := range d.containers {
		if i == d.main && plan.image != "" {
			c.image = plan.image
		}
		if i == d.main && d.helper {
			c = c.withHelper(helper)
		}
		kc, sp := build(c, false)
		out.containers = append(out.containers, kc)
		app = append(app, sp)
	}
	if d.helper || plan.spec != nil {
		kc, sp := build(toolsContainer(a), true)
		out.inits = append(out.inits, kc)
		init = append(init, sp)
	}
	if plan.spec != nil {
		run := imageBuildContainer(a)
		run.image = d.build.Base
		for _, c := range []container{imageRegistryContainer(a, ImagePrepareContainerName, "prepare", plan.image), run, imageRegistryContainer(a, ImagePushContainerName, "push", plan.image)} {
			kc, sp := build(c, true)
			out.inits = append(out.inits, kc)
			init = append(init, sp)
		}
	}
	if d.editorInMain {
		kc, sp := build(editorInstallContainer(), true)
		out.inits = append(out.inits, kc)
		init = append(init, sp)
	}
	if len(d.projects) > 0 {
		gitServer := ""
		if helper.git {
			gitServer = helper.serverURL
		}
		kc, sp := build(d.cloneContainer(a, gitServer), true)
		out.inits = append(out.inits, kc)
		init = append(init, sp)
	}
	for _, c := range d.inits {
		kc, sp := build(c, true)
		out.inits = append(out.inits, kc)
		init = append(init, sp)
	}

	// The pod's effective value of a resource is the larger of the containers' sum and the largest
	// init container (init containers run one at a time, before the others).
	v := &workspace.ValidationError{}
	max := a.MaxResources
	for _, m := range []struct {
		limits  bool
		name    corev1.ResourceName
		cap     string
		field   string
		devfile string
	}{
		{true, corev1.ResourceCPU, max.Limits.CPU, "limits.cpu", "cpuLimit"},
		{true, corev1.ResourceMemory, max.Limits.Memory, "limits.memory", "memoryLimit"},
		{false, corev1.ResourceCPU, max.Requests.CPU, "requests.cpu", "cpuRequest"},
		{false, corev1.ResourceMemory, max.Requests.Memory, "requests.memory", "memoryRequest"},
	} {
		q := optQuantity(m.cap)
		if q == nil {
			continue
		}
		get := func(sp spent) (resource.Quantity, bool) {
			l := sp.res.Requests
			if m.limits {
				l = sp.res.Limits
			}
			v, ok := l[m.name]
			return v, ok
		}
		var missing []string
		var sum resource.Quantity
		var parts []string
		for _, sp := range app {
			val, ok := get(sp)
			if !ok {
				missing = append(missing, sp.name)
				continue
			}
			sum.Add(val)
			parts = append(parts, fmt.Sprintf("%s %s (%s)", sp.name, val.String(), sp.from[resourceKey(m.limits, m.name)]))
		}
		for _, sp := range init {
			val, ok := get(sp)
			if !ok {
				missing = append(missing, sp.name)
				continue
			}
			if val.Cmp(*q) > 0 {
				v.Add("devfile.components", "init container %s needs %s %s (%s), more than the agent's max_resources_per_workspace %s of %s", sp.name, m.field, val.String(), sp.from[resourceKey(m.limits, m.name)], m.field, m.cap)
			}
		}
		switch {
		case len(missing) > 0:
			v.Add("devfile.components", "%s %s no %s, but the agent caps %s at %s per workspace; set %s in the devfile or %s in the agent's default_resources_per_workspace_container", strings.Join(missing, ", "), hasHave(len(missing)), m.field, m.field, m.cap, m.devfile, m.field)
		case sum.Cmp(*q) > 0:
			v.Add("devfile.components", "the containers' %s add up to %s (%s), more than the agent's max_resources_per_workspace %s of %s", m.field, sum.String(), strings.Join(parts, ", "), m.field, m.cap)
		}
	}
	if err := v.Err(); err != nil {
		return podSpec{}, err
	}
	sum := h.Sum(nil)
	out.hash = hex.EncodeToString(sum[:8])
	return out, nil
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

func resourceKey(limits bool, name corev1.ResourceName) corev1.ResourceName {
	if limits {
		return "limits." + name
	}
	return "requests." + name
}

// defaultsWithinCaps returns the agent's default container resources, each kept at or below the
// agent's per-workspace cap of the same resource, so that a default alone never makes a workspace
// exceed the caps (the default devfile sets no resources).
func defaultsWithinCaps(a workspace.AgentConfig) workspace.Resources {
	// A clamped limit may now be below a default request; merge lowers the request then.
	return withinCaps(a.DefaultResources, a.MaxResources)
}

// resources returns c's effective requests and limits and where each value came from.
func (c container) resources(def workspace.Resources) (corev1.ResourceRequirements, map[corev1.ResourceName]string) {
	res := corev1.ResourceRequirements{}
	from := map[corev1.ResourceName]string{}
	for _, r := range []struct {
		name             corev1.ResourceName
		req, lim         *resource.Quantity
		defReq, defLim   string
		devReq, devLim   string
		agentReq, agentL string
	}{
		{corev1.ResourceCPU, c.cpuRequest, c.cpuLimit, def.Requests.CPU, def.Limits.CPU, "devfile cpuRequest", "devfile cpuLimit", "agent default requests.cpu", "agent default limits.cpu"},
		{corev1.ResourceMemory, c.memoryRequest, c.memoryLimit, def.Requests.Memory, def.Limits.Memory, "devfile memoryRequest", "devfile memoryLimit", "agent default requests.memory", "agent default limits.memory"},
	} {
		req, lim := merge(r.req, r.lim, optQuantity(r.defReq), optQuantity(r.defLim))
		// A value is the devfile's when the devfile set it, or when merge took it from the devfile's
		// other value of the pair; else it is the agent's default.
		setResource(&res.Requests, r.name, req, from, resourceKey(false, r.name), r.agentReq, r.devReq, r.req != nil || (r.lim != nil && req == r.lim))
		setResource(&res.Limits, r.name, lim, from, resourceKey(true, r.name), r.agentL, r.devLim, r.lim != nil || (r.req != nil && lim == r.req))
	}
	// What the editor run inside it needs comes on top (a limit only where there is one).
	for name, q := range c.extraReq {
		sum := q.DeepCopy()
		if have, ok := res.Requests[name]; ok {
			sum.Add(have)
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Requests[name] = sum
	}
	for name, q := range c.extraLimit {
		if have, ok := res.Limits[name]; ok {
			have.Add(q)
			res.Limits[name] = have
		}
	}
	return res, from
}

// setResource puts q (if any) into *list under name and records where it came from.
func setResource(list *corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity, from map[corev1.ResourceName]string, key corev1.ResourceName, agent, devfile string, fromDevfile bool) {
	if q == nil {
		return
	}
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[name] = *q
	from[key] = agent
	if fromDevfile {
		from[key] = devfile
	}
}

// kubeContainer is c as Kubernetes runs it.
func (d *Devfile) kubeContainer(c container, res corev1.ResourceRequirements, a workspace.AgentConfig) corev1.Container {
	mounts := make([]corev1.VolumeMount, 0, 1+len(c.mounts))
	if c.mountSources && !c.ownSources {
		mounts = append(mounts, corev1.VolumeMount{Name: projectsVolume, MountPath: c.sourcePath})
	}
	mounts = append(mounts, c.mounts...)
	var ports []corev1.ContainerPort
	for _, ep := range c.endpoints {
		p := corev1.ContainerPort{ContainerPort: ep.port, Protocol: ep.protocol}
		if len(ep.name) <= 15 && ianaNameRe.MatchString(ep.name) && ianaLetterRe.MatchString(ep.name) && !strings.Contains(ep.name, "--") {
			p.Name = ep.name // a container port's name is an IANA service name; longer ones go unnamed
		}
		ports = append(ports, p)
	}
	env := slices.Clone(c.env)
	if c.mountSources {
		has := map[string]bool{}
		for _, e := range env {
			has[e.Name] = true
		}
		source := c.sourcePath
		if d.source != "" {
			source = path.Join(c.sourcePath, d.source)
		}
		for _, e := range []corev1.EnvVar{{Name: "PROJECTS_ROOT", Value: c.sourcePath}, {Name: "PROJECT_SOURCE", Value: source}} {
			if !has[e.Name] { // the devfile's own value wins
				env = append(env, e)
			}
		}
	}
	command, args := c.command, c.args
	if c.keepAlive {
		command = []string{"/bin/sh", "-c", KeepAliveScript}
	}
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsUser:                c.security.runAsUser,
		RunAsGroup:               c.security.runAsGroup,
		ReadOnlyRootFilesystem:   c.security.readOnlyRootFilesystem,
	}
	if c.imageBuild {
		sc = imageBuildSecurity()
	}
	var lifecycle *corev1.Lifecycle
	hook := func(cmds []execCommand) *corev1.LifecycleHandler {
		if len(cmds) == 0 {
			return nil
		}
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", shellScript(cmds)}}}
	}
	if len(c.postStart) > 0 || len(c.preStop) > 0 {
		lifecycle = &corev1.Lifecycle{PostStart: hook(c.postStart), PreStop: hook(c.preStop)}
	}
	var messagePolicy corev1.TerminationMessagePolicy
	if c.logsAsMessage {
		messagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	}
	return corev1.Container{
		Name:            c.name,
		Image:           c.image,
		Command:         command,
		Args:            args,
		Ports:           ports,
		Env:             env,
		Resources:       res,
		VolumeMounts:    mounts,
		Lifecycle:       lifecycle,
		ReadinessProbe:  c.readiness,
		ImagePullPolicy: corev1.PullIfNotPresent,
		// Empty unless logsAsMessage: the API server's default (File) then applies.
		TerminationMessagePolicy: messagePolicy,
		SecurityContext:          sc,
	}
}

// helperOptions are what the helper gets beyond its SSH: whether the <name>-ssh Secret holds its
// host key, and the server it asks with the token of that Secret ("": none).
type helperOptions struct {
	hostKey   bool
	serverURL string
	// git: the helper asks serverURL for the owner's git credentials too (Params.HelperGit).
	git bool
	// gitName and gitEmail are the owner's git identity; dotfiles the repository the helper
	// installs (HelperDotfilesEnv, "": none).
	gitName, gitEmail, dotfiles string
}

// withHelper returns the main container c running `hangar workspace-helper`: around the devfile's
// command and args (`-- COMMAND ARGS...`), or alone instead of the keep-alive script (the helper
// keeps the container running). The helper serves SSH on HelperSSHPort to the keys of the
// <name>-ssh Secret, with the host key of that Secret when hostKey (Params.HelperHostKey, which the
// proxy pins), else one it keeps in <data volume>/.hangar when the container mounts the data
// volume, or in HelperDir/state. Its state (postStart record) lives there too.
func (c container) withHelper(h helperOptions) container {
	if c.keepAlive {
		c.command, c.keepAlive = []string{HelperBinary, "workspace-helper"}, false
	} else {
		c.command = slices.Concat([]string{HelperBinary, "workspace-helper", "--"}, c.command, c.args)
	}
	c.args = nil
	stateDir := path.Join(HelperDir, "state")
	if c.mountSources && !c.ownSources {
		stateDir = path.Join(c.sourcePath, ".hangar")
	}
	c.env = append(slices.Clip(c.env),
		corev1.EnvVar{Name: "HANGAR_HELPER_SSH_ADDR", Value: ":" + strconv.Itoa(HelperSSHPort)},
		corev1.EnvVar{Name: "HANGAR_HELPER_AUTHORIZED_KEYS_FILE", Value: path.Join(HelperSSHDir, AuthorizedKeysKey)},
		corev1.EnvVar{Name: "HANGAR_HELPER_STATE_DIR", Value: stateDir})
	if h.serverURL != "" {
		c.env = append(c.env,
			corev1.EnvVar{Name: "HANGAR_HELPER_SERVER_URL", Value: h.serverURL},
			corev1.EnvVar{Name: "HANGAR_HELPER_TOKEN_FILE", Value: path.Join(HelperSSHDir, HelperTokenKey)})
		if !h.git {
			c.env = append(c.env, corev1.EnvVar{Name: HelperGitCredentialsEnv, Value: "false"})
		}
	}
	if h.hostKey {
		c.env = append(c.env, corev1.EnvVar{Name: "HANGAR_HELPER_HOST_KEY_FILE", Value: path.Join(HelperSSHDir, HostKeyKey)})
	}
	if h.dotfiles != "" {
		c.env = append(c.env, corev1.EnvVar{Name: HelperDotfilesEnv, Value: h.dotfiles})
	}
	// The owner's git identity, as Coder gives it (not secret); a devfile's own value of one of
	// these variables wins.
	for _, v := range []corev1.EnvVar{
		{Name: "GIT_AUTHOR_NAME", Value: h.gitName}, {Name: "GIT_AUTHOR_EMAIL", Value: h.gitEmail},
		{Name: "GIT_COMMITTER_NAME", Value: h.gitName}, {Name: "GIT_COMMITTER_EMAIL", Value: h.gitEmail},
	} {
		if v.Value != "" && !slices.ContainsFunc(c.env, func(e corev1.EnvVar) bool { return e.Name == v.Name }) {
			c.env = append(c.env, v)
		}
	}
	// The web editor, run by the helper, from the bundle the editor's init container copied.
	if c.editor != nil {
		b, _ := json.Marshal(c.editor) // strings and a number: cannot fail
		c.env = append(c.env, corev1.EnvVar{Name: HelperEditorEnv, Value: string(b)})
		c.mounts = append(slices.Clip(c.mounts), corev1.VolumeMount{Name: editorVolume, MountPath: EditorDir, ReadOnly: true})
	}
	if len(c.remoteEnv) > 0 {
		b, _ := json.Marshal(c.remoteEnv) // strings only: cannot fail
		c.env = append(c.env, corev1.EnvVar{Name: HelperRemoteEnvEnv, Value: string(b)})
	}
	if c.metadata != nil {
		c.env = append(c.env, corev1.EnvVar{Name: protocol.HelperMetadataEnv, Value: protocol.EncodeMetadataSpec(*c.metadata)})
	}
	// postStart runs in the helper, once per start of the workspace, instead of as the container's
	// lifecycle hook (docs/decisions.md, "postStart runs in the helper"): each command is the very
	// script the hook would run, so its meaning does not change.
	if len(c.postStart) > 0 {
		cmds := make([]workspace.PostStartCommand, 0, len(c.postStart))
		for _, e := range c.postStart {
			cmds = append(cmds, workspace.PostStartCommand{ID: e.id, CommandLine: shellScript([]execCommand{e}), OncePerWorkspace: e.oncePerWorkspace})
		}
		b, _ := json.Marshal(cmds) // strings only: cannot fail
		c.env = append(c.env, corev1.EnvVar{Name: HelperPostStartEnv, Value: string(b)})
		if c.nonBlocking {
			c.env = append(c.env, corev1.EnvVar{Name: HelperPostStartBlockingEnv, Value: "false"})
		}
		c.postStart = nil
	}
	// Ready once the helper listens: the EndpointSlice then sends the proxy only to a pod that
	// answers SSH (just after Running, `hangar ssh` would otherwise meet a refused connection).
	c.readiness = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(HelperSSHPort)}},
		PeriodSeconds: 2, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1,
	}
	c.mounts = append(slices.Clip(c.mounts),
		corev1.VolumeMount{Name: toolsVolume, MountPath: HelperDir},
		corev1.VolumeMount{Name: sshVolume, MountPath: HelperSSHDir, ReadOnly: true})
	c.endpoints = append(slices.Clip(c.endpoints), endpoint{name: protocol.HelperSSHPortName, port: HelperSSHPort, protocol: corev1.ProtocolTCP, exposure: v1alpha2.NoneEndpointExposure})
	return c
}

// HelperEditorEnv is the main container's variable that gives the helper the web editor to run
// (a workspace.EditorProcess as JSON).
const HelperEditorEnv = "HANGAR_HELPER_EDITOR"

// HelperGitCredentialsEnv "false" tells a helper that has a server to report to not to hand git
// the owner's credentials from it (the server has no forges); unset means it does, as helpers did
// before they reported without forges.
const HelperGitCredentialsEnv = "HANGAR_HELPER_GIT_CREDENTIALS"

// HelperRemoteEnvEnv is the main container's variable that gives the helper the environment of
// what it runs (RemoteEnvAttribute; a JSON list of workspace.EnvVar).
const HelperRemoteEnvEnv = "HANGAR_HELPER_REMOTE_ENV"

// HelperPostStartEnv is the main container's variable that gives the helper the postStart
// commands (a JSON list of workspace.PostStartCommand).
const HelperPostStartEnv = "HANGAR_HELPER_POST_START"

// HelperPostStartBlockingEnv "false" has the helper serve SSH (the pod's readiness) without
// waiting for the postStart commands (StartupBehaviorAttribute non-blocking).
const HelperPostStartBlockingEnv = "HANGAR_HELPER_POST_START_BLOCKING"

// HelperDotfilesEnv is the main container's variable that gives the helper the owner's dotfiles
// repository (URL[#ref]) to install at the workspace's first start.
const HelperDotfilesEnv = "HANGAR_HELPER_DOTFILES_REPO"

// toolsContainer is the init container that copies the hangar binary of the agent's tools image
// into the toolsVolume, for the main container's helper. Small fixed resources: it copies one file.
func toolsContainer(a workspace.AgentConfig) container {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	return container{
		name:          ToolsContainerName,
		image:         a.ToolsImage,
		command:       []string{ToolsBinary, "install-self", HelperBinary},
		mounts:        []corev1.VolumeMount{{Name: toolsVolume, MountPath: HelperDir}},
		cpuRequest:    q("10m"),
		cpuLimit:      q("500m"),
		memoryRequest: q("32Mi"),
		memoryLimit:   q("128Mi"),
		logsAsMessage: true,
	}
}

// cloneContainer is the init container that clones the devfile's projects: `hangar project-clone`
// from the agent's tools image, with the workspace data volume at /projects.
//
// When the main container has a devfile volume at its PROJECTS_ROOT instead of the data volume, the
// clone goes into that volume, so that the main container sees the projects where PROJECT_SOURCE
// points. With a server to ask (serverURL), it asks with the helper's token for the owner's
// credentials of each remote, as git in the workspace does.
func (d *Devfile) cloneContainer(a workspace.AgentConfig, serverURL string) container {
	list, _ := json.Marshal(d.projects) // plain strings and maps: cannot fail
	var mounts []corev1.VolumeMount
	if m := d.containers[d.main]; m.mountSources && m.ownSources {
		for _, vm := range m.mounts {
			if vm.MountPath == m.sourcePath {
				mounts = []corev1.VolumeMount{{Name: vm.Name, MountPath: projectsPath}}
			}
		}
	}
	own := len(mounts) > 0
	env := []corev1.EnvVar{{Name: ProjectsEnv, Value: string(list)}}
	if serverURL != "" && d.helper {
		env = append(env,
			corev1.EnvVar{Name: "HANGAR_HELPER_SERVER_URL", Value: serverURL},
			corev1.EnvVar{Name: "HANGAR_HELPER_TOKEN_FILE", Value: path.Join(HelperSSHDir, HelperTokenKey)})
		mounts = append(mounts, corev1.VolumeMount{Name: sshVolume, MountPath: HelperSSHDir, ReadOnly: true})
	}
	return container{
		mounts:        mounts,
		ownSources:    own,
		name:          CloneContainerName,
		image:         a.ToolsImage,
		command:       []string{ToolsBinary, "project-clone"},
		env:           env,
		mountSources:  true,
		sourcePath:    projectsPath,
		logsAsMessage: true, // its error is what the user needs to see when it fails
	}
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

// CheckAgentCaps returns warnings for an admin about an agent configuration whose caps
// (max_resources_per_workspace) are below its own defaults or below what a workspace created without
// a devfile needs; nil when all is well. cfg has had WithDefaults.
func CheckAgentCaps(cfg workspace.AgentConfig) []string {
	var out []string
	def, max := cfg.DefaultResources, cfg.MaxResources
	for _, r := range []struct{ field, def, cap string }{
		{"limits.cpu", def.Limits.CPU, max.Limits.CPU},
		{"limits.memory", def.Limits.Memory, max.Limits.Memory},
		{"requests.cpu", def.Requests.CPU, max.Requests.CPU},
		{"requests.memory", def.Requests.Memory, max.Requests.Memory},
	} {
		d, c := optQuantity(r.def), optQuantity(r.cap)
		if d != nil && c != nil && d.Cmp(*c) > 0 {
			out = append(out, fmt.Sprintf("max_resources_per_workspace %s %s is below default_resources_per_workspace_container %s %s: a container that sets no value gets %s; a workspace with several such containers may exceed the cap and be refused", r.field, r.cap, r.field, r.def, r.cap))
		}
	}
	d, err := Parse(defaultDevfile)
	if err != nil {
		return append(out, "the default devfile does not parse: "+err.Error())
	}
	if _, err := d.podContainers(cfg, helperOptions{}, buildPlan{}); err != nil {
		out = append(out, "workspaces created without a devfile do not fit this agent's caps: "+err.Error())
	}
	return out
}
