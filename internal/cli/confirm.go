package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// confirmDelete asks on the terminal before `hangar delete` ends a workspace for good; --yes skips
// it. Without a terminal to ask on (a script, a pipe) and without --yes, it refuses: a delete is
// never made by default. It reads the workspace first, to say what goes with it (and so that a
// wrong name fails before any question).
func (a *app) confirmDelete(cmd *cobra.Command, c *sdk.Client, name string, orphan bool) error {
	ws, err := c.Workspace(cmd.Context(), name)
	if err != nil {
		return err
	}
	what := "its Kubernetes objects and its volume are deleted"
	switch {
	case ws.Backend == "terraform" && orphan:
		what = "Terraform is not run: its resources are left in place, unmanaged"
	case ws.Backend == "terraform":
		what = "terraform destroy deletes its resources"
	}
	if !a.isTerminal(cmd.InOrStdin()) {
		return usageError{fmt.Errorf("deleting workspace %s cannot be undone (%s): pass --yes to confirm (stdin is not a terminal to ask on)", name, what)}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Delete workspace %s? %s; this cannot be undone. [y/N] ", name, upperFirst(what))
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("workspace %s was not deleted: no answer (%v)", name, err)
	}
	if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
		return errors.New("workspace " + name + " was not deleted")
	}
	return nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
