package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// defaultPublicKeys are the files `ssh-keys add` tries without FILE, in order: ssh-keygen's
// default names, the strongest kind first.
var defaultPublicKeys = []string{"id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub"}

func (a *app) sshKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ssh-keys",
		Short: "Manage your SSH keys (to reach your workspaces by SSH)",
		Long: `Manage the SSH public keys with which you reach your workspaces by SSH through the workspace
proxy. A key identifies one user: the proxy lets its holder into that user's workspaces.`,
		Args: noSubcommand,
		RunE: showHelp,
	}
	var name string
	add := &cobra.Command{
		Use:   "add [FILE|-] [--name NAME]",
		Short: "Register an SSH public key",
		Long: `Register an SSH public key. FILE is the public key (a .pub file; "-" reads standard input);
without FILE, the first of ~/.ssh/id_ed25519.pub, ~/.ssh/id_ecdsa.pub and ~/.ssh/id_rsa.pub that
exists. The key is named after its comment unless --name says otherwise. A key can be registered
by one user only; ed25519, ECDSA and RSA keys of at least 2048 bits are accepted.`,
		Example: `  hangar ssh-keys add
  hangar ssh-keys add ~/.ssh/work.pub --name work-laptop`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("%s takes at most one file, got %d arguments", cmd.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			} else if file, err = a.defaultPublicKey(); err != nil {
				return err
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "Using %s\n", file)
			}
			b, err := readInput(cmd.InOrStdin(), file)
			if err != nil {
				return fmt.Errorf("read the public key: %w", err)
			}
			if strings.Contains(string(b), "PRIVATE KEY") {
				// Refused here, so that the secret never leaves the machine.
				return fmt.Errorf("%s is a private key, which must never be shared: give the public key, the .pub file beside it", displayName(file))
			}
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			k, err := c.AddSSHKey(cmd.Context(), sdk.AddSSHKeyRequest{Name: name, PublicKey: string(b)})
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), k)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Added SSH key %q (%s).\n", k.Name, k.Fingerprint)
			return err
		},
	}
	add.Flags().StringVar(&name, "name", "", "the key's `NAME` (default: its comment, else its type)")

	list := listCommand(a, "List your SSH keys", (*sdk.Client).ListSSHKeys, a.printSSHKeys)

	remove := &cobra.Command{
		Use:   "remove KEY",
		Short: "Remove one of your SSH keys",
		Long: `Remove one of your SSH keys, named by its fingerprint (SHA256:..., as 'hangar ssh-keys list'
shows it), its id, or its name when no other key of yours has that name. The workspace proxy
refuses it within seconds.`,
		Args: oneName("SSH key"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			ref, err := resolveSSHKey(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if err := c.RemoveSSHKey(cmd.Context(), ref); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Removed SSH key %s.\n", args[0])
			return err
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}

// defaultPublicKey returns the first of defaultPublicKeys in ~/.ssh that exists.
func (a *app) defaultPublicKey() (string, error) {
	home := a.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("find your public key: %w; give its file: hangar ssh-keys add FILE", err)
		}
	}
	for _, n := range defaultPublicKeys {
		path := filepath.Join(home, ".ssh", n)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("find your public key: %w", err)
		}
	}
	return "", fmt.Errorf("no public key in %s (looked for %s): give its file (hangar ssh-keys add FILE), or make a key with ssh-keygen -t ed25519",
		filepath.Join(home, ".ssh"), strings.Join(defaultPublicKeys, ", "))
}

func displayName(file string) string {
	if file == "-" {
		return "standard input"
	}
	return file
}

// resolveSSHKey returns how the API names the key arg names: an id or fingerprint as it is, a name
// as the id of the one key of that name.
func resolveSSHKey(ctx context.Context, c *sdk.Client, arg string) (string, error) {
	keys, err := c.ListSSHKeys(ctx)
	if err != nil {
		return "", err
	}
	var named []sdk.SSHKey
	for _, k := range keys {
		if k.ID == arg || k.Fingerprint == arg {
			return arg, nil
		}
		if k.Name == arg {
			named = append(named, k)
		}
	}
	switch len(named) {
	case 0:
		return arg, nil // the server says it is not there
	case 1:
		return named[0].ID, nil
	}
	return "", fmt.Errorf("%d of your SSH keys are named %q: remove one by its fingerprint (see hangar ssh-keys list)", len(named), arg)
}

// printSSHKeys prints the key table: NAME TYPE FINGERPRINT ADDED.
func (a *app) printSSHKeys(w io.Writer, keys []sdk.SSHKey) error {
	if len(keys) == 0 {
		_, err := fmt.Fprintln(w, "No SSH keys.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tFINGERPRINT\tADDED")
	for _, k := range keys {
		typ, _, _ := strings.Cut(k.PublicKey, " ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Name, typ, k.Fingerprint, a.formatTime(k.CreatedAt))
	}
	return tw.Flush()
}
