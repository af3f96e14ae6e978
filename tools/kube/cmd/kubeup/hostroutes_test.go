package main

import (
	"strings"
	"testing"
)

// kube-up refuses a host that uses one of the cluster's ranges for real, and names the use; its own
// unreachable routes (an earlier run's, another cluster's) are no use.
func TestHostUses(t *testing.T) {
	for _, tc := range []struct {
		name, addrs, routes string
		want                []string
	}{
		{"free", "", "", nil},
		{"kube-up's own route", "", "unreachable 10.244.0.0/16 \n", nil},
		{"an address", "2: eth1    inet 10.244.3.4/24 brd 10.244.3.255 scope global eth1\\       valid_lft forever preferred_lft forever\n",
			"10.244.3.0/24 dev eth1 proto kernel scope link src 10.244.3.4 \nlocal 10.244.3.4 dev eth1 table local proto kernel scope host src 10.244.3.4 \n",
			[]string{"address 10.244.3.4/24 on eth1", "route 10.244.3.0/24 dev eth1", "route local 10.244.3.4 dev eth1 table local"}},
		{"a route", "", "10.96.0.0/12 via 192.0.2.1 dev eth0 \n", []string{"route 10.96.0.0/12 via 192.0.2.1 dev eth0"}},
	} {
		got := hostUses(tc.addrs, tc.routes)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %q, want %d uses like %q", tc.name, got, len(tc.want), tc.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%s: use %d is %q, want it to begin %q", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}
