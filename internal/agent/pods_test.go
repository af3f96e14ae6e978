package agent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/protocol"
)

func TestPodFailure(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	pull := func(reason, msg string) *corev1.Pod {
		p := waiting(reason, msg)
		p.Status.ContainerStatuses[0].Image = "registry.example.com/x:1"
		return p
	}
	at := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
	unschedulableSince := func(d time.Duration, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg, LastTransitionTime: metav1.NewTime(at.Add(-d))}}}}
	}
	unschedulable := unschedulableSince(UnschedulableGrace, "0/1 nodes are available: 1 Insufficient memory.")
	justUnschedulable := unschedulableSince(UnschedulableGrace-time.Second, `0/2 nodes are available: persistentvolumeclaim "dev-data" not found.`)
	terminated := func(init bool, code int32, reason, msg string) *corev1.Pod {
		st := []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}}}
		if init {
			return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: st}}
		}
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: st}}
	}
	backOffAfterExit := waiting("CrashLoopBackOff", "back-off 10s")
	backOffAfterExit.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3, Message: "no config\n"}
	cloneDoneMainCrashed := terminated(true, 0, "Completed", "")
	cloneDoneMainCrashed.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	buildFailed := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
		{Name: "hangar-tools", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
		{Name: "hangar-image-build", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "feature ghcr.io/devcontainers/features/node:1: install.sh\nE: Unable to locate package nodejs\nimage build: feature ghcr.io/devcontainers/features/node:1: install.sh exited with code 100\n"}}},
	}}}
	// prepare and push fail after the containers before them completed.
	phaseFailed := func(name, message string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "hangar-tools", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
			{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: message}}},
		}}}
	}
	prepareFailed := phaseFailed("hangar-image-prepare", "building r:1 from b:1: 0 steps, 1 features\nfeature ghcr.io/devcontainers/features/docker-in-docker:2 (docker-in-docker) needs privileges\n")
	pushFailed := phaseFailed("hangar-image-push", "pushing r:1\npush r:1: the registry answered 401 Unauthorized\n")
	buildBackOff := waiting("CrashLoopBackOff", "back-off 10s restarting failed container=hangar-image-build")
	buildBackOff.Status.InitContainerStatuses, buildBackOff.Status.ContainerStatuses = buildBackOff.Status.ContainerStatuses, nil
	buildBackOff.Status.InitContainerStatuses[0].Name = "hangar-image-build"
	buildBackOff.Status.InitContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: "pushing\nimage build: push registry.test:5000/b:1: unauthorized"}
	deleting := waiting("CrashLoopBackOff", "x")
	now := metav1.NewTime(time.Now())
	deleting.DeletionTimestamp = &now
	tests := []struct {
		name   string
		pods   []*corev1.Pod
		reason string
		msg    string
	}{
		{"none", nil, "", ""},
		{"image build failed: its last log line", []*corev1.Pod{buildFailed}, "Init:Error",
			"init container hangar-image-build (the workspace's image build: running the definition's steps and features) exited with code 1: image build: feature ghcr.io/devcontainers/features/node:1: install.sh exited with code 100"},
		{"image build in back-off", []*corev1.Pod{buildBackOff}, "CrashLoopBackOff",
			// The kubelet's back-off text is left out: the build's reason says it all.
			"container hangar-image-build (the workspace's image build: running the definition's steps and features) exited with code 1: image build: push registry.test:5000/b:1: unauthorized"},
		{"image build's prepare failed", []*corev1.Pod{prepareFailed}, "Init:Error",
			"init container hangar-image-prepare (the workspace's image build: fetching the base image and the features) exited with code 1: feature ghcr.io/devcontainers/features/docker-in-docker:2 (docker-in-docker) needs privileges"},
		{"image build's push failed", []*corev1.Pod{pushFailed}, "Init:Error",
			"init container hangar-image-push (the workspace's image build: pushing the image) exited with code 1: push r:1: the registry answered 401 Unauthorized"},
		{"creating", []*corev1.Pod{waiting("ContainerCreating", "")}, "", ""},
		{"crash loop", []*corev1.Pod{waiting("CrashLoopBackOff", "back-off 5m0s")}, "CrashLoopBackOff", "container main: back-off 5m0s"},
		{"image pull", []*corev1.Pod{pull("ImagePullBackOff", `Back-off pulling image "registry.example.com/x:1"`)}, "ImagePullBackOff",
			"container main: the image registry.example.com/x:1 could not be pulled (the kubelet tries again after a back-off). " +
				"Check its name and the registry's access; on a cluster without a registry (scripts/kube-up's), " + LoadImageHint},
		{"back-off on a cluster without a registry", []*corev1.Pod{pull("ImagePullBackOff", `Back-off pulling image "registry.example.com/x:1": ErrImagePull: failed to pull and unpack image "registry.example.com/x:1": failed to resolve reference "registry.example.com/x:1": failed to do request: Head "http://127.0.0.1:1/v2/x/manifests/1?ns=registry.example.com": dial tcp 127.0.0.1:1: connect: connection refused`)},
			"ImagePullBackOff", "container main: the image registry.example.com/x:1 is not on the node, and this cluster pulls from no registry: " + LoadImageHint},
		{"err image pull", []*corev1.Pod{pull("ErrImagePull", "not found")}, "ErrImagePull", "container main: the image registry.example.com/x:1 could not be pulled: not found"},
		{"no registry", []*corev1.Pod{pull("ErrImagePull", `failed to pull and unpack image "registry.example.com/x:1": failed to resolve reference "registry.example.com/x:1": failed to do request: Head "http://127.0.0.1:1/v2/x/manifests/1?ns=registry.example.com": dial tcp 127.0.0.1:1: connect: connection refused`)},
			"ErrImagePull", "container main: the image registry.example.com/x:1 is not on the node, and this cluster pulls from no registry: load it onto the node with scripts/kube-load-image DIR ARCHIVE (DIR is the cluster's directory; docker save or skopeo copy make an ARCHIVE)"},
		{"unschedulable", []*corev1.Pod{unschedulable}, "Unschedulable", "0/1 nodes are available: 1 Insufficient memory."},
		{"unschedulable for less than the grace", []*corev1.Pod{justUnschedulable}, "", ""},
		{"image never pulled", []*corev1.Pod{waiting("ErrImageNeverPull", "image not present")}, "ErrImageNeverPull", "container main: image not present"},
		{"crash loop with the last exit", []*corev1.Pod{backOffAfterExit}, "CrashLoopBackOff", "container main: back-off 10s; exited with code 3: no config"},
		{"container exited with an error", []*corev1.Pod{terminated(false, 3, "Error", "")}, "Error", "container c exited with code 3"},
		{"init container failed", []*corev1.Pod{terminated(true, 1, "Error", "clone app: repository not found")}, "Init:Error", "init container c exited with code 1: clone app: repository not found"},
		{"init container done, container killed", []*corev1.Pod{cloneDoneMainCrashed}, "OOMKilled", "container main exited with code 137"},
		{"init container done", []*corev1.Pod{terminated(true, 0, "Completed", "")}, "", ""},
		{"container exited cleanly", []*corev1.Pod{terminated(false, 0, "Completed", "")}, "", ""},
		{"a pod being deleted does not count", []*corev1.Pod{deleting}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := PodFailure(tc.pods, at)
			if tc.reason == "" {
				if f != nil {
					t.Fatalf("got %+v, want none", f)
				}
				return
			}
			if f == nil || f.Reason != tc.reason || f.Message != tc.msg {
				t.Fatalf("got %+v, want %s: %s", f, tc.reason, tc.msg)
			}
		})
	}
}

func TestParseInventoryAndConfig(t *testing.T) {
	refs := ParseInventory("apps/v1/Deployment/ns/w\nv1/Namespace//ns\n\nnetworking.k8s.io/v1/NetworkPolicy/ns/w\n")
	if len(refs) != 3 || refs[0] != (Ref{"apps/v1", "Deployment", "ns", "w"}) || refs[1] != (Ref{"v1", "Namespace", "", "ns"}) ||
		refs[2] != (Ref{"networking.k8s.io/v1", "NetworkPolicy", "ns", "w"}) {
		t.Fatalf("refs %+v", refs)
	}
	objs, err := ParseConfig("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\n")
	if err != nil || len(objs) != 2 || objs[1].GetKind() != "ConfigMap" || objs[1].GetNamespace() != "ns" {
		t.Fatalf("objs %v %v", objs, err)
	}
	if _, err := ParseConfig("kind: [unclosed"); err == nil {
		t.Fatal("bad YAML accepted")
	}
}

// TestPodAlerts: a container restarted after the kernel killed it for lack of memory, or being
// killed now, and a pod evicted are alerts, each once (a container's current and last
// termination the same kill), oldest first, at most protocol.MaxPodAlerts; a container that ended
// otherwise is none.
func TestPodAlerts(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	oom := func(s int) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(at.Add(time.Duration(s) * time.Second))}
	}
	running := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "dev", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: oom(5)}},
		{Name: "db", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}},
		{Name: "side", State: corev1.ContainerState{Terminated: oom(2)}, LastTerminationState: corev1.ContainerState{Terminated: oom(2)}},
	}}}
	evicted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dev-abc", CreationTimestamp: metav1.NewTime(at.Add(-time.Hour))},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: ephemeral-storage.",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(at.Add(time.Second))}}}}
	got := PodAlerts([]*corev1.Pod{running, evicted})
	var lines []string
	for _, a := range got {
		lines = append(lines, a.Kind+" "+a.Subject+" "+a.At.Format("15:04:05")+" "+a.Message)
	}
	want := []string{
		"evicted dev-abc 10:00:01 pod dev-abc was evicted: The node was low on resource: ephemeral-storage.",
		"oom-killed side 10:00:02 container side was killed for lack of memory (exit code 137)",
		"oom-killed dev 10:00:05 container dev was killed for lack of memory (exit code 137)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("alerts:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	var many []*corev1.Pod
	for i := range protocol.MaxPodAlerts + 3 {
		many = append(many, &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "dev", LastTerminationState: corev1.ContainerState{Terminated: oom(i)}}}}})
	}
	if got := PodAlerts(many); len(got) != protocol.MaxPodAlerts || !got[0].At.Equal(at.Add(3*time.Second)) {
		t.Fatalf("%d alerts from %d kills, the first at %v", len(got), len(many), got[0].At)
	}
}
