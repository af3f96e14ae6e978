package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// benchTimeline watches the cluster while a benchmark runs and notes, per workspace namespace, when
// each step of the cluster's own pipeline (Deployment → ReplicaSet → Pod → claim bound → scheduled
// → Ready, and back down on a stop) was first seen. Its report says which step a burst waits on:
// the figures of issue 8 were first missed because of the cluster's controllers, not the agent.
type benchTimeline struct {
	match func(namespace string) bool
	stop  chan struct{}

	mu    sync.Mutex
	begin time.Time
	first map[string]map[string]time.Duration // step → namespace → first seen, since begin
}

// Steps the timeline notes.
const (
	tlNamespace      = "namespace created"
	tlDeployment     = "Deployment created"
	tlReplicaSet     = "ReplicaSet created"
	tlPod            = "Pod created"
	tlClaimBound     = "claim Bound"
	tlScheduled      = "Pod scheduled"
	tlReady          = "Pod Ready"
	tlAvailable      = "Deployment available"
	tlDeploymentZero = "Deployment spec.replicas 0"
	tlReplicaSetZero = "ReplicaSet spec.replicas 0"
	tlPodDeleting    = "Pod deleting"
	tlPodGone        = "Pod gone"
	tlDeploymentDown = "Deployment status.replicas 0"
)

var (
	benchCreateSteps = []string{tlNamespace, tlDeployment, tlReplicaSet, tlPod, tlClaimBound, tlScheduled, tlReady, tlAvailable}
	benchStopSteps   = []string{tlDeploymentZero, tlReplicaSetZero, tlPodDeleting, tlPodGone, tlDeploymentDown}
)

// startBenchTimeline starts watching the namespaces match accepts; it stops with the benchmark.
func startBenchTimeline(b *testing.B, cluster *kubetest.Cluster, match func(namespace string) bool) *benchTimeline {
	tl := &benchTimeline{match: match, stop: make(chan struct{}), begin: time.Now(), first: map[string]map[string]time.Duration{}}
	f := informers.NewSharedInformerFactory(cluster.Client, 0)
	add := func(inf cache.SharedIndexInformer, onAdd, onChange, onDelete func(obj any)) {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if onAdd != nil {
					onAdd(obj)
				}
				onChange(obj)
			},
			UpdateFunc: func(_, obj any) { onChange(obj) },
			DeleteFunc: func(obj any) {
				if onDelete != nil {
					if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
						obj = d.Obj
					}
					onDelete(obj)
				}
			},
		}); err != nil {
			b.Fatal(err)
		}
	}
	add(f.Core().V1().Namespaces().Informer(), func(obj any) {
		tl.note(tlNamespace, obj.(*corev1.Namespace).Name)
	}, func(any) {}, nil)
	add(f.Apps().V1().Deployments().Informer(), func(obj any) {
		tl.note(tlDeployment, obj.(*appsv1.Deployment).Namespace)
	}, func(obj any) {
		d := obj.(*appsv1.Deployment)
		if d.Status.AvailableReplicas > 0 {
			tl.note(tlAvailable, d.Namespace)
		}
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			tl.note(tlDeploymentZero, d.Namespace)
			if d.Status.Replicas == 0 {
				tl.note(tlDeploymentDown, d.Namespace)
			}
		}
	}, nil)
	add(f.Apps().V1().ReplicaSets().Informer(), func(obj any) {
		tl.note(tlReplicaSet, obj.(*appsv1.ReplicaSet).Namespace)
	}, func(obj any) {
		rs := obj.(*appsv1.ReplicaSet)
		if rs.Spec.Replicas != nil && *rs.Spec.Replicas == 0 {
			tl.note(tlReplicaSetZero, rs.Namespace)
		}
	}, nil)
	add(f.Core().V1().Pods().Informer(), func(obj any) {
		tl.note(tlPod, obj.(*corev1.Pod).Namespace)
	}, func(obj any) {
		p := obj.(*corev1.Pod)
		if p.Spec.NodeName != "" {
			tl.note(tlScheduled, p.Namespace)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				tl.note(tlReady, p.Namespace)
			}
		}
		if p.DeletionTimestamp != nil {
			tl.note(tlPodDeleting, p.Namespace)
		}
	}, func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			tl.note(tlPodGone, p.Namespace)
		}
	})
	add(f.Core().V1().PersistentVolumeClaims().Informer(), func(any) {}, func(obj any) {
		c := obj.(*corev1.PersistentVolumeClaim)
		if c.Status.Phase == corev1.ClaimBound {
			tl.note(tlClaimBound, c.Namespace)
		}
	}, nil)
	f.Start(tl.stop)
	for typ, ok := range f.WaitForCacheSync(tl.stop) {
		if !ok {
			b.Fatalf("timeline: %v did not sync", typ)
		}
	}
	b.Cleanup(func() { close(tl.stop) })
	return tl
}

// reset forgets what was noted and counts from begin.
func (tl *benchTimeline) reset(begin time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.begin, tl.first = begin, map[string]map[string]time.Duration{}
}

func (tl *benchTimeline) note(step, namespace string) {
	if !tl.match(namespace) {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	m := tl.first[step]
	if m == nil {
		m = map[string]time.Duration{}
		tl.first[step] = m
	}
	if _, ok := m[namespace]; !ok {
		m[namespace] = now.Sub(tl.begin)
	}
}

// report lists each step: how many namespaces reached it, and when the first, half and all of
// those had.
func (tl *benchTimeline) report(steps []string) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var lines []string
	for _, step := range steps {
		var ds []time.Duration
		for _, d := range tl.first[step] {
			ds = append(ds, d)
		}
		if len(ds) == 0 {
			lines = append(lines, fmt.Sprintf("%s: none", step))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %d, first %v, half %v, all %v", step, len(ds),
			benchPercentile(ds, 0).Round(10*time.Millisecond), benchPercentile(ds, 0.5).Round(10*time.Millisecond),
			benchPercentile(ds, 1).Round(10*time.Millisecond)))
	}
	return strings.Join(lines, "; ")
}
