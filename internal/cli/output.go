package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// printJSON prints v as indented JSON: the API's own shape, since v is an sdk type.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON output: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

const timeLayout = "2006-01-02 15:04:05 MST"

func (a *app) formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(a.loc).Format(timeLayout)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printWorkspaces prints the workspace table: OWNER NAME AGENT DESIRED ACTUAL HELPER URL.
func printWorkspaces(w io.Writer, wss []sdk.Workspace) error {
	if len(wss) == 0 {
		_, err := fmt.Fprintln(w, "No workspaces.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "OWNER\tNAME\tAGENT\tDESIRED\tACTUAL\tHELPER\tURL")
	for _, ws := range wss {
		agent := ws.Agent
		if ws.Backend == "terraform" {
			agent = fmt.Sprintf("(terraform: %s v%d)", ws.Template, ws.TemplateVersion)
			if ws.Outdated {
				agent = fmt.Sprintf("(terraform: %s v%d, outdated)", ws.Template, ws.TemplateVersion)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(ws.Owner), ws.Name, agent, ws.DesiredState, ws.ActualState, helperCell(ws.Helper), dash(ws.URL))
	}
	return tw.Flush()
}

// helperCell is the helper's status in the list: with "(see show)" when it has a problem.
func helperCell(h sdk.WorkspaceHelper) string {
	if h.Problem != "" {
		return h.Status + " (problem: see show)"
	}
	return dash(h.Status)
}

// helperRows are the lines of the helper's status: whether it is reachable and since when, its
// last error and its problem.
func (a *app) helperRows(ws sdk.Workspace) [][2]string {
	h := ws.Helper
	status := dash(h.Status)
	if h.Since != nil {
		status += " (since " + a.formatTime(*h.Since) + ")"
	}
	rows := [][2]string{{"Helper", status}}
	if h.LastError != "" && (ws.Error == nil || ws.Error.Message != h.LastError) { // not the workspace's own, said above
		rows = append(rows, [2]string{"Helper last error", h.LastError})
	}
	if h.Problem != "" {
		rows = append(rows, [2]string{"Helper problem", h.Problem})
	}
	return rows
}

// endpointRows are the lines of a Kubernetes workspace's declared endpoints, one each.
func endpointRows(eps []sdk.WorkspaceEndpoint) [][2]string {
	var rows [][2]string
	for i, e := range eps {
		label := ""
		if i == 0 {
			label = "Endpoints"
		}
		where := e.Exposure + ", not served by the access proxy"
		if e.URL != "" {
			where = e.Exposure + ", " + e.URL
		}
		rows = append(rows, [2]string{label, fmt.Sprintf("%s (%s, port %d): %s", e.Name, e.Container, e.Port, where)})
	}
	return rows
}

// printWorkspace prints every field of one workspace, one per line.
func (a *app) printWorkspace(w io.Writer, ws sdk.Workspace) error {
	since := func(t *time.Time, none string) string {
		if t == nil {
			return none
		}
		return "since " + a.formatTime(*t)
	}
	lastErr := "none"
	if ws.Error != nil {
		lastErr = formatWorkspaceError(ws.Error)
	}
	respondedAt := "never"
	if ws.RespondedToAgentAt != nil {
		respondedAt = a.formatTime(*ws.RespondedToAgentAt)
	}
	lastUsed := "never"
	if ws.LastActivityAt != nil {
		lastUsed = a.formatTime(*ws.LastActivityAt)
	}
	deployment := "-"
	if ws.DeploymentResourceVersion != nil && *ws.DeploymentResourceVersion != "" {
		deployment = "resourceVersion " + *ws.DeploymentResourceVersion
	}
	rows := [][2]string{
		{"Name", ws.Name},
		{"ID", ws.ID},
		{"Owner", ws.Owner},
		{"Agent", ws.Agent},
		{"Namespace", dash(ws.Namespace)},
		{"URL", dash(ws.URL)},
		{"Desired state", fmt.Sprintf("%s (%s)", ws.DesiredState, since(ws.DesiredStateUpdatedAt, "never changed"))},
		{"Actual state", fmt.Sprintf("%s (%s)", actualState(ws), since(ws.ActualStateUpdatedAt, "not reported by the agent yet"))},
		{"Last error", lastErr},
		{"Last sent to agent", respondedAt},
		{"Deployment", deployment},
		{"Last used", lastUsed},
		{"Created", a.formatTime(ws.CreatedAt)},
	}
	rows = append(rows[:9:9], append(append(a.helperRows(ws), endpointRows(ws.Endpoints)...), rows[9:]...)...)
	if ws.Definition == "devcontainer.json" {
		rows = append(rows, [2]string{"Defined by", "devcontainer.json"})
	}
	rows = append(rows, a.repositoryRows(ws)...)
	rows = append(rows, a.dotfilesRows(ws)...)
	rows = append(rows, a.startupRows(ws)...)
	if ws.Backend == "terraform" {
		// Builds run it, not an agent: the agent's fields mean nothing here.
		rows = [][2]string{
			{"Name", ws.Name},
			{"ID", ws.ID},
			{"Owner", ws.Owner},
			{"Template", ws.Template + " (terraform; see hangar builds " + ws.Name + ")"},
			{"Desired state", fmt.Sprintf("%s (%s)", ws.DesiredState, since(ws.DesiredStateUpdatedAt, "never changed"))},
			{"Actual state", fmt.Sprintf("%s (%s)", actualState(ws), since(ws.ActualStateUpdatedAt, "no build yet"))},
			{"Last error", lastErr},
			{"Last used", lastUsed},
			{"Created", a.formatTime(ws.CreatedAt)},
		}
		if ws.ClaimedAt != nil {
			rows[len(rows)-1][1] += fmt.Sprintf(" (claimed: a prebuilt workspace of preset %s; hangar builds %s shows its prebuild)", ws.Preset, ws.Name)
		}
		rows = append(rows[:7:7], append(a.helperRows(ws), rows[7:]...)...)
		rows = append(rows[:4:4], append(parameterRows(ws), rows[4:]...)...)
		if ws.AppsURL != "" {
			rows = append(rows[:6:6], append([][2]string{{"Apps", ws.AppsURL + " (any port the machine listens on)"}}, rows[6:]...)...)
		}
		rows = append(rows, a.startupRows(ws)...)
	}
	rows = append(rows, a.resourceRows(ws)...)
	rows = append(rows, a.scheduleRows(ws)...)
	return a.printRows(w, rows)
}

// actualState is the workspace's actual state, and "startup failed" with the step when one failed
// while it runs.
func actualState(ws sdk.Workspace) string {
	if ws.StartupFailed != "" {
		return ws.ActualState + ", startup failed (" + ws.StartupFailed + ")"
	}
	return ws.ActualState
}

// printRows prints "Label:  value" lines, aligned.
func (a *app) printRows(w io.Writer, rows [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, r := range rows {
		if r[0] == "" { // a value continued from the line above
			fmt.Fprintf(tw, "\t%s\n", r[1])
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// scheduleRows are a workspace's lifecycle lines: its schedule, the policy in force, what the
// lifecycle executor will do next, and why it did what it did last.
func (a *app) scheduleRows(ws sdk.Workspace) [][2]string {
	autostart := "none"
	if ws.Schedule.Autostart != "" {
		autostart = fmt.Sprintf("%q (%s)", ws.Schedule.Autostart, cmp.Or(ws.Schedule.Timezone, "UTC"))
	}
	ttl := "the policy's"
	if ws.Schedule.TTL != nil {
		ttl = *ws.Schedule.TTL
		if ttl == "0s" {
			ttl = "off"
		}
	}
	rows := [][2]string{{"Autostart", autostart}}
	if au := ws.Automation; au != nil {
		ttl += ", in force: " + cmp.Or(au.TTL, "none")
		rows = append(rows, [2]string{"Autostop TTL", ttl}, [2]string{"Policy", policyText(au.Policy)})
		if au.AutostopAt != nil {
			rows = append(rows, [2]string{"Stops at", a.formatTime(*au.AutostopAt) + " unless used before"})
		}
		if au.NextAutostartAt != nil {
			rows = append(rows, [2]string{"Starts at", a.formatTime(*au.NextAutostartAt)})
		}
	} else {
		rows = append(rows, [2]string{"Autostop TTL", ttl})
	}
	if ws.DormantAt != nil {
		rows = append(rows, [2]string{"Dormant", "since " + a.formatTime(*ws.DormantAt) + " (starting it wakes it)"})
	}
	if ws.DesiredStateReason != "" {
		rows = append(rows, [2]string{"Changed by automation", ws.DesiredStateReason})
	}
	return rows
}

// policyText is a lifecycle policy on one line.
func policyText(l sdk.Lifecycle) string {
	var parts []string
	for _, p := range [][2]string{{"default TTL", l.DefaultTTL}, {"max TTL", l.MaxTTL}, {"failure TTL", l.FailureTTL},
		{"dormant after", l.DormancyThreshold}, {"deleted when dormant for", l.DormancyAutoDelete},
		{"max active", l.MaxActive}, {"max stopped", l.MaxStopped}} {
		if p[1] != "" {
			parts = append(parts, p[0]+" "+p[1])
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func formatWorkspaceError(e *sdk.WorkspaceError) string {
	switch {
	case e.Type != "" && e.Message != "":
		return e.Type + ": " + e.Message
	case e.Message != "":
		return e.Message
	}
	return e.Type
}

// listCommand builds a `list` command: fetch a list with the client, print it as a table or, with
// -o json, as the API's JSON.
func listCommand[T any](a *app, short string, fetch func(*sdk.Client, context.Context) ([]T, error), table func(io.Writer, []T) error) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			items, err := fetch(c, cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), items)
			}
			return table(cmd.OutOrStdout(), items)
		},
	}
}

// nameCommand builds a command that reads one thing by a workspace's name (`show NAME`,
// `builds NAME`) and prints it as a table or, with -o json, as the API's JSON.
func nameCommand[T any](a *app, use, short string, fetch func(*sdk.Client, context.Context, string) (T, error), table func(io.Writer, T) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  short + ".\n\n" + nameHelp,
		Args:  oneName("workspace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			v, err := fetch(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return table(cmd.OutOrStdout(), v)
		},
	}
}

// repositoryRows are show's lines about the repository a Kubernetes workspace was made from: the
// repository and ref, and the file and commit its definition was read at.
func (a *app) repositoryRows(ws sdk.Workspace) [][2]string {
	r := ws.Repository
	if r == nil {
		return nil
	}
	at := "its default branch"
	if r.Ref != "" {
		at = r.Ref
	}
	repo := r.URL + " at " + at
	if r.DevcontainerPath != "" {
		repo += " (" + r.DevcontainerPath + ")"
	}
	var def string
	switch {
	case r.Commit == "":
		def = "not read (no forge configured in Hangar serves the repository): the agent's default"
	case r.DefinitionPath == "":
		def = "the agent's default (no devfile or devcontainer.json at commit " + r.Commit + ")"
	default:
		def = r.DefinitionPath + " at commit " + r.Commit
	}
	return [][2]string{
		{"Repository", repo},
		{"Definition", def},
		{"", "read " + a.formatTime(r.ReadAt) + "; 'hangar update " + ws.Name + "' reads it again"},
	}
}

// logRows are the last n lines of a log as show's rows, each after "| ". The log is a script's or
// a build's output: its control characters (terminal escapes) are not passed to the terminal of
// whoever reads it.
func logRows(log string, n int) [][2]string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var rows [][2]string
	for _, l := range lines {
		if l = printable(l); l != "" {
			rows = append(rows, [2]string{"", "| " + l})
		}
	}
	return rows
}

// csiRE matches a terminal's control sequences (colours, cursor moves), which build tools print.
var csiRE = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]")

// printable drops a line's terminal control sequences and control characters but tabs.
func printable(l string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' && r != '\t' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, csiRE.ReplaceAllString(l, ""))
}

// startupRows are show's lines about a workspace's startup steps (the image build's prepare,
// build and push): each with its state, how long it took or has run, and how far it is; for a
// failed step, the last lines of its log ('hangar logs' shows more).
func (a *app) startupRows(ws sdk.Workspace) [][2]string {
	var rows [][2]string
	for i, st := range ws.StartupSteps {
		label := ""
		if i == 0 {
			label = "Startup"
		}
		line := fmt.Sprintf("%-13s %s", st.Name, st.State)
		switch {
		case st.StartedAt != nil && st.EndedAt != nil:
			line += " in " + st.EndedAt.Sub(*st.StartedAt).Round(time.Second).String()
		case st.StartedAt != nil && st.State == "running":
			line += " for " + a.now().Sub(*st.StartedAt).Round(time.Second).String()
		}
		if st.Detail != "" {
			line += ": " + printable(st.Detail)
		}
		rows = append(rows, [2]string{label, line})
		// The dotfiles' failure has its own lines (dotfilesRows).
		if st.State == "failed" && st.Name != protocol.StepDotfiles {
			rows = append(rows, logRows(st.Log, 10)...)
		}
	}
	return rows
}

// resourceRows are show's lines about what happens inside a running workspace, as its helper
// reports it: its CPU, memory and volumes (with their share of the limit), the custom metadata
// values, and its alerts (an active one first says so).
func (a *app) resourceRows(ws sdk.Workspace) [][2]string {
	var rows [][2]string
	if r := ws.Resources; r != nil {
		var parts []string
		if c := r.CPU; c != nil {
			parts = append(parts, fmt.Sprintf("CPU %.2f of %g cores", c.UsedCores, c.LimitCores))
		}
		if m := r.Memory; m != nil {
			parts = append(parts, "memory "+share(m.UsedBytes, m.LimitBytes))
		}
		for _, v := range r.Volumes {
			parts = append(parts, printable(v.Path)+" "+share(v.UsedBytes, v.TotalBytes))
		}
		if len(parts) == 0 {
			parts = append(parts, "not measured (the helper reads no cgroup v2 here)")
		}
		rows = append(rows, [2]string{"Resources", strings.Join(parts, ", ") + " (measured " + a.formatTime(r.CollectedAt) + ")"})
	}
	for i, m := range ws.Metadata {
		label := ""
		if i == 0 {
			label = "Metadata"
		}
		v := printable(m.Value)
		if m.Error != "" {
			v = strings.TrimSpace(v + " (" + printable(m.Error) + ")")
		}
		rows = append(rows, [2]string{label, printable(m.DisplayName) + ": " + v})
	}
	for i, al := range ws.Alerts {
		label := ""
		if i == 0 {
			label = "Alerts"
		}
		line := a.formatTime(al.RaisedAt) + " " + printable(al.Detail)
		if al.Active {
			line = "ACTIVE since " + line
		}
		rows = append(rows, [2]string{label, line})
	}
	return rows
}

// share is "USED of TOTAL (PERCENT)" in binary units; without a total, the used amount alone.
func share(used, total int64) string {
	if total <= 0 {
		return workspace.Bytes(used)
	}
	return fmt.Sprintf("%s of %s (%d%%)", workspace.Bytes(used), workspace.Bytes(total), used*100/total)
}

// dotfilesRows are show's lines about the install of the owner's dotfiles: its status, and for a
// failure the error and the last lines of its log.
func (a *app) dotfilesRows(ws sdk.Workspace) [][2]string {
	d := ws.Dotfiles
	if d == nil {
		return nil
	}
	status := d.Status
	switch d.Status {
	case "pending":
		status = "pending: " + d.Repository + " is installed at the workspace's next start"
	case "installing", "failed":
		status += " (" + d.Repository + ")"
	case "installed":
		how := "its dot-files linked into the home directory"
		if d.Script != "" {
			how = "with " + d.Script
		}
		status += " (" + d.Repository + ", " + how + ")"
	}
	if d.UpdatedAt != nil {
		status += ", " + a.formatTime(*d.UpdatedAt)
	}
	rows := [][2]string{{"Dotfiles", status}}
	if d.Status == "failed" {
		rows = append(rows, [2]string{"", "error: " + strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return ' '
			}
			return r
		}, d.Error)})
		rows = append(rows, logRows(d.Log, 10)...)
	}
	return rows
}
