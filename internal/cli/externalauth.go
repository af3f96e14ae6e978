package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// defaultLinkTimeout bounds `external-auth link`'s wait for the browser.
const defaultLinkTimeout = 10 * time.Minute

func (a *app) externalAuthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "external-auth",
		Short: "Link your accounts at forges (GitHub, GitLab, Gitea, Bitbucket) for git in your workspaces",
		Long: `Link your accounts at the forges the server is configured with (GitHub, GitLab, Gitea or Forgejo,
Bitbucket), so that git in your workspaces clones and pushes as you. The forge's token stays on the
server, encrypted; your workspace's helper asks for it each time git needs it, so an unlink ends
git's access at its next request.`,
		Args: noSubcommand,
		RunE: showHelp,
	}
	list := listCommand(a, "List the forges and your links to them", (*sdk.Client).ListExternalAuth, a.printExternalAuth)
	var timeout time.Duration
	link := &cobra.Command{
		Use:   "link NAME [--timeout DURATION]",
		Short: "Link your account at a forge",
		Long: `Link your account at a forge: prints the forge's page to open in a browser signed in to Hangar,
then waits until the link is made there (or --timeout passes). Linking again replaces the link,
which mends one that must be linked again.`,
		Example: `  hangar external-auth link github`,
		Args:    oneName("forge"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			before, err := findForge(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			start, err := c.LinkExternalAuth(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Open this page in a browser signed in to Hangar to link your %s account:\n\n  %s\n\nWaiting for the link (up to %s)...\n",
				before.Name, start.AuthorizeURL, timeout)
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			for {
				f, err := findForge(ctx, c, args[0])
				if err == nil && f.Linked && !f.NeedsRelink && (!before.Linked || f.LinkedAt != nil && before.LinkedAt != nil && f.LinkedAt.After(*before.LinkedAt)) {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "Linked %s as %s.\n", f.Name, f.AccountLogin)
					return err
				}
				if err != nil && ctx.Err() == nil {
					return err
				}
				select {
				case <-ctx.Done():
					if errors.Is(ctx.Err(), context.DeadlineExceeded) {
						return fmt.Errorf("timed out after %s waiting for the link to %s: run hangar external-auth link %s again", timeout, before.Name, args[0])
					}
					return ctx.Err()
				case <-time.After(a.pollInterval):
				}
			}
		},
	}
	link.Flags().DurationVar(&timeout, "timeout", defaultLinkTimeout, "how long to wait for the link to be made in the browser")
	unlink := &cobra.Command{
		Use:   "unlink NAME",
		Short: "Unlink your account at a forge",
		Long: `Unlink your account at a forge: the server forgets its token, and git in your workspaces is
refused at its next request to that forge.`,
		Args: oneName("forge"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			if err := c.UnlinkExternalAuth(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Unlinked %s.\n", args[0])
			return err
		},
	}
	cmd.AddCommand(list, link, unlink)
	return cmd
}

func findForge(ctx context.Context, c *sdk.Client, id string) (sdk.ExternalAuth, error) {
	forges, err := c.ListExternalAuth(ctx)
	if err != nil {
		return sdk.ExternalAuth{}, err
	}
	for _, f := range forges {
		if f.ID == id {
			return f, nil
		}
	}
	if len(forges) == 0 {
		return sdk.ExternalAuth{}, errors.New("the server has no forge configured (hangar server --external-auth-config)")
	}
	return sdk.ExternalAuth{}, fmt.Errorf("no forge %q: see hangar external-auth list", id)
}

func (a *app) printExternalAuth(w io.Writer, forges []sdk.ExternalAuth) error {
	if len(forges) == 0 {
		_, err := fmt.Fprintln(w, "No forge is configured on this server.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tACCOUNT\tLINKED\tSTATUS")
	for _, f := range forges {
		account, linked, status := "-", "-", "not linked: hangar external-auth link "+f.ID
		if f.Linked {
			account, status = f.AccountLogin, "ok"
			if f.LinkedAt != nil {
				linked = a.formatTime(*f.LinkedAt)
			}
			if f.NeedsRelink {
				status = "must be linked again: " + f.RelinkReason
			} else if f.LastRefreshError != "" {
				status = "last refresh failed: " + f.LastRefreshError
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.ID, f.Type, account, linked, status)
	}
	return tw.Flush()
}
