package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// waitFlags are the flags of every command that can wait for a workspace.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (f *waitFlags) add(cmd *cobra.Command, goal string) {
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait until the workspace is "+goal+", showing each state change")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up --wait after `DURATION` (e.g. 90s, 5m)")
}

// logLevelUsage is the help of --log-level.
const logLevelUsage = "terraform workspaces: `LEVEL` of the builds' Terraform log, info or debug (debug runs Terraform with TF_LOG=DEBUG for these builds only; 'hangar logs' shows its lines)"

func (a *app) createCmd() *cobra.Command {
	var agent, devfileName, devcontainerName, repo, devcontainerPath, template, logLevel, preset string
	var wf waitFlags
	var params parameterFlag
	cmd := &cobra.Command{
		Use:   "create NAME (--agent AGENT [--devfile FILE | --devcontainer FILE | --repo URL[#REF] [--devcontainer-path PATH]] | --template TEMPLATE [--parameter NAME=VALUE ... | --preset PRESET] [--log-level debug]) [--wait]",
		Short: "Create a workspace",
		Long: `Create a workspace, desired state Running: on the cluster of an agent, from a devfile
(schemaVersion 2.2.0; without --devfile the server's default devfile), a devcontainer.json
(--devcontainer: its image, ports, environment, user, volumes and lifecycle commands; what needs
an image build or privileges is refused, naming the field), a repository (--repo: cloned as the
workspace's first project at REF, and defined by its .devfile.yaml or devfile.yaml, else its
devcontainer.json, read with your linked forge account: see hangar external-auth) or a kubernetes
template (with --repo too when the template's devfile says hangar.dev/definition-from: repository:
the repository's definition when it has one, else the template's devfile, under the template's
policies either way); or from a terraform template, which provisioners build (no agent). A terraform template's parameters
are given with --parameter NAME=VALUE (a string, number or bool as text, a list or map as JSON);
on a terminal, the required ones not given are asked for (sensitive ones without echo). The values
are checked before any build. With --preset, a ready prebuilt workspace of the template's preset
is claimed (it is yours at once, with a start that completes what the prebuild left for its user);
without a ready one, the workspace is built with the preset's version and parameters.`,
		Example: `  hangar create my-ws --agent eu --devfile devfile.yaml --wait
  hangar create my-ws --agent eu --devcontainer .devcontainer/devcontainer.json --wait
  hangar create my-ws --agent eu --repo https://github.com/team/app#main --wait
  hangar create my-ws --agent eu --template team --repo https://github.com/team/app --wait
  hangar create my-vm --template vm --parameter size=large --wait
  hangar create my-vm --template vm --preset small --wait`,
		Args: oneName("workspace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			req := sdk.CreateWorkspaceRequest{Name: args[0], Agent: agent, Template: template, LogLevel: logLevel, Preset: preset}
			if preset != "" && template == "" {
				return usageError{errors.New("--preset names a preset of --template: give --template too")}
			}
			if agent == "" && template == "" {
				return usageError{errors.New("give --agent (a cluster) or --template (a template)")}
			}
			if devcontainerPath != "" && repo == "" {
				return usageError{errors.New("--devcontainer-path names a devcontainer.json in --repo: give --repo too")}
			}
			if repo != "" {
				u, ref, _ := strings.Cut(repo, "#")
				req.Repository = &sdk.RepositorySource{URL: u, Ref: ref, DevcontainerPath: devcontainerPath}
			}
			if devcontainerName != "" {
				b, err := readInput(cmd.InOrStdin(), devcontainerName)
				if err != nil {
					return fmt.Errorf("read --devcontainer: %w", err)
				}
				if len(b) > sdk.MaxDevfileBytes {
					return fmt.Errorf("read --devcontainer %s: it is %d bytes, the server accepts at most %d", devcontainerName, len(b), sdk.MaxDevfileBytes)
				}
				req.Devcontainer = string(b)
			}
			if devfileName != "" {
				b, err := readInput(cmd.InOrStdin(), devfileName)
				if err != nil {
					return fmt.Errorf("read --devfile: %w", err)
				}
				if len(b) > sdk.MaxDevfileBytes {
					return fmt.Errorf("read --devfile %s: it is %d bytes, the server accepts at most %d", devfileName, len(b), sdk.MaxDevfileBytes)
				}
				req.Devfile = string(b)
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			if template != "" && a.isTerminal(cmd.InOrStdin()) {
				if t, err := c.Template(cmd.Context(), template); err == nil && t.Kind == "terraform" {
					if err := a.askParameters(cmd, c, template, nil, &params); err != nil {
						return err
					}
				}
			}
			req.Parameters = params.values
			ws, err := c.CreateWorkspace(cmd.Context(), req)
			if err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), ws.Warnings)
			if ws.ClaimedAt != nil && format != "json" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Claimed a prebuilt workspace of preset %s (template %s): it was built ahead, and now starts as yours.\n", ws.Preset, ws.Template)
			}
			return a.finish(cmd, c, format, wf, goals[workspace.Running], ws)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the `AGENT` whose cluster runs the workspace")
	cmd.Flags().StringVar(&devfileName, "devfile", "", "devfile `FILE` (YAML; \"-\" for standard input)")
	cmd.Flags().StringVar(&devcontainerName, "devcontainer", "", "devcontainer.json `FILE` defining the workspace instead of a devfile (\"-\" for standard input)")
	cmd.Flags().StringVar(&repo, "repo", "", "create from the repository at `URL` (https, or SSH: git@host:path or ssh://, cloned with your hangar gitssh key; URL#REF for a branch, tag or commit): its first project, defined by its devfile or devcontainer.json")
	cmd.Flags().StringVar(&devcontainerPath, "devcontainer-path", "", "with --repo: the devcontainer.json to use when the repository has several (`PATH` such as .devcontainer/go/devcontainer.json)")
	cmd.Flags().StringVar(&template, "template", "", "create from `TEMPLATE` (see hangar templates list)")
	params.add(cmd, "value of a terraform template's parameter (repeatable)")
	cmd.Flags().StringVar(&logLevel, "log-level", "", logLevelUsage)
	cmd.Flags().StringVar(&preset, "preset", "", "claim a prebuilt workspace of the template's `PRESET`, or build with its settings (see hangar templates presets)")
	wf.add(cmd, "Running")
	return cmd
}

func (a *app) listCmd() *cobra.Command {
	var all, prebuilds bool
	cmd := listCommand(a, "List workspaces (an admin sees every user's)", func(c *sdk.Client, ctx context.Context) ([]sdk.Workspace, error) {
		return c.ListWorkspacesWith(ctx, sdk.ListWorkspacesOptions{All: all, Prebuilds: prebuilds})
	}, printWorkspaces)
	cmd.Use = "list [--all] [--prebuilds]"
	cmd.Long = `List workspaces: yours, or, for an admin, every user's (OWNER says whose). Deleted (Terminated)
workspaces are left out; --all lists them too. An admin's --prebuilds lists the unclaimed prebuilt
workspaces too (owner hangar-prebuilds; see hangar templates presets).`
	cmd.Flags().BoolVar(&all, "all", false, "list Terminated (deleted) workspaces too")
	cmd.Flags().BoolVar(&prebuilds, "prebuilds", false, "list the unclaimed prebuilt workspaces too (admins)")
	return cmd
}

func (a *app) showCmd() *cobra.Command {
	return nameCommand(a, "show NAME", "Show every field of a workspace", (*sdk.Client).Workspace, a.printWorkspace)
}

// nameHelp is said in the help of every command that takes a workspace.
const nameHelp = `NAME is one of your workspaces, or OWNER/NAME: an admin names another user's workspace so.
Names are unique per owner; a deleted (Terminated) workspace's name may be used again.`

// transition is a command that changes a workspace's desired state.
type transition struct {
	use, short, long string
	to               workspace.State
}

var transitions = []transition{
	{use: "start", to: workspace.Running, short: "Start a workspace (desired state Running)"},
	{use: "stop", to: workspace.Stopped, short: "Stop a workspace (desired state Stopped)",
		long: `Stop a workspace. A Kubernetes workspace is scaled to zero: its volume, and the files on it, are
kept for the next start. A workspace made from a terraform template runs a stop build: terraform
apply with start_count = 0, which removes what the template counts by it (the machine) and keeps the
rest (a disk, say).`},
	{use: "restart", to: workspace.RestartRequested, short: "Restart a running workspace (desired state RestartRequested)",
		long: `Restart a running workspace: the agent scales it to zero, then the server sets the desired state
back to Running. With --wait, the command ends when the workspace runs again.`},
	{use: "delete", to: workspace.Terminated, short: "Delete a workspace and everything it made (desired state Terminated)",
		long: `Delete a workspace. For a Kubernetes workspace the agent deletes its resources, its volume
included. For a workspace made from a terraform template a delete build runs terraform destroy,
which removes every resource of the template (--orphan skips Terraform and leaves every resource in
place). Termination is permanent; a terminated workspace cannot be started again.`},
}

func (a *app) transitionCmd(t transition) *cobra.Command {
	var wf waitFlags
	var orphan, yes bool
	var logLevel string
	g := goals[t.to]
	cmd := &cobra.Command{
		Use:   t.use + " NAME [--wait] [--log-level debug]" + map[bool]string{true: " [--orphan] [--yes]"}[t.to == workspace.Terminated],
		Short: t.short,
		Long:  cmp.Or(t.long, t.short+".") + "\n\n" + nameHelp,
		Args:  oneName("workspace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			if t.to == workspace.Terminated && !yes {
				if err := a.confirmDelete(cmd, c, args[0], orphan); err != nil {
					return err
				}
			}
			if orphan {
				b, err := c.CreateBuild(cmd.Context(), args[0], sdk.CreateBuildRequest{Transition: "delete", Orphan: true})
				if err != nil {
					return err
				}
				if !wf.wait {
					fmt.Fprintln(cmd.ErrOrStderr(), "Orphan delete: Terraform was not run; the workspace's resources were left in place. Clean them up by hand.")
				}
				return a.finishBuild(cmd, c, format, wf, args[0], b)
			}
			ws, err := c.UpdateWorkspace(cmd.Context(), args[0], sdk.UpdateWorkspaceRequest{DesiredState: string(t.to), LogLevel: logLevel})
			if err != nil {
				return err
			}
			if t.to == workspace.Running || t.to == workspace.RestartRequested {
				printWarnings(cmd.ErrOrStderr(), ws.Warnings)
			}
			return a.finish(cmd, c, format, wf, g, ws)
		},
	}
	wf.add(cmd, g.describe)
	cmd.Flags().StringVar(&logLevel, "log-level", "", logLevelUsage)
	if t.to == workspace.Terminated {
		cmd.Flags().BoolVar(&orphan, "orphan", false, "terraform workspaces: delete without running Terraform, leaving every resource in place")
		cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking (needed when stdin is not a terminal)")
	}
	return cmd
}

// finish prints the workspace a command created or changed, or, with --wait, follows it to goal.
func (a *app) finish(cmd *cobra.Command, c *sdk.Client, format string, wf waitFlags, g goal, ws sdk.Workspace) error {
	out := cmd.OutOrStdout()
	if !wf.wait {
		if format == "json" {
			return printJSON(out, ws)
		}
		return printWorkspaces(out, []sdk.Workspace{ws})
	}
	// In JSON mode stdout carries only the final workspace; progress goes to stderr.
	progress := out
	if format == "json" {
		progress = cmd.ErrOrStderr()
	}
	// One deadline for the whole wait: following the builds of a terraform workspace and then
	// reading the workspace share --timeout (each once had its own, so a wait could last twice
	// as long).
	ctx, cancel := context.WithTimeoutCause(cmd.Context(), wf.timeout, errWaitTimeout)
	defer cancel()
	if ws.Backend == "terraform" {
		if err := a.followBuilds(ctx, cmd, c, ws, g, progress); err != nil {
			return err
		}
	}
	final, err := a.wait(ctx, c, ws, g, wf.timeout, progress)
	if err != nil {
		return err
	}
	if format == "json" {
		return printJSON(out, final)
	}
	if final.URL != "" && g.actual == workspace.Running {
		_, err = fmt.Fprintf(out, "Workspace %s is %s at %s\n", final.Name, final.ActualState, final.URL)
	} else {
		_, err = fmt.Fprintf(out, "Workspace %s is %s.\n", final.Name, final.ActualState)
	}
	return err
}

// followBuilds shows the builds of a terraform workspace as they run until the workspace reaches g
// or a build ends without getting there (a restart runs two builds: the stop, then the start).
// ctx carries the wait's deadline (--timeout), which a.wait then shares.
func (a *app) followBuilds(ctx context.Context, cmd *cobra.Command, c *sdk.Client, ws sdk.Workspace, g goal, progress io.Writer) error {
	until := g.until(ws)
	followed := 0
	for {
		b, err := a.followBuild(ctx, cmd, c, ws.Ref(), progress)
		if err != nil {
			if ctx.Err() != nil {
				return nil // a.wait reports the time-out or the interrupt
			}
			return err
		}
		cur, err := c.Workspace(ctx, ws.Ref())
		if err != nil {
			return err
		}
		if done, err := until(cur); done || err != nil {
			return err
		}
		latest, err := c.Build(ctx, ws.Ref(), 0)
		if err != nil {
			return err
		}
		if latest.Number == b.Number || latest.Number == followed {
			return nil // nothing new to follow: a.wait finishes
		}
		followed = b.Number
	}
}

// printWarnings writes what the server accepted but ignores, one "warning:" line each, to standard
// error, so that --output json on standard output stays machine-readable.
func printWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}
