// Package quickstart is `hangar quickstart`; on Windows it only says why it cannot run there.
package quickstart

import (
	"errors"

	"github.com/spf13/cobra"
)

// Command is `hangar quickstart`: the local cluster it starts needs Linux.
func Command() *cobra.Command {
	return &cobra.Command{
		Use:   "quickstart",
		Short: "Start Hangar, a local Kubernetes cluster and a first workspace on this machine (Linux, as root)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("hangar quickstart runs the local Kubernetes cluster, which needs Linux")
		},
	}
}

// RelayCommand is `hangar relay` (hidden), which the quick start runs: it needs Linux too.
func RelayCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "relay",
		Short:  "Forward connections made inside a network namespace to an address of this host (hangar quickstart runs it)",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("hangar relay listens in a network namespace, which needs Linux")
		},
	}
}
