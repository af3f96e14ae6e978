package servercmd

import (
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
)

func TestMaxStoragePerUser(t *testing.T) {
	for in, want := range map[string]int64{"": tfbackend.DefaultMaxStoragePerUser, defaultMaxStoragePerUser: 1 << 30, "500Mi": 500 << 20, "0": 0, "2000000": 2000000} {
		if got, err := maxStoragePerUser(in); err != nil || got != want {
			t.Errorf("maxStoragePerUser(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1Gi", "lots", "1Gi ", "1e30"} {
		if _, err := maxStoragePerUser(in); err == nil || !strings.Contains(err.Error(), "--max-storage-per-user") {
			t.Errorf("maxStoragePerUser(%q): %v, want an error naming the flag", in, err)
		}
	}
}
