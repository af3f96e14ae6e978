package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// kube-proxy makes Services work on the real node: in iptables mode, in the cluster's network
// namespace, so that pods (and anything else in that namespace) reach a Service by its cluster IP,
// the `kubernetes` Service (the in-cluster API address) included. It is built from the same pinned
// k8s.io/kubernetes module as the kubelet (tools/kube/cmd/kube-proxy).
//
//   - masqueradeAll: a pod's connection to a Service whose endpoint is a pod on the same bridge would
//     otherwise be answered straight over the bridge, around the DNAT (the reply needs
//     br_netfilter, a module and sysctl of the whole host). Masqueraded, the reply comes back to the
//     bridge's address and the connection tracking undoes both translations.
//   - conntrack limits and timeouts left alone (0): those sysctls belong to the whole host.
//   - its healthz and metrics ports are in the namespace only.
func kubeProxyConfig(kubeconfig string) string {
	return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ` + kubeconfig + `
hostnameOverride: ` + realNodeName + `
mode: iptables
clusterCIDR: ` + clusterCIDR + `
detectLocalMode: ClusterCIDR
iptables:
  masqueradeAll: true
  syncPeriod: 30s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
`
}

// startKubeProxy starts kube-proxy and waits until it has written the `kubernetes` Service's rules.
func (cl *cluster) startKubeProxy(kubeconfig string) error {
	dir := cl.c.dir
	cfg := filepath.Join(dir, "kube-proxy.yaml")
	if err := writeFile(cfg, kubeProxyConfig(kubeconfig)); err != nil {
		return err
	}
	// The namespace has no default route, so a connection made in it (a test's DialInside) to a
	// cluster IP would fail before kube-proxy's OUTPUT rules translate it: a route for the Service
	// range makes the address reachable; the translated packet is routed again to the pod (pods'
	// packets are translated on the way in, before routing, and need nothing).
	if err := run("ip", "-n", clusterID(dir), "route", "replace", serviceRange, "dev", "lo"); err != nil {
		return fmt.Errorf("route for the Service range: %w", err)
	}
	kp, err := cl.startIn("kube-proxy", nil, filepath.Join(cl.c.bin, "kube-proxy"), "--config", cfg)
	if err != nil {
		return err
	}
	return cl.waitFor("kube-proxy to write the rules of Service default/kubernetes", kp, func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", clusterID(dir), "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables -t nat -S KUBE-SERVICES: %v: %s", err, strings.TrimSpace(string(out)))
		}
		if !strings.Contains(string(out), "default/kubernetes:https") {
			return fmt.Errorf("no rule for default/kubernetes:https yet")
		}
		return nil
	})
}
