package helmcharts

// The checks of the charts: `helm lint --strict` and `helm template` with default and non-default
// values, asserting on the rendered objects.

import (
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/agent"
)

// Helm returns the helm binary's path (scripts/build-helm).
func Helm(t testing.TB) string {
	t.Helper()
	p, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func chartDir(name string) string { return ChartDir(name) }

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// render runs helm template and returns the objects by "Kind/name".
func render(t *testing.T, chart string, set ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "rel", chartDir(chart), "--namespace", "hangar-system"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(out, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if string(js) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("rendered object: %v\n%s", err, doc)
		}
		key := u.GetKind() + "/" + u.GetName()
		if objs[key] != nil {
			t.Fatalf("%s rendered twice", key)
		}
		if u.GetKind() == "Secret" {
			t.Errorf("%s renders a Secret (%s): secrets are referenced, never put in values", chart, u.GetName())
		}
		objs[key] = u
	}
	return objs
}

func get(t *testing.T, objs map[string]*unstructured.Unstructured, key string) *unstructured.Unstructured {
	t.Helper()
	o := objs[key]
	if o == nil {
		var keys []string
		for k := range objs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Fatalf("no %s among the rendered objects %v", key, keys)
	}
	return o
}

// field reads a nested field as JSON-decoded data.
func field(o *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	return v
}

// container returns the first container of a Deployment.
func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _ := field(d, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%s: want one container, got %d", d.GetName(), len(cs))
	}
	return cs[0].(map[string]any)
}

func args(c map[string]any) []string {
	var out []string
	for _, a := range c["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

func rules(t *testing.T, o *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	js, err := json.Marshal(o.Object["rules"])
	if err != nil {
		t.Fatal(err)
	}
	var rs []rbacv1.PolicyRule
	if err := json.Unmarshal(js, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// checkHardened asserts the pod security every chart's Deployment has: non-root 65532, no
// privilege escalation, a read-only root file system, no capabilities.
func checkHardened(t *testing.T, d *unstructured.Unstructured) {
	t.Helper()
	psc, _ := field(d, "spec", "template", "spec", "securityContext").(map[string]any)
	if psc["runAsNonRoot"] != true || psc["runAsUser"] != int64(65532) {
		t.Errorf("%s: pod securityContext %v, want runAsNonRoot and runAsUser 65532", d.GetName(), psc)
	}
	sc, _ := container(t, d)["securityContext"].(map[string]any)
	caps, _ := sc["capabilities"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false || !reflect.DeepEqual(caps["drop"], []any{"ALL"}) {
		t.Errorf("%s: container securityContext %v", d.GetName(), sc)
	}
}

func probePath(c map[string]any, probe string) string {
	p, _ := c[probe].(map[string]any)
	h, _ := p["httpGet"].(map[string]any)
	s, _ := h["path"].(string)
	return s
}

func TestLint(t *testing.T) {
	for _, tc := range []struct {
		chart string
		set   []string
	}{
		{"hangar-server", nil},
		{"hangar-server", []string{"database.postgresUrlSecret.name=pg", "replicaCount=3", "serviceMonitor.enabled=true"}},
		{"hangar-agent", []string{"serverUrl=http://hangar-server:7080", "tokenSecret.name=agent-token"}},
		{"hangar-agent", []string{"serverUrl=http://hangar-server:7080", "tokenSecret.name=agent-token", "replicaCount=3", "metrics.enabled=false", "podDisruptionBudget.enabled=false"}},
		{"hangar-proxy", []string{"serverUrl=http://hangar-server:7080", "tokenSecret.name=agent-token"}},
		{"hangar-proxy", []string{"serverUrl=http://hangar-server:7080", "tokenSecret.name=agent-token", "tlsSecret=wild", "ssh.secret=keys"}},
	} {
		a := []string{"lint", "--strict", chartDir(tc.chart)}
		for _, s := range tc.set {
			a = append(a, "--set", s)
		}
		if out, err := helm(t, a...); err != nil || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm %s: %v\n%s", strings.Join(a, " "), err, out)
		}
	}
}

func TestServerDefaults(t *testing.T) {
	objs := render(t, "hangar-server")
	d := get(t, objs, "Deployment/rel-hangar-server")
	checkHardened(t, d)
	c := container(t, d)
	if s := field(d, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("SQLite: strategy %v, want Recreate (one process owns the file)", s)
	}
	a := args(c)
	for _, want := range []string{"server", "--listen=0.0.0.0:7080", "--data-dir=/data", "--provisioners=0"} {
		if !slices.Contains(a, want) {
			t.Errorf("args %v lack %s", a, want)
		}
	}
	if probePath(c, "livenessProbe") != "/healthz" || probePath(c, "readinessProbe") != "/readyz" {
		t.Errorf("probes: liveness %q readiness %q", probePath(c, "livenessProbe"), probePath(c, "readinessProbe"))
	}
	pvc := get(t, objs, "PersistentVolumeClaim/rel-hangar-server")
	if pvc.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the SQLite claim is not kept on uninstall: %v", pvc.GetAnnotations())
	}
	vols, _ := field(d, "spec", "template", "spec", "volumes").([]any)
	if claim := vols[0].(map[string]any)["persistentVolumeClaim"]; claim == nil || claim.(map[string]any)["claimName"] != "rel-hangar-server" {
		t.Errorf("the data volume is not the claim: %v", vols[0])
	}
	if objs["ServiceMonitor/rel-hangar-server"] != nil {
		t.Error("a ServiceMonitor by default")
	}
	if env, _ := json.Marshal(c["env"]); strings.Contains(string(env), "HANGAR_POSTGRES_URL") {
		t.Errorf("SQLite: env %s sets a Postgres URL", env)
	}
	svc := get(t, objs, "Service/rel-hangar-server")
	if ports, _ := json.Marshal(field(svc, "spec", "ports")); !strings.Contains(string(ports), `"port":7080`) {
		t.Errorf("service ports %s", ports)
	}
}

func TestServerPostgres(t *testing.T) {
	objs := render(t, "hangar-server", "database.postgresUrlSecret.name=hangar-pg", "database.postgresUrlSecret.key=dsn",
		"replicaCount=3", "serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom", "accessUrl=https://hangar.example.com")
	d := get(t, objs, "Deployment/rel-hangar-server")
	c := container(t, d)
	if r := field(d, "spec", "replicas"); r != int64(3) {
		t.Errorf("replicas %v", r)
	}
	if s := field(d, "spec", "strategy"); s != nil {
		t.Errorf("Postgres: strategy %v, want the rolling default", s)
	}
	env, _ := json.Marshal(c["env"])
	if !strings.Contains(string(env), `{"name":"HANGAR_POSTGRES_URL","valueFrom":{"secretKeyRef":{"key":"dsn","name":"hangar-pg"}}}`) {
		t.Errorf("the Postgres URL does not come from the Secret: env %s", env)
	}
	a := args(c)
	for _, want := range []string{"--relay-url=http://$(POD_IP):7080", "--access-url=https://hangar.example.com"} {
		if !slices.Contains(a, want) {
			t.Errorf("args %v lack %s", a, want)
		}
	}
	if objs["PersistentVolumeClaim/rel-hangar-server"] != nil {
		t.Error("Postgres: a claim is rendered")
	}
	sm := get(t, objs, "ServiceMonitor/rel-hangar-server")
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
	}
	if eps, _ := json.Marshal(field(sm, "spec", "endpoints")); !strings.Contains(string(eps), `"path":"/metrics"`) || !strings.Contains(string(eps), `"port":"http"`) {
		t.Errorf("ServiceMonitor endpoints %s", eps)
	}

	// SQLite cannot have several replicas: a clear error, nothing rendered.
	out, err := helm(t, "template", "rel", chartDir("hangar-server"), "--set", "replicaCount=2")
	if err == nil || !strings.Contains(out, "replicaCount > 1 needs Postgres") {
		t.Errorf("two SQLite replicas: err %v\n%s", err, out)
	}
}

func TestAgentRBACIsWhatTheAgentDoes(t *testing.T) {
	objs := render(t, "hangar-agent", "serverUrl=http://10.96.0.10:7080", "tokenSecret.name=agent-token")
	cr := get(t, objs, "ClusterRole/rel-hangar-agent")
	if got, want := rules(t, cr), agent.ClusterRules(); !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("the chart's ClusterRole is not what the agent applies, watches and prunes (internal/agent/rbac.go):\nchart %s\nagent %s", gj, wj)
	}
	role := get(t, objs, "Role/rel-hangar-agent-leader-election")
	if role.GetNamespace() != "" && role.GetNamespace() != "hangar-system" {
		t.Errorf("Role in namespace %q", role.GetNamespace())
	}
	if got, want := rules(t, role), agent.LeaseRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("leader-election Role rules %+v, want %+v", got, want)
	}
	crb := get(t, objs, "ClusterRoleBinding/rel-hangar-agent")
	if subj, _ := json.Marshal(crb.Object["subjects"]); string(subj) != `[{"kind":"ServiceAccount","name":"rel-hangar-agent","namespace":"hangar-system"}]` {
		t.Errorf("ClusterRoleBinding subjects %s", subj)
	}
	rb := get(t, objs, "RoleBinding/rel-hangar-agent-leader-election")
	if ref := field(rb, "roleRef", "name"); ref != "rel-hangar-agent-leader-election" {
		t.Errorf("RoleBinding roleRef %v", ref)
	}

	d := get(t, objs, "Deployment/rel-hangar-agent")
	checkHardened(t, d)
	if r := field(d, "spec", "replicas"); r != int64(2) {
		t.Errorf("replicas %v, want 2 (leader election)", r)
	}
	if sa := field(d, "spec", "template", "spec", "serviceAccountName"); sa != "rel-hangar-agent" {
		t.Errorf("serviceAccountName %v", sa)
	}
	c := container(t, d)
	a := args(c)
	for _, want := range []string{"agent", "--server=http://10.96.0.10:7080", "--token-file=/var/run/hangar/token/token", "--lease-namespace=hangar-system", "--identity=$(POD_NAME)"} {
		if !slices.Contains(a, want) {
			t.Errorf("args %v lack %s", a, want)
		}
	}
	if probePath(c, "livenessProbe") != "/healthz" || probePath(c, "readinessProbe") != "/readyz" {
		t.Errorf("probes: liveness %q readiness %q", probePath(c, "livenessProbe"), probePath(c, "readinessProbe"))
	}
	if env, _ := json.Marshal(c["env"]); !strings.Contains(string(env), `{"name":"HANGAR_AGENT_METRICS_LISTEN","value":":9090"}`) {
		t.Errorf("env %s", env)
	}
	vols, _ := json.Marshal(field(d, "spec", "template", "spec", "volumes"))
	if !strings.Contains(string(vols), `"secretName":"agent-token"`) {
		t.Errorf("the token is not the Secret's: volumes %s", vols)
	}
	pdb := get(t, objs, "PodDisruptionBudget/rel-hangar-agent")
	if m := field(pdb, "spec", "maxUnavailable"); m != int64(1) {
		t.Errorf("PDB maxUnavailable %v", m)
	}
	if sel, _ := json.Marshal(field(pdb, "spec", "selector")); !strings.Contains(string(sel), `"app.kubernetes.io/name":"hangar-agent"`) {
		t.Errorf("PDB selector %s", sel)
	}
}

func TestAgentNonDefault(t *testing.T) {
	objs := render(t, "hangar-agent", "serverUrl=http://s:7080", "tokenSecret.name=t", "tokenSecret.key=agent.token",
		"replicaCount=3", "metrics.enabled=false", "podDisruptionBudget.enabled=false",
		"extraRules[0].apiGroups[0]=batch", "extraRules[0].resources[0]=jobs", "extraRules[0].verbs={get,list,watch,patch,delete}")
	cr := get(t, objs, "ClusterRole/rel-hangar-agent")
	want := append(agent.ClusterRules(), rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}})
	if got := rules(t, cr); !reflect.DeepEqual(got, want) {
		t.Errorf("extraRules: ClusterRole rules %+v", got)
	}
	d := get(t, objs, "Deployment/rel-hangar-agent")
	c := container(t, d)
	if c["livenessProbe"] != nil || c["readinessProbe"] != nil || c["ports"] != nil {
		t.Errorf("metrics.enabled=false still probes: %v %v", c["livenessProbe"], c["ports"])
	}
	if !slices.Contains(args(c), "--token-file=/var/run/hangar/token/agent.token") {
		t.Errorf("args %v", args(c))
	}
	if objs["PodDisruptionBudget/rel-hangar-agent"] != nil {
		t.Error("a PDB with podDisruptionBudget.enabled=false")
	}
	for _, missing := range [][]string{{"tokenSecret.name=t"}, {"serverUrl=http://s:7080"}} {
		a := []string{"template", "rel", chartDir("hangar-agent")}
		for _, s := range missing {
			a = append(a, "--set", s)
		}
		out, err := helm(t, a...)
		if err == nil || !strings.Contains(out, "is required") {
			t.Errorf("helm %v: err %v\n%s", missing, err, out)
		}
	}
}

func TestProxy(t *testing.T) {
	objs := render(t, "hangar-proxy", "serverUrl=http://s:7080", "tokenSecret.name=t")
	d := get(t, objs, "Deployment/rel-hangar-proxy")
	checkHardened(t, d)
	c := container(t, d)
	a := args(c)
	for _, want := range []string{"proxy", "--server=http://s:7080", "--listen=:8443", "--metrics-listen=:9443"} {
		if !slices.Contains(a, want) {
			t.Errorf("args %v lack %s", a, want)
		}
	}
	if slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--ssh-") || strings.HasPrefix(s, "--tls-") }) {
		t.Errorf("default args %v serve TLS or SSH", a)
	}
	if probePath(c, "readinessProbe") != "/readyz" {
		t.Errorf("readiness probe %q", probePath(c, "readinessProbe"))
	}
	cr := get(t, objs, "ClusterRole/rel-hangar-proxy")
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}
	if got := rules(t, cr); !reflect.DeepEqual(got, want) {
		t.Errorf("proxy ClusterRole %+v", got)
	}
	get(t, objs, "PodDisruptionBudget/rel-hangar-proxy")

	objs = render(t, "hangar-proxy", "serverUrl=http://s:7080", "tokenSecret.name=t", "tlsSecret=wild", "ssh.secret=keys")
	d = get(t, objs, "Deployment/rel-hangar-proxy")
	a = args(container(t, d))
	for _, want := range []string{"--tls-cert-file=/var/run/hangar/tls/tls.crt", "--ssh-listen=:2222", "--ssh-host-key-file=/var/run/hangar/ssh/host_key"} {
		if !slices.Contains(a, want) {
			t.Errorf("args %v lack %s", a, want)
		}
	}
	svc := get(t, objs, "Service/rel-hangar-proxy")
	if ports, _ := json.Marshal(field(svc, "spec", "ports")); !strings.Contains(string(ports), `"name":"ssh"`) {
		t.Errorf("service ports %s", ports)
	}
}
