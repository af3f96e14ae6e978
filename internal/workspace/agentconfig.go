package workspace

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/internal/errs"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/api/resource"
)

// AgentConfig is the per-agent configuration an admin sets when registering an agent. Its JSON
// form is part of the user API (`POST /api/v1/agents {"name", "config"}`). Zero values are filled by
// WithDefaults; Validate names the first-level field of every problem.
type AgentConfig struct {
	// DNSZone is the domain workspaces are reached under: `<port>-<workspace>.<dns_zone>`.
	DNSZone string `json:"dns_zone"`
	// NamespaceMode is "per_workspace" (each workspace gets its own namespace, the default) or
	// "shared" (every workspace of this agent lives in SharedNamespace).
	NamespaceMode   string `json:"namespace_mode"`
	SharedNamespace string `json:"shared_namespace,omitempty"`
	// ProxyNamespace is where `hangar proxy` runs; workspace NetworkPolicies admit ingress only from it.
	ProxyNamespace string `json:"proxy_namespace"`
	// ProxyPodSelector selects the proxy's pods in ProxyNamespace: only they reach public endpoints.
	ProxyPodSelector map[string]string `json:"proxy_pod_selector"`
	// ProxyURLScheme is how browsers reach the proxy: "https" (the default) or "http" (a proxy
	// without TLS, for trials). The server sends one-time codes to that scheme only.
	ProxyURLScheme string `json:"proxy_url_scheme"`
	// ProxyURLPort is the port browsers reach the proxy on, when it is not the scheme's own (443
	// for https, 80 for http): a proxy listening on :8443 without a load balancer in front, such
	// as on the local test cluster. Workspace URLs then carry it (https://<host>:8443/). 0 (the
	// default) leaves the port out.
	ProxyURLPort int `json:"proxy_url_port,omitempty"`
	// ProxySSHPublicKeys are the keys (authorized_keys lines) the access proxy logs in to
	// workspaces' helpers with: each workspace pod's `hangar workspace-helper` trusts exactly these.
	// Empty refuses every SSH login (the helper fails closed).
	ProxySSHPublicKeys []string `json:"proxy_ssh_public_keys"`
	// ProxySSHAddress is HOST:PORT where users reach the proxy's SSH (`hangar proxy --ssh-listen`,
	// behind an L4 load balancer): `hangar ssh`, `port-forward` and `config-ssh` connect there.
	// Empty: this agent's workspaces have no SSH for users.
	ProxySSHAddress string `json:"proxy_ssh_address,omitempty"`
	// ProxySSHHostKey is the proxy's SSH host public key (authorized_keys form: "ssh-ed25519 AAAA..."),
	// which the server checks when it connects to ProxySSHAddress for a browser terminal (the
	// workspace page's). Empty: this agent's workspaces have no browser terminal.
	ProxySSHHostKey string `json:"proxy_ssh_host_key,omitempty"`

	PartialReconcileIntervalSeconds int `json:"partial_reconciliation_interval_seconds"`
	FullReconcileIntervalSeconds    int `json:"full_reconciliation_interval_seconds"`

	// DefaultResources are merged under each container's own requests and limits.
	DefaultResources Resources `json:"default_resources_per_workspace_container"`
	// MaxResources caps the sum over a workspace's containers (a ResourceQuota); empty means no cap.
	MaxResources Resources `json:"max_resources_per_workspace"`

	NetworkPolicy    NetworkPolicy     `json:"network_policy"`
	ImagePullSecrets []ImagePullSecret `json:"image_pull_secrets"`
	Labels           map[string]string `json:"labels"`
	Annotations      map[string]string `json:"annotations"`

	// WorkspacesQuota caps the workspaces (not terminated) on this agent; -1 is unlimited, 0 blocks
	// creation. WorkspacesPerUserQuota does the same per user.
	WorkspacesQuota        *int `json:"workspaces_quota"`
	WorkspacesPerUserQuota *int `json:"workspaces_per_user_quota"`

	MaxActiveHoursBeforeStop         int `json:"max_active_hours_before_stop"`
	MaxStoppedHoursBeforeTermination int `json:"max_stopped_hours_before_termination"`
	// Lifecycle is the rest of the agent's lifecycle policy (autostop TTL, failure TTL, dormancy;
	// Policy adds the two lifetimes above). Its max_active and max_stopped are the two above.
	Lifecycle Lifecycle `json:"lifecycle"`

	// ToolsImage runs Hangar's own helpers in workspace pods (the project clone init container, and
	// hangar-tools, which copies the binary for the main container's workspace helper); it must
	// hold the hangar binary at /usr/local/bin/hangar.
	ToolsImage string `json:"tools_image"`
	// DefaultDevfile is the devfile (YAML) of this agent's workspaces created with neither a devfile
	// nor a template; empty: Hangar's built-in default (devfile.Default). A cluster that cannot pull
	// the built-in default's public image (the local test cluster: `hangar quickstart` sets the
	// Kubernetes starter's devfile here) names one its nodes have.
	DefaultDevfile string `json:"default_devfile,omitempty"`
	// NodeSelector and Tolerations are given to every workspace pod of this agent.
	NodeSelector map[string]string `json:"node_selector"`
	Tolerations  []Toleration      `json:"tolerations"`
	// ImageBuild is how this agent's workspaces get the images their definitions build (a
	// devcontainer.json's `features` or `build`): built in the cluster and pushed to Registry, or
	// mapped to an image an admin built elsewhere. Empty: such a definition is refused at create.
	ImageBuild ImageBuild `json:"image_build"`
}

// ImageBuild configures the image builds of an agent's workspaces (docs/decisions.md, "Image
// builds in the cluster: wiring").
type ImageBuild struct {
	// Registry is the repository builds are pushed to, host[:port]/path: a definition whose build
	// has hash H runs the image Registry:H (imagebuild.Ref). The build runs as three init
	// containers of the workspace's pod after hangar-tools (prepare, the user's steps, push); the
	// node pulls the result. Empty: the agent builds no images (Prebuilt still applies).
	Registry string `json:"registry,omitempty"`
	// InsecureRegistries are registries (HOST:PORT) the build reaches over plain HTTP: an
	// in-cluster or test registry. The nodes' container runtime must be told the same on its own.
	InsecureRegistries []string `json:"insecure_registries,omitempty"`
	// PushSecret names a kubernetes.io/dockerconfigjson Secret, copied into the workspace's
	// namespace as image_pull_secrets are: the build's prepare and push containers, which run no
	// code of the user's, use it (mounted as DOCKER_CONFIG), never the container that runs the
	// user's steps; the workspace's ServiceAccount pulls the built image with it. Unset: anonymous
	// pushes and pulls, which any build's steps could then use too (docs/decisions.md).
	PushSecret *ImagePullSecret `json:"push_secret,omitempty"`
	// Resources are the requests and limits of the container that runs the build's steps
	// (defaults: DefaultImageBuildResources), each kept within max_resources_per_workspace.
	Resources Resources `json:"resources"`
	// Prebuilt maps a definition's build hash (shown with the workspace) to an image an admin built
	// elsewhere: that workspace runs the image, with no build.
	Prebuilt []PrebuiltImage `json:"prebuilt"`
}

// PrebuiltImage is an image an admin built for the definitions whose build has Hash.
type PrebuiltImage struct {
	Hash  string `json:"hash"`
	Image string `json:"image"`
}

// DefaultImageBuildResources are the build container's resources when the agent sets none: a build
// runs package managers and compilers.
var DefaultImageBuildResources = Resources{
	Requests: ResourceList{CPU: "1", Memory: "2Gi"},
	Limits:   ResourceList{CPU: "2", Memory: "4Gi"},
}

// PrebuiltImage returns the image the admin mapped the build hash to, if any.
func (b ImageBuild) PrebuiltImage(hash string) (string, bool) {
	for _, p := range b.Prebuilt {
		if p.Hash == hash {
			return p.Image, true
		}
	}
	return "", false
}

// Toleration lets workspace pods run on nodes with a matching taint (Kubernetes' own fields).
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"` // Equal (default) or Exists
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"` // NoSchedule, PreferNoSchedule, NoExecute; empty matches all
}

// The label the proxy's pods carry by default (the agent config's proxy_pod_selector).
const (
	DefaultProxyPodLabel      = "app.kubernetes.io/name"
	DefaultProxyPodLabelValue = "hangar-proxy"
)

// DefaultToolsImage is the tools image of an agent that names none.
const DefaultToolsImage = "hangar.local/hangar:dev"

// Resources are Kubernetes quantities, as strings ("500m", "1Gi").
type Resources struct {
	Requests ResourceList `json:"requests"`
	Limits   ResourceList `json:"limits"`
}

// ResourceList holds a CPU and a memory quantity; empty means unset.
type ResourceList struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// NetworkPolicy controls the NetworkPolicy generated for each workspace.
type NetworkPolicy struct {
	Enabled *bool        `json:"enabled"`
	Egress  []EgressRule `json:"egress"`
}

// EgressRule allows egress to a CIDR, less the excepted ones.
type EgressRule struct {
	Allow  string   `json:"allow"`
	Except []string `json:"except,omitempty"`
}

// ImagePullSecret names an existing Secret the workspace's ServiceAccount uses to pull images.
type ImagePullSecret struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Namespace modes.
const (
	NamespacePerWorkspace = "per_workspace"
	NamespaceShared       = "shared"
)

// ReservedPrefix is the label and annotation prefix Hangar owns; agent configs may not use it.
const ReservedPrefix = "hangar.dev/"

func intPtr(i int) *int { return &i }

// WithDefaults returns c with every unset field at its default.
func (c AgentConfig) WithDefaults() AgentConfig {
	if c.DNSZone == "" {
		c.DNSZone = "workspaces.localhost"
	}
	if c.NamespaceMode == "" {
		c.NamespaceMode = NamespacePerWorkspace
	}
	if c.ProxyNamespace == "" {
		c.ProxyNamespace = "hangar-proxy"
	}
	if c.ProxyPodSelector == nil {
		c.ProxyPodSelector = map[string]string{DefaultProxyPodLabel: DefaultProxyPodLabelValue}
	}
	if c.ProxyURLScheme == "" {
		c.ProxyURLScheme = "https"
	}
	if c.ProxySSHPublicKeys == nil {
		c.ProxySSHPublicKeys = []string{}
	}
	if c.PartialReconcileIntervalSeconds == 0 {
		c.PartialReconcileIntervalSeconds = 10
	}
	if c.FullReconcileIntervalSeconds == 0 {
		c.FullReconcileIntervalSeconds = 3600
	}
	if c.DefaultResources == (Resources{}) {
		c.DefaultResources = Resources{
			Requests: ResourceList{CPU: "100m", Memory: "256Mi"},
			Limits:   ResourceList{CPU: "2", Memory: "4Gi"},
		}
	}
	if c.NetworkPolicy.Enabled == nil {
		t := true
		c.NetworkPolicy.Enabled = &t
	}
	if c.NetworkPolicy.Egress == nil {
		// Public internet, private ranges denied (as GitLab's default).
		c.NetworkPolicy.Egress = []EgressRule{{Allow: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}}}
	}
	if c.ImagePullSecrets == nil {
		c.ImagePullSecrets = []ImagePullSecret{}
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	if c.WorkspacesQuota == nil {
		c.WorkspacesQuota = intPtr(-1)
	}
	if c.WorkspacesPerUserQuota == nil {
		c.WorkspacesPerUserQuota = intPtr(-1)
	}
	if c.MaxActiveHoursBeforeStop == 0 {
		c.MaxActiveHoursBeforeStop = 36
	}
	if c.MaxStoppedHoursBeforeTermination == 0 {
		c.MaxStoppedHoursBeforeTermination = 744
	}
	if c.ToolsImage == "" {
		c.ToolsImage = DefaultToolsImage
	}
	if c.NodeSelector == nil {
		c.NodeSelector = map[string]string{}
	}
	if c.Tolerations == nil {
		c.Tolerations = []Toleration{}
	}
	if c.ImageBuild.Resources == (Resources{}) {
		c.ImageBuild.Resources = DefaultImageBuildResources
	}
	if c.ImageBuild.Prebuilt == nil {
		c.ImageBuild.Prebuilt = []PrebuiltImage{}
	}
	return c
}

// FieldError names the field a validation problem is about, in JSON path form.
type FieldError struct {
	Field  string
	Detail string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Detail }

// Code is Invalid.
func (e FieldError) Code() errs.Code { return errs.Invalid }

// ValidationError collects every problem found in one input.
type ValidationError struct {
	Problems []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Code is Invalid.
func (e *ValidationError) Code() errs.Code { return errs.Invalid }

// Add records a problem.
func (e *ValidationError) Add(field, format string, args ...any) {
	e.Problems = append(e.Problems, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// Err returns e when it holds problems, else nil.
func (e *ValidationError) Err() error {
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualifiedKey = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelValue   = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
)

// IsQualifiedKey reports whether k is a valid Kubernetes label or annotation key.
func IsQualifiedKey(k string) bool { return len(k) <= 316 && qualifiedKey.MatchString(k) }

// IsLabelValue reports whether s is a valid Kubernetes label value.
func IsLabelValue(s string) bool { return len(s) <= 63 && labelValue.MatchString(s) }

// imageRef is a container image reference: [registry[:port]/]path[:tag][@digest].
var imageRef = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[a-z0-9]+:[a-f0-9]{32,})?$`)

// IsImageReference reports whether s is a container image reference such as
// registry.example.com/team/tools:1.2 or busybox@sha256:....
func IsImageReference(s string) bool { return len(s) <= 512 && imageRef.MatchString(s) }

// IsDNSLabel reports whether s is a valid Kubernetes DNS-1123 label of at most max characters.
func IsDNSLabel(s string, max int) bool {
	return len(s) > 0 && len(s) <= max && dnsLabel.MatchString(s)
}

// Validate checks a config that WithDefaults has filled.
func (c AgentConfig) Validate() error {
	v := &ValidationError{}
	if len(c.DNSZone) > 253 || !dnsSubdomain.MatchString(c.DNSZone) {
		v.Add("config.dns_zone", "must be a DNS name such as workspaces.example.com, got %q", c.DNSZone)
	}
	switch c.NamespaceMode {
	case NamespacePerWorkspace:
		if c.SharedNamespace != "" {
			v.Add("config.shared_namespace", "is only allowed with namespace_mode %q", NamespaceShared)
		}
	case NamespaceShared:
		if !IsDNSLabel(c.SharedNamespace, 63) {
			v.Add("config.shared_namespace", "must be a namespace name (DNS-1123 label) when namespace_mode is %q, got %q", NamespaceShared, c.SharedNamespace)
		}
	default:
		v.Add("config.namespace_mode", "must be %q or %q, got %q", NamespacePerWorkspace, NamespaceShared, c.NamespaceMode)
	}
	if !IsDNSLabel(c.ProxyNamespace, 63) {
		v.Add("config.proxy_namespace", "must be a namespace name (DNS-1123 label), got %q", c.ProxyNamespace)
	}
	if len(c.ProxyPodSelector) == 0 {
		v.Add("config.proxy_pod_selector", "must hold at least one label (an empty selector would admit every pod of the proxy namespace)")
	}
	for _, k := range slices.Sorted(maps.Keys(c.ProxyPodSelector)) {
		if !IsQualifiedKey(k) {
			v.Add(fmt.Sprintf("config.proxy_pod_selector[%q]", k), "is not a valid Kubernetes label key")
		} else if !IsLabelValue(c.ProxyPodSelector[k]) {
			v.Add(fmt.Sprintf("config.proxy_pod_selector[%q]", k), "value %q is not a valid label value", c.ProxyPodSelector[k])
		}
	}
	if c.ProxyURLScheme != "https" && c.ProxyURLScheme != "http" {
		v.Add("config.proxy_url_scheme", "must be https or http, got %q", c.ProxyURLScheme)
	}
	if c.ProxyURLPort < 0 || c.ProxyURLPort > 65535 {
		v.Add("config.proxy_url_port", "must be a port from 1 to 65535 (0: the scheme's own), got %d", c.ProxyURLPort)
	}
	if a := c.ProxySSHAddress; a != "" {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 || strings.ContainsAny(host, " /\t") {
			v.Add("config.proxy_ssh_address", "must be HOST:PORT where users reach the proxy's SSH, such as ssh.workspaces.example.com:22, got %q", a)
		}
	}
	if k := c.ProxySSHHostKey; k != "" {
		if _, err := c.ParsedProxySSHHostKey(); err != nil {
			v.Add("config.proxy_ssh_host_key", "%s", err.Error())
		} else if c.ProxySSHAddress == "" {
			v.Add("config.proxy_ssh_host_key", "is the key of the proxy at proxy_ssh_address, which is not set")
		}
	}
	for i, k := range c.ProxySSHPublicKeys {
		f := fmt.Sprintf("config.proxy_ssh_public_keys[%d]", i)
		key, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(k))
		switch {
		case err != nil || strings.ContainsAny(k, "\r\n") || len(bytes.TrimSpace(rest)) > 0:
			v.Add(f, "must be one SSH public key on one line in authorized_keys form, such as \"ssh-ed25519 AAAA... proxy\"")
		case len(options) > 0:
			v.Add(f, "must have no options (%s): the workspace helper ignores lines with options", strings.Join(options, ","))
		default:
			if _, isCert := key.(*ssh.Certificate); isCert {
				v.Add(f, "must be a plain public key, not a certificate: the workspace helper ignores certificates")
			}
		}
	}
	if c.PartialReconcileIntervalSeconds < 1 || c.PartialReconcileIntervalSeconds > 3600 {
		v.Add("config.partial_reconciliation_interval_seconds", "must be between 1 and 3600, got %d", c.PartialReconcileIntervalSeconds)
	}
	if c.FullReconcileIntervalSeconds < 60 || c.FullReconcileIntervalSeconds > 86400 {
		v.Add("config.full_reconciliation_interval_seconds", "must be between 60 and 86400, got %d", c.FullReconcileIntervalSeconds)
	}
	validateResources(v, "config.default_resources_per_workspace_container", c.DefaultResources)
	validateResources(v, "config.max_resources_per_workspace", c.MaxResources)
	for i, r := range c.NetworkPolicy.Egress {
		if _, err := netip.ParsePrefix(r.Allow); err != nil {
			v.Add(fmt.Sprintf("config.network_policy.egress[%d].allow", i), "must be a CIDR such as 0.0.0.0/0, got %q", r.Allow)
		}
		for j, e := range r.Except {
			if _, err := netip.ParsePrefix(e); err != nil {
				v.Add(fmt.Sprintf("config.network_policy.egress[%d].except[%d]", i, j), "must be a CIDR, got %q", e)
			}
		}
	}
	for i, s := range c.ImagePullSecrets {
		if !IsDNSLabel(s.Name, 253) {
			v.Add(fmt.Sprintf("config.image_pull_secrets[%d].name", i), "must be a Secret name, got %q", s.Name)
		}
		if !IsDNSLabel(s.Namespace, 63) {
			v.Add(fmt.Sprintf("config.image_pull_secrets[%d].namespace", i), "must be a namespace name, got %q", s.Namespace)
		}
	}
	validateMeta(v, "config.labels", c.Labels, true)
	validateMeta(v, "config.annotations", c.Annotations, false)
	if q := *c.WorkspacesQuota; q < -1 {
		v.Add("config.workspaces_quota", "must be -1 (unlimited), 0 (blocks creation) or more, got %d", q)
	}
	if q := *c.WorkspacesPerUserQuota; q < -1 {
		v.Add("config.workspaces_per_user_quota", "must be -1 (unlimited), 0 (blocks creation) or more, got %d", q)
	}
	if c.MaxActiveHoursBeforeStop < 1 {
		v.Add("config.max_active_hours_before_stop", "must be at least 1, got %d", c.MaxActiveHoursBeforeStop)
	}
	if c.MaxStoppedHoursBeforeTermination < 1 {
		v.Add("config.max_stopped_hours_before_termination", "must be at least 1, got %d", c.MaxStoppedHoursBeforeTermination)
	}
	c.Lifecycle.Validate("config.lifecycle.", v)
	if c.Lifecycle.MaxActive != 0 {
		v.Add("config.lifecycle.max_active", "is max_active_hours_before_stop for an agent")
	}
	if c.Lifecycle.MaxStopped != 0 {
		v.Add("config.lifecycle.max_stopped", "is max_stopped_hours_before_termination for an agent")
	}
	if !IsImageReference(c.ToolsImage) {
		v.Add("config.tools_image", "must be a container image reference such as hangar.local/hangar:dev, got %q", c.ToolsImage)
	}
	for _, k := range slices.Sorted(maps.Keys(c.NodeSelector)) {
		if !IsQualifiedKey(k) {
			v.Add(fmt.Sprintf("config.node_selector[%q]", k), "is not a valid Kubernetes label key")
		} else if !IsLabelValue(c.NodeSelector[k]) {
			v.Add(fmt.Sprintf("config.node_selector[%q]", k), "value %q is not a valid label value", c.NodeSelector[k])
		}
	}
	for i, t := range c.Tolerations {
		f := fmt.Sprintf("config.tolerations[%d]", i)
		if t.Key != "" && !IsQualifiedKey(t.Key) {
			v.Add(f+".key", "must be a taint key such as kwok.x-k8s.io/node, got %q", t.Key)
		}
		switch t.Operator {
		case "", "Equal":
			if t.Key == "" {
				v.Add(f+".key", "is required with operator Equal (an empty key with operator Exists tolerates every taint)")
			}
			if !IsLabelValue(t.Value) {
				v.Add(f+".value", "must be a taint value (a label value), got %q", t.Value)
			}
		case "Exists":
			if t.Value != "" {
				v.Add(f+".value", "must be empty with operator Exists, got %q", t.Value)
			}
		default:
			v.Add(f+".operator", "must be Equal or Exists, got %q", t.Operator)
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			v.Add(f+".effect", "must be NoSchedule, PreferNoSchedule, NoExecute or empty (all), got %q", t.Effect)
		}
	}
	c.ImageBuild.validate(v)
	if c.MaxActiveHoursBeforeStop+c.MaxStoppedHoursBeforeTermination > 8760 {
		v.Add("config.max_active_hours_before_stop", "plus max_stopped_hours_before_termination must be at most 8760 (one year), got %d", c.MaxActiveHoursBeforeStop+c.MaxStoppedHoursBeforeTermination)
	}
	return v.Err()
}

// buildHashRe is a build's hash (imagebuild.Spec.Hash): 64 lowercase hex digits.
var buildHashRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (b ImageBuild) validate(v *ValidationError) {
	const f = "config.image_build"
	// The registry is a repository: the hash becomes its tag, so it has neither tag nor digest.
	if r := b.Registry; r != "" && (!IsImageReference(r) || strings.ContainsAny(r, "@") || strings.Contains(r[strings.LastIndex(r, "/")+1:], ":") || !strings.Contains(r, "/")) {
		v.Add(f+".registry", "must be a repository to push builds to, host[:port]/path without a tag, such as registry.example.com:5000/hangar/builds, got %q", r)
	}
	for i, h := range b.InsecureRegistries {
		host, port, err := net.SplitHostPort(h)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 || !dnsSubdomain.MatchString(host) && net.ParseIP(host) == nil {
			v.Add(fmt.Sprintf("%s.insecure_registries[%d]", f, i), "must be a registry's HOST:PORT, such as registry.hangar-system.svc:5000, got %q", h)
		}
	}
	if s := b.PushSecret; s != nil {
		if !IsDNSLabel(s.Name, 253) {
			v.Add(f+".push_secret.name", "must be a Secret name, got %q", s.Name)
		}
		if !IsDNSLabel(s.Namespace, 63) {
			v.Add(f+".push_secret.namespace", "must be a namespace name, got %q", s.Namespace)
		}
	}
	validateResources(v, f+".resources", b.Resources)
	seen := map[string]bool{}
	for i, p := range b.Prebuilt {
		pf := fmt.Sprintf("%s.prebuilt[%d]", f, i)
		switch {
		case !buildHashRe.MatchString(p.Hash):
			v.Add(pf+".hash", "must be a build hash (64 lowercase hex digits, as the workspace shows it), got %q", p.Hash)
		case seen[p.Hash]:
			v.Add(pf+".hash", "maps %s a second time", p.Hash)
		}
		seen[p.Hash] = true
		if !IsImageReference(p.Image) {
			v.Add(pf+".image", "must be a container image reference such as registry.example.com/team/dev:1, got %q", p.Image)
		}
	}
}

func validateResources(v *ValidationError, field string, r Resources) {
	check := func(name, q string) {
		if q == "" {
			return
		}
		qty, err := resource.ParseQuantity(q)
		switch {
		case err != nil:
			v.Add(field+"."+name, "must be a Kubernetes quantity such as 500m or 2Gi, got %q", q)
		case qty.Sign() < 0:
			// Kubernetes refuses a negative request or limit only when it applies the pod (or the
			// ResourceQuota), so every workspace of this agent would fail to start: refused here.
			v.Add(field+"."+name, "must not be negative, got %q", q)
		}
	}
	check("requests.cpu", r.Requests.CPU)
	check("requests.memory", r.Requests.Memory)
	check("limits.cpu", r.Limits.CPU)
	check("limits.memory", r.Limits.Memory)
}

func validateMeta(v *ValidationError, field string, m map[string]string, isLabel bool) {
	for k, val := range m {
		if !qualifiedKey.MatchString(k) || len(k) > 316 {
			v.Add(field, "key %q is not a valid Kubernetes key", k)
			continue
		}
		if strings.HasPrefix(k, ReservedPrefix) || strings.Contains(k, "."+ReservedPrefix) {
			v.Add(field, "key %q uses the reserved prefix %q", k, ReservedPrefix)
		}
		if isLabel && (len(val) > 63 || !labelValue.MatchString(val)) {
			v.Add(field, "value %q of key %q is not a valid label value", val, k)
		}
	}
}

// EndpointURL is the URL browsers open a workspace's endpoint at, through this agent's proxy:
// `<proxy_url_scheme>://<port>-<name>--<owner>.<dns_zone>[:<proxy_url_port>]<path>`. It is the one
// place such a URL is made.
func (c AgentConfig) EndpointURL(port int, name, owner, path string) string {
	host := HostLabel(port, name, owner) + "." + strings.TrimSuffix(c.DNSZone, ".")
	scheme := cmp.Or(c.ProxyURLScheme, "https")
	if p := c.ProxyURLPort; p != 0 && !(scheme == "https" && p == 443 || scheme == "http" && p == 80) {
		host = net.JoinHostPort(host, strconv.Itoa(p))
	}
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	return scheme + "://" + host + path
}

// ParsedProxySSHHostKey is ProxySSHHostKey as a key (nil when it is empty).
func (c AgentConfig) ParsedProxySSHHostKey() (ssh.PublicKey, error) {
	if c.ProxySSHHostKey == "" {
		return nil, nil
	}
	key, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(c.ProxySSHHostKey))
	if err != nil || strings.ContainsAny(c.ProxySSHHostKey, "\r\n") || len(bytes.TrimSpace(rest)) > 0 || len(options) > 0 {
		return nil, errors.New("must be the proxy's SSH host public key on one line, such as \"ssh-ed25519 AAAA...\" (the .pub of hangar proxy --ssh-host-key-file)")
	}
	return key, nil
}
