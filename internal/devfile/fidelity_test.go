package devfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hangar-dev/hangar/internal/workspace"
)

func generatedPod(t *testing.T, src string, mutate func(*Params)) (corev1.PodSpec, generated) {
	t.Helper()
	p := defaultParams(t)
	if mutate != nil {
		mutate(&p)
	}
	out, err := Generate(mustParse(t, []byte(src)), p)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	g := readBack(t, out)
	return g.deployment.Spec.Template.Spec, g
}

func TestEventsBecomeInitContainersAndHooks(t *testing.T) {
	spec, _ := generatedPod(t, `schemaVersion: 2.2.0
components:
  - name: main
    container: {image: busybox, env: [{name: A, value: "1"}]}
  - name: seed
    container: {image: seeder, command: [/seed], memoryLimit: 64Mi}
commands:
  - id: seed-data
    apply: {component: seed}
  - id: warm
    exec: {component: main, commandLine: make warm, workingDir: "${PROJECT_SOURCE}/app"}
  - id: hello
    exec: {component: main, commandLine: echo "hi", env: [{name: WHO, value: "a b"}]}
  - id: both
    composite: {commands: [warm, hello]}
  - id: save
    exec: {component: main, commandLine: git stash}
events:
  preStart: [seed-data, warm]
  postStart: [both]
  preStop: [save]
`, nil)
	if len(spec.InitContainers) != 3 || spec.InitContainers[0].Name != ToolsContainerName || spec.InitContainers[1].Name != "seed" || spec.InitContainers[2].Name != "warm" {
		t.Fatalf("init containers %+v, want the tools, seed, then warm", spec.InitContainers)
	}
	spec.InitContainers = spec.InitContainers[1:] // the helper's is checked by TestCorpus (checkHelper)
	seed := spec.InitContainers[0]
	if seed.Image != "seeder" || seed.Command[0] != "/seed" || seed.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("seed init container = %+v, want the component's image, command and resources", seed)
	}
	if got := spec.InitContainers[1].Command; got[0] != "/bin/sh" || got[2] != `cd "${PROJECT_SOURCE}/app" && make warm` || spec.InitContainers[1].Image != "busybox" {
		t.Errorf("warm init container = %q, want make warm in its directory with main's image", got)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("containers %+v, want main only (seed runs as an init container)", spec.Containers)
	}
	// postStart runs in the helper, once per start, each command the script a hook would run.
	lc := spec.Containers[0].Lifecycle
	if lc != nil && lc.PostStart != nil {
		t.Errorf("a postStart hook on the helper's container: %+v", lc.PostStart)
	}
	cmds, err := helperPostStart(spec.Containers[0])
	want := []workspace.PostStartCommand{{ID: "warm", CommandLine: `cd "${PROJECT_SOURCE}/app" && make warm`}, {ID: "hello", CommandLine: `export WHO="a b" && echo "hi"`}}
	if err != nil || !reflect.DeepEqual(cmds, want) {
		t.Errorf("the helper's postStart = %+v (%v), want %+v", cmds, err, want)
	}
	if lc == nil || lc.PreStop == nil || lc.PreStop.Exec.Command[2] != "git stash" {
		t.Errorf("preStop = %+v, want git stash", lc)
	}
}

func TestOverridesAreApplied(t *testing.T) {
	spec, g := generatedPod(t, `schemaVersion: 2.2.0
attributes:
  pod-overrides: {metadata: {annotations: {my-note: ""}}, spec: {securityContext: {fsGroup: 2000}}}
components:
  - name: main
    attributes:
      container-overrides: {resources: {limits: {cpu: 1500m, memory: 3Gi}}, securityContext: {runAsUser: 1001, runAsGroup: 1001}}
    container: {image: busybox, memoryLimit: 1Gi}
`, nil)
	c := spec.Containers[0]
	if *c.SecurityContext.RunAsUser != 1001 || *c.SecurityContext.RunAsGroup != 1001 || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("security context %+v, want user and group 1001, still non-root", c.SecurityContext)
	}
	if c.Resources.Limits.Memory().String() != "3Gi" || c.Resources.Limits.Cpu().String() != "1500m" {
		t.Errorf("limits %v, want memory 3Gi (the override wins) and cpu 1500m", c.Resources.Limits)
	}
	if *spec.SecurityContext.FSGroup != 2000 {
		t.Errorf("fsGroup %d, want 2000", *spec.SecurityContext.FSGroup)
	}
	if _, ok := g.deployment.Spec.Template.Annotations["my-note"]; !ok {
		t.Errorf("pod annotations %v lack the override's", g.deployment.Spec.Template.Annotations)
	}
}

func TestSchedulingAndPullPolicy(t *testing.T) {
	spec, _ := generatedPod(t, string(Default()), func(p *Params) {
		p.Agent.NodeSelector = map[string]string{"type": "kwok"}
		p.Agent.Tolerations = []workspace.Toleration{{Key: "kwok.x-k8s.io/node", Operator: "Equal", Value: "fake", Effect: "NoSchedule"}}
	})
	if spec.NodeSelector["type"] != "kwok" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "kwok.x-k8s.io/node" || spec.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("nodeSelector %v, tolerations %+v; want the agent's", spec.NodeSelector, spec.Tolerations)
	}
	if spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %q, want IfNotPresent", spec.Containers[0].ImagePullPolicy)
	}
}

// TestDefaultDevfileFitsCaps: a workspace created without a devfile fits any caps the agent sets
// (the defaults are kept within them), and a devfile over the caps is refused with the caps and the
// values, each with where it came from.
func TestDefaultDevfileFitsCaps(t *testing.T) {
	p := defaultParams(t)
	p.Agent.MaxResources = workspace.Resources{Limits: workspace.ResourceList{CPU: "1", Memory: "1Gi"}}
	if _, err := Generate(mustParse(t, Default()), p); err != nil {
		t.Fatalf("the default devfile does not fit caps of 1 CPU and 1Gi: %v", err)
	}
	if w := CheckAgentCaps(p.Agent); len(w) != 2 || !strings.Contains(w[0], "max_resources_per_workspace limits.cpu 1 is below default_resources_per_workspace_container limits.cpu 2") {
		t.Errorf("CheckAgentCaps = %q, want warnings about limits.cpu and limits.memory", w)
	}
	if w := CheckAgentCaps(workspace.AgentConfig{}.WithDefaults()); w != nil {
		t.Errorf("CheckAgentCaps on the defaults = %q, want none", w)
	}
	two := mustParse(t, []byte("schemaVersion: 2.2.0\ncomponents:\n- name: a\n  container: {image: busybox, cpuLimit: 700m}\n- name: b\n  container: {image: busybox}\n"))
	_, err := Generate(two, p)
	var ve *workspace.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	msg := ve.Problems[0].Detail
	for _, want := range []string{"limits.cpu add up to 1700m", "a 700m (devfile cpuLimit)", "b 1 (agent default limits.cpu)", "max_resources_per_workspace limits.cpu of 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "devfile values") {
		t.Errorf("message %q blames devfile values", msg)
	}
}
