// Command kube-proxy is k8s.io/kubernetes/cmd/kube-proxy, built from the version pinned in
// tools/kube/go.mod, for the test cluster's Services (scripts/kube-up runs it in iptables mode on the
// real node, so that pods and the cluster's network namespace reach Services by their cluster IP).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // for client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
