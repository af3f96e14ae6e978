//go:build !unix

package split

import "os"

// Stop ends a process.
func Stop(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
