package devfile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, data []byte) *Devfile {
	t.Helper()
	d, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

func agent(t testing.TB, c workspace.AgentConfig) workspace.AgentConfig {
	t.Helper()
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("agent config: %v", err)
	}
	return c
}

func defaultParams(t testing.TB) Params {
	return Params{
		WorkspaceID:   "6f1c2a3e-9b7d-4c1e-8f2a-0d5e4b3c2a19",
		WorkspaceName: "alice-demo",
		Owner:         "alice",
		AgentID:       "17",
		Namespace:     "hangar-ws-alice-demo",
		DesiredState:  workspace.Running,
		Agent:         agent(t, workspace.AgentConfig{DNSZone: "workspaces.example.com"}),
	}
}

type generateCase struct {
	name    string
	devfile []byte
	params  Params
}

func generateCases(t testing.TB) []generateCase {
	running := defaultParams(t)
	stopped := defaultParams(t)
	stopped.DesiredState = workspace.Stopped

	off := false
	rich := defaultParams(t)
	rich.WorkspaceName = "bob-rich"
	rich.WorkspaceID = "0b9d7c52-3f61-4e0a-9c1b-7a8e6d5f4c3b"
	rich.Owner = "bob"
	rich.Namespace = "workspaces"
	// In a shared namespace the objects carry the cluster name, unique to this workspace.
	rich.KubeName = workspace.KubeName(rich.WorkspaceName, rich.WorkspaceID)
	// The server's config carries the helper's derived host key (a fixed test agent token hash).
	rich.HelperHostKey = workspace.HelperHostKey(make([]byte, 32), rich.WorkspaceID)
	// ... and the helper's token for the server (a fixed test key), with the server's URL.
	rich.HelperToken = workspace.KubeHelperToken(make([]byte, 32), rich.WorkspaceID)
	rich.ServerURL = "https://hangar.example.org"
	// ... and the owner's profile: git identity and dotfiles.
	rich.OwnerFullName, rich.OwnerEmail = "Bob Builder", "bob@example.org"
	rich.DotfilesRepo = "https://git.example.org/bob/dotfiles.git#main"
	rich.Agent = agent(t, workspace.AgentConfig{
		DNSZone:         "ws.example.org",
		NamespaceMode:   workspace.NamespaceShared,
		SharedNamespace: "workspaces",
		Labels:          map[string]string{"team": "platform", "cost-center": "42"},
		Annotations:     map[string]string{"example.com/contact": "platform@example.org", "example.com/note": "yes"},
		ImagePullSecrets: []workspace.ImagePullSecret{
			{Name: "registry-creds", Namespace: "hangar-system"},
			{Name: "mirror-creds", Namespace: "hangar-system"},
		},
		MaxResources: workspace.Resources{
			Requests: workspace.ResourceList{CPU: "4", Memory: "8Gi"},
			Limits:   workspace.ResourceList{CPU: "8", Memory: "16Gi"},
		},
		NetworkPolicy: workspace.NetworkPolicy{Enabled: &off},
	})

	quota := defaultParams(t)
	quota.DesiredState = workspace.RestartRequested
	quota.Agent = agent(t, workspace.AgentConfig{
		DNSZone:        "workspaces.example.com",
		ProxyNamespace: "edge",
		MaxResources:   workspace.Resources{Limits: workspace.ResourceList{CPU: "4", Memory: "8Gi"}},
		NetworkPolicy: workspace.NetworkPolicy{Egress: []workspace.EgressRule{
			{Allow: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "169.254.169.254/32"}},
			{Allow: "10.20.0.0/16"},
		}},
	})

	// An agent that builds images: into its registry over plain HTTP, with a push secret, within
	// caps lower than the build's default limits.
	builds := defaultParams(t)
	builds.Agent = agent(t, workspace.AgentConfig{
		DNSZone: "workspaces.example.com",
		ImageBuild: workspace.ImageBuild{
			Registry:           "registry.hangar-system.svc:5000/hangar/builds",
			InsecureRegistries: []string{"registry.hangar-system.svc:5000"},
			PushSecret:         &workspace.ImagePullSecret{Name: "builds-push", Namespace: "hangar-system"},
		},
		ImagePullSecrets: []workspace.ImagePullSecret{{Name: "registry-creds", Namespace: "hangar-system"}},
		MaxResources:     workspace.Resources{Limits: workspace.ResourceList{CPU: "4", Memory: "3Gi"}},
	})
	// An agent whose admin mapped the build's hash to an image built elsewhere.
	prebuilt := defaultParams(t)
	prebuilt.Agent = agent(t, workspace.AgentConfig{
		DNSZone:    "workspaces.example.com",
		ImageBuild: workspace.ImageBuild{Prebuilt: []workspace.PrebuiltImage{{Hash: buildHash(t), Image: "registry.example.com/team/dev@sha256:" + strings.Repeat("c", 64)}}},
	})

	return []generateCase{
		{"image-build-per-workspace", readFile(t, "build.devfile.yaml"), builds},
		{"image-build-prebuilt", readFile(t, "build.devfile.yaml"), prebuilt},
		{"default-running-per-workspace", Default(), running},
		{"default-stopped-per-workspace", Default(), stopped},
		{"rich-shared", readFile(t, "rich.devfile.yaml"), rich},
		{"default-quota-egress-restart", Default(), quota},
		{"editor-gitlab", readFile(t, "editor.devfile.yaml"), running},
	}
}

// buildHash is the hash of testdata/build.devfile.yaml's image build.
func buildHash(t testing.TB) string {
	_, h := mustParse(t, readFile(t, "build.devfile.yaml")).ImageBuild()
	if len(h) != 64 {
		t.Fatalf("build.devfile.yaml has no image build (hash %q)", h)
	}
	return h
}

func TestGenerateGolden(t *testing.T) {
	for _, tc := range generateCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Generate(mustParse(t, tc.devfile), tc.params)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", tc.name+".golden.yaml"), got)
			again, _ := Generate(mustParse(t, tc.devfile), tc.params)
			if again != got {
				t.Error("Generate is not deterministic")
			}
		})
	}
}

// checkGolden compares got with a golden file, which -update rewrites first.
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/devfile -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update after checking the change):\n%s", golden, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing line with some context.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(no line differs)"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// documents splits a stream the way kubectl does.
func documents(t *testing.T, stream string) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// TestGenerateParsesBack decodes every document as Kubernetes objects would be, checks the identity
// and labels of each, and checks that the YAML means exactly what the typed objects marshal to.
func TestGenerateParsesBack(t *testing.T) {
	for _, tc := range generateCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, tc.devfile)
			p := tc.params
			out, err := Generate(d, p)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := buildObjects(d, p)
			if err != nil {
				t.Fatal(err)
			}
			docs := documents(t, out)
			if len(docs) != len(objs) {
				t.Fatalf("%d documents, want %d", len(docs), len(objs))
			}
			var inventory []string
			kinds := map[string]int{}
			for i, doc := range docs {
				var u map[string]any
				if err := yaml.Unmarshal(doc, &u); err != nil {
					t.Fatalf("document %d: %v\n%s", i, err, doc)
				}
				kind, _ := u["kind"].(string)
				kinds[kind]++
				meta, _ := u["metadata"].(map[string]any)
				name, _ := meta["name"].(string)
				ns, _ := meta["namespace"].(string)
				if u["apiVersion"] == nil || kind == "" || name == "" {
					t.Errorf("document %d lacks apiVersion, kind or name:\n%s", i, doc)
				}
				if kind == "Namespace" {
					if ns != "" || name != p.Namespace {
						t.Errorf("Namespace %q in %q", name, ns)
					}
				} else if ns != p.Namespace {
					t.Errorf("%s %s in namespace %q, want %q", kind, name, ns, p.Namespace)
				}
				if _, ok := meta["creationTimestamp"]; ok {
					t.Errorf("%s %s has creationTimestamp", kind, name)
				}
				if _, ok := u["status"]; ok {
					t.Errorf("%s %s has status", kind, name)
				}
				labels, _ := meta["labels"].(map[string]any)
				want := map[string]string{LabelManagedBy: "hangar", protocol.LabelAgentID: p.AgentID, protocol.LabelWorkspaceID: p.WorkspaceID, protocol.LabelWorkspaceName: cmp.Or(p.KubeName, p.WorkspaceName)}
				for k, v := range p.Agent.Labels {
					want[k] = v
				}
				for k, v := range want {
					if labels[k] != v {
						t.Errorf("%s %s label %s = %v, want %q", kind, name, k, labels[k], v)
					}
				}
				ann, _ := meta["annotations"].(map[string]any)
				if ann[protocol.AnnotationHostTemplate] != "{{.port}}-"+p.WorkspaceName+"--"+p.Owner+"."+p.Agent.DNSZone {
					t.Errorf("%s %s host template = %v", kind, name, ann[protocol.AnnotationHostTemplate])
				}
				switch kind {
				case "Deployment":
					replicas := u["spec"].(map[string]any)["replicas"]
					want := 0.0
					if p.DesiredState == workspace.Running {
						want = 1
					}
					if replicas != want {
						t.Errorf("replicas = %v, want %v", replicas, want)
					}
				case "ConfigMap":
					if labels[protocol.LabelInventory] == "true" {
						s := u["data"].(map[string]any)[protocol.InventoryKey].(string)
						inventory = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
					}
				}

				// The YAML must mean what encoding/json makes of the typed object.
				fromYAML, err := yaml.YAMLToJSON(doc)
				if err != nil {
					t.Fatal(err)
				}
				direct, err := json.Marshal(objs[i].v)
				if err != nil {
					t.Fatal(err)
				}
				var a, b map[string]any
				_ = json.Unmarshal(fromYAML, &a)
				_ = json.Unmarshal(direct, &b)
				delete(b, "status") // checked to be absent from the YAML above
				if spec, ok := b["spec"].(map[string]any); ok && len(spec) == 0 && kind == "Namespace" {
					delete(b, "spec")
				}
				if !reflect.DeepEqual(a, b) {
					t.Errorf("document %d (%s %s) does not read back as the typed object:\nyaml: %s\njson: %s", i, kind, name, fromYAML, direct)
				}
			}

			var listed []string
			for _, o := range objs {
				if !strings.HasSuffix(o.name, "-inventory") {
					listed = append(listed, o.inventoryLine())
				}
			}
			if len(inventory) != len(listed) {
				t.Errorf("inventory lists %d objects, want %d:\n%s", len(inventory), len(listed), strings.Join(inventory, "\n"))
			}
			for _, l := range listed {
				if !contains(inventory, l) {
					t.Errorf("inventory lacks %s", l)
				}
			}
			if kinds["Deployment"] != 1 || kinds["ServiceAccount"] != 1 || kinds["Secret"] != 2 { // env, and ssh for the helper
				t.Errorf("kinds = %v", kinds)
			}
			if got, want := kinds["Namespace"] == 1, p.Agent.NamespaceMode == workspace.NamespacePerWorkspace; got != want {
				t.Errorf("Namespace present = %v, want %v", got, want)
			}
			if got, want := kinds["NetworkPolicy"] == 1, *p.Agent.NetworkPolicy.Enabled; got != want {
				t.Errorf("NetworkPolicy present = %v, want %v", got, want)
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestGenerateReplicas(t *testing.T) {
	d := mustParse(t, Default())
	for _, tc := range []struct {
		state    workspace.State
		replicas int32
		wantErr  bool
	}{
		{workspace.Running, 1, false},
		{workspace.Stopped, 0, false},
		{workspace.RestartRequested, 0, false},
		{workspace.Terminated, 0, false},
		{workspace.Starting, 0, true},
		{"", 0, true},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			p := defaultParams(t)
			p.DesiredState = tc.state
			objs, err := buildObjects(d, p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			for _, o := range objs {
				if o.kind == "Deployment" {
					b, _ := json.Marshal(o.v)
					var u struct{ Spec struct{ Replicas int32 } }
					_ = json.Unmarshal(b, &u)
					if u.Spec.Replicas != tc.replicas {
						t.Errorf("replicas = %d, want %d", u.Spec.Replicas, tc.replicas)
					}
				}
			}
		})
	}
}

func TestGenerateBadParams(t *testing.T) {
	d := mustParse(t, Default())
	for name, mutate := range map[string]func(*Params){
		"long name":      func(p *Params) { p.WorkspaceName = strings.Repeat("a", 41) },
		"upper name":     func(p *Params) { p.WorkspaceName = "Alice" },
		"no namespace":   func(p *Params) { p.Namespace = "" },
		"no workspace":   func(p *Params) { p.WorkspaceID = "" },
		"bad agent id":   func(p *Params) { p.AgentID = "a b" },
		"agent defaults": func(p *Params) { p.Agent = workspace.AgentConfig{} },
	} {
		t.Run(name, func(t *testing.T) {
			p := defaultParams(t)
			mutate(&p)
			if _, err := Generate(d, p); err == nil {
				t.Error("Generate accepted bad params")
			}
		})
	}
}

func TestGenerateResourceHashFollowsLimits(t *testing.T) {
	d := mustParse(t, Default())
	p := defaultParams(t)
	hash := func(p Params) string {
		objs, err := buildObjects(d, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.kind == "Deployment" {
				b, _ := json.Marshal(o.v)
				var u struct {
					Spec struct {
						Template struct {
							Metadata struct{ Annotations map[string]string }
						}
					}
				}
				_ = json.Unmarshal(b, &u)
				return u.Spec.Template.Metadata.Annotations[AnnotationResourceHash]
			}
		}
		t.Fatal("no Deployment")
		return ""
	}
	h1 := hash(p)
	p.DesiredState = workspace.Stopped
	if h2 := hash(p); h2 != h1 {
		t.Errorf("hash changed with the desired state: %s -> %s", h1, h2)
	}
	// The default devfile sets all four values, so agent defaults do not reach it; use a devfile
	// that sets none.
	bare := mustParse(t, []byte("schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container:\n    image: busybox\n"))
	d = bare
	a := hash(p)
	p.Agent.DefaultResources.Limits.Memory = "8Gi"
	if b := hash(p); b == a || len(b) != 16 {
		t.Errorf("hash %q -> %q after changing the default memory limit", a, b)
	}
}

func TestMergeResources(t *testing.T) {
	q := func(s string) *resource.Quantity {
		if s == "" {
			return nil
		}
		v := resource.MustParse(s)
		return &v
	}
	for _, tc := range []struct {
		req, lim, defReq, defLim string
		wantReq, wantLim         string
	}{
		{"", "", "100m", "2", "100m", "2"},
		{"500m", "1", "100m", "2", "500m", "1"},
		{"500m", "", "100m", "2", "500m", "2"},
		{"", "1", "100m", "2", "100m", "1"},
		{"3", "", "100m", "2", "3", "3"},       // a devfile request above the default limit raises the limit
		{"", "50m", "100m", "2", "50m", "50m"}, // a devfile limit below the default request lowers the request
		{"", "", "", "", "", ""},
		{"1", "", "", "", "1", ""},
	} {
		r, l := merge(q(tc.req), q(tc.lim), q(tc.defReq), q(tc.defLim))
		if qstr(r) != qstr(q(tc.wantReq)) || qstr(l) != qstr(q(tc.wantLim)) {
			t.Errorf("merge(%q, %q, defaults %q, %q) = %s, %s; want %s, %s", tc.req, tc.lim, tc.defReq, tc.defLim, qstr(r), qstr(l), qstr(q(tc.wantReq)), qstr(q(tc.wantLim)))
		}
	}
}

func TestGenerateMaxResources(t *testing.T) {
	two := mustParse(t, []byte(`schemaVersion: 2.2.0
components:
- name: a
  container: {image: busybox, cpuLimit: "3"}
- name: b
  container: {image: busybox, cpuLimit: "2"}
`))
	for _, tc := range []struct {
		name    string
		max     workspace.Resources
		wantErr bool
	}{
		{"fits", workspace.Resources{Limits: workspace.ResourceList{CPU: "5", Memory: "8Gi"}}, false},
		{"cpu over", workspace.Resources{Limits: workspace.ResourceList{CPU: "4"}}, true},
		{"memory over", workspace.Resources{Limits: workspace.ResourceList{Memory: "6Gi"}}, true}, // 2 x 4Gi default
		{"shared fits", workspace.Resources{Requests: workspace.ResourceList{CPU: "1"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultParams(t)
			p.Agent.MaxResources = tc.max
			_, err := Generate(two, p)
			var ve *workspace.ValidationError
			if tc.wantErr {
				if !errors.As(err, &ve) || ve.Problems[0].Field != "devfile.components" {
					t.Fatalf("err = %v, want a ValidationError on devfile.components", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}

	// A cap on limits needs every container to have a limit, or the quota refuses the pod.
	p := defaultParams(t)
	p.Agent.DefaultResources = workspace.Resources{Requests: workspace.ResourceList{CPU: "100m"}}
	p.Agent.MaxResources = workspace.Resources{Limits: workspace.ResourceList{Memory: "16Gi"}}
	if _, err := Generate(two, p); err == nil || !strings.Contains(err.Error(), "memoryLimit") {
		t.Errorf("err = %v, want one about memoryLimit", err)
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, tc := range generateCases(b) {
		if tc.name != "default-running-per-workspace" && tc.name != "rich-shared" {
			continue
		}
		d := mustParse(b, tc.devfile)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Generate(d, tc.params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGenerateSigsYAML measures the straightforward alternative, sigs.k8s.io/yaml.Marshal per
// object, to keep the reason for appendYAML honest.
func BenchmarkGenerateSigsYAML(b *testing.B) {
	tc := generateCases(b)[0]
	d := mustParse(b, tc.devfile)
	b.ReportAllocs()
	for b.Loop() {
		objs, err := buildObjects(d, tc.params)
		if err != nil {
			b.Fatal(err)
		}
		var out []byte
		for i, o := range objs {
			if i > 0 {
				out = append(out, "---\n"...)
			}
			y, err := yaml.Marshal(o.v)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, y...)
		}
	}
}

// TestProtocolLabelsAreReserved: the labels and annotations the agent and the proxy read back are
// under the prefix a devfile may not set, so that no devfile can forge them.
func TestProtocolLabelsAreReserved(t *testing.T) {
	for _, k := range []string{protocol.LabelAgentID, protocol.LabelWorkspaceID, protocol.LabelWorkspaceName,
		protocol.LabelInventory, protocol.AnnotationHostTemplate, protocol.AnnotationPublicPorts} {
		if !strings.HasPrefix(k, workspace.ReservedPrefix) {
			t.Errorf("%s is not under %s", k, workspace.ReservedPrefix)
		}
	}
}

// The helper's token for the server is in the <name>-ssh Secret only: the pod spec names its file
// and the server, never the token (anyone who can read a Deployment would have it).
func TestGenerateHelperTokenOnlyInTheSecret(t *testing.T) {
	p := defaultParams(t)
	p.HelperToken = workspace.KubeHelperToken([]byte("test key"), p.WorkspaceID)
	p.ServerURL = "https://hangar.example.org"
	p.HelperGit = true
	got, err := Generate(mustParse(t, Default()), p)
	if err != nil {
		t.Fatal(err)
	}
	var inSecret, inOther int
	for _, doc := range documents(t, got) {
		if !strings.Contains(string(doc), p.HelperToken) {
			continue
		}
		if strings.Contains(string(doc), "kind: Secret") && strings.Contains(string(doc), "name: alice-demo-ssh") {
			inSecret++
		} else {
			inOther++
		}
	}
	if inSecret != 1 || inOther != 0 {
		t.Fatalf("the token is in %d <name>-ssh Secret(s) and %d other object(s); want 1 and 0", inSecret, inOther)
	}
	for _, want := range []string{"name: HANGAR_HELPER_SERVER_URL\n          value: https://hangar.example.org", "name: HANGAR_HELPER_TOKEN_FILE\n          value: /hangar/ssh/helper-token"} {
		if !strings.Contains(got, want) {
			t.Errorf("the config lacks %q", want)
		}
	}
	// The init container that clones the projects asks the server too, with the same file.
	withProjects, err := Generate(mustParse(t, readFile(t, "editor.devfile.yaml")), p)
	if err != nil {
		t.Fatal(err)
	}
	clone := withProjects[strings.Index(withProjects, "name: "+CloneContainerName):]
	clone = clone[:strings.Index(clone, "\n      - ")+1]
	for _, want := range []string{"HANGAR_HELPER_SERVER_URL", "value: /hangar/ssh/helper-token", "mountPath: /hangar/ssh\n"} {
		if !strings.Contains(withProjects, "name: "+CloneContainerName) || !strings.Contains(clone, want) {
			t.Errorf("the clone container lacks %q:\n%s", want, clone)
		}
	}
	if strings.Contains(got, HelperGitCredentialsEnv) {
		t.Errorf("a server with forges turned the helper's git credentials off:\n%s", got)
	}
	// A server without forges: the helper reports to it but hands git no credentials from it, and
	// the clone does not ask it (it may not even reach it).
	p.HelperGit = false
	reportOnly, err := Generate(mustParse(t, readFile(t, "editor.devfile.yaml")), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: HANGAR_HELPER_SERVER_URL\n          value: https://hangar.example.org", "name: " + HelperGitCredentialsEnv + "\n          value: \"false\""} {
		if !strings.Contains(reportOnly, want) {
			t.Errorf("without forges, the config lacks %q", want)
		}
	}
	clone = reportOnly[strings.Index(reportOnly, "name: "+CloneContainerName):]
	clone = clone[:strings.Index(clone, "\n      - ")+1]
	if strings.Contains(clone, "HANGAR_HELPER_SERVER_URL") || strings.Contains(clone, "helper-token") {
		t.Errorf("without forges, the clone container asks the server:\n%s", clone)
	}
	// Without a server URL (or a token), nothing of it is generated.
	p.ServerURL = ""
	if got, _ := Generate(mustParse(t, Default()), p); strings.Contains(got, "helper-token") || strings.Contains(got, "HANGAR_HELPER_SERVER_URL") {
		t.Error("a token without a server URL was generated")
	}
}
