package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestImageBuildPodOnTheRealNode: the objects generated for a workspace whose definition builds
// its image are admitted by the real API server (its namespace enforces the "baseline" Pod
// Security Standard, as generated), and on the real node the build's init container runs as uid 0,
// its prepare and push containers (which hold the push credential) and the main container as the
// workspace's non-root user. The same pod is refused in a namespace
// that enforces "restricted", because of the build container only.
//
// `hangar image-build` and a registry are not part of this test: the three build containers'
// commands are replaced by `id -u`, which writes its uid as its termination message, and the main container runs
// the base image instead of the build's result. Everything else is as generated.
func TestImageBuildPodOnTheRealNode(t *testing.T) {
	c := kubetest.Start(t)
	name, agentID := unique("imgbuild"), "apply-imgbuild"
	ns := "hangar-" + name
	deleteNamespaceAtEnd(t, c, ns)
	devfileText := `schemaVersion: 2.2.0
metadata:
  name: devcontainer
attributes:
  hangar.dev/definition: devcontainer.json
  hangar.dev/image-build:
    base: ` + kubetest.WorkspaceImage + `
    features:
      - ref: ghcr.io/devcontainers/features/node:1
components:
  - name: devcontainer
    attributes:
      hangar.dev/main: true
    container:
      image: ` + kubetest.WorkspaceImage + `
      mountSources: true
`
	d, err := devfile.Parse([]byte(devfileText))
	if err != nil {
		t.Fatal(err)
	}
	cfg := workspace.AgentConfig{DNSZone: "workspaces.example.com", ImageBuild: workspace.ImageBuild{
		Registry: "registry.hangar-test.svc:5000/hangar/builds", InsecureRegistries: []string{"registry.hangar-test.svc:5000"},
		Resources: workspace.Resources{Requests: workspace.ResourceList{CPU: "10m", Memory: "32Mi"}, Limits: workspace.ResourceList{CPU: "500m", Memory: "256Mi"}},
	}}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	config, err := devfile.Generate(d, devfile.Params{
		WorkspaceID: "0c7e5d2a-41f6-4b8e-9a3d-6e2f1b0c9d84", WorkspaceName: name, Owner: "alice", AgentID: agentID,
		Namespace: ns, DesiredState: workspace.Running, Agent: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ParseConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	var template corev1.PodTemplateSpec
	for i, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			if l := o.GetLabels(); l["pod-security.kubernetes.io/enforce"] != "baseline" || l["pod-security.kubernetes.io/warn"] != "restricted" {
				t.Fatalf("namespace labels %v: want enforce baseline, warn restricted", l)
			}
		case "Deployment":
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep); err != nil {
				t.Fatal(err)
			}
			spec := &dep.Spec.Template.Spec
			var names []string
			for _, ic := range spec.InitContainers {
				names = append(names, ic.Name)
			}
			if want := []string{devfile.ToolsContainerName, protocol.ImagePrepareContainerName, protocol.ImageBuildContainerName, protocol.ImagePushContainerName}; len(names) < 4 || !slices.Equal(names[:4], want) {
				t.Fatalf("init containers %q: want %q first", names, want)
			}
			build := &spec.InitContainers[2]
			if !strings.HasPrefix(strings.Join(build.Command, " "), "/hangar/bin/hangar image-build run --spec /hangar/build/spec.json --dir /hangar/work") ||
				!strings.HasPrefix(strings.Join(spec.InitContainers[3].Command, " "), devfile.ToolsBinary+" image-build push --spec /hangar/build/spec.json --image registry.hangar-test.svc:5000/hangar/builds:") ||
				spec.Containers[0].Image != spec.InitContainers[3].Command[6] {
				t.Fatalf("build command %q, push command %q, main image %q: want the build, then the push of the main container's image", build.Command, spec.InitContainers[3].Command, spec.Containers[0].Image)
			}
			// Only in this test: see the function's comment.
			for i := 1; i <= 3; i++ {
				spec.InitContainers[i].Command = []string{"/bin/sh", "-c", "id -u > /dev/termination-log"}
			}
			spec.Containers[0].Image = kubetest.WorkspaceImage
			template = dep.Spec.Template
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&dep)
			if err != nil {
				t.Fatal(err)
			}
			objs[i] = &unstructured.Unstructured{Object: u}
		}
	}
	a := newApplier(t, c, agentID)
	a.apply(t, objs)

	ctx := context.Background()
	var pod corev1.Pod
	kubetest.Eventually(t, 3*time.Minute, "the workspace pod runs, after its build", func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods (a pod the API server refused is never created)", len(pods.Items))
		}
		pod = pods.Items[0]
		if f := PodFailure([]*corev1.Pod{&pod}, time.Now()); f != nil {
			t.Fatalf("the pod failed: %s: %s", f.Reason, f.Message)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == "devcontainer" && cs.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("phase %s", pod.Status.Phase)
	})
	uids := map[string]string{}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.State.Terminated != nil {
			uids[cs.Name] = strings.TrimSpace(cs.State.Terminated.Message)
		}
	}
	if uids[protocol.ImageBuildContainerName] != "0" {
		t.Errorf("the build container ran as uid %q, want 0 (root in its own root filesystem)", uids[protocol.ImageBuildContainerName])
	}
	// The containers with the registry credential run no user code, and not as root.
	for _, n := range []string{protocol.ImagePrepareContainerName, protocol.ImagePushContainerName} {
		if uids[n] != "5001" {
			t.Errorf("%s ran as uid %q, want the workspace's 5001", n, uids[n])
		}
	}
	var mainUID string
	kubetest.Eventually(t, 30*time.Second, "id -u in the main container", func(ctx context.Context) error {
		out, errOut, err := c.Exec(ctx, ns, pod.Name, "devcontainer", "id", "-u")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		mainUID = strings.TrimSpace(out)
		return nil
	})
	if mainUID != "5001" {
		t.Errorf("the main container runs as uid %q, want the workspace's 5001", mainUID)
	}

	// The same pod in a namespace that enforces "restricted" is refused, naming the build container
	// only: the workspace's own containers still meet "restricted".
	restricted := unique("imgbuild-restricted")
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteNamespaceAtEnd(t, c, restricted)
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: restricted}, Spec: template.Spec}
	probe.Spec.ServiceAccountName = ""
	_, err = c.Client.CoreV1().Pods(restricted).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `container "hangar-image-build"`) {
		t.Fatalf("under restricted: got %v, want Forbidden naming the build container", err)
	}
	for _, other := range []string{"hangar-tools", protocol.ImagePrepareContainerName, protocol.ImagePushContainerName, "devcontainer"} {
		if strings.Contains(err.Error(), `"`+other+`"`) {
			t.Errorf("restricted also refuses %s: %v", other, err)
		}
	}
}
