//go:build !unix

package wshelper

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
)

// Command returns `hangar workspace-helper`, which on this system only says that it runs on Unix:
// the helper is PID 1 of a workspace's Linux container, or the agent on a Terraform workspace's
// Linux or macOS machine, and manages processes, terminals and signals the Unix way (the rest of
// this package is built for Unix only).
func Command() *cobra.Command {
	return &cobra.Command{
		Use:                "workspace-helper [flags] [-- COMMAND [ARG...]]",
		Short:              "Serve SSH inside a workspace and run its command (a workspace's main container)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("hangar workspace-helper runs in a workspace's Linux container or on a Linux or macOS machine, not on %s", runtime.GOOS)
		},
	}
}

// GitCredentialCommand returns `hangar git-credential`, which runs in a workspace only.
func GitCredentialCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "git-credential get|store|erase",
		Short:              "Give git the workspace owner's forge credentials (git's credential helper protocol)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("hangar git-credential runs in a workspace on Linux or macOS, not on %s", runtime.GOOS)
		},
	}
}

// GitKnownHostsCommand returns `hangar git-known-hosts`, which runs in a workspace only.
func GitKnownHostsCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "git-known-hosts SOCKET",
		Short:              "Print the forges' SSH host keys for ssh (its KnownHostsCommand), in a workspace",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("hangar git-known-hosts runs in a workspace on Linux or macOS, not on %s", runtime.GOOS)
		},
	}
}

// GitKnownHostsMain says that the git SSH agent runs in a workspace on Linux or macOS only.
func GitKnownHostsMain(_ string, _, stderr io.Writer) {
	fmt.Fprintf(stderr, "hangar git-known-hosts runs in a workspace on Linux or macOS, not on %s\n", runtime.GOOS)
}
