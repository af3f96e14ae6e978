package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

func (a *app) gitSSHCmd() *cobra.Command {
	show := func(cmd *cobra.Command, k sdk.GitSSHKey, what string) error {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n\n%s (%s). Add it to your forge as an SSH key of your account (GitHub, GitLab, Gitea: Settings, SSH keys);\ngit in your workspaces signs with it over SSH, and the private key never leaves the Hangar server.\n",
			k.PublicKey, what, k.Fingerprint)
		return err
	}
	cmd := &cobra.Command{
		Use:   "gitssh",
		Short: "Show your git SSH key, to add to your forge for git over SSH in your workspaces",
		Long: `Show your git SSH key: the public key to add to your forge (as an SSH key of your account), so
that git in your workspaces clones and pushes over SSH as you. The server makes the key the first
time it is asked; the private key stays on the server, encrypted, and signs for your workspaces'
git through their helper (an SSH agent that only asks the server), so a suspension or a rotation
ends its use at once. The server must have an external auth key file.`,
		Args: noSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			k, err := c.GitSSHKey(cmd.Context())
			if err != nil {
				return err
			}
			return show(cmd, k, "Your git SSH key")
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Replace your git SSH key with a new one",
		Long: `Replace your git SSH key with a new one: your workspaces' git stops signing with the old key at
once. Add the new key to your forge, and remove the old one there.`,
		Args: noSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			k, err := c.RotateGitSSHKey(cmd.Context())
			if err != nil {
				return err
			}
			return show(cmd, k, "Your new git SSH key; the old one signs no more")
		},
	}
	cmd.AddCommand(rotate)
	return cmd
}
