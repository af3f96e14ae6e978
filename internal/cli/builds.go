package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/tfmodule"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The commands of the Terraform backend: templates, builds, logs, cancel, state, provisioners.

func (a *app) templatesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "templates", Short: "Push, list, promote, pull and delete templates", Args: noSubcommand, RunE: showHelp}
	var dir, devfileName string
	activate := true
	push := &cobra.Command{
		Use:   "push NAME (--directory DIR | --devfile FILE) [--activate=false]",
		Short: "Push a new version of a template (admin only)",
		Long: `Push a new version of a template, creating the template on its first push. A terraform
template is a module directory (--directory): its *.tf files are packed and sent; the server
checks they parse and records the variables they declare: those Hangar does not supply become the
template's parameters, which users give at create (hangar create --parameter). A kubernetes
template is a devfile (--devfile). New workspaces and the next start of existing ones use the
active version: the one pushed, unless --activate=false stores it for a later 'hangar templates
promote' (a new template's first version is always active).

A parameter is immutable unless the line right above its variable block is the comment
"# hangar:mutable"; 'sensitive = true' keeps its value from being shown anywhere.`,
		Example: `  hangar templates push vm --directory ./templates/vm`,
		Args:    oneName("template"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			var req sdk.CreateTemplateVersionRequest
			switch {
			case (dir == "") == (devfileName == ""):
				return usageError{errors.New("give exactly one of --directory (terraform) or --devfile (kubernetes)")}
			case dir != "":
				archive, err := tfmodule.Pack(dir)
				if err != nil {
					return fmt.Errorf("pack --directory %s: %w", dir, err)
				}
				if len(archive) > sdk.MaxTemplateArchiveBytes {
					return fmt.Errorf("pack --directory %s: the archive is %d bytes, the server accepts at most %d", dir, len(archive), sdk.MaxTemplateArchiveBytes)
				}
				req = sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}
			default:
				b, err := readInput(cmd.InOrStdin(), devfileName)
				if err != nil {
					return fmt.Errorf("read --devfile: %w", err)
				}
				req = sdk.CreateTemplateVersionRequest{Kind: "kubernetes", Devfile: string(b)}
			}
			if !activate {
				req.Activate = &activate
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			t, err := c.PushTemplateVersion(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			vars, params, number, active := "none", "none", t.ActiveVersion, true
			if len(t.Versions) > 0 {
				v := t.Versions[0]
				number, active = v.Number, v.Active
				if len(v.Variables) > 0 {
					vars = strings.Join(v.Variables, ", ")
				}
				if len(v.Parameters) > 0 {
					params = describeParameters(v.Parameters)
				}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Pushed %s template %s version %d (variables: %s; parameters: %s).\n", t.Kind, t.Name, number, vars, params)
			if err == nil && !active {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Version %d is not active (version %d is): 'hangar templates promote %s %d' activates it.\n",
					number, t.ActiveVersion, t.Name, number)
			}
			return err
		},
	}
	push.Flags().StringVar(&dir, "directory", "", "Terraform module `DIR` (a terraform template)")
	push.Flags().StringVar(&devfileName, "devfile", "", "devfile `FILE` (a kubernetes template; \"-\" for standard input)")
	push.Flags().BoolVar(&activate, "activate", true, "make the version the active one (false: store it for a later promote)")
	cmd.AddCommand(push, a.templatesInitCmd(), listCommand(a, "List templates", (*sdk.Client).ListTemplates, printTemplates), a.templateLifecycleCmd(),
		a.templateVersionsCmd(), a.templatePromoteCmd(), a.templatePullCmd(), a.presetsCmd(), a.presetCmd(), a.templateDeleteCmd())
	return cmd
}

func printTemplates(w io.Writer, ts []sdk.Template) error {
	if len(ts) == 0 {
		_, err := fmt.Fprintln(w, "No templates.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tVERSION\tUPDATED BY")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.Name, t.Kind, t.ActiveVersion, t.CreatedBy)
	}
	return tw.Flush()
}

func (a *app) buildsCmd() *cobra.Command {
	return nameCommand(a, "builds NAME", "List the builds of a terraform workspace, newest first", (*sdk.Client).ListBuilds, a.printBuilds)
}

func (a *app) printBuilds(w io.Writer, bs []sdk.Build) error {
	if len(bs) == 0 {
		_, err := fmt.Fprintln(w, "No builds.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILD\tTRANSITION\tSTATUS\tBY\tREASON\tVERSION\tSTATE\tCREATED\tDURATION\tERROR")
	for _, b := range bs {
		state := "-"
		switch {
		case b.Orphan:
			state = "orphaned"
		case b.StateCapturedOnCancel:
			state = "captured-on-cancel"
		case b.StatePruned:
			state = "pruned"
		case b.HasState:
			state = "yes"
		}
		dur := "-"
		if b.StartedAt != nil && b.CompletedAt != nil {
			dur = b.CompletedAt.Sub(*b.StartedAt).Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", b.Number, b.Transition, b.Status, b.Initiator, b.Reason,
			b.TemplateVersion, state, a.formatTime(b.CreatedAt), dur, dash(oneLine(b.Error)))
	}
	return tw.Flush()
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

func (a *app) logsCmd() *cobra.Command {
	var follow, startup bool
	var number int
	cmd := &cobra.Command{
		Use:   "logs NAME [-f] [--build N | --startup] [-o json]",
		Short: "Show the log of a workspace's build (the latest by default)",
		Long: "Show the log of a workspace's build (the latest by default). With -o json, each line is a JSON\n" +
			"object as the API sends it (time, stage, level, output; the last one, once the build has ended,\n" +
			"has end and the build's status), one per line.\n\n" +
			"A Kubernetes workspace has no builds: for it, logs shows its startup steps (the image build's\n" +
			"prepare, build and push) with the last lines of each one's log, as its agent last reported\n" +
			"them; -f follows them until none is pending or running; -o json prints each step as the API\n" +
			"has it.\n\n" +
			"--startup shows the startup steps of either kind of workspace instead of its build: a Terraform\n" +
			"workspace's are those its helper runs (its postStart commands).\n\n" + nameHelp,
		Args: oneName("workspace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			c, err := a.streamClient(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if startup && cmd.Flags().Changed("build") {
				return errors.New("--startup shows the startup steps, --build a build's log: give one of them")
			}
			if startup {
				if format == "json" {
					enc := json.NewEncoder(out)
					return a.startupLogs(cmd.Context(), c, args[0], follow, func(st sdk.WorkspaceStartupStep, _ string) error { return enc.Encode(st) })
				}
				return a.startupLogs(cmd.Context(), c, args[0], follow, func(st sdk.WorkspaceStartupStep, text string) error {
					return a.printStepLog(out, st, text)
				})
			}
			if format == "json" {
				enc := json.NewEncoder(out)
				err := c.BuildLogs(cmd.Context(), args[0], number, 0, follow, func(l sdk.BuildLog) error { return enc.Encode(l) })
				if notTerraform(err) && number == 0 {
					return a.startupLogs(cmd.Context(), c, args[0], follow, func(st sdk.WorkspaceStartupStep, _ string) error { return enc.Encode(st) })
				}
				return err
			}
			var status string
			err = c.BuildLogs(cmd.Context(), args[0], number, 0, follow, func(l sdk.BuildLog) error {
				if l.End {
					status = l.Status
					return nil
				}
				_, err := fmt.Fprintf(out, "%s  %-22s %s\n", l.Time.In(a.loc).Format("15:04:05.000"), l.Stage, l.Output)
				return err
			})
			if notTerraform(err) && number == 0 {
				return a.startupLogs(cmd.Context(), c, args[0], follow, func(st sdk.WorkspaceStartupStep, text string) error {
					return a.printStepLog(out, st, text)
				})
			}
			if err != nil {
				return err
			}
			if status != "" {
				_, err = fmt.Fprintf(out, "Build %s.\n", status)
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep following the log until the build ends")
	cmd.Flags().IntVar(&number, "build", 0, "build `N` (default: the latest)")
	cmd.Flags().BoolVar(&startup, "startup", false, "show the workspace's startup steps (either backend) instead of a build's log")
	return cmd
}

// streamClient is a client without the per-request time bound: a followed log lasts as long as the
// build.
func (a *app) streamClient(cmd *cobra.Command) (*sdk.Client, error) {
	c, err := a.client(cmd)
	if err != nil {
		return nil, err
	}
	hc := *c.HTTP
	hc.Timeout = 0
	c.HTTP = &hc
	return c, nil
}

func (a *app) cancelCmd() *cobra.Command {
	var number int
	cmd := &cobra.Command{
		Use:   "cancel NAME [--build N]",
		Short: "Cancel a workspace's running build (the latest by default)",
		Long: `Cancel a build. A build no provisioner has picked up ends at once; a running one is interrupted:
Terraform finishes the operations in progress and stops, and the state it wrote is kept (marked
captured-on-cancel), so nothing it created is forgotten.

` + nameHelp,
		Args: oneName("workspace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			b, err := c.CancelBuild(cmd.Context(), args[0], number)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), b)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Build #%d (%s) is %s.\n", b.Number, b.Transition, b.Status)
			return err
		},
	}
	cmd.Flags().IntVar(&number, "build", 0, "build `N` (default: the latest)")
	return cmd
}

func (a *app) stateCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "state", Short: "Pull or push the Terraform state of a workspace", Args: noSubcommand, RunE: showHelp}
	var number int
	pull := &cobra.Command{
		Use:   "pull NAME [FILE] [--build N]",
		Short: "Write the Terraform state of a build (the latest by default) to FILE or standard output",
		Long:  "Write the Terraform state of a build (the latest by default) to FILE or standard output.\n\n" + nameHelp,
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			state, n, err := c.PullState(cmd.Context(), args[0], number)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				_, err = cmd.OutOrStdout().Write(state)
				return err
			}
			if err := os.WriteFile(args[1], state, 0o600); err != nil {
				return fmt.Errorf("write %s: %w", args[1], err)
			}
			_, err = fmt.Fprintf(cmd.ErrOrStderr(), "Wrote the state of build #%d (%d bytes) to %s.\n", n, len(state), args[1])
			return err
		},
	}
	pull.Flags().IntVar(&number, "build", 0, "build `N` (default: the latest)")
	var noBuild, force bool
	var wf waitFlags
	push := &cobra.Command{
		Use:   "push NAME FILE [--no-build [--force]]",
		Short: "Start a build from the state in FILE, or with --no-build replace the latest build's state",
		Long: `Push a Terraform state. By default a start build runs from it (Terraform reconciles what the state
says with what exists); with --no-build it replaces the state of the latest build and nothing runs.
With --no-build the file must be a Terraform state (version, terraform_version, serial, lineage)
that follows the saved one: the same lineage and a greater serial (bump the serial after editing
a pulled state). --force replaces the saved state with any Terraform state.

` + nameHelp,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			if force && !noBuild {
				return usageError{errors.New("--force applies only with --no-build")}
			}
			state, err := readInput(cmd.InOrStdin(), args[1])
			if err != nil {
				return fmt.Errorf("read %s: %w", args[1], err)
			}
			if len(state) > protocol.MaxStateBytes {
				return fmt.Errorf("read %s: the state is %d bytes, the server accepts at most %d", args[1], len(state), protocol.MaxStateBytes)
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			if noBuild {
				if err := c.PushState(cmd.Context(), args[0], state, force); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Replaced the state of %s's latest build (%d bytes); no build ran.\n", args[0], len(state))
				return err
			}
			b, err := c.CreateBuild(cmd.Context(), args[0], sdk.CreateBuildRequest{Transition: "start", State: state})
			if err != nil {
				return err
			}
			return a.finishBuild(cmd, c, format, wf, args[0], b)
		},
	}
	push.Flags().BoolVar(&noBuild, "no-build", false, "replace the latest build's state; run nothing")
	push.Flags().BoolVar(&force, "force", false, "with --no-build: replace the state even if it does not follow the saved one (another lineage, a serial not greater)")
	wf.add(push, "Running")
	cmd.AddCommand(pull, push)
	return cmd
}

func (a *app) provisionersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "provisioners", Short: "Register and list provisioner daemons, and replace their tokens", Args: noSubcommand, RunE: showHelp}
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Register a provisioner and print its token (admin only)",
		Args:  oneName("provisioner"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			p, err := c.CreateProvisioner(cmd.Context(), sdk.CreateProvisionerRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), p)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Registered provisioner %s.\nToken (shown only once): %s\nRun: hangar provisioner --server URL --token-file FILE\n", p.Name, p.Token)
			return err
		},
	}
	cmd.AddCommand(create, listCommand(a, "List provisioners (admin only)", (*sdk.Client).ListProvisioners, a.printProvisioners))
	cmd.AddCommand(a.provisionerAdminCmds()...)
	return cmd
}

func (a *app) printProvisioners(w io.Writer, ps []sdk.Provisioner) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "No provisioners registered (hangar server runs its own unless --provisioners 0).")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLAST SEEN")
	for _, p := range ps {
		seen := "never"
		if p.LastSeenAt != nil {
			seen = a.formatTime(*p.LastSeenAt)
		}
		name := p.Name
		if p.BuiltIn {
			name = fmt.Sprintf("%s (in the server, %d daemon%s)", p.Name, p.Daemons, map[bool]string{true: "s"}[p.Daemons != 1])
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, seen)
	}
	return tw.Flush()
}

// finishBuild prints a build a command started, or with --wait follows it (see followBuild).
func (a *app) finishBuild(cmd *cobra.Command, c *sdk.Client, format string, wf waitFlags, name string, b sdk.Build) error {
	if !wf.wait {
		if format == "json" {
			return printJSON(cmd.OutOrStdout(), b)
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "Build #%d (%s) of %s is %s.\n", b.Number, b.Transition, name, b.Status)
		return err
	}
	ws, err := c.Workspace(cmd.Context(), name)
	if err != nil {
		return err
	}
	return a.finish(cmd, c, format, wf, goalOfTransition(b.Transition), ws)
}

// followBuild shows a terraform workspace's latest build as it runs: each stage when it begins,
// then, when it is over, the time it took, marked ✔ if the build went on past it or succeeded and
// ✘ if the build ended there without succeeding; then the result. When stdin is a terminal, Ctrl-C
// asks whether to cancel the build (anything but y: the build goes on), and a Ctrl-C while that
// question is open ends the wait. When stdin is not a terminal nobody can answer, so Ctrl-C ends
// the wait at once (the build goes on) instead of asking a question that would block Ctrl-C.
func (a *app) followBuild(ctx context.Context, cmd *cobra.Command, c *sdk.Client, name string, progress io.Writer) (sdk.Build, error) {
	sc, err := a.streamClient(cmd)
	if err != nil {
		return sdk.Build{}, err
	}
	b, err := sc.Build(ctx, name, 0)
	if err != nil {
		return b, err
	}
	fmt.Fprintf(progress, "Build #%d (%s) %s\n", b.Number, b.Transition, b.Status)

	asked := make(chan struct{}, 1)
	var asking atomic.Bool
	if a.isTerminal(cmd.InOrStdin()) {
		release := interrupts.take(func() bool {
			if asking.Load() {
				return false // Ctrl-C at the question: end the wait
			}
			select {
			case asked <- struct{}{}:
			default:
			}
			return true
		})
		defer release()
	}
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	answered := make(chan error, 1)
	go func() {
		for {
			select {
			case <-fctx.Done():
				return
			case <-asked:
			}
			asking.Store(true)
			fmt.Fprintf(progress, "\nCancel build #%d of %s? [y/N] ", b.Number, name)
			line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			asking.Store(false)
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y") {
				_, err := c.CancelBuild(ctx, name, b.Number)
				if err == nil {
					fmt.Fprintln(progress, "Canceling: Terraform stops after the operations in progress; its state is kept.")
				}
				answered <- err
				continue
			}
			fmt.Fprintln(progress, "The build goes on.")
		}
	}()

	stage, stageAt := "", time.Time{}
	var status string
	err = sc.BuildLogs(fctx, name, b.Number, 0, true, func(l sdk.BuildLog) error {
		if l.End {
			status = l.Status
			if stage != "" {
				fmt.Fprintf(progress, "  %s\n", stageEnd(stage, l.Status, l.Time.Sub(stageAt)))
			}
			return nil
		}
		// The server's notice of a cancel is a note on the stage that runs, which terraform's
		// interrupt then ends: it does not end that stage.
		note := l.Stage == build.StageCanceling && stage != ""
		if l.Stage != "" && l.Stage != stage && !note {
			if stage != "" {
				fmt.Fprintf(progress, "  ✔ %s (%s)\n", stage, l.Time.Sub(stageAt).Round(10*time.Millisecond))
			}
			stage, stageAt = l.Stage, l.Time
			fmt.Fprintf(progress, "==> %s\n", stage)
		}
		if l.Level == "error" || l.Level == "warn" {
			fmt.Fprintf(progress, "    %s\n", l.Output)
		}
		return nil
	})
	select {
	case cerr := <-answered:
		if cerr != nil {
			return b, fmt.Errorf("cancel build #%d: %w", b.Number, cerr)
		}
	default:
	}
	if err != nil {
		return b, err
	}
	final, err := c.Build(ctx, name, b.Number)
	if err != nil {
		return b, err
	}
	if status == "" {
		status = final.Status
	}
	fmt.Fprintf(progress, "Build #%d %s", final.Number, status)
	if final.StartedAt != nil && final.CompletedAt != nil {
		fmt.Fprintf(progress, " in %s", final.CompletedAt.Sub(*final.StartedAt).Round(10*time.Millisecond))
	}
	fmt.Fprintln(progress, ".")
	return final, nil
}

// stageEnd is the line that ends the stage a build ended in: it passed only if the build
// succeeded; it was canceled, or it failed.
func stageEnd(stage, status string, took time.Duration) string {
	took = took.Round(10 * time.Millisecond)
	switch {
	case status == string(build.Succeeded):
		return fmt.Sprintf("✔ %s (%s)", stage, took)
	case status == string(build.Canceled) && stage == build.StageCanceling:
		return fmt.Sprintf("⊘ Canceled (%s)", took) // before terraform ran
	case status == string(build.Canceled):
		return fmt.Sprintf("⊘ %s canceled (%s)", stage, took)
	}
	return fmt.Sprintf("✘ %s (%s)", stage, took)
}

func goalOfTransition(t string) goal {
	switch t {
	case "start":
		return goals["Running"]
	case "stop":
		return goals["Stopped"]
	}
	return goals["Terminated"]
}

func (a *app) templateDeleteCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete NAME [--yes]",
		Short: "Delete a template nothing uses any more (admin only)",
		Long: `Delete a template: it leaves hangar templates list, and its name may be pushed again as a new
template. It is refused while workspaces of it are not deleted (prebuilt ones included), naming
them, and while it has presets: delete those first (hangar delete, hangar templates preset NAME
PRESET --delete). Deleted workspaces of it keep their builds and logs. It asks before deleting,
on a terminal; --yes skips the question.`,
		Example: `  hangar templates delete old-vm --yes`,
		Args:    oneName("template"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			name := args[0]
			if !yes {
				t, err := c.Template(cmd.Context(), name)
				if err != nil {
					return err
				}
				if !a.isTerminal(cmd.InOrStdin()) {
					return usageError{fmt.Errorf("deleting template %s cannot be undone (its versions go with it: %d): pass --yes to confirm (stdin is not a terminal to ask on)", name, len(t.Versions))}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Delete template %s? Its versions go with it (%d); this cannot be undone. [y/N] ", name, len(t.Versions))
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if ans := strings.ToLower(strings.TrimSpace(line)); err != nil && line == "" || ans != "y" && ans != "yes" {
					return errors.New("template " + name + " was not deleted")
				}
			}
			if err := c.DeleteTemplate(cmd.Context(), name); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted template %s.\n", name)
			return err
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	return cmd
}

// notTerraform reports whether err is the build endpoints' answer for a Kubernetes workspace.
func notTerraform(err error) bool {
	var ae *sdk.APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusConflict && ae.Body.Message == sdk.NotTerraformMessage
}

// startupLogs shows a Kubernetes workspace's startup steps: emit gets each step with the part of
// its log not shown yet. With follow, it reads the workspace again every poll interval until no
// step is pending or running (or the workspace is no longer meant to run).
func (a *app) startupLogs(ctx context.Context, c *sdk.Client, name string, follow bool, emit func(sdk.WorkspaceStartupStep, string) error) error {
	shown := map[string]sdk.WorkspaceStartupStep{}
	for {
		ws, err := c.Workspace(ctx, name)
		if err != nil {
			return err
		}
		// With -f, a workspace that starts may not have reported its steps yet; one that does not
		// start never will.
		starting := ws.ActualState == string(workspace.CreationRequested) || ws.ActualState == string(workspace.Starting)
		if len(ws.StartupSteps) == 0 && len(shown) == 0 && (!follow || !starting) {
			if ws.Backend == string(workspace.KindTerraform) {
				return fmt.Errorf("workspace %s has no startup steps: its helper has reported none (its template's machine runs no postStart commands, or its helper has not run them yet)", ws.Name)
			}
			return fmt.Errorf("workspace %s is a Kubernetes workspace and has no build; its agent has reported no startup steps (its definition builds no image)", ws.Name)
		}
		active := false
		for _, st := range ws.StartupSteps {
			prev, seen := shown[st.Name]
			if st.State == "pending" || st.State == "running" {
				active = true
			}
			if seen && prev.State == st.State && prev.Detail == st.Detail && prev.Log == st.Log {
				continue
			}
			text := st.Log
			if seen && sameRun(prev, st) {
				text = logAfter(prev.Log, st.Log)
			}
			if err := emit(st, text); err != nil {
				return err
			}
			shown[st.Name] = st
		}
		if !follow || (!active && len(ws.StartupSteps) > 0) || ws.DesiredState != string(workspace.Running) {
			return nil
		}
		t := time.NewTimer(a.pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sameRun reports whether two reports of a step are of the same run of it.
func sameRun(a, b sdk.WorkspaceStartupStep) bool {
	return a.StartedAt != nil && b.StartedAt != nil && a.StartedAt.Equal(*b.StartedAt)
}

// logAfter is the part of a step's log now that was not in its log before. Both are tails of
// the same log (the agent keeps the last 16 KiB, marked when lines were cut): now is a part of old
// that lost its first lines, followed by what was added. So the longest end of old, from a line's
// start, that now begins with is what both have; what follows it in now is new. When none is (more
// was added than is kept), now is new whole.
func logAfter(old, now string) string {
	old = strings.TrimPrefix(old, protocol.TruncatedPrefix)
	now = strings.TrimPrefix(now, protocol.TruncatedPrefix)
	for i := 0; i < len(old); {
		if strings.HasPrefix(now, old[i:]) {
			return now[len(old)-i:]
		}
		j := strings.IndexByte(old[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return now
}

// printStepLog prints a step's heading (name, state, progress) and the new part of its log.
func (a *app) printStepLog(out io.Writer, st sdk.WorkspaceStartupStep, text string) error {
	head := "== " + st.Name + ": " + st.State
	if st.Detail != "" {
		head += " (" + printable(st.Detail) + ")"
	}
	if _, err := fmt.Fprintln(out, head); err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l = printable(l); l != "" {
			if _, err := fmt.Fprintln(out, l); err != nil {
				return err
			}
		}
	}
	return nil
}
