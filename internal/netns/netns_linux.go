package netns

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// threadNetns is the path of the calling thread's network namespace.
func threadNetns() string { return fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()) }

// setns moves the calling thread into the network namespace f is open on.
func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }
