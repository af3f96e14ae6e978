package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/starters"
)

// templatesInitCmd is `hangar templates init`: it lists the starter templates, or writes one into
// a directory to push.
func (a *app) templatesInitCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "init [STARTER] [--directory DIR]",
		Short: "List the starter templates, or write one into a directory",
		Long: `Without STARTER, list the starter templates. With it, write its files into --directory
(default: a directory named after the starter), refusing to write over any file; then push it with
'hangar templates push NAME --directory DIR' (a Terraform starter) or --devfile DIR/devfile.yaml
(a Kubernetes one). Nothing is sent to the server.`,
		Example: `  hangar templates init
  hangar templates init terraform-kubernetes-pod --directory ./pods
  hangar templates init kubernetes`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "STARTER\tDESCRIPTION")
				for _, s := range starters.List() {
					fmt.Fprintf(w, "%s\t%s\n", s.Name, s.Description)
				}
				return w.Flush()
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
				fmt.Fprintf(out, "wrote %s\n", p)
			}
			// A Kubernetes starter is a devfile, a Terraform one a module directory.
			if slices.Contains(s.Files, "devfile.yaml") {
				fmt.Fprintf(out, "Next: hangar templates push %s --devfile %s\n", s.Name, filepath.Join(dir, "devfile.yaml"))
				return nil
			}
			fmt.Fprintf(out, "Next: hangar templates push %s --directory %s\n", s.Name, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "directory", "", "where to write the starter's files (default: ./STARTER)")
	return cmd
}
