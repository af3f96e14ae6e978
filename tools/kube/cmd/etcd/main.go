// Command etcd is go.etcd.io/etcd/server/v3/etcdmain, built from the version pinned in
// tools/kube/go.mod for the test cluster of scripts/kube-up.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
