package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/starters"
)

// templateInitCmd is `hangar templates init`: the starter templates (internal/starters), listed or
// written out. It needs no server.
func (a *app) templateInitCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "init [NAME] [--directory DIR]",
		Short: "List the starter templates, or write one to begin from",
		Long: `With no NAME, list the starter templates. With a NAME, write that starter's files into
--directory (default: ./NAME), which must not hold them already, and print the commands that push
it and create a workspace from it.`,
		Example: `  hangar templates init
  hangar templates init kubernetes && hangar templates push kubernetes --devfile kubernetes/devfile.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				if dir != "" {
					return usageError{fmt.Errorf("--directory needs a starter's NAME (starters: %s)", strings.Join(starters.Names(), ", "))}
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tDESCRIPTION")
				for _, s := range starters.List() {
					fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				_, err := fmt.Fprintln(out, "Write one with: hangar templates init NAME [--directory DIR]")
				return err
			}
			s, err := starters.Get(args[0])
			if err != nil {
				return usageError{err}
			}
			if dir == "" {
				dir = s.Name
			}
			paths, err := s.Write(dir)
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintf(out, "Wrote %s\n", p)
			}
			if len(s.Next) > 0 {
				fmt.Fprintln(out, "Next:")
				for _, n := range s.Next {
					fmt.Fprintf(out, "  %s\n", strings.ReplaceAll(n, "{dir}", filepath.ToSlash(filepath.Clean(dir))))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "directory", "", "write the starter into `DIR` (default: ./NAME)")
	return cmd
}
