package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// The CNI configuration is valid JSON, and the addresses it hands out are recorded under the
// cluster's own directory (a path with a quote in it too), never in host-local's shared default.
func TestCNIConfigKeepsAddressesInTheCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), `a "cluster"`)
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cniConfig(dir)), &conf); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, cniConfig(dir))
	}
	if p := conf.Plugins[0]; p.Type != "bridge" || p.IPAM.Type != "host-local" || p.IPAM.DataDir != filepath.Join(dir, "cni/ipam") {
		t.Fatalf("the bridge's IPAM: %+v, want host-local recording under %s", p, filepath.Join(dir, "cni/ipam"))
	}
}
