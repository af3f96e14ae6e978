package main

// The host's routes for the cluster's ranges. Pod, Service and node addresses exist only inside a
// cluster's network namespace; on the host they would follow the default route out of the machine
// (towards whatever network the machine is on). kube-up makes each range unreachable on the host:
// a dial from the host to any of them fails at once (EHOSTUNREACH) and no packet is sent. A route
// through one cluster's veth is no option, as several clusters run side by side with the same
// ranges; processes that must reach pods make their sockets in the cluster's namespace instead
// (`hangar proxy --pod-netns`). The routes stay after kube-down: a stopped cluster's pod address
// must not go out either. `ip route del unreachable RANGE` removes one by hand.

import (
	"fmt"
	"os/exec"
	"strings"
)

// hostRanges are every address range the cluster uses: the cluster CIDR (the real node's pods and
// the kwok node's), the Service range and the node range (the real node's address).
var hostRanges = []string{clusterCIDR, serviceRange, nodeRange}

const (
	clusterCIDR = "10.244.0.0/16" // holds realPodCIDR and podCIDR
	nodeRange   = "10.99.0.0/16"  // holds realNodeIP
)

// ensureHostRoutes adds (or keeps) an unreachable route for each range on the host, after checking
// that the host does not use the range for real.
func ensureHostRoutes() error {
	for _, r := range hostRanges {
		addrs, err := exec.Command("ip", "-4", "-o", "addr", "show", "to", r).Output()
		if err != nil {
			return fmt.Errorf("ip addr show to %s: %v", r, err)
		}
		routes, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "all", "root", r).Output()
		if err != nil {
			return fmt.Errorf("ip route show table all root %s: %v", r, err)
		}
		if uses := hostUses(string(addrs), string(routes)); len(uses) > 0 {
			return fmt.Errorf("the host uses %s, which the test cluster's pods, Services or node need for themselves: %s. "+
				"kube-up makes that range unreachable on the host (so that no dial to a pod leaves the machine); "+
				"run it on a machine where %s is free", r, strings.Join(uses, "; "), r)
		}
		if err := run("ip", "route", "replace", "unreachable", r); err != nil {
			return err
		}
	}
	return nil
}

// hostUses lists what of the host's `ip -o addr show to R` and `ip -o route show table all root R`
// output is a real use of the range R: any address, and any route that is not unreachable (the
// routes kube-up adds itself, by an earlier run or another cluster's).
func hostUses(addrs, routes string) []string {
	var uses []string
	for _, line := range strings.Split(addrs, "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			uses = append(uses, "address "+f[3]+" on "+f[1])
		}
	}
	for _, line := range strings.Split(routes, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "unreachable ") {
			continue
		}
		uses = append(uses, "route "+line)
	}
	return uses
}
