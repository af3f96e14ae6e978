package cli

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// profileCmd is `hangar profile` (show) and `hangar profile set`: the caller's full name, email
// and dotfiles repository (docs/decisions.md, "A team's repository: dotfiles and identity").
func (a *app) profileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Show your profile: git identity and dotfiles in your workspaces",
		Long: `Show your profile: the name and email your commits get in your workspaces (GIT_AUTHOR_NAME,
GIT_AUTHOR_EMAIL and the committer's, from each workspace's next start; without a name your
username is used), and your dotfiles repository, which each workspace clones into ~/.dotfiles with
your forge credentials and installs at its first start. With sign-in through an OIDC provider, the
name and email come from it at each sign-in unless you set them here.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{runsItself: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			me, err := c.Me(cmd.Context())
			if err != nil {
				return err
			}
			return a.printProfile(cmd.OutOrStdout(), format, me)
		},
	}
	var name, email, dotfiles string
	set := &cobra.Command{
		Use:   "set [--name NAME] [--email EMAIL] [--dotfiles-repo URL[#REF]]",
		Short: "Change your profile (an empty value clears a field)",
		Long: `Change your profile. Each flag given is set; an empty value ("") clears that field; the others
are left as they are. --dotfiles-repo is an https://, http:// or ssh:// git URL, or git@host:path,
with an optional #REF (a branch, tag or commit). A name or email you set is kept over your OIDC
provider's; cleared, the next sign-in fills it again.`,
		Example: `  hangar profile set --name "Ada Lovelace" --email ada@example.com
  hangar profile set --dotfiles-repo https://github.com/ada/dotfiles.git#main
  hangar profile set --dotfiles-repo ""`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req sdk.UpdateProfileRequest
			if cmd.Flags().Changed("name") {
				req.FullName = &name
			}
			if cmd.Flags().Changed("email") {
				req.Email = &email
			}
			if cmd.Flags().Changed("dotfiles-repo") {
				req.DotfilesRepo = &dotfiles
			}
			if req.FullName == nil && req.Email == nil && req.DotfilesRepo == nil {
				return usageError{errors.New("give at least one of --name, --email and --dotfiles-repo")}
			}
			format, c, err := a.formatAndClient(cmd)
			if err != nil {
				return err
			}
			me, err := c.UpdateProfile(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.printProfile(cmd.OutOrStdout(), format, me)
		},
	}
	set.Flags().StringVar(&name, "name", "", "your full name, for your commits")
	set.Flags().StringVar(&email, "email", "", "your email, for your commits")
	set.Flags().StringVar(&dotfiles, "dotfiles-repo", "", "your dotfiles repository, URL[#REF]")
	cmd.AddCommand(set)
	return cmd
}

func (a *app) printProfile(w io.Writer, format string, me sdk.User) error {
	if format == "json" {
		return printJSON(w, me)
	}
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	return a.printRows(w, [][2]string{
		{"User", me.Username},
		{"Name", or(me.FullName, "- (commits use "+me.Username+")")},
		{"Email", or(me.Email, "-")},
		{"Dotfiles", or(me.DotfilesRepo, "-")},
	})
}
