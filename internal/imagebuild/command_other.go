//go:build !linux

package imagebuild

import (
	"errors"

	"github.com/spf13/cobra"
)

// Command is `hangar image-build`, hidden. The executor needs Linux (chroot, credentials, the
// filesystem's own metadata): it runs in a workspace's build pod, never on a user's machine, so
// elsewhere the command only says so.
func Command() *cobra.Command {
	return &cobra.Command{
		Use:    "image-build",
		Short:  "Build a workspace's image inside its build pod (Linux only)",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("hangar image-build runs only on Linux, in a workspace's build pod")
		},
	}
}
