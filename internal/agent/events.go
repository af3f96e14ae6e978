package agent

import (
	"errors"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/hangar-dev/hangar/internal/agent/errtrack"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// EventRecorder records Kubernetes Events (events.k8s.io/v1, also listed as core/v1 Events).
type EventRecorder = events.EventRecorder

// Reasons of the Events the agent records on a workspace's Deployment (docs/architecture.md,
// "Kubernetes visibility"). kubectl describe deployment and kubectl events show them.
const (
	ReasonApplyFailed = "ApplyFailed" // the workspace's config did not apply; the note is the error
	ReasonPodFailed   = "PodFailed"   // the workspace's pod cannot run; the note is why (pods.go)
)

// EventsController is the reporting controller of the agent's Events.
const EventsController = "hangar.dev/agent"

// NewEventRecorder starts recording Events through k's client (its rate limiter); stop ends it.
// The broadcaster folds repeats of an Event into a series (one object, its count patched), so a
// workspace that fails every cycle does not flood the namespace.
func NewEventRecorder(k *Kube) (rec EventRecorder, stop func()) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: k.Clientset.EventsV1()})
	done := make(chan struct{})
	b.StartRecordingToSink(done)
	return b.NewRecorder(scheme.Scheme, EventsController), func() { close(done); b.Shutdown() }
}

// maxEventNote is the longest note the API server takes (1 kB).
const maxEventNote = 1024

// deploymentRef is what an Event of workspace k is about: its Deployment, with its uid when the
// informer has seen it (kubectl describe finds Events by uid), else by name (an apply that failed
// before the Deployment was created; kubectl events still lists it).
func (r *reconciler) deploymentRef(k errtrack.Key) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: k.Namespace, Name: k.Name}
	if obj, ok, _ := r.informer.GetStore().GetByKey(k.Namespace + "/" + k.Name); ok {
		if d, ok := obj.(*appsv1.Deployment); ok {
			ref.UID, ref.ResourceVersion = d.UID, d.ResourceVersion
		}
	}
	return ref
}

// recordApplyFailed records a Warning Event for a workspace whose apply failed.
func (r *reconciler) recordApplyFailed(k errtrack.Key, errs []error) {
	if r.events == nil || len(errs) == 0 {
		return
	}
	r.events.Eventf(r.deploymentRef(k), nil, corev1.EventTypeWarning, ReasonApplyFailed, "Apply", "%s", eventNote(errors.Join(errs...).Error()))
	r.kube.Metrics.event(ReasonApplyFailed)
}

// recordPodFailure records a Warning Event when the pod failure of a workspace differs from the
// last one recorded (the same failure seen at every cycle is recorded once; the broadcaster's
// series counts the rest). Called with r.mu held.
func (r *reconciler) recordPodFailure(k errtrack.Key, f *protocol.PodFailure) {
	key := failureKey(f)
	if r.events == nil || r.podEvents[k] == key {
		return
	}
	if key == "" {
		delete(r.podEvents, k)
		return
	}
	r.podEvents[k] = key
	note := f.Reason
	if f.Message != "" {
		note += ": " + f.Message
	}
	r.events.Eventf(r.deploymentRef(k), nil, corev1.EventTypeWarning, ReasonPodFailed, "Run", "%s", eventNote(note))
	r.kube.Metrics.event(ReasonPodFailed)
}

// eventNote cuts s to what an Event's note holds, on a rune boundary.
func eventNote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxEventNote {
		return s
	}
	cut := maxEventNote - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
