package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// tokensCmd is `hangar tokens create|list|revoke`: the caller's API tokens (docs/decisions.md,
// "API tokens").
func (a *app) tokensCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Short: "Create, list and revoke your API tokens", Args: noSubcommand, RunE: showHelp}
	var lifetime string
	create := &cobra.Command{
		Use:   "create NAME [--lifetime 30d]",
		Short: "Create an API token and print it (shown only once)",
		Long: `Create an API token named NAME (unique among your tokens that are not revoked) and print it.
The token is shown only once: the server keeps only its hash. --lifetime is how long it lives, such
as 90d, 12h or 1h30m (default: the server's, 30 days; at most the server's --max-token-lifetime).`,
		Args: oneName("token"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			req := sdk.CreateTokenRequest{Name: args[0]}
			if lifetime != "" {
				d, err := parseLifetime(lifetime)
				if err != nil {
					return usageError{fmt.Errorf("--lifetime %q: %w", lifetime, err)}
				}
				req.LifetimeSeconds = int64(d / time.Second)
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Created token %s, %s.\n", t.Name, a.expiry(t.ExpiresAt))
			printNewToken(w, t.Token)
			return nil
		},
	}
	create.Flags().StringVar(&lifetime, "lifetime", "", "how long the token lives (`DURATION`: 90d, 12h, 1h30m; default the server's)")
	var user string
	list := &cobra.Command{
		Use:   "list [--user NAME]",
		Short: "List your API tokens (an admin: anyone's, with --user)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context(), user)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), ts)
			}
			return a.printTokens(cmd.OutOrStdout(), ts)
		},
	}
	list.Flags().StringVar(&user, "user", "", "another user's tokens (`NAME`; admins only)")
	revoke := &cobra.Command{
		Use:   "revoke ID|NAME [--user NAME]",
		Short: "Revoke an API token (it stops working at once)",
		Long: `Revoke one of your API tokens, by its id or its name (an admin: anyone's, with --user). It stops
working at once, with every browser and workspace session begun with it, through the workspace
proxies and SSH too.`,
		Args: oneName("token"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			t, err := c.RevokeToken(cmd.Context(), user, args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Revoked token %s of %s.\n", t.Name, t.User)
			return err
		},
	}
	revoke.Flags().StringVar(&user, "user", "", "another user's token (`NAME`; admins only)")
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// parseLifetime reads a duration as Go writes them, plus days ("30d", "1d12h").
func parseLifetime(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return 0, errors.New("want a duration such as 90d, 12h or 1h30m")
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		var err error
		if rest, err = time.ParseDuration(s); err != nil {
			return 0, errors.New("want a duration such as 90d, 12h or 1h30m")
		}
	}
	if d := days + rest; d > 0 {
		return d, nil
	}
	return 0, errors.New("want a duration above 0, such as 90d, 12h or 1h30m")
}

func (a *app) expiry(t *time.Time) string {
	if t == nil {
		return "never expires"
	}
	return "expires " + a.formatTime(*t)
}

func (a *app) printTokens(w io.Writer, ts []sdk.Token) error {
	if len(ts) == 0 {
		_, err := fmt.Fprintln(w, "No tokens.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tEXPIRES\tLAST USED\tCREATED\tID")
	for _, t := range ts {
		expires := "never"
		if t.ExpiresAt != nil {
			expires = a.formatTime(*t.ExpiresAt)
		}
		used := "-"
		if t.LastUsedAt != nil {
			used = a.formatTime(*t.LastUsedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Status, expires, used, a.formatTime(t.CreatedAt), t.ID)
	}
	return tw.Flush()
}

// whoamiCmd is `hangar whoami`: the user, admin or not, and the token in use.
func (a *app) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who you are signed in as, and the token in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			me, err := c.Me(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), me)
			}
			role := "user"
			if me.Admin {
				role = "admin"
			}
			rows := [][2]string{{"User", me.Username}, {"Role", role}, {"Server", c.URL.String()}}
			if t := me.CurrentToken; t != nil {
				rows = append(rows, [2]string{"Token", fmt.Sprintf("%s (%s)", t.Name, a.expiry(t.ExpiresAt))})
			}
			return a.printRows(cmd.OutOrStdout(), rows)
		},
	}
}

// logoutCmd is `hangar logout`. `hangar login` never makes a token (it saves the one it is given,
// which may be shared with scripts), so logout only forgets it, unless --revoke says to revoke it
// on the server first.
func (a *app) logoutCmd() *cobra.Command {
	var revoke bool
	cmd := &cobra.Command{
		Use:   "logout [--revoke]",
		Short: "Forget the saved server URL and token (--revoke: revoke the token first)",
		Long: `Logout removes the login file that 'hangar login' wrote. The token itself keeps working
elsewhere (login saves the token you gave it, which scripts may share) unless --revoke is given:
then it is revoked on the server first, and stops working everywhere at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			saved, err := a.loadConfig()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if saved.Token == "" {
				fmt.Fprintln(w, "Not logged in.")
				return nil
			}
			if revoke {
				c, err := a.newClient(saved.URL, saved.Token)
				if err != nil {
					return err
				}
				me, err := c.Me(cmd.Context())
				if err != nil {
					return fmt.Errorf("revoke the saved token: %w (nothing removed; run without --revoke to only forget it)", err)
				}
				if me.CurrentToken == nil {
					return errors.New("revoke the saved token: the server did not say which token it is (nothing removed)")
				}
				if _, err := c.RevokeToken(cmd.Context(), "", me.CurrentToken.ID); err != nil {
					return fmt.Errorf("revoke the saved token: %w (nothing removed)", err)
				}
				fmt.Fprintf(w, "Revoked token %s of %s.\n", me.CurrentToken.Name, me.Username)
			}
			path, err := a.configPath()
			if err != nil {
				return err
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the login file: %w", err)
			}
			fmt.Fprintf(w, "Logged out of %s (removed %s).\n", saved.URL, path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the saved token on the server before forgetting it")
	return cmd
}

// usersAdminCmds are the admin's `hangar users list|suspend|unsuspend|delete`.
func (a *app) usersAdminCmds() []*cobra.Command {
	list := listCommand(a, "List users (admin only)", (*sdk.Client).ListUsers, a.printUsers)
	suspend := func(use, short, long string, suspended bool) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Long: long,
			Args: oneName("user"),
			RunE: func(cmd *cobra.Command, args []string) error {
				format, c, err := a.formatAndClient(cmd)
				if err != nil {
					return err
				}
				u, err := c.UpdateUser(cmd.Context(), args[0], sdk.UpdateUserRequest{Suspended: &suspended})
				if err != nil {
					return err
				}
				if format == "json" {
					return printJSON(cmd.OutOrStdout(), u)
				}
				w := cmd.OutOrStdout()
				if !suspended {
					_, err = fmt.Fprintf(w, "Reinstated %s; their workspaces stay as they are until started.\n", u.Username)
					return err
				}
				fmt.Fprintf(w, "Suspended %s: their tokens, sessions and keys are refused.\n", u.Username)
				if len(u.StoppedWorkspaces) > 0 {
					fmt.Fprintf(w, "Stopping: %s\n", strings.Join(u.StoppedWorkspaces, ", "))
				}
				return nil
			},
		}
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user (admin only; refused while they own workspaces)",
		Long: `Delete a user: their tokens are revoked and their sessions and SSH keys removed; the name is
never given to anyone else. Refused while the user owns workspaces that are not deleted: delete
them first (hangar delete OWNER/NAME), nothing is deleted with the user.`,
		Args: oneName("user"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			if err := c.DeleteUser(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted user %s.\n", args[0])
			return err
		},
	}
	return []*cobra.Command{list,
		suspend("suspend NAME", "Suspend a user and stop their workspaces (admin only)",
			`Suspend a user: their workspaces are kept but asked to stop, and every request, browser or
workspace session, proxied request and SSH connection of theirs is refused from then on (open SSH
connections are closed within about a second). 'hangar users unsuspend' reinstates them.`, true),
		suspend("unsuspend NAME", "Reinstate a suspended user (admin only)", "", false),
		del}
}

func (a *app) printUsers(w io.Writer, us []sdk.User) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATUS\tCREATED")
	for _, u := range us {
		role, status := "user", "active"
		if u.Admin {
			role = "admin"
		}
		if u.SuspendedAt != nil {
			status = "suspended since " + a.formatTime(*u.SuspendedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Username, role, status, a.formatTime(u.CreatedAt))
	}
	return tw.Flush()
}

// agentAdminCmds are `hangar agents update|rotate-token|revoke-token`.
func (a *app) agentAdminCmds() []*cobra.Command {
	var configFile string
	var sets []string
	update := &cobra.Command{
		Use:   "update NAME [--config FILE.json] [--set FIELD=VALUE]...",
		Short: "Change fields of an agent's config (admin only)",
		Long: `Change an agent's config: --config names a JSON file holding the fields to change ("-": standard
input), --set one field (VALUE is JSON when it parses as such, else a string; null puts the field
back to its default). Fields not named are kept. The whole result is checked as at registration,
and nothing changes unless it is all valid. dns_zone, namespace_mode and shared_namespace cannot
change.`,
		Example: `  hangar agents update eu-west --set workspaces_quota=50 --set proxy_ssh_address=ssh.example.com:2222`,
		Args:    oneName("agent"),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			fields := map[string]any{}
			if configFile != "" {
				b, err := readInput(cmd.InOrStdin(), configFile)
				if err != nil {
					return fmt.Errorf("read --config: %w", err)
				}
				var m map[string]json.RawMessage
				if err := json.Unmarshal(b, &m); err != nil {
					return fmt.Errorf("read --config %s: want a JSON object of config fields: %w", configFile, err)
				}
				for k, v := range m {
					fields[k] = v
				}
			}
			for _, s := range sets {
				k, v, ok := strings.Cut(s, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--set %q: want FIELD=VALUE", s)}
				}
				if json.Valid([]byte(v)) {
					fields[k] = json.RawMessage(v)
				} else {
					fields[k] = v
				}
			}
			if len(fields) == 0 {
				return usageError{errors.New("nothing to change: pass --config FILE or --set FIELD=VALUE")}
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			ag, err := c.UpdateAgent(cmd.Context(), args[0], sdk.UpdateAgentRequest{Config: fields})
			if err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), ag.Warnings)
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), ag)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Updated agent %s.\n", ag.Name)
			return err
		},
	}
	update.Flags().StringVar(&configFile, "config", "", "the config fields to change, a JSON `FILE` (\"-\" for standard input)")
	update.Flags().StringArrayVar(&sets, "set", nil, "one config field to change, `FIELD=VALUE`")
	rotate := func(c *sdk.Client, cmd *cobra.Command, name string, revoke bool) (any, string, error) {
		ag, err := c.RotateAgentToken(cmd.Context(), name, revoke)
		return ag, ag.Token, err
	}
	return []*cobra.Command{update, a.tokenRotationCmd("agent", false, rotate), a.tokenRotationCmd("agent", true, rotate)}
}

// provisionerAdminCmds are `hangar provisioners rotate-token|revoke-token`.
func (a *app) provisionerAdminCmds() []*cobra.Command {
	rotate := func(c *sdk.Client, cmd *cobra.Command, name string, revoke bool) (any, string, error) {
		p, err := c.RotateProvisionerToken(cmd.Context(), name, revoke)
		return p, p.Token, err
	}
	return []*cobra.Command{a.tokenRotationCmd("provisioner", false, rotate), a.tokenRotationCmd("provisioner", true, rotate)}
}

// tokenRotationCmd is `rotate-token NAME` (revoke false) or `revoke-token NAME` of an agent or a
// provisioner.
func (a *app) tokenRotationCmd(kind string, revoke bool, do func(c *sdk.Client, cmd *cobra.Command, name string, revoke bool) (any, string, error)) *cobra.Command {
	use, short := "rotate-token NAME", "Give the "+kind+" a new token and print it; the old one stops working at once (admin only)"
	if revoke {
		use, short = "revoke-token NAME", "Revoke the "+kind+"'s token: refused at once, until rotate-token gives a new one (admin only)"
	}
	return &cobra.Command{
		Use: use, Short: short,
		Args: oneName(kind),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			v, token, err := do(c, cmd, args[0], revoke)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			w := cmd.OutOrStdout()
			if revoke {
				_, err = fmt.Fprintf(w, "Revoked the token of %s %s; it is refused until 'hangar %ss rotate-token %s'.\n", kind, args[0], kind, args[0])
				return err
			}
			fmt.Fprintf(w, "New token for %s %s; the old one no longer works.\n", kind, args[0])
			printNewToken(w, token)
			return nil
		},
	}
}
