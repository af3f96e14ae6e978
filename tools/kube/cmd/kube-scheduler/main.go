// Command kube-scheduler is k8s.io/kubernetes/cmd/kube-scheduler, built from the version pinned in
// tools/kube/go.mod for the test cluster of scripts/kube-up.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
