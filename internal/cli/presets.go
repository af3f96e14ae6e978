package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// The commands of prebuilt pools: hangar templates presets and hangar templates preset.

func (a *app) presetsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "presets NAME",
		Short: "List a terraform template's presets with their pools of prebuilt workspaces",
		Long: `List a terraform template's presets: what each is built from (a version, parameters) and its
pool now: how many prebuilt workspaces it wants, how many are ready to be claimed (hangar create
--preset) and how many are being built. A pool whose prebuild creates keep failing is named after
the table, with how many failed in a row and the last error.`,
		Example: `  hangar templates presets vm`,
		Args:    oneName("template"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			ps, err := c.ListPresets(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), ps)
			}
			return printPresets(cmd.OutOrStdout(), ps)
		},
	}
}

func printPresets(w io.Writer, ps []sdk.Preset) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "No presets.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tDESIRED\tREADY\tBUILDING\tPARAMETERS\tSCHEDULE")
	for _, p := range ps {
		version := strconv.Itoa(p.Pool.Version)
		if p.Version == 0 {
			version += " (active)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", p.Name, version, p.Pool.Desired, p.Pool.Ready, p.Pool.Building,
			parametersText(p.Parameters), scheduleText(p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A pool that keeps failing says so, with the last error (the reconciler backs off meanwhile).
	for _, p := range ps {
		if p.Pool.Failures == 0 || p.Pool.LastFailureAt == nil {
			continue
		}
		if _, err := fmt.Fprintf(w, "\nPreset %s is failing: %d prebuild create(s) failed in a row, the last at %s:\n  %s\n", p.Name, p.Pool.Failures,
			p.Pool.LastFailureAt.UTC().Format("2006-01-02 15:04:05 UTC"), strings.ReplaceAll(p.Pool.LastError, "\n", "\n  ")); err != nil {
			return err
		}
	}
	return nil
}

func parametersText(params map[string]string) string {
	if len(params) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+params[k])
	}
	return strings.Join(parts, ",")
}

func scheduleText(p sdk.Preset) string {
	if len(p.Schedule) == 0 {
		return fmt.Sprintf("%d always", p.Instances)
	}
	parts := make([]string, 0, len(p.Schedule)+1)
	for _, r := range p.Schedule {
		parts = append(parts, fmt.Sprintf("%q=%d", r.Cron, r.Instances))
	}
	zone := p.Timezone
	if zone == "" {
		zone = "UTC"
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" (%s), else %d", zone, p.Instances)
}

func (a *app) presetCmd() *cobra.Command {
	var instances, version int
	var params, schedule []string
	var timezone string
	var del bool
	cmd := &cobra.Command{
		Use:   "preset NAME PRESET (--instances N [--version V] [--parameter K=V]... [--schedule \"CRON=N\"]... [--timezone ZONE] | --delete)",
		Short: "Set or delete a preset: a pool of prebuilt workspaces of a terraform template (admin only)",
		Long: `Set a preset of a terraform template: the server keeps --instances prebuilt workspaces of it
ready, built with is_prebuild (the module's variable, and HANGAR_WORKSPACE_IS_PREBUILD), so that
'hangar create NAME --template TEMPLATE --preset PRESET' hands one to its user at once (a start
with is_prebuild_claim) instead of building from scratch. The flags replace the whole preset.

  --version    pin a template version (default: follow the active version; a new version
               replaces the pool's workspaces)
  --parameter  a value for a variable the module declares, passed to every build (repeatable);
               the values are checked as a create's: every required parameter, each type and
               validation
  --schedule   "CRON=N": while the cron expression matches, keep N instead (repeatable; the first
               rule that matches wins), read in --timezone (default UTC)

--delete deletes the preset: its unclaimed prebuilt workspaces are deleted; claimed ones stay.`,
		Example: `  hangar templates preset vm small --instances 2 --parameter size=small
  hangar templates preset vm small --instances 1 --schedule "* 8-18 * * 1-5=5" --timezone Europe/Paris
  hangar templates preset vm small --delete`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{fmt.Errorf("%s takes a template and a preset name, got %d arguments", cmd.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			set := cmd.Flags().Changed("instances")
			if del {
				for _, f := range []string{"instances", "version", "parameter", "schedule", "timezone"} {
					if cmd.Flags().Changed(f) {
						return usageError{fmt.Errorf("--delete takes no --%s", f)}
					}
				}
			} else if !set {
				return usageError{errors.New("give --instances N (0 keeps none outside the schedule), or --delete")}
			}
			req := sdk.PutPresetRequest{Instances: instances, Version: version, Timezone: timezone}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--parameter %q: want KEY=VALUE", p)}
				}
				if req.Parameters == nil {
					req.Parameters = map[string]string{}
				}
				req.Parameters[k] = v
			}
			for _, r := range schedule {
				i := strings.LastIndex(r, "=")
				n, err := strconv.Atoi(strings.TrimSpace(r[i+1:]))
				if i < 0 || err != nil {
					return usageError{fmt.Errorf("--schedule %q: want \"CRON=N\", such as \"* 8-18 * * 1-5=5\"", r)}
				}
				req.Schedule = append(req.Schedule, sdk.PresetScheduleRule{Cron: strings.TrimSpace(r[:i]), Instances: n})
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			if del {
				if err := c.DeletePreset(cmd.Context(), args[0], args[1]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Deleted preset %s of template %s; its unclaimed prebuilt workspaces are being deleted.\n", args[1], args[0])
				return err
			}
			p, err := c.PutPreset(cmd.Context(), args[0], args[1], req)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), p)
			}
			return printPresets(cmd.OutOrStdout(), []sdk.Preset{p})
		},
	}
	f := cmd.Flags()
	f.IntVar(&instances, "instances", 0, "keep `N` prebuilt workspaces ready (0 to 100)")
	f.IntVar(&version, "version", 0, "build template version `V` (default: the active version)")
	f.StringArrayVar(&params, "parameter", nil, "`KEY=VALUE` for a variable of the module (repeatable)")
	f.StringArrayVar(&schedule, "schedule", nil, "\"`CRON=N`\": keep N while the cron expression matches (repeatable)")
	f.StringVar(&timezone, "timezone", "", "IANA time `ZONE` of --schedule (default UTC)")
	f.BoolVar(&del, "delete", false, "delete the preset")
	return cmd
}
