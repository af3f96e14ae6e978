package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

func (a *app) auditCmd() *cobra.Command {
	var q sdk.AuditQuery
	cmd := &cobra.Command{
		Use:   "audit [--actor USER] [--action ACTION] [--target NAME] [--since DURATION|TIME] [--limit N]",
		Short: "Show the audit log (admin only)",
		Long: `Show the audit log, newest first: who did what to which workspace, user, agent, template,
provisioner, SSH key or preset, when, and whether it succeeded (a refused action shows its
refusal). The lifecycle automation acts as hangar-automation, the prebuild reconciler as
hangar-prebuilds. Builds show their transition and template version; a Terraform state is never in
the log. Entries older than the server's --audit-retention are gone.

--target matches a target's name; a workspace is OWNER/NAME, and a name alone matches every owner's
workspace of that name. --since and --until take an RFC 3339 time or a duration back from now.
When more entries match than --limit, the last line says how to read the next page (--before).`,
		Example: `  hangar audit --actor alice --since 24h
  hangar audit --target alice/dev --action workspace.transition
  hangar audit --outcome failure --action signin -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			page, err := c.ListAudit(cmd.Context(), q)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), page)
			}
			if err := a.printAudit(cmd.OutOrStdout(), page.Entries); err != nil {
				return err
			}
			if page.NextBeforeID != 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "More entries: add --before %d for the next page.\n", page.NextBeforeID)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Actor, "actor", "", "only the actions of `USER` (hangar-automation: the lifecycle automation)")
	f.StringVar(&q.Action, "action", "", "only `ACTION` (workspace.create, workspace.transition, build.create, build.cancel, state.push, signin, ...)")
	f.StringVar(&q.Target, "target", "", "only actions on `NAME` (a workspace is OWNER/NAME; NAME alone matches every owner's)")
	f.StringVar(&q.TargetKind, "target-kind", "", "only actions on a `KIND`: workspace, user, agent, template, provisioner, ssh_key or preset")
	f.StringVar(&q.Outcome, "outcome", "", "only `OUTCOME`: success or failure")
	f.StringVar(&q.Since, "since", "", "only entries since `WHEN`: a duration back from now (24h) or an RFC 3339 time")
	f.StringVar(&q.Until, "until", "", "only entries before `WHEN`: a duration back from now or an RFC 3339 time")
	f.IntVar(&q.Limit, "limit", 50, "show at most `N` entries (1 to 1000)")
	f.Int64Var(&q.BeforeID, "before", 0, "show the entries older than entry `ID` (the next page)")
	return cmd
}

func (a *app) printAudit(w io.Writer, es []sdk.AuditEntry) error {
	if len(es) == 0 {
		_, err := fmt.Fprintln(w, "No audit entries match.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tACTOR\tACTION\tTARGET\tOUTCOME\tDETAILS")
	for _, e := range es {
		target := e.TargetName
		if e.TargetKind != "" && target != "" {
			target = e.TargetKind + " " + target
		}
		details := auditDetails(e.Details)
		if e.Error != "" {
			details = strings.TrimSpace(oneLine(e.Error) + "  " + details)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, a.formatTime(e.Time), dash(e.Actor), e.Action, dash(target), e.Outcome, dash(details))
	}
	return tw.Flush()
}

// auditDetails shows details as key=value, sorted by key.
func auditDetails(d map[string]any) string {
	parts := make([]string, 0, len(d))
	for _, k := range slices.Sorted(maps.Keys(d)) {
		v := fmt.Sprint(d[k])
		if m, ok := d[k].(map[string]any); ok {
			v = auditDetails(m)
			v = "{" + v + "}"
		}
		parts = append(parts, k+"="+oneLine(v))
	}
	return strings.Join(parts, " ")
}
