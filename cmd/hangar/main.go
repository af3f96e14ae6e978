// Command hangar is Hangar's single binary: `hangar server` and the client commands.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/agentcmd"
	"github.com/hangar-dev/hangar/internal/cli"
	"github.com/hangar-dev/hangar/internal/imagebuild"
	"github.com/hangar-dev/hangar/internal/loadcmd"
	"github.com/hangar-dev/hangar/internal/projectclone"
	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/provisionercmd"
	"github.com/hangar-dev/hangar/internal/proxycmd"
	"github.com/hangar-dev/hangar/internal/quickstart"
	"github.com/hangar-dev/hangar/internal/servercmd"
	"github.com/hangar-dev/hangar/internal/tfprovider"
	"github.com/hangar-dev/hangar/internal/wshelper"
)

func main() {
	// Started by a provisioner as the survival shim of a terraform run (terraform.Runner.Shim)?
	if terraform.IsShim() {
		os.Exit(terraform.ShimMain())
	}
	// Started (by a provisioner, or its shim) to run terraform in the template sandbox?
	if sandbox.IsSandbox() {
		os.Exit(sandbox.Main())
	}
	// Started by terraform as Hangar's own provider (through the provisioner's plugin mirror)?
	if tfprovider.IsPlugin() {
		os.Exit(tfprovider.Serve())
	}
	root := rootCommand()
	os.Exit(cli.Execute(root))
}

// groupDaemons is the help's group of the server and the daemons.
const groupDaemons = "daemons"

// rootCommand builds the command tree.
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "hangar",
		Short: "Hangar: self-hosted remote development workspaces",
	}
	cli.AddCommands(root) // and their groups in the help
	// The daemons, apart from the client commands (the hidden ones too, should they be shown).
	root.AddGroup(&cobra.Group{ID: groupDaemons, Title: "Running Hangar (the server and its daemons):"})
	for _, c := range []*cobra.Command{servercmd.Command(), agentcmd.Command(), provisionercmd.Command(), proxycmd.Command(), quickstart.Command(), projectCloneCommand(),
		wshelper.Command(),              // hidden: a workspace's main container runs it
		wshelper.GitCredentialCommand(), // hidden: git runs it in a workspace (credential.helper)
		wshelper.GitKnownHostsCommand(), // hidden: git's ssh runs it in a workspace (KnownHostsCommand)
		installSelfCommand(),            // hidden: a workspace's init container copies the binary for it
		loadcmd.Command(),               // hidden: the load generator (docs/benchmarks.md)
		quickstart.RelayCommand(),       // hidden: the quick start's relay from the local cluster to the server
		imagebuild.Command(),            // hidden: a workspace's build init container runs it
	} {
		c.GroupID = groupDaemons
		root.AddCommand(c)
	}
	return root
}

// projectCloneCommand is the init container of a workspace whose devfile lists projects
// (internal/projectclone); hidden, as people do not run it.
func projectCloneCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "project-clone",
		Short:  "Clone the projects of HANGAR_PROJECTS into PROJECTS_ROOT (a workspace's init container)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			os.Exit(projectclone.Main(cmd.Context(), os.Getenv, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
}
