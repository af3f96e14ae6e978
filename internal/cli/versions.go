package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/tfmodule"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Template versions (versions, promote, pull), hangar update, and the parameters of terraform
// templates (--parameter, and the questions asked on a terminal).

// parameterFlag collects repeated --parameter NAME=VALUE.
type parameterFlag struct{ values map[string]string }

func (p *parameterFlag) add(cmd *cobra.Command, help string) {
	cmd.Flags().Var(p, "parameter", help)
}

func (p *parameterFlag) String() string { return "" }
func (p *parameterFlag) Type() string   { return "NAME=VALUE" }
func (p *parameterFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	if p.values == nil {
		p.values = map[string]string{}
	}
	if _, dup := p.values[name]; dup {
		return fmt.Errorf("parameter %q given twice", name)
	}
	p.values[name] = value
	return nil
}

func (a *app) templateVersionsCmd() *cobra.Command {
	return nameCommand(a, "versions NAME", "List the versions of a template, newest first, and the parameters of each",
		(*sdk.Client).ListTemplateVersions, printTemplateVersions)
}

func printTemplateVersions(w io.Writer, vs []sdk.TemplateVersion) error {
	if len(vs) == 0 {
		_, err := fmt.Fprintln(w, "No versions.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tACTIVE\tPARAMETERS\tPUSHED BY\tHASH")
	for _, v := range vs {
		active := ""
		if v.Active {
			active = "active"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.Number, dash(active), dash(describeParameters(v.Parameters)), v.CreatedBy, shortHash(v.Hash))
	}
	return tw.Flush()
}

// describeParameters is "name (type, required, sensitive, mutable), ...".
func describeParameters(ps []sdk.TemplateParameter) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		attrs := []string{p.Type}
		if p.Required {
			attrs = append(attrs, "required")
		} else if !p.Sensitive {
			attrs = append(attrs, "default "+strconv.Quote(p.Default))
		}
		if p.Sensitive {
			attrs = append(attrs, "sensitive")
		}
		if p.Mutable {
			attrs = append(attrs, "mutable")
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", p.Name, strings.Join(attrs, ", ")))
	}
	return strings.Join(parts, ", ")
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func (a *app) templatePromoteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "promote NAME VERSION",
		Short: "Make a version of a template the active one (admin only)",
		Long: `Make a version of a template the active one: new workspaces, starts and 'hangar update' take it.
Workspaces on another version are shown outdated until they are updated.`,
		Example: "  hangar templates promote vm 2",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return usageError{fmt.Errorf("VERSION must be a version number (1, 2, ...), got %q", args[1])}
			}
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			t, err := c.PromoteTemplateVersion(cmd.Context(), args[0], n)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Template %s: version %d is active.\n", t.Name, t.ActiveVersion)
			return err
		},
	}
}

func (a *app) templatePullCmd() *cobra.Command {
	var dir, archive string
	cmd := &cobra.Command{
		Use:   "pull NAME [VERSION] (--directory DIR | --archive FILE)",
		Short: "Download a version of a template (admin only; the active one without VERSION)",
		Long: `Download a version of a template, the active one without VERSION: a terraform module is
unpacked into --directory DIR (which must not exist, or be empty) or written as the gzipped tar
archive --archive FILE ("-" for standard output); a kubernetes template's devfile is written to
--archive FILE.`,
		Example: `  hangar templates pull vm --directory ./vm
  hangar templates pull vm 1 --archive vm-v1.tar.gz`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (dir == "") == (archive == "") {
				return usageError{errors.New("give exactly one of --directory DIR or --archive FILE")}
			}
			number := 0
			if len(args) == 2 {
				n, err := strconv.Atoi(args[1])
				if err != nil || n < 1 {
					return usageError{fmt.Errorf("VERSION must be a version number (1, 2, ...), got %q", args[1])}
				}
				number = n
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			t, err := c.Template(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if t.Kind != "terraform" && dir != "" {
				return usageError{fmt.Errorf("template %s is a %s template: its devfile is one file, give --archive FILE", t.Name, t.Kind)}
			}
			content, got, err := c.PullTemplateVersion(cmd.Context(), args[0], number)
			if err != nil {
				return err
			}
			switch {
			case archive == "-":
				_, err = cmd.OutOrStdout().Write(content)
				return err
			case archive != "":
				if err := os.WriteFile(archive, content, 0o644); err != nil {
					return fmt.Errorf("write --archive: %w", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Wrote version %d of template %s to %s.\n", got, t.Name, archive)
				return err
			}
			if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
				return fmt.Errorf("--directory %s is not empty: pull into a new or empty directory", dir)
			}
			if err := tfmodule.Extract(content, dir); err != nil {
				return fmt.Errorf("unpack into --directory %s: %w", dir, err)
			}
			abs, _ := filepath.Abs(dir)
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Unpacked version %d of template %s into %s.\n", got, t.Name, abs)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "directory", "", "unpack the module into `DIR`")
	cmd.Flags().StringVar(&archive, "archive", "", "write the archive (or devfile) to `FILE` (\"-\" for standard output)")
	return cmd
}

func (a *app) updateCmd() *cobra.Command {
	var wf waitFlags
	var params parameterFlag
	cmd := &cobra.Command{
		Use:   "update NAME [--parameter NAME=VALUE ...] [--wait]",
		Short: "Move a workspace to its template's active version, or to its repository's newest definition",
		Long: `Move a terraform workspace to its template's active version, with new values of its mutable
parameters (and of any required parameter the active version adds; asked for on a terminal): a
running workspace is stopped, then started on the active version; a stopped one is started on it.
The state comes from the last build. A workspace already on the active version, with the same
values, is left as it is (running or stopped): update says so and does nothing. Immutable
parameters keep the value they were given at create; changing one is refused.

For a Kubernetes workspace created from a repository (hangar create --repo), read its definition
again (devfile, devcontainer.json, or the agent's default) at the newest commit of its branch, as
create did, and make it the workspace's: a running workspace is rolled onto it, a stopped one takes
it at its next start. A start never reads the repository: the definition stays the one of the last
create or update. The same definition changes nothing. 'hangar show' says the commit it was read at.

` + nameHelp,
		Example: `  hangar update my-vm --wait
  hangar update my-vm --parameter size=large --wait`,
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
			if ws.Backend == "terraform" && a.isTerminal(cmd.InOrStdin()) {
				// Ask for the required parameters the active version adds.
				have := map[string]bool{}
				for _, p := range ws.Parameters {
					have[p.Name] = true
				}
				if err := a.askParameters(cmd, c, ws.Template, have, &params); err != nil {
					return err
				}
			}
			out, err := c.UpdateWorkspaceVersion(cmd.Context(), args[0], sdk.UpdateWorkspaceVersionRequest{Parameters: params.values})
			if err != nil {
				return err
			}
			if out.Workspace.Backend != "terraform" {
				return a.finishDefinitionUpdate(cmd, c, format, wf, out)
			}
			if out.Result == "up-to-date" {
				if format == "json" {
					return printJSON(cmd.OutOrStdout(), out.Workspace)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Workspace %s is up to date (template %s version %d, the active one): nothing to do.\n",
					out.Workspace.Name, out.Workspace.Template, out.Workspace.TemplateVersion)
				return err
			}
			g := goals[workspace.Running]
			if out.Result == "restart" {
				g = goals[workspace.RestartRequested]
			}
			if !wf.wait && format != "json" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Updating %s: %s on the active version of template %s.\n", out.Workspace.Name,
					map[string]string{"restart": "stop, then start", "start": "start"}[out.Result], out.Workspace.Template)
			}
			return a.finish(cmd, c, format, wf, g, out.Workspace)
		},
	}
	params.add(cmd, "new value of a parameter (repeatable): a mutable one, or one the active version adds")
	wf.add(cmd, "Running on the active version")
	return cmd
}

// finishDefinitionUpdate reports the update of a Kubernetes workspace's definition from its
// repository, and with --wait follows a running workspace onto it.
func (a *app) finishDefinitionUpdate(cmd *cobra.Command, c *sdk.Client, format string, wf waitFlags, out sdk.UpdateWorkspaceVersionResponse) error {
	ws := out.Workspace
	printWarnings(cmd.ErrOrStderr(), ws.Warnings)
	at := "the repository"
	if r := ws.Repository; r != nil && r.Commit != "" {
		at = "commit " + r.Commit
		if r.DefinitionPath != "" {
			at = r.DefinitionPath + " at " + at
		}
	}
	if out.Result == "up-to-date" {
		if format == "json" {
			return printJSON(cmd.OutOrStdout(), ws)
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "Workspace %s is up to date: its definition is the one of %s.\n", ws.Name, at)
		return err
	}
	if format != "json" {
		then := "it takes it at its next start"
		if ws.DesiredState == string(workspace.Running) {
			then = "the agent rolls it onto it"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Updating %s: its definition is now the one of %s; %s.\n", ws.Name, at, then)
	}
	if ws.DesiredState != string(workspace.Running) {
		wf.wait = false
	}
	return a.finish(cmd, c, format, wf, goals[workspace.Running], ws)
}

// askParameters asks, on a terminal, for each required parameter of the template's active version
// that has no value yet (given, or in have); sensitive answers are not echoed.
func (a *app) askParameters(cmd *cobra.Command, c *sdk.Client, template string, have map[string]bool, params *parameterFlag) error {
	vs, err := c.ListTemplateVersions(cmd.Context(), template)
	if err != nil {
		return err
	}
	var active *sdk.TemplateVersion
	for i := range vs {
		if vs[i].Active {
			active = &vs[i]
		}
	}
	if active == nil {
		return nil
	}
	in := bufio.NewReader(cmd.InOrStdin())
	ps := append([]sdk.TemplateParameter(nil), active.Parameters...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	for _, p := range ps {
		if !p.Required || have[p.Name] {
			continue
		}
		if _, ok := params.values[p.Name]; ok {
			continue
		}
		prompt := fmt.Sprintf("%s (%s", p.Name, p.Type)
		if p.Description != "" {
			prompt += ": " + p.Description
		}
		prompt += "): "
		fmt.Fprint(cmd.ErrOrStderr(), prompt)
		value, err := readAnswer(cmd.InOrStdin(), in, p.Sensitive)
		if p.Sensitive {
			fmt.Fprintln(cmd.ErrOrStderr())
		}
		if err != nil {
			return fmt.Errorf("read parameter %s: %w", p.Name, err)
		}
		if err := params.Set(p.Name + "=" + value); err != nil {
			return err
		}
	}
	return nil
}

// readAnswer reads one line; a sensitive one without echo when stdin is a real terminal.
func readAnswer(stdin io.Reader, in *bufio.Reader, sensitive bool) (string, error) {
	if f, ok := stdin.(*os.File); ok && sensitive && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		return string(b), err
	}
	line, err := in.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// parameterRows are show's lines about a terraform workspace's version and parameters.
func parameterRows(ws sdk.Workspace) [][2]string {
	version := fmt.Sprintf("%d", ws.TemplateVersion)
	if ws.Outdated {
		version += " (outdated: the template's active version differs; 'hangar update " + ws.Name + "' moves it)"
	}
	vals := make([]string, 0, len(ws.Parameters))
	for _, p := range ws.Parameters {
		v := p.Value
		if p.Sensitive {
			v = "(sensitive)"
		}
		vals = append(vals, p.Name+"="+v)
	}
	return [][2]string{{"Template version", version}, {"Parameters", dash(strings.Join(vals, ", "))}}
}
