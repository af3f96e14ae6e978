//go:build !linux

package sandbox

import (
	"fmt"
	"os"
	"runtime"
)

// Supported reports whether this platform can isolate builds: only Linux can.
const Supported = false

// Main fails: the sandbox needs Linux.
func Main() int {
	fmt.Fprintf(os.Stderr, "hangar sandbox: template isolation needs Linux, not %s\n", runtime.GOOS)
	return 126
}

// GroupMembers: none known here.
func GroupMembers(int) []Process { return nil }

// KillUser does nothing here.
func KillUser(int) []Process { return nil }

// openLock: no build user is claimed here (lockFile refuses).
func openLock(path string) (*os.File, error) { return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644) }

// lockFile: no build user is claimed here (the sandbox needs Linux).
func lockFile(*os.File) error {
	return fmt.Errorf("template isolation needs Linux, not %s", runtime.GOOS)
}

// processOf: none here.
func processOf(int) (int, string) { return 0, "" }
