package devfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// corpusFile is one real devfile of testdata/corpus, as SOURCES.tsv lists it.
type corpusFile struct {
	file, repo, path, commit string
}

func readCorpus(t testing.TB) []corpusFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", "SOURCES.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusFile
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 || len(f[3]) != 40 {
			t.Fatalf("SOURCES.tsv line %d: want file, repo, path and a 40-character commit: %q", i+1, line)
		}
		out = append(out, corpusFile{f[0], f[1], f[2], f[3]})
	}
	return out
}

// TestCorpusIndex checks that every corpus file is listed with its source and every listed file is
// there, and that the corpus is what it claims: at least 100 files from at least 4 sources.
func TestCorpusIndex(t *testing.T) {
	listed := map[string]bool{}
	sources := map[string]int{}
	for _, c := range readCorpus(t) {
		listed[c.file] = true
		sources[strings.SplitN(c.file, "/", 2)[0]]++
		if !strings.HasSuffix(c.file, "/"+c.path) || !strings.Contains(c.file, strings.ReplaceAll(c.repo, "/", "_")+"/") {
			t.Errorf("%s: the path does not say where it came from (%s %s)", c.file, c.repo, c.path)
		}
	}
	root := filepath.Join("testdata", "corpus")
	_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() == "SOURCES.tsv" || e.Name() == "outcomes.golden" {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s is not listed in SOURCES.tsv", rel)
		}
		delete(listed, filepath.ToSlash(rel))
		return nil
	})
	for f := range listed {
		t.Errorf("SOURCES.tsv lists %s, which is missing", f)
	}
	total := 0
	for _, n := range sources {
		total += n
	}
	if total < 100 || len(sources) < 4 {
		t.Errorf("corpus has %d files from %d sources (%v); want at least 100 from 4", total, len(sources), sources)
	}
}

// TestCorpus parses every real devfile of the corpus. Each accepted one is generated, read back and
// checked object by object against what the devfile says, by a checker that reads the devfile on its
// own; each refused one must name its fields. The outcome of every file is in outcomes.golden
// (-update rewrites it), so that every change of outcome is reviewed.
func TestCorpus(t *testing.T) {
	var outcomes []string
	accepted := 0
	for _, c := range readCorpus(t) {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", filepath.FromSlash(c.file)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := Parse(data)
		if err != nil {
			var ve *workspace.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Errorf("%s: error is not a ValidationError with problems: %v", c.file, err)
				continue
			}
			var fields []string
			for _, p := range ve.Problems {
				if !strings.HasPrefix(p.Field, "devfile") || p.Detail == "" {
					t.Errorf("%s: problem %q: %q does not name a devfile field with a reason", c.file, p.Field, p.Detail)
				}
				fields = append(fields, p.Field)
			}
			outcomes = append(outcomes, c.file+"\trefused\t"+strings.Join(slices.Compact(fields), " "))
			continue
		}
		accepted++
		line := c.file + "\taccepted"
		if n := len(d.Warnings()); n > 0 {
			line += fmt.Sprintf("\t%d warnings", n)
		}
		outcomes = append(outcomes, line)
		t.Run(c.file, func(t *testing.T) { checkFaithful(t, data, d) })
	}
	checkGolden(t, filepath.Join("testdata", "corpus", "outcomes.golden"), strings.Join(outcomes, "\n")+"\n")
	t.Logf("%d of %d corpus devfiles accepted", accepted, len(outcomes))
}

// generated is a workspace's objects read back from Generate's YAML.
type generated struct {
	deployment appsv1.Deployment
	service    *corev1.Service
	policy     *networkingv1.NetworkPolicy
	claims     map[string]corev1.PersistentVolumeClaim
}

func readBack(t *testing.T, stream string) generated {
	t.Helper()
	g := generated{claims: map[string]corev1.PersistentVolumeClaim{}}
	for _, doc := range documents(t, stream) {
		var tm struct{ Kind string }
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		var err error
		switch tm.Kind {
		case "Deployment":
			err = yaml.UnmarshalStrict(doc, &g.deployment)
		case "Service":
			g.service = &corev1.Service{}
			err = yaml.UnmarshalStrict(doc, g.service)
		case "NetworkPolicy":
			g.policy = &networkingv1.NetworkPolicy{}
			err = yaml.UnmarshalStrict(doc, g.policy)
		case "PersistentVolumeClaim":
			var pvc corev1.PersistentVolumeClaim
			err = yaml.UnmarshalStrict(doc, &pvc)
			g.claims[pvc.Name] = pvc
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", tm.Kind, err, doc)
		}
	}
	return g
}

var variableRef = regexp.MustCompile(`\{\{\s*(.*?)\s*\}\}`)

// checkFaithful generates the workspace of an accepted devfile and checks each object against the
// devfile, read here as plain YAML: each container component is a container with its image,
// command, args, env, mounts and resources (or an init container when preStart applies it);
// endpoints by exposure are Service ports, the proxy's public ports and NetworkPolicy rules; volumes
// are claims or emptyDirs; postStart commands are hooks; projects are the clone init container.
func checkFaithful(t *testing.T, data []byte, d *Devfile) {
	p := defaultParams(t)
	out, err := Generate(d, p)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	g := readBack(t, out)
	spec := g.deployment.Spec.Template.Spec

	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	vars, _ := raw["variables"].(map[string]any)
	subst := func(s string) string {
		return variableRef.ReplaceAllStringFunc(s, func(ref string) string {
			name := variableRef.FindStringSubmatch(ref)[1]
			if v, ok := vars[name].(string); ok {
				return v
			}
			return ref
		})
	}
	strs := func(v any) []string {
		l, _ := v.([]any)
		var out []string
		for _, e := range l {
			out = append(out, subst(fmt.Sprint(e)))
		}
		return out
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return subst(s) }

	// Commands and what events make of them.
	commands := map[string]map[string]any{}
	for _, c := range asList(raw["commands"]) {
		cm := c.(map[string]any)
		commands[str(cm, "id")] = cm
	}
	var leaves func(id string) []map[string]any
	leaves = func(id string) []map[string]any {
		c := commands[id]
		if comp, ok := c["composite"].(map[string]any); ok {
			var out []map[string]any
			for _, m := range strs(comp["commands"]) {
				out = append(out, leaves(m)...)
			}
			return out
		}
		return []map[string]any{c}
	}
	events, _ := raw["events"].(map[string]any)
	initOnly := map[string]bool{}
	var wantInits []string
	postStart := map[string][]string{} // container -> command lines
	for _, id := range strs(events["preStart"]) {
		for _, c := range leaves(id) {
			if a, ok := c["apply"].(map[string]any); ok {
				initOnly[str(a, "component")] = true
				wantInits = append(wantInits, str(a, "component"))
			} else if _, ok := c["exec"].(map[string]any); ok {
				wantInits = append(wantInits, str(c, "id"))
			}
		}
	}
	for _, id := range strs(events["postStart"]) {
		for _, c := range leaves(id) {
			e := c["exec"].(map[string]any)
			postStart[str(e, "component")] = append(postStart[str(e, "component")], str(e, "commandLine"))
		}
	}

	projects := append(asList(raw["projects"]), asList(raw["dependentProjects"])...)
	var initNames []string
	for _, c := range spec.InitContainers {
		initNames = append(initNames, c.Name)
	}
	if len(projects) > 0 {
		wantInits = append([]string{CloneContainerName}, wantInits...)
	}

	containers := map[string]corev1.Container{}
	for _, c := range append(slices.Clone(spec.Containers), spec.InitContainers...) {
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("container %s: imagePullPolicy %q, want IfNotPresent", c.Name, c.ImagePullPolicy)
		}
		if _, dup := containers[c.Name]; !dup {
			containers[c.Name] = c
		}
	}
	publicPorts := map[string]bool{}
	if g.service != nil {
		for _, p := range strings.Split(g.service.Annotations[protocol.AnnotationPublicPorts], ",") {
			publicPorts[p] = true
		}
	}

	// The main container: marked by hangar.dev/main, else gl/inject-editor, else the first.
	var names []string
	mainName, glMain := "", ""
	volumes := map[string]map[string]any{}
	for _, comp := range asList(raw["components"]) {
		cm := comp.(map[string]any)
		attrs, _ := cm["attributes"].(map[string]any)
		if v, ok := cm["volume"].(map[string]any); ok {
			volumes[str(cm, "name")] = v
		}
		if _, ok := cm["container"]; !ok || initOnly[str(cm, "name")] {
			continue
		}
		names = append(names, str(cm, "name"))
		if truthy(attrs[MainAttribute]) && mainName == "" {
			mainName = str(cm, "name")
		}
		if truthy(attrs[GitLabMainAttribute]) && glMain == "" {
			glMain = str(cm, "name")
		}
	}
	mainName = firstNonEmpty(mainName, glMain, names[0])

	// The web editor: for the container whose hangar.dev/editor is code-server, else the first whose
	// gl/inject-editor is true (and hangar.dev/editor not none); never when an endpoint has its port.
	editorFor, editorByGitLab, editorPortTaken := "", "", false
	for _, comp := range asList(raw["components"]) {
		cm := comp.(map[string]any)
		attrs, _ := cm["attributes"].(map[string]any)
		dc, ok := cm["container"].(map[string]any)
		if !ok {
			continue
		}
		for _, e := range asList(dc["endpoints"]) {
			editorPortTaken = editorPortTaken || int32(e.(map[string]any)["targetPort"].(float64)) == EditorPort
		}
		if initOnly[str(cm, "name")] {
			continue
		}
		if attrs[EditorAttribute] == "code-server" && editorFor == "" {
			editorFor = str(cm, "name")
		}
		if truthy(attrs[GitLabMainAttribute]) && attrs[EditorAttribute] != "none" && editorByGitLab == "" {
			editorByGitLab = str(cm, "name")
		}
	}
	editorFor = firstNonEmpty(editorFor, editorByGitLab)
	if editorPortTaken {
		editorFor = ""
	}
	// (checked below, once it is known whether the main container runs the helper)

	// The helper runs in the main container unless the image's entrypoint runs its args (args
	// without a command) or an endpoint takes the helper's port; its init container goes first.
	helper := true
	for _, comp := range asList(raw["components"]) {
		cm := comp.(map[string]any)
		dc, ok := cm["container"].(map[string]any)
		if !ok {
			continue
		}
		if str(cm, "name") == mainName && len(strs(dc["command"])) == 0 && len(strs(dc["args"])) > 0 {
			helper = false
		}
		for _, e := range asList(dc["endpoints"]) {
			if int32(e.(map[string]any)["targetPort"].(float64)) == HelperSSHPort {
				helper = false
			}
		}
	}
	// The editor runs in the main container, from a bundle its init container copies (right after
	// the helper's), when the main container asks for it and runs the helper; else beside it.
	if editorFor != "" {
		if editorFor == mainName && helper {
			wantInits = append([]string{EditorInstallContainerName}, wantInits...)
		} else {
			names = append(names, EditorContainerName)
		}
		checkEditor(t, g, spec, editorFor)
	}
	if helper {
		wantInits = append([]string{ToolsContainerName}, wantInits...)
	}
	if !slices.Equal(initNames, wantInits) {
		t.Errorf("init containers %v, want %v", initNames, wantInits)
	}
	checkHelper(t, g, spec, mainName, helper)
	var gotNames []string
	for _, c := range spec.Containers {
		gotNames = append(gotNames, c.Name)
	}
	if !slices.Equal(gotNames, names) {
		t.Errorf("containers %v, want %v", gotNames, names)
	}

	mainPublic, anyPublic := "", "" // the main container's first public port, and the first of any
	mainSourceVolume := ""          // the volume at the main container's PROJECTS_ROOT
	for _, comp := range asList(raw["components"]) {
		cm := comp.(map[string]any)
		dc, ok := cm["container"].(map[string]any)
		if !ok {
			continue
		}
		name := str(cm, "name")
		c, found := containers[name]
		if !found {
			t.Errorf("component %s: no container", name)
			continue
		}
		if c.Image != str(dc, "image") {
			t.Errorf("%s: image %q, want %q", name, c.Image, str(dc, "image"))
		}
		wantCmd, wantArgs := strs(dc["command"]), strs(dc["args"])
		switch {
		case name != mainName:
		case helper && len(wantCmd) == 0:
			wantCmd = []string{HelperBinary, "workspace-helper"} // the helper keeps it running
		case helper:
			wantCmd, wantArgs = slices.Concat([]string{HelperBinary, "workspace-helper", "--"}, wantCmd, wantArgs), nil
		case len(wantCmd) == 0 && len(wantArgs) == 0:
			wantCmd = []string{"/bin/sh", "-c", KeepAliveScript}
		}
		if !slices.Equal(c.Command, wantCmd) || !slices.Equal(c.Args, wantArgs) {
			t.Errorf("%s: command %q args %q, want %q %q", name, c.Command, c.Args, wantCmd, wantArgs)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		devEnv := map[string]bool{}
		for _, e := range asList(dc["env"]) {
			em := e.(map[string]any)
			devEnv[str(em, "name")] = true
			if got, ok := env[str(em, "name")]; !ok || got != str(em, "value") {
				t.Errorf("%s: env %s = %q, want %q", name, str(em, "name"), got, str(em, "value"))
			}
		}
		mountSources := dc["mountSources"] == nil || dc["mountSources"] == true
		sourcePath := firstNonEmpty(str(dc, "sourceMapping"), "/projects")
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		ownSource := false
		for _, m := range asList(dc["volumeMounts"]) {
			mm := m.(map[string]any)
			p := firstNonEmpty(str(mm, "path"), "/"+str(mm, "name"))
			ownSource = ownSource || p == sourcePath
			if mounts[p] != str(mm, "name") {
				t.Errorf("%s: %s mounts %q, want volume %q", name, p, mounts[p], str(mm, "name"))
			}
			if v, ok := volumes[str(mm, "name")]; ok {
				checkVolume(t, g, spec, str(mm, "name"), v)
			}
		}
		if mountSources {
			if name == mainName {
				mainSourceVolume = mounts[sourcePath]
			}
			if !ownSource && mounts[sourcePath] != projectsVolume {
				t.Errorf("%s: the data volume is not at %s (%v)", name, sourcePath, mounts)
			}
			if !devEnv["PROJECTS_ROOT"] && env["PROJECTS_ROOT"] != sourcePath {
				t.Errorf("%s: PROJECTS_ROOT = %q, want %q", name, env["PROJECTS_ROOT"], sourcePath)
			}
			wantSource := sourcePath
			if ps := asList(raw["projects"]); len(ps) > 0 {
				pm := ps[0].(map[string]any)
				wantSource = path.Join(sourcePath, firstNonEmpty(str(pm, "clonePath"), str(pm, "name")))
			}
			if !devEnv["PROJECT_SOURCE"] && env["PROJECT_SOURCE"] != wantSource {
				t.Errorf("%s: PROJECT_SOURCE = %q, want %q", name, env["PROJECT_SOURCE"], wantSource)
			}
		} else if mounts[sourcePath] == projectsVolume {
			t.Errorf("%s: mountSources is false, but the data volume is mounted", name)
		}
		for field, res := range map[string]struct {
			list corev1.ResourceList
			name corev1.ResourceName
		}{
			"memoryLimit": {c.Resources.Limits, corev1.ResourceMemory}, "memoryRequest": {c.Resources.Requests, corev1.ResourceMemory},
			"cpuLimit": {c.Resources.Limits, corev1.ResourceCPU}, "cpuRequest": {c.Resources.Requests, corev1.ResourceCPU},
		} {
			if s := str(dc, field); s != "" {
				want := resource.MustParse(s)
				if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == HelperEditorEnv }) {
					// The editor the helper runs inside it comes on top.
					extra := map[string]string{"cpuRequest": editorCPURequest, "cpuLimit": editorCPULimit, "memoryRequest": editorMemoryRequest, "memoryLimit": editorMemoryLimit}[field]
					want.Add(resource.MustParse(extra))
				}
				if got := res.list[res.name]; got.Cmp(want) != 0 {
					t.Errorf("%s: %s %s, want %s", name, field, got.String(), want.String())
				}
			}
		}
		if lines := postStart[name]; len(lines) > 0 {
			script, err := postStartScript(c)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else if script == "" {
				t.Errorf("%s: no postStart (hook or helper), want one running %q", name, lines)
			} else {
				rest := script
				for _, l := range lines {
					i := strings.Index(rest, strings.TrimRight(l, "\n"))
					if i < 0 {
						t.Errorf("%s: postStart %q does not run %q (in order)", name, script, l)
						break
					}
					rest = rest[i+len(l)-1:]
				}
			}
		} else if script, _ := postStartScript(c); script != "" {
			t.Errorf("%s: a postStart the devfile does not ask for", name)
		}

		// Endpoints by exposure.
		ports := map[int32]bool{}
		for _, p := range c.Ports {
			ports[p.ContainerPort] = true
		}
		for _, e := range asList(dc["endpoints"]) {
			em := e.(map[string]any)
			port := int32(em["targetPort"].(float64))
			exposure := firstNonEmpty(str(em, "exposure"), "public")
			if !initOnly[name] && !ports[port] {
				t.Errorf("%s: no container port %d", name, port)
			}
			inService := g.service != nil && slices.ContainsFunc(g.service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
			fromProxy, fromCluster := policyAdmits(g.policy, port)
			key := strconv.Itoa(int(port))
			switch exposure {
			case "public":
				if !inService || !publicPorts[key] || !fromProxy || fromCluster {
					t.Errorf("%s: public endpoint %d: service port %v, public %v, proxy may reach %v, others %v; want true, true, true, false", name, port, inService, publicPorts[key], fromProxy, fromCluster)
				}
				if name == mainName && mainPublic == "" {
					mainPublic = key
				}
				if anyPublic == "" {
					anyPublic = key
				}
			case "internal":
				if !inService || publicPorts[key] || fromProxy || !fromCluster {
					t.Errorf("%s: internal endpoint %d: service port %v, public %v, proxy may reach %v, others %v; want true, false, false, true", name, port, inService, publicPorts[key], fromProxy, fromCluster)
				}
			case "none":
				if inService || publicPorts[key] || fromProxy || fromCluster {
					t.Errorf("%s: endpoint %d with exposure none is reachable: service port %v, public %v, proxy %v, others %v", name, port, inService, publicPorts[key], fromProxy, fromCluster)
				}
			}
		}
	}
	for name, v := range volumes {
		checkVolume(t, g, spec, name, v)
	}
	want := firstNonEmpty(mainPublic, anyPublic)
	if editorFor != "" {
		want = strconv.Itoa(EditorPort) // the workspace URL opens the editor
	}
	if port, _, ok := d.PublicEndpoint(); ok != (want != "") || ok && strconv.Itoa(port) != want {
		t.Errorf("workspace URL port %d (%v), want the first public endpoint %q", port, ok, want)
	}

	if len(projects) > 0 {
		clone := containers[CloneContainerName]
		// The projects go where the main container's PROJECTS_ROOT is.
		if mainSourceVolume != "" && !slices.ContainsFunc(clone.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == mainSourceVolume && m.MountPath == "/projects" }) {
			t.Errorf("clone container mounts %v, want %s at /projects, as the main container has at its PROJECTS_ROOT", clone.VolumeMounts, mainSourceVolume)
		}
		var list []map[string]any
		for _, e := range clone.Env {
			if e.Name == ProjectsEnv {
				_ = json.Unmarshal([]byte(e.Value), &list)
			}
		}
		if len(list) != len(projects) {
			t.Errorf("clone container lists %d projects, want %d", len(list), len(projects))
		}
		for i := 0; i < len(list) && i < len(projects); i++ {
			pm := projects[i].(map[string]any)
			git, _ := pm["git"].(map[string]any)
			remotes, _ := git["remotes"].(map[string]any)
			gotRemotes, _ := list[i]["remotes"].(map[string]any)
			if list[i]["name"] != str(pm, "name") || fmt.Sprint(gotRemotes) != fmt.Sprint(remotes) {
				t.Errorf("project %d: clone gets %v, want %s from %v", i, list[i], str(pm, "name"), remotes)
			}
		}
	}
}

func checkVolume(t *testing.T, g generated, spec corev1.PodSpec, name string, v map[string]any) {
	t.Helper()
	size := "1Gi"
	if s, ok := v["size"].(string); ok && s != "" {
		size = s
	}
	want := resource.MustParse(size)
	i := slices.IndexFunc(spec.Volumes, func(pv corev1.Volume) bool { return pv.Name == name })
	if i < 0 {
		t.Errorf("volume %s: not in the pod", name)
		return
	}
	if v["ephemeral"] == true {
		if ed := spec.Volumes[i].EmptyDir; ed == nil || ed.SizeLimit == nil || ed.SizeLimit.Cmp(want) != 0 {
			t.Errorf("ephemeral volume %s: %+v, want an emptyDir of %s", name, spec.Volumes[i], size)
		}
		return
	}
	claim := spec.Volumes[i].PersistentVolumeClaim
	if claim == nil {
		t.Errorf("volume %s: not a claim", name)
		return
	}
	got := g.claims[claim.ClaimName].Spec.Resources.Requests[corev1.ResourceStorage]
	if got.Cmp(want) != 0 {
		t.Errorf("volume %s: claim %s of %s, want %s", name, claim.ClaimName, got.String(), size)
	}
}

// policyAdmits reports whether the NetworkPolicy lets the proxy namespace, and other namespaces,
// reach port, with Kubernetes' semantics: no policy, or one without the Ingress type, admits all; a
// rule with no ports admits every port and a rule with no from admits every source; a peer with an
// IP block or an empty namespace selector admits any namespace, and one with only a pod selector
// admits the workspace's own namespace (other workspaces in a shared one).
func policyAdmits(np *networkingv1.NetworkPolicy, port int32) (proxy, others bool) {
	if np == nil || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) && len(np.Spec.Ingress) == 0 {
		return true, true
	}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) > 0 && !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool {
			switch {
			case p.Port == nil:
				return true // every port
			case p.Port.Type != intstr.Int:
				return true // a named port: may be this one
			case p.EndPort != nil:
				return p.Port.IntVal <= port && port <= *p.EndPort
			}
			return p.Port.IntVal == port
		}) {
			continue
		}
		if len(rule.From) == 0 {
			return true, true // every source
		}
		for _, from := range rule.From {
			ns := from.NamespaceSelector
			switch {
			case from.IPBlock != nil:
				proxy, others = true, true
			case ns == nil:
				others = true // pods of the policy's own namespace
			case len(ns.MatchExpressions) == 0 && len(ns.MatchLabels) == 1 && ns.MatchLabels[namespaceNameLabel] == "hangar-proxy":
				proxy = true
			case len(ns.MatchLabels) == 0 && len(ns.MatchExpressions) == 1 && ns.MatchExpressions[0].Key == namespaceNameLabel &&
				ns.MatchExpressions[0].Operator == metav1.LabelSelectorOpNotIn && slices.Equal(ns.MatchExpressions[0].Values, []string{"hangar-proxy"}):
				others = true
			default:
				proxy, others = true, true // anything else may select both
			}
		}
	}
	return proxy, others
}

func asList(v any) []any { l, _ := v.([]any); return l }

func truthy(v any) bool { return v == true || v == "true" }

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// checkHelper checks the helper's part of a generated pod: with the helper, the tools init
// container installs the binary into the emptyDir the main container runs it from, the main
// container has the helper's environment, the <name>-ssh Secret read-only and the SSH port, which
// the proxy alone may reach and which is no Service port; without it, none of these.
func checkHelper(t *testing.T, g generated, spec corev1.PodSpec, mainName string, helper bool) {
	t.Helper()
	var main corev1.Container
	for _, c := range spec.Containers {
		if c.Name == mainName {
			main = c
		}
	}
	env := map[string]string{}
	for _, e := range main.Env {
		env[e.Name] = e.Value
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range main.VolumeMounts {
		mounts[m.Name] = m
	}
	hasPort := slices.ContainsFunc(main.Ports, func(p corev1.ContainerPort) bool {
		return p.ContainerPort == HelperSSHPort && p.Name == protocol.HelperSSHPortName && p.Protocol == corev1.ProtocolTCP
	})
	volume := func(name string) *corev1.Volume {
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == name {
				return &spec.Volumes[i]
			}
		}
		return nil
	}
	if !helper {
		if volume(toolsVolume) != nil || volume(sshVolume) != nil || env["HANGAR_HELPER_SSH_ADDR"] != "" {
			t.Errorf("no helper expected, but the pod has its volumes or environment")
		}
		return
	}
	fromProxy, fromCluster := policyAdmits(g.policy, HelperSSHPort)
	// The proxy finds the pod through the Service's EndpointSlice: the port is on the Service, by
	// its name, and only the NetworkPolicy's proxy rule admits it (checked below).
	if g.service == nil || !slices.ContainsFunc(g.service.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == HelperSSHPort && p.Name == protocol.HelperSSHPortName && p.TargetPort.IntValue() == HelperSSHPort
	}) {
		t.Errorf("the Service has no port %s (%d) for the proxy to find the helper by", protocol.HelperSSHPortName, HelperSSHPort)
	}
	if g.service != nil && slices.Contains(strings.Split(g.service.Annotations[protocol.AnnotationPublicPorts], ","), strconv.Itoa(HelperSSHPort)) {
		t.Errorf("the helper's port %d is a public port", HelperSSHPort)
	}
	tools := spec.InitContainers[0]
	if tools.Name != ToolsContainerName || !slices.Equal(tools.Command, []string{ToolsBinary, "install-self", HelperBinary}) ||
		len(tools.VolumeMounts) != 1 || tools.VolumeMounts[0].Name != toolsVolume || tools.VolumeMounts[0].MountPath != HelperDir {
		t.Errorf("first init container %s %q %v, want %s installing %s into %s", tools.Name, tools.Command, tools.VolumeMounts, ToolsContainerName, HelperBinary, HelperDir)
	}
	if v := volume(toolsVolume); v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
		t.Errorf("volume %s: %+v, want a limited emptyDir", toolsVolume, v)
	}
	if v := volume(sshVolume); v == nil || v.Secret == nil || v.Secret.SecretName != g.deployment.Name+"-ssh" {
		t.Errorf("volume %s: %+v, want the Secret %s-ssh", sshVolume, v, g.deployment.Name)
	}
	if m := mounts[toolsVolume]; m.MountPath != HelperDir {
		t.Errorf("main container mounts %s at %q, want %s", toolsVolume, m.MountPath, HelperDir)
	}
	if m := mounts[sshVolume]; m.MountPath != HelperSSHDir || !m.ReadOnly {
		t.Errorf("main container mounts %s as %+v, want read-only at %s", sshVolume, m, HelperSSHDir)
	}
	wantState := HelperDir + "/state"
	if m, ok := mounts[projectsVolume]; ok {
		wantState = m.MountPath + "/.hangar"
	}
	if env["HANGAR_HELPER_SSH_ADDR"] != ":60022" || env["HANGAR_HELPER_AUTHORIZED_KEYS_FILE"] != HelperSSHDir+"/authorized_keys" || env["HANGAR_HELPER_STATE_DIR"] != wantState {
		t.Errorf("main container's helper environment %q %q %q, want :60022, %s/authorized_keys, %s", env["HANGAR_HELPER_SSH_ADDR"], env["HANGAR_HELPER_AUTHORIZED_KEYS_FILE"], env["HANGAR_HELPER_STATE_DIR"], HelperSSHDir, wantState)
	}
	if !hasPort {
		t.Errorf("main container ports %v, want %d named %s", main.Ports, HelperSSHPort, protocol.HelperSSHPortName)
	}
	if !fromProxy || fromCluster {
		t.Errorf("the helper's port: proxy may reach %v, others %v; want true, false", fromProxy, fromCluster)
	}
}

// checkEditor checks the injected editor against the devfile: code-server from EditorImage with its
// own password off, on a public endpoint on EditorPort that only the proxy reaches, serving the
// volume at the PROJECTS_ROOT of the component that asked for it.
func checkEditor(t *testing.T, g generated, spec corev1.PodSpec, asking string) {
	t.Helper()
	var editor, from *corev1.Container
	for i, c := range spec.Containers {
		switch c.Name {
		case EditorContainerName:
			editor = &spec.Containers[i]
		case asking:
			from = &spec.Containers[i]
		}
	}
	if from == nil {
		t.Fatalf("containers %v: want %s", spec.Containers, asking)
	}
	inService := g.service != nil && slices.ContainsFunc(g.service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == EditorPort })
	public := g.service != nil && slices.Contains(strings.Split(g.service.Annotations[protocol.AnnotationPublicPorts], ","), strconv.Itoa(EditorPort))
	fromProxy, fromCluster := policyAdmits(g.policy, EditorPort)
	if !inService || !public || !fromProxy || fromCluster {
		t.Errorf("editor endpoint: service port %v, public %v, proxy may reach %v, others %v; want true, true, true, false", inService, public, fromProxy, fromCluster)
	}
	env := func(c *corev1.Container, name string) string {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
		return ""
	}
	root := env(from, "PROJECTS_ROOT")
	if root == "" {
		root = "/projects" // the asking container does not mount the sources; the editor does
	}
	if editor == nil {
		checkEditorInMain(t, spec, from, root, env(from, "PROJECT_SOURCE"))
		return
	}
	if editor.Image != EditorImage || len(editor.Command) == 0 || editor.Command[0] != EditorBinary || !strings.Contains(strings.Join(editor.Command, " "), "--auth none") {
		t.Errorf("editor %s %q, want %s running %s with --auth none", editor.Image, editor.Command, EditorImage, EditorBinary)
	}
	if len(editor.Ports) != 1 || editor.Ports[0].ContainerPort != EditorPort {
		t.Errorf("editor ports %v, want %d", editor.Ports, EditorPort)
	}
	if editor.ReadinessProbe == nil || editor.ReadinessProbe.HTTPGet == nil || editor.ReadinessProbe.HTTPGet.Port.IntValue() != EditorPort {
		t.Errorf("editor readiness probe %+v, want an HTTP GET on %d", editor.ReadinessProbe, EditorPort)
	}
	if env(editor, "PROJECTS_ROOT") != root || editor.Command[len(editor.Command)-1] != path.Join(root, strings.TrimPrefix(env(editor, "PROJECT_SOURCE"), root)) {
		t.Errorf("editor PROJECTS_ROOT %q, opens %q; want %q and its PROJECT_SOURCE", env(editor, "PROJECTS_ROOT"), editor.Command[len(editor.Command)-1], root)
	}
	mounted := map[string]string{}
	for _, c := range []*corev1.Container{editor, from} {
		for _, m := range c.VolumeMounts {
			if m.MountPath == root {
				mounted[c.Name] = m.Name
			}
		}
	}
	if want := mounted[asking]; mounted[EditorContainerName] == "" || want != "" && mounted[EditorContainerName] != want {
		t.Errorf("editor mounts %q at %s, want the volume %s has there (%q)", mounted[EditorContainerName], root, asking, want)
	}
}

// checkEditorInMain: the main container's helper runs the editor from the bundle the editor's init
// container copies into the pod, on the editor's port, opening PROJECT_SOURCE.
func checkEditorInMain(t *testing.T, spec corev1.PodSpec, main *corev1.Container, root, source string) {
	t.Helper()
	var e workspace.EditorProcess
	for _, v := range main.Env {
		if v.Name == HelperEditorEnv {
			if err := json.Unmarshal([]byte(v.Value), &e); err != nil {
				t.Fatalf("%s: %v", HelperEditorEnv, err)
			}
		}
	}
	if len(main.Command) < 2 || main.Command[0] != HelperBinary || len(e.Argv) == 0 || e.Argv[0] != EditorDir+"/bin/node" ||
		!strings.Contains(strings.Join(e.Argv, " "), "--auth none") || e.Port != EditorPort {
		t.Fatalf("%s runs %q with the editor %+v, want the helper running %s/bin/node with --auth none on %d", main.Name, main.Command, e, EditorDir, EditorPort)
	}
	if source == "" {
		source = root
	}
	if last := e.Argv[len(e.Argv)-1]; last != source {
		t.Errorf("the editor opens %q, want PROJECT_SOURCE %q", last, source)
	}
	if !slices.ContainsFunc(main.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == EditorPort }) {
		t.Errorf("%s ports %v, want %d", main.Name, main.Ports, EditorPort)
	}
	if !slices.ContainsFunc(main.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == editorVolume && m.MountPath == EditorDir && m.ReadOnly
	}) {
		t.Errorf("%s mounts %v, want %s read-only at %s", main.Name, main.VolumeMounts, editorVolume, EditorDir)
	}
	var install *corev1.Container
	for i, c := range spec.InitContainers {
		if c.Name == EditorInstallContainerName {
			install = &spec.InitContainers[i]
		}
	}
	if install == nil || install.Image != EditorImage || !slices.ContainsFunc(install.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == editorVolume }) {
		t.Errorf("editor install container %+v, want %s from %s writing %s", install, EditorInstallContainerName, EditorImage, editorVolume)
	}
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == editorVolume && v.EmptyDir != nil }) {
		t.Errorf("volumes %v, want the emptyDir %s", spec.Volumes, editorVolume)
	}
}

// postStartScript is what runs after c starts: its postStart hook's script, or the postStart
// commands given to its helper (one after another), never both.
func postStartScript(c corev1.Container) (string, error) {
	var hook string
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if c.Lifecycle.PostStart.Exec == nil {
			return "", fmt.Errorf("postStart hook %+v is not exec", c.Lifecycle.PostStart)
		}
		cmd := c.Lifecycle.PostStart.Exec.Command
		if len(cmd) != 3 || cmd[0] != "/bin/sh" || cmd[1] != "-c" {
			return "", fmt.Errorf("postStart hook %q is not /bin/sh -c", cmd)
		}
		hook = cmd[2]
	}
	cmds, err := helperPostStart(c)
	if err != nil {
		return "", err
	}
	if hook != "" && len(cmds) > 0 {
		return "", fmt.Errorf("both a postStart hook and the helper's postStart")
	}
	if hook != "" {
		return hook, nil
	}
	if len(cmds) > 0 && (len(c.Command) < 2 || c.Command[0] != HelperBinary) {
		return "", fmt.Errorf("postStart commands given to a container the helper does not run: %q", c.Command)
	}
	parts := make([]string, 0, len(cmds))
	for _, cmd := range cmds {
		if _, err := exec.Command("/bin/sh", "-n", "-c", cmd.CommandLine).CombinedOutput(); err != nil {
			return "", fmt.Errorf("postStart command %q: /bin/sh -n refuses it: %v", cmd.ID, err)
		}
		parts = append(parts, "("+cmd.CommandLine+"\n)")
	}
	return strings.Join(parts, " && "), nil
}

// helperPostStart returns the postStart commands the generator gave c's helper.
func helperPostStart(c corev1.Container) ([]workspace.PostStartCommand, error) {
	for _, e := range c.Env {
		if e.Name == HelperPostStartEnv {
			var cmds []workspace.PostStartCommand
			if err := json.Unmarshal([]byte(e.Value), &cmds); err != nil {
				return nil, fmt.Errorf("%s: %v", HelperPostStartEnv, err)
			}
			return cmds, nil
		}
	}
	return nil, nil
}
