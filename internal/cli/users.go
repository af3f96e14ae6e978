package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

func (a *app) usersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage users",
		Args:  noSubcommand,
		RunE:  showHelp,
	}
	var admin bool
	create := &cobra.Command{
		Use:   "create NAME [--admin]",
		Short: "Create a user and print its token (admin only)",
		Long: `Create a user and print its API token. The token is shown only once: the server keeps only
its hash. Give it to the user, who runs 'hangar login --url URL --token TOKEN'.`,
		Args: oneName("user"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), sdk.CreateUserRequest{Username: args[0], Admin: admin})
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), u)
			}
			kind := "user"
			if u.Admin {
				kind = "admin user"
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Created %s %s.\n", kind, u.Username)
			printNewToken(w, u.Token)
			return nil
		},
	}
	create.Flags().BoolVar(&admin, "admin", false, "make the user an admin (may create users and agents, sees every workspace)")
	rotate := &cobra.Command{
		Use:   "rotate-token NAME",
		Short: "Revoke all of a user's tokens and give one new token (admin, or yourself as 'me')",
		Long: `Revoke every API token of a user and print one new token (named "initial", with the server's
default lifetime): a reset after a leak. The old tokens stop working at once, and so do the user's
browser sessions, through the workspace proxies and SSH too; the user's SSH keys are removed (one
may have been registered with the leaked token: add yours again). An admin may reset anyone's
tokens; any user may reset their own, named 'me' (then log in again with it).`,
		Args: oneName("user"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			u, err := c.RotateUserToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), u)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "New token for %s; the old one no longer works.\n", u.Username)
			printNewToken(w, u.Token)
			return nil
		},
	}
	cmd.AddCommand(create, rotate)
	cmd.AddCommand(a.usersAdminCmds()...)
	return cmd
}

func (a *app) agentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Register, list and change agents and their tokens",
		Args:  noSubcommand,
		RunE:  showHelp,
	}
	var configFile string
	create := &cobra.Command{
		Use:   "create NAME [--config FILE.json]",
		Short: "Register an agent and print its token (admin only)",
		Long: `Register an agent and print the token it authenticates with. The token is shown only once:
the server keeps only its hash.

--config names a JSON file with the agent configuration (dns_zone, namespace_mode, quotas,
resources, network_policy...); fields left out take the server's defaults. "-" reads standard input.`,
		Args: oneName("agent"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			req := sdk.CreateAgentRequest{Name: args[0]}
			if configFile != "" {
				b, err := readInput(cmd.InOrStdin(), configFile)
				if err != nil {
					return fmt.Errorf("read --config: %w", err)
				}
				if !json.Valid(b) {
					return fmt.Errorf("read --config %s: not valid JSON", configFile)
				}
				req.Config = json.RawMessage(bytes.TrimSpace(b))
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			ag, err := c.CreateAgent(cmd.Context(), req)
			if err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), ag.Warnings)
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), ag)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Registered agent %s.\n", ag.Name)
			fmt.Fprintf(w, "Token: %s\n", ag.Token)
			fmt.Fprintln(w, "This token is shown only once: configure the agent with it now.")
			return nil
		},
	}
	create.Flags().StringVar(&configFile, "config", "", "agent configuration, a JSON `FILE` (\"-\" for standard input)")
	list := listCommand(a, "List the registered agents", (*sdk.Client).ListAgents, a.printAgents)
	cmd.AddCommand(create, list)
	cmd.AddCommand(a.agentAdminCmds()...)
	return cmd
}

func (a *app) printAgents(w io.Writer, agents []sdk.Agent) error {
	if len(agents) == 0 {
		_, err := fmt.Fprintln(w, "No agents.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCONNECTED\tLAST SEEN\tDNS ZONE\tNAMESPACES\tCREATED")
	for _, ag := range agents {
		// The config is the server's workspace.AgentConfig with defaults filled in; a field this
		// client does not know is ignored.
		var cfg workspace.AgentConfig
		_ = json.Unmarshal(ag.Config, &cfg)
		ns := cfg.NamespaceMode
		if cfg.NamespaceMode == workspace.NamespaceShared && cfg.SharedNamespace != "" {
			ns += " (" + cfg.SharedNamespace + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ag.Name, agentConnected(ag), a.agentLastSeen(ag), dash(cfg.DNSZone), dash(ns), a.formatTime(ag.CreatedAt))
	}
	return tw.Flush()
}

// agentConnected is the agents list's CONNECTED column: yes when the agent called the server in
// the last two minutes (the server decides: server.AgentConnectedWithin).
func agentConnected(ag sdk.Agent) string {
	switch {
	case ag.Connected == nil:
		return "-" // a server older than the field
	case *ag.Connected:
		return "yes"
	}
	return "no"
}

// agentLastSeen is the LAST SEEN column: when the agent last called, or never.
func (a *app) agentLastSeen(ag sdk.Agent) string {
	if ag.LastSeenAt == nil {
		if ag.Connected == nil {
			return "-"
		}
		return "never"
	}
	return a.formatTime(*ag.LastSeenAt)
}

// readInput reads a file named on the command line; "-" is standard input.
func readInput(stdin io.Reader, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// printNewToken shows a token the server will never show again.
func printNewToken(w io.Writer, token string) {
	fmt.Fprintf(w, "Token: %s\n", token)
	fmt.Fprintln(w, "This token is shown only once: store it now.")
}
