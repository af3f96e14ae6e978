package devfile

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// refusal parses src, which must be refused, and returns the detail the user reads for field.
func refusal(t *testing.T, src, field string) string {
	t.Helper()
	d, err := Parse([]byte(src))
	var ve *workspace.ValidationError
	if d != nil || !errors.As(err, &ve) {
		t.Fatalf("Parse = %v, %v; want a refusal naming %s", d, err, field)
	}
	for _, p := range ve.Problems {
		if p.Field == field {
			return p.Detail
		}
	}
	t.Fatalf("no problem on %s; got %v", field, ve)
	return ""
}

func withOverrides(attrs string) string {
	return "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    attributes: {" + attrs + "}\n    container: {image: busybox, cpuRequest: 500m, cpuLimit: '1', memoryRequest: 1Gi, memoryLimit: 2Gi}\n"
}

// A limit of 0 is no limit to the kubelet: an override of 0 would escape the agent's caps.
func TestContainerOverridesRefuseZeroResources(t *testing.T) {
	for _, tc := range []struct{ attrs, field string }{
		{`container-overrides: {resources: {limits: {cpu: 0}}}`, `devfile.components[0].attributes["container-overrides"].resources.limits.cpu`},
		{`container-overrides: {resources: {limits: {memory: "0"}}}`, `devfile.components[0].attributes["container-overrides"].resources.limits.memory`},
		{`container-overrides: {resources: {requests: {memory: "0Gi"}}}`, `devfile.components[0].attributes["container-overrides"].resources.requests.memory`},
	} {
		if got := refusal(t, withOverrides(tc.attrs), tc.field); !strings.Contains(got, "must be a positive Kubernetes quantity") {
			t.Errorf("%s: %q, want it to ask for a positive quantity", tc.attrs, got)
		}
	}
}

func TestContainerOverridesResources(t *testing.T) {
	const f = `devfile.components[0].attributes["container-overrides"].resources`
	for _, tc := range []struct{ attrs, field, want string }{
		{`container-overrides: {resources: {requests: {"not a name": 1}}}`, f + `.requests["not a name"]`, "is not a Kubernetes resource name"},
		{`container-overrides: {resources: {limits: {nvidia.com/gpu: 1}}}`, f + `.limits["nvidia.com/gpu"]`, "may set cpu and memory"},
		{`container-overrides: {resources: {limits: {hugepages-2Mi: 1Gi}}}`, f + `.limits.hugepages-2Mi`, "may set cpu and memory"},
		{`container-overrides: {resources: {requests: {ephemeral-storage: 1Ti}}}`, f + `.requests.ephemeral-storage`, "may set cpu and memory"},
		// The devfile's pair is valid; the override makes the request larger than the limit.
		{`container-overrides: {resources: {requests: {cpu: "3"}}}`, f, "makes the cpu request 3 more than the cpu limit 1"},
		{`container-overrides: {resources: {limits: {memory: 512Mi}}}`, f, "makes the memory request 1Gi more than the memory limit 512Mi"},
	} {
		if got := refusal(t, withOverrides(tc.attrs), tc.field); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.attrs, got, tc.want)
		}
	}
	// Both values of a pair raised together are fine, and win over the devfile's.
	spec, _ := generatedPod(t, withOverrides(`container-overrides: {resources: {requests: {cpu: "3"}, limits: {cpu: "4"}}}`), func(p *Params) {
		p.Agent.MaxResources = workspace.Resources{}
	})
	if r := spec.Containers[0].Resources; r.Requests.Cpu().String() != "3" || r.Limits.Cpu().String() != "4" {
		t.Errorf("resources %v, want cpu request 3 and limit 4", r)
	}
}

func TestOverrideLabelsAndAnnotations(t *testing.T) {
	pod := func(meta string) string {
		return "schemaVersion: 2.2.0\nattributes: {pod-overrides: {metadata: " + meta + "}}\ncomponents:" + okContainer
	}
	const f = `devfile.attributes["pod-overrides"].metadata`
	for _, tc := range []struct{ src, field, want string }{
		{pod(`{annotations: {container.apparmor.security.beta.kubernetes.io/main: unconfined}}`), f + `.annotations["container.apparmor.security.beta.kubernetes.io/main"]`, "configure the cluster's components"},
		{pod(`{annotations: {k8s.v1.cni.cncf.io/networks: host-net}}`), f + `.annotations["k8s.v1.cni.cncf.io/networks"]`, "must be plain names"},
		{pod(`{annotations: {cni.projectcalico.org/ipAddrs: '["10.0.0.5"]'}}`), f + `.annotations["cni.projectcalico.org/ipAddrs"]`, "must be plain names"},
		{pod(`{annotations: {sidecar.istio.io/inject: "false"}}`), f + `.annotations["sidecar.istio.io/inject"]`, "must be plain names"},
		{pod(`{annotations: {example.com/anything: x}}`), f + `.annotations["example.com/anything"]`, "must be plain names"},
		// A container runtime's annotation without a slash: CRI-O gives the container the device.
		{pod(`{annotations: {io.kubernetes.cri-o.Devices: /dev/fuse}}`), f + `.annotations["io.kubernetes.cri-o.Devices"]`, "must be plain names"},
		{pod(`{annotations: {hangar.dev/main: x}}`), f + `.annotations["hangar.dev/main"]`, "reserved for Hangar"},
		{pod(`{labels: {app: payments-api}}`), f + `.labels.app`, "could make it match other applications' Services and NetworkPolicies"},
		{pod(`{labels: {app.kubernetes.io/name: payments-api}}`), f + `.labels["app.kubernetes.io/name"]`, "could make it match"},
		{"schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, annotation: {service: {external-dns.alpha.kubernetes.io/hostname: pay.example.com}}}\n",
			`devfile.components[0].container.annotation.service["external-dns.alpha.kubernetes.io/hostname"]`, "must be plain names"},
		{"schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, annotation: {deployment: {container.apparmor.security.beta.kubernetes.io/main: unconfined}}}\n",
			`devfile.components[0].container.annotation.deployment["container.apparmor.security.beta.kubernetes.io/main"]`, "must be plain names"},
	} {
		if got := refusal(t, tc.src, tc.field); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.field, got, tc.want)
		}
	}
	// Plain names reach the pod.
	_, g := generatedPod(t, pod(`{annotations: {my-note: "hello", build_id: "42"}}`), nil)
	if a := g.deployment.Spec.Template.Annotations; a["my-note"] != "hello" || a["build_id"] != "42" {
		t.Errorf("pod annotations %v, want my-note and build_id", a)
	}
}

func TestNestedProjectPathsRefused(t *testing.T) {
	git := "\n    git: {remotes: {origin: https://example.com/r.git}}"
	for _, tc := range []struct{ projects, field string }{
		{"  - name: lib\n    clonePath: app/lib" + git + "\n  - name: app" + git, "devfile.projects[1].clonePath"},
		{"  - name: app" + git + "\n  - name: lib\n    clonePath: app/deps/lib" + git, "devfile.projects[1].clonePath"},
	} {
		got := refusal(t, "schemaVersion: 2.2.0\nprojects:\n"+tc.projects+"\ncomponents:"+okContainer, tc.field)
		if !strings.Contains(got, `is inside "app" or contains it`) && !strings.Contains(got, `"app" is inside`) {
			t.Errorf("%q, want it to say the paths are nested", got)
		}
	}
	// Siblings with a common prefix are fine.
	mustParse(t, []byte("schemaVersion: 2.2.0\nprojects:\n  - name: app"+git+"\n  - name: app2"+git+"\ncomponents:"+okContainer))
}

// A devfile volume at the main container's PROJECTS_ROOT receives the clone, not the data volume
// the main container does not see.
func TestCloneGoesToTheMainContainersSources(t *testing.T) {
	spec, _ := generatedPod(t, `schemaVersion: 2.2.0
projects:
  - name: app
    git: {remotes: {origin: https://example.com/app.git}}
components:
  - name: main
    container: {image: busybox, volumeMounts: [{name: src, path: /projects}]}
  - name: src
    volume: {size: 5Gi}
`, nil)
	if len(spec.InitContainers) != 2 || spec.InitContainers[0].Name != ToolsContainerName || spec.InitContainers[1].Name != CloneContainerName {
		t.Fatalf("init containers %+v, want the tools, then the clone", spec.InitContainers)
	}
	clone := spec.InitContainers[1]
	if len(clone.VolumeMounts) != 1 || clone.VolumeMounts[0].Name != "src" || clone.VolumeMounts[0].MountPath != "/projects" {
		t.Errorf("clone mounts %+v, want volume src at /projects", clone.VolumeMounts)
	}
	main := spec.Containers[0]
	env := map[string]string{}
	for _, e := range main.Env {
		env[e.Name] = e.Value
	}
	// Then the helper's tools and ssh mounts; its state is not on the data volume, which the main
	// container does not mount.
	if env["PROJECT_SOURCE"] != "/projects/app" || len(main.VolumeMounts) != 3 || main.VolumeMounts[0].Name != "src" || env["HANGAR_HELPER_STATE_DIR"] != HelperDir+"/state" {
		t.Errorf("main: env %v, mounts %+v; want PROJECT_SOURCE /projects/app on volume src, and the helper's state in %s/state", env, main.VolumeMounts, HelperDir)
	}
}

// An undefined variable is refused only where Hangar uses the value.
func TestUndefinedVariableInIgnoredComponent(t *testing.T) {
	d := mustParse(t, []byte(`schemaVersion: 2.2.0
components:
  - name: main
    container: {image: busybox}
  - name: build
    image:
      imageName: "{{REGISTRY}}/app"
      autoBuild: false
      dockerfile: {uri: Dockerfile}
`))
	if w := d.Warnings(); len(w) != 1 || !strings.Contains(w[0], `components[1] (image "build") is ignored`) {
		t.Errorf("warnings %q, want the image component ignored", w)
	}
	// A container's is still refused.
	got := refusal(t, "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: '{{REGISTRY}}/app'}\n", "devfile.components[0]")
	if !strings.Contains(got, "uses undefined variables: REGISTRY") {
		t.Errorf("%q, want the undefined variable named", got)
	}
}

// The corpus checker's reading of NetworkPolicies follows Kubernetes: an empty from or ports admits
// everything, so an allow-all rule would fail the "none endpoints unreachable" check.
func TestPolicyAdmitsSemantics(t *testing.T) {
	port := intstr.FromInt32(80)
	proxyPeer := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: "hangar-proxy"}}}
	policy := func(rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: rules}}
	}
	for _, tc := range []struct {
		name          string
		np            *networkingv1.NetworkPolicy
		proxy, others bool
	}{
		{"no rules", policy(), false, false},
		{"allow all", policy(networkingv1.NetworkPolicyIngressRule{}), true, true},
		{"empty from on the port", policy(networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}), true, true},
		{"proxy on every port", policy(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{proxyPeer}}), true, false},
		{"proxy on another port", policy(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{proxyPeer}, Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(81))}}}), false, false},
		{"pods of the namespace", policy(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}), false, true},
		{"no policy", nil, true, true},
	} {
		if p, o := policyAdmits(tc.np, 80); p != tc.proxy || o != tc.others {
			t.Errorf("%s: proxy %v, others %v; want %v, %v", tc.name, p, o, tc.proxy, tc.others)
		}
	}
}

// What a devfile asks for is honoured or named in a warning, never dropped without a word.
func TestHonouredOrWarned(t *testing.T) {
	t.Run("storage-type ephemeral", func(t *testing.T) {
		spec, g := generatedPod(t, "schemaVersion: 2.2.0\nattributes: {controller.devfile.io/storage-type: ephemeral}\ncomponents:"+okContainer, nil)
		var data *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == projectsVolume {
				data = &spec.Volumes[i]
			}
		}
		if data == nil || data.EmptyDir == nil || data.PersistentVolumeClaim != nil {
			t.Errorf("data volume %+v, want an emptyDir", data)
		}
		if len(g.claims) != 0 {
			t.Errorf("claims %v, want none", g.claims)
		}
		// Without the attribute, a claim.
		_, g = generatedPod(t, "schemaVersion: 2.2.0\ncomponents:"+okContainer, nil)
		if len(g.claims) != 1 {
			t.Errorf("claims %v, want the data claim", g.claims)
		}
	})
	warnings := func(src string) string {
		t.Helper()
		return strings.Join(mustParse(t, []byte(src)).Warnings(), "\n")
	}
	for _, tc := range []struct{ name, src, want string }{
		{"storage-type per-user", "schemaVersion: 2.2.0\nattributes: {controller.devfile.io/storage-type: per-user}\ncomponents:" + okContainer,
			`attributes["controller.devfile.io/storage-type"] is "per-user", which is ignored`},
		{"scc", "schemaVersion: 2.2.0\nattributes: {controller.devfile.io/scc: container-build}\ncomponents:" + okContainer,
			`attributes["controller.devfile.io/scc"] is ignored`},
		{"endpoint fields", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: web, targetPort: 80}, {name: api, targetPort: 81, secure: true, annotation: {a: b}, attributes: {urlRewriteSupported: true}}]}\n",
			`components[0].container.endpoints[1] ("api"): ignored: annotation (for an Ingress or Route: Hangar creates none per endpoint); secure (`},
		{"endpoint attributes", "schemaVersion: 2.2.0\ncomponents:\n  - name: main\n    container: {image: busybox, endpoints: [{name: api, targetPort: 81, attributes: {urlRewriteSupported: true, discoverable: false}}]}\n",
			`attributes discoverable, urlRewriteSupported (Eclipse Che's)`},
		{"parallel composite in an event", "schemaVersion: 2.2.0\ncommands:\n  - id: a\n    exec: {component: main, commandLine: 'true'}\n  - id: b\n    exec: {component: main, commandLine: 'true'}\n  - id: both\n    composite: {commands: [a, b], parallel: true}\nevents: {postStart: [both]}\ncomponents:" + okContainer,
			`commands[2] ("both") has parallel: true, which is ignored: the postStart event runs its commands one after another`},
	} {
		if got := warnings(tc.src); !strings.Contains(got, tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.name, got, tc.want)
		}
	}
	// A parallel composite no event runs is for the tools in the workspace: nothing to say.
	if got := warnings("schemaVersion: 2.2.0\ncommands:\n  - id: a\n    exec: {component: main, commandLine: 'true'}\n  - id: both\n    composite: {commands: [a], parallel: true}\ncomponents:" + okContainer); got != "" {
		t.Errorf("warnings %q, want none", got)
	}
	got := refusal(t, "schemaVersion: 2.2.0\nattributes: {controller.devfile.io/storage-type: tmpfs}\ncomponents:"+okContainer, `devfile.attributes["controller.devfile.io/storage-type"]`)
	if !strings.Contains(got, `must be ephemeral, per-workspace, per-user, common or async, got "tmpfs"`) {
		t.Errorf("%q", got)
	}
}

// pod-overrides may map host names to the pod itself (a docker-compose devcontainer's services,
// which share the pod's network), and to no other address.
func TestPodOverridesHostAliases(t *testing.T) {
	src := func(aliases string) string {
		return "schemaVersion: 2.2.0\nattributes: {pod-overrides: {spec: {hostAliases: " + aliases + "}}}\ncomponents:\n  - name: main\n    container: {image: busybox}\n"
	}
	spec, _ := generatedPod(t, src(`[{ip: 127.0.0.1, hostnames: [db, cache.local]}]`), nil)
	if len(spec.HostAliases) != 1 || spec.HostAliases[0].IP != "127.0.0.1" || strings.Join(spec.HostAliases[0].Hostnames, ",") != "db,cache.local" {
		t.Errorf("hostAliases %+v, want db and cache.local at 127.0.0.1", spec.HostAliases)
	}
	const f = `devfile.attributes["pod-overrides"].spec.hostAliases`
	for _, tc := range []struct{ aliases, field, want string }{
		{`[{ip: 10.0.0.1, hostnames: [db]}]`, f + "[0].ip", "must be 127.0.0.1 or ::1"},
		{`[{ip: 127.0.0.1, hostnames: ["Not_A_Name"]}]`, f + "[0].hostnames[0]", "must be a lowercase DNS name"},
		{`[{ip: 127.0.0.1}]`, f + "[0]", "needs an ip (127.0.0.1) and at least one host name"},
		{`[{ip: 127.0.0.1, hostnames: [db], extra: 1}]`, f + "[0].extra", "is not supported"},
		{`{ip: 127.0.0.1}`, f, "must be a list of {ip, hostnames}"},
	} {
		if got := refusal(t, src(tc.aliases), tc.field); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.aliases, got, tc.want)
		}
	}
}

// SSH remotes are cloned at the start with the owner's git SSH key: ssh:// and scp-like remotes
// are accepted, and reach project-clone as given.
func TestSSHProjectRemotes(t *testing.T) {
	for _, remote := range []string{"git@github.com:team/app.git", "ssh://git@git.example.com:2222/team/app.git", "github.com:team/app"} {
		d := mustParse(t, []byte("schemaVersion: 2.2.0\nprojects:\n  - name: app\n    git: {remotes: {origin: '"+remote+"'}}\ncomponents:"+okContainer))
		if len(d.projects) != 1 || d.projects[0].Remotes["origin"] != remote {
			t.Errorf("%s: projects %+v", remote, d.projects)
		}
	}
}
