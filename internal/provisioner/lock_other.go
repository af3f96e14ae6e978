//go:build !unix

package provisioner

import (
	"os"

	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
)

// lockFile: a provisioner does not run on this system (terraform.Supported says why), so its work
// root is never locked here.
func lockFile(*os.File) (func(), error) { return nil, terraform.Supported() }
