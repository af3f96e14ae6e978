package agent

import (
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
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// PodFailure returns why a workspace's pod cannot run, or nil: an unschedulable pod, or a container
// (init containers first) waiting for one of waitingFailures.
func PodFailure(pods []*corev1.Pod) *protocol.PodFailure {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return &protocol.PodFailure{Reason: c.Reason, Message: c.Message}
			}
		}
		for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range statuses {
				if w := cs.State.Waiting; w != nil && waitingFailures[w.Reason] {
					msg := w.Message
					if msg == "" {
						msg = "container " + cs.Name
					} else {
						msg = "container " + cs.Name + ": " + msg
					}
					return &protocol.PodFailure{Reason: w.Reason, Message: msg}
				}
			}
		}
	}
	return nil
}
