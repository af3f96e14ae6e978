// Command pause is the real node's sandbox ("pause") image: it holds a pod's namespaces, reaps the
// zombies of the processes that share its PID namespace, and exits on SIGINT or SIGTERM. No registry
// is reachable here, so scripts/kube-up builds it and loads it into containerd as
// hangar.local/pause:dev.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
