package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/buildinfo"
)

// versionCmd is `hangar version`: which build this binary is (internal/buildinfo), with no server.
func versionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json]",
		Short: "Print this binary's version, commit, build date, Go version and platform (needs no server)",
		Long: `Print this binary's version, commit, build date, Go version and platform. A release binary
(scripts/release) carries the version, commit and date it was built with; a binary built with
'go build' in a clone shows the commit the Go toolchain recorded and the time of that commit.`,
		Args:                  cobra.NoArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Read()
			switch output {
			case "json":
				return printJSON(cmd.OutOrStdout(), in)
			case "table":
				_, err := io.WriteString(cmd.OutOrStdout(), in.String())
				return err
			}
			return usageError{fmt.Errorf("--output %q: must be table or json", output)}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "`FORMAT` of the output: table or json")
	return cmd
}
