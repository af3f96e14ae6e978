package servercmd

import (
	"fmt"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultMaxStoragePerUser is --max-storage-per-user's default, tfbackend.DefaultMaxStoragePerUser.
const defaultMaxStoragePerUser = "1Gi"

// maxStoragePerUser reads --max-storage-per-user: a byte quantity such as 1Gi or 500Mi ("": the
// default; 0: no bound).
func maxStoragePerUser(s string) (int64, error) {
	if s == "" {
		return tfbackend.DefaultMaxStoragePerUser, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--max-storage-per-user: want a size in bytes such as 1Gi or 500Mi (0: no limit), got %q", s)
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("--max-storage-per-user: %q is too large", s)
	}
	return n, nil
}
