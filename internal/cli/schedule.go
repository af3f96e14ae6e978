package cli

import (
	"github.com/spf13/cobra"
	"strings"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// The lifecycle commands: a workspace's schedule, a template's policy.

func (a *app) scheduleCmd() *cobra.Command {
	var autostart, timezone, ttl string
	cmd := &cobra.Command{
		Use:   "schedule NAME [--autostart CRON] [--timezone ZONE] [--ttl DURATION]",
		Short: "Show or set a workspace's autostart schedule and autostop TTL",
		Long: `Show or set a workspace's own lifecycle settings. Without flags it shows them; each flag given
changes one and keeps the others.

--autostart is a cron expression of five fields (minute hour day-of-month month day-of-week), or
@daily, @weekly...: the stopped workspace is started then ("" or "off": no autostart). --timezone is
its IANA zone (default UTC). --ttl stops the running workspace that long after its start or its last
use, whichever is later ("0": never, where the policy allows; "default": the policy's).

The policy of the workspace's template (terraform) or agent (kubernetes) bounds the TTL, and may
also stop failed workspaces, and stop, mark dormant and then delete unused ones: hangar show NAME
shows the policy in force and what will happen next.

` + nameHelp,
		Example: `  hangar schedule dev --autostart "0 9 * * 1-5" --timezone Europe/Paris --ttl 8h
  hangar schedule dev --autostart off`,
		Args: oneName("workspace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			ws, err := c.Workspace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			flags := cmd.Flags()
			if flags.Changed("autostart") || flags.Changed("timezone") || flags.Changed("ttl") {
				s := ws.Schedule
				if flags.Changed("autostart") {
					s.Autostart = autostart
					if autostart == "off" {
						s.Autostart, s.Timezone = "", ""
					}
				}
				if flags.Changed("timezone") {
					s.Timezone = timezone
				}
				if flags.Changed("ttl") {
					s.TTL = &ttl
					if ttl == "default" {
						s.TTL = nil
					}
				}
				if ws, err = c.SetSchedule(cmd.Context(), args[0], s); err != nil {
					return err
				}
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), ws)
			}
			return a.printRows(cmd.OutOrStdout(), a.scheduleRows(ws))
		},
	}
	cmd.Flags().StringVar(&autostart, "autostart", "", "cron `EXPRESSION` at which the stopped workspace starts (\"off\": none)")
	cmd.Flags().StringVar(&timezone, "timezone", "", "IANA time `ZONE` of --autostart (default UTC)")
	cmd.Flags().StringVar(&ttl, "ttl", "", "autostop `DURATION` after start or last use (\"0\": never; \"default\": the policy's)")
	return cmd
}

func (a *app) templateLifecycleCmd() *cobra.Command {
	var l sdk.Lifecycle
	var clear bool
	var activityProcesses string
	cmd := &cobra.Command{
		Use:   "lifecycle NAME [--default-ttl D] [--max-ttl D] [--failure-ttl D] [--dormancy D] [--dormancy-delete D] [--max-active D] [--max-stopped D] [--activity connections|work] [--activity-processes LIST] [--activity-cpu CORES] [--clear]",
		Short: "Show or set the lifecycle policy of a template's workspaces",
		Long: `Show or set what the lifecycle executor does to the workspaces of a terraform template without
being asked. Without flags it shows the policy (anyone may look); each flag given changes one rule
and keeps the others ("0" turns that rule off), and --clear removes the whole policy (with flags:
the policy becomes just those). Changing it is for admins. Durations are Go's text: 90m, 8h, 720h.

  --default-ttl      stop a running workspace this long after its start or last use (workspaces may
                     set their own with hangar schedule)
  --max-ttl          the most a workspace's own TTL may be; with it, no workspace turns autostop off
  --failure-ttl      stop a workspace that stayed Failed this long
  --dormancy         stop and mark dormant a workspace nobody used for this long
  --dormancy-delete  delete a workspace dormant for this long, unless its owner starts it
  --max-active       stop a workspace this long after it was started, used or not
  --max-stopped      delete a workspace stopped for this long
  --activity         what counts as use for the TTL and dormancy: connections (the default: traffic
                     through the proxy or the server, an open SSH session included) or work (what
                     the workspace's helper sees inside: CPU of the user's processes, a running
                     process of --activity-processes, terminal output, web editor connections)
  --activity-processes  with work: commands whose running is work, comma-separated names and first
                     words ("make,go test,cargo")
  --activity-cpu     with work: the CPU, in cores, at or over which the user's processes are
                     working (default 0.1)

A claimed prebuilt workspace counts its times from the claim. An agent's policy (kubernetes
workspaces) is in its configuration: "lifecycle", with GitLab's max_active_hours_before_stop and
max_stopped_hours_before_termination.`,
		Example: `  hangar templates lifecycle vm
  hangar templates lifecycle vm --default-ttl 8h --failure-ttl 1h --dormancy 720h --dormancy-delete 720h
  hangar templates lifecycle vm --max-active 0
  hangar templates lifecycle vm --clear`,
		Args: oneName("template"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			t, err := c.Template(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rules := []struct {
				flag string
				to   *string
				from string
			}{
				{"default-ttl", &t.Lifecycle.DefaultTTL, l.DefaultTTL}, {"max-ttl", &t.Lifecycle.MaxTTL, l.MaxTTL},
				{"failure-ttl", &t.Lifecycle.FailureTTL, l.FailureTTL}, {"dormancy", &t.Lifecycle.DormancyThreshold, l.DormancyThreshold},
				{"dormancy-delete", &t.Lifecycle.DormancyAutoDelete, l.DormancyAutoDelete},
				{"max-active", &t.Lifecycle.MaxActive, l.MaxActive}, {"max-stopped", &t.Lifecycle.MaxStopped, l.MaxStopped},
			}
			changed := clear
			if clear {
				t.Lifecycle = sdk.Lifecycle{}
			}
			if f := cmd.Flags(); f.Changed("activity") || f.Changed("activity-processes") || f.Changed("activity-cpu") {
				if f.Changed("activity") {
					t.Lifecycle.Activity = l.Activity
				}
				if f.Changed("activity-processes") {
					t.Lifecycle.ActivityProcesses = nil
					for _, p := range strings.Split(activityProcesses, ",") {
						if p = strings.TrimSpace(p); p != "" {
							t.Lifecycle.ActivityProcesses = append(t.Lifecycle.ActivityProcesses, p)
						}
					}
				}
				if f.Changed("activity-cpu") {
					t.Lifecycle.ActivityCPU = l.ActivityCPU
				}
				changed = true
			}
			for _, r := range rules {
				if cmd.Flags().Changed(r.flag) {
					*r.to, changed = r.from, true
				}
			}
			if changed {
				if t, err = c.SetTemplateLifecycle(cmd.Context(), args[0], t.Lifecycle); err != nil {
					return err
				}
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			return a.printRows(cmd.OutOrStdout(), [][2]string{{"Template", t.Name}, {"Policy", policyText(t.Lifecycle)}})
		},
	}
	f := cmd.Flags()
	f.StringVar(&l.DefaultTTL, "default-ttl", "", "autostop `DURATION` of workspaces that set none")
	f.StringVar(&l.MaxTTL, "max-ttl", "", "the longest `DURATION` a workspace's own TTL may be")
	f.StringVar(&l.FailureTTL, "failure-ttl", "", "stop a Failed workspace after this `DURATION`")
	f.StringVar(&l.DormancyThreshold, "dormancy", "", "stop and mark dormant a workspace unused for this `DURATION`")
	f.StringVar(&l.DormancyAutoDelete, "dormancy-delete", "", "delete a workspace dormant for this `DURATION`")
	f.StringVar(&l.MaxActive, "max-active", "", "stop a workspace this `DURATION` after its start")
	f.StringVar(&l.MaxStopped, "max-stopped", "", "delete a workspace stopped for this `DURATION`")
	f.StringVar(&l.Activity, "activity", "", "what counts as use (`MODE`): connections or work")
	f.StringVar(&activityProcesses, "activity-processes", "", "with --activity work: commands whose running is work (`LIST`: make,go test)")
	f.Float64Var(&l.ActivityCPU, "activity-cpu", 0, "with --activity work: `CORES` of CPU at or over which processes are working (0: 0.1)")
	f.BoolVar(&clear, "clear", false, "remove the whole policy (with other flags: keep only those)")
	return cmd
}
