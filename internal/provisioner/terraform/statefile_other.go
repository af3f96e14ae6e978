//go:build !unix

package terraform

import "os"

// openBuildFile opens a file the build wrote (statefile_unix.go refuses links and FIFOs; the
// runner does not run on these systems: Supported).
func openBuildFile(path string) (*os.File, error) { return os.Open(path) }
