package proxy

import (
	"errors"
	"fmt"
	"syscall"
)

// PodNetNSFlag is how the proxy is told to dial workspaces from the local test cluster's network
// namespace; the messages below name it.
const PodNetNSFlag = "--pod-netns"

// PodNetworkUnreachable says, for an error dialing addr (a pod's address), whether the pod network
// cannot be reached at all from where the proxy runs (no route: EHOSTUNREACH or ENETUNREACH, which
// is what the host's unreachable routes for the local cluster's ranges answer at once), and if so
// what the user should read. Other errors (refused, timed out) are a workspace's, not the network's.
func PodNetworkUnreachable(addr string, err error) (string, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) || (errno != syscall.EHOSTUNREACH && errno != syscall.ENETUNREACH) {
		return "", false
	}
	return fmt.Sprintf("The proxy cannot reach the cluster's pod network: connecting to %s failed (%s). "+
		"Pod addresses are not reachable from where the proxy runs. Run the proxy where it reaches the pods; "+
		"for the local test cluster of scripts/kube-up, run it on the host with %s /run/netns/$(cat DIR/netns).",
		addr, errno.Error(), PodNetNSFlag), true
}
