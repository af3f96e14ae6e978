package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// waitingFailures are the container waiting reasons that mean the container will not run without
// a change (or not soon): a kubelet shows them within seconds, long before the Deployment's
// progress deadline.
var waitingFailures = map[string]bool{
	"CrashLoopBackOff":           true,
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// UnschedulableGrace is how long a pod may be unschedulable before that is a failure: the scheduler
// retries on its own, and a first "persistentvolumeclaim not found" (its cache a moment behind the
// claim the agent has just created) or a claim still being bound is not a reason to tell the user
// their workspace failed.
const UnschedulableGrace = 5 * time.Second

// PodFailure returns why a workspace's pod cannot run, or nil: a pod unschedulable for
// UnschedulableGrace or more at now, a container
// (init containers first) waiting for one of waitingFailures, or a container that terminated with
// an error. In a workspace pod (restart policy Always) no container is meant to end, and an init
// container that ends with an error blocks the pod; a real kubelet shows such a container as
// terminated for the whole first back-off (about 10 s after its second failure) before it shows
// CrashLoopBackOff.
func PodFailure(pods []*corev1.Pod, now time.Time) *protocol.PodFailure {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				now.Sub(c.LastTransitionTime.Time) >= UnschedulableGrace {
				return &protocol.PodFailure{Reason: c.Reason, Message: c.Message}
			}
		}
		for i, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			kind := map[int]string{0: "init container ", 1: "container "}[i]
			for _, cs := range statuses {
				if w := cs.State.Waiting; w != nil && waitingFailures[w.Reason] {
					msg := "container " + cs.Name
					_, building := imageBuildParts[cs.Name]
					t := cs.LastTerminationState.Terminated
					switch {
					case w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff":
						msg += ": " + pullFailure(cs.Image, w)
					case building && w.Reason == "CrashLoopBackOff" && t != nil && t.ExitCode != 0:
						// The kubelet's back-off text (its delay, the pod's name and UID) says
						// nothing the build's own reason does not: the reason alone.
						msg += " " + exited(cs.Name, t)
						return &protocol.PodFailure{Reason: w.Reason, Message: msg}
					case w.Message != "":
						msg += ": " + w.Message
					}
					if t != nil && t.ExitCode != 0 {
						msg += "; " + exited(cs.Name, t)
					}
					return &protocol.PodFailure{Reason: w.Reason, Message: msg}
				}
				if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
					reason := t.Reason
					if reason == "" {
						reason = "Error"
					}
					if i == 0 {
						reason = "Init:" + reason
					}
					return &protocol.PodFailure{Reason: reason, Message: kind + cs.Name + " " + exited(cs.Name, t)}
				}
			}
		}
	}
	return nil
}

// PodAlerts returns what happened to a workspace's pods that its owner must hear of although the
// workspace runs on, at most protocol.MaxPodAlerts, oldest first: a container the kernel killed
// for lack of memory (its last termination, or its current one, OOMKilled: the kubelet restarts
// it), and a pod evicted (phase Failed, reason Evicted: the Deployment makes another).
func PodAlerts(pods []*corev1.Pod) []protocol.PodAlert {
	var out []protocol.PodAlert
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" {
			at := p.CreationTimestamp.Time
			for _, c := range p.Status.Conditions {
				if c.LastTransitionTime.After(at) {
					at = c.LastTransitionTime.Time
				}
			}
			out = append(out, protocol.PodAlert{Kind: protocol.PodAlertEvicted, Subject: p.Name, At: at.UTC(),
				Message: strings.TrimSuffix("pod "+p.Name+" was evicted: "+p.Status.Message, ": ")})
		}
		for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range statuses {
				for _, t := range []*corev1.ContainerStateTerminated{cs.LastTerminationState.Terminated, cs.State.Terminated} {
					if t != nil && t.Reason == "OOMKilled" {
						out = append(out, protocol.PodAlert{Kind: protocol.PodAlertOOMKilled, Subject: cs.Name, At: t.FinishedAt.UTC(),
							Message: "container " + cs.Name + " was killed for lack of memory (exit code " + strconv.Itoa(int(t.ExitCode)) + ")"})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b protocol.PodAlert) int { return a.At.Compare(b.At) })
	out = slices.CompactFunc(out, func(a, b protocol.PodAlert) bool {
		return a.Kind == b.Kind && a.Subject == b.Subject && a.At.Equal(b.At)
	})
	if len(out) > protocol.MaxPodAlerts {
		out = out[len(out)-protocol.MaxPodAlerts:]
	}
	return out
}

// imageBuildParts says what each of the image build's init containers does, for its failure.
var imageBuildParts = map[string]string{
	protocol.ImagePrepareContainerName: "fetching the base image and the features",
	protocol.ImageBuildContainerName:   "running the definition's steps and features",
	protocol.ImagePushContainerName:    "pushing the image",
}

// exited describes a container's termination: its exit code (or signal) and its termination
// message, if any. An image build container's message is its log's tail, whose last line is the
// build's reason (`hangar image-build` ends its log with it): that line alone is the message.
func exited(name string, t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("exited with code %d", t.ExitCode)
	if t.Signal != 0 {
		s = fmt.Sprintf("killed by signal %d", t.Signal)
	}
	m := strings.TrimSpace(t.Message)
	if part, ok := imageBuildParts[name]; ok {
		s = "(the workspace's image build: " + part + ") " + s
		m = m[strings.LastIndexByte(m, '\n')+1:]
	}
	if m = strings.TrimSpace(m); m != "" {
		s += ": " + m
	}
	return s
}

// NoRegistry is the address the local test cluster's node sends every pull to (scripts/kube-up's
// containerd hosts.toml): a pull error that names it means the image is not on the node and the
// cluster has no registry to get it from.
const NoRegistry = "127.0.0.1:1"

// LoadImageHint tells a user of a cluster without a registry how to put an image on its node.
const LoadImageHint = "load it onto the node with scripts/kube-load-image DIR ARCHIVE (DIR is the cluster's directory; docker save or skopeo copy make an ARCHIVE)"

// pullFailure says that a container's image could not be pulled, and why, from the kubelet's
// waiting state: ErrImagePull carries the cause; ImagePullBackOff repeats it after "Back-off pulling
// image" since Kubernetes 1.32, and says only that before.
func pullFailure(image string, w *corev1.ContainerStateWaiting) string {
	if image == "" {
		image = "of the container"
	}
	switch {
	case strings.Contains(w.Message, NoRegistry):
		return fmt.Sprintf("the image %s is not on the node, and this cluster pulls from no registry: %s", image, LoadImageHint)
	case w.Reason == "ImagePullBackOff":
		return fmt.Sprintf("the image %s could not be pulled (the kubelet tries again after a back-off). "+
			"Check its name and the registry's access; on a cluster without a registry (scripts/kube-up's), %s", image, LoadImageHint)
	case w.Message != "":
		return fmt.Sprintf("the image %s could not be pulled: %s", image, w.Message)
	default:
		return fmt.Sprintf("the image %s could not be pulled", image)
	}
}
