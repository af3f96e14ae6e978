//go:build !linux

package netns

import (
	"fmt"
	"os"
	"runtime"
)

// threadNetns: network namespaces are Linux's; nothing opens this path elsewhere.
func threadNetns() string { return "/proc/self/ns/net" }

// setns: network namespaces are Linux's (hangar proxy --pod-netns says so at start).
func setns(*os.File) error {
	return fmt.Errorf("network namespaces need Linux, not %s", runtime.GOOS)
}
