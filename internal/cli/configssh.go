package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hangar-dev/hangar/internal/sdk"
)

const (
	sshConfigStart = "# ------------START-HANGAR-----------"
	sshConfigEnd   = "# ------------END-HANGAR------------"
)

func (a *app) configSSHCmd() *cobra.Command {
	var file, suffix string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "config-ssh",
		Short: "Write an ~/.ssh/config block so that ssh NAME.hangar reaches your workspaces",
		Long: `Write a block into ~/.ssh/config with one Host entry per live workspace of yours, so that
'ssh NAME.hangar', scp, rsync, VS Code Remote-SSH and JetBrains Gateway reach it. Each entry's
ProxyCommand is 'hangar ssh --stdio'. A Kubernetes workspace is reached through the access proxy,
whose address the ProxyCommand finds when it connects; ssh authenticates with your own key, which
must be registered ('hangar ssh-keys add'). A Terraform workspace is reached through the server,
which relays to the helper its machine runs; the ProxyCommand authenticates with your token and
the helper asks ssh for nothing, its host key being trusted on first use.

The block sits between START-HANGAR and END-HANGAR lines; running the command again (after creating
or deleting workspaces) rewrites it and leaves the rest of the file alone. The proxy's host key is
checked against Hangar's known_hosts file, where the first connection puts it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(cmd)
			if err != nil {
				return err
			}
			if file == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return fmt.Errorf("find ~/.ssh/config: %w (pass --ssh-config FILE)", err)
				}
				file = filepath.Join(home, ".ssh", "config")
			}
			if !strings.HasPrefix(suffix, ".") || strings.ContainsAny(suffix, " \t*?!/") || len(suffix) < 2 {
				return usageError{fmt.Errorf("--host-suffix %q: want a dot and a name, such as .hangar", suffix)}
			}
			wss, err := c.ListWorkspaces(cmd.Context())
			if err != nil {
				return err
			}
			me, err := c.Me(cmd.Context())
			if err != nil {
				return err
			}
			block, probes, err := a.sshConfigBlock(cmd, c, wss, me.Username, suffix)
			if err != nil {
				return err
			}
			if dryRun {
				_, err := fmt.Fprint(cmd.OutOrStdout(), block)
				return err
			}
			_, knownHostsFile, err := a.hostKeyCallback(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			for _, addr := range probes {
				if err := a.learnHostKey(cmd, addr); err != nil {
					return err
				}
			}
			if err := replaceSSHConfigBlock(file, block); err != nil {
				return err
			}
			n := strings.Count(block, "\nHost ")
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %d host(s) to %s (known hosts: %s).\n", n, file, knownHostsFile)
			if keys, err := c.ListSSHKeys(cmd.Context()); err == nil && len(keys) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "hangar: you have no SSH key registered; ssh will be refused until you run 'hangar ssh-keys add'")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "ssh-config", "", "`FILE` to write (default ~/.ssh/config)")
	cmd.Flags().StringVar(&suffix, "host-suffix", ".hangar", "what follows the workspace name in the host names")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the block instead of writing it")
	addSSHAddressFlag(cmd)
	return cmd
}

// sshConfigBlock is the block for the user's live Kubernetes workspaces, and the proxies' addresses.
func (a *app) sshConfigBlock(cmd *cobra.Command, c *sdk.Client, wss []sdk.Workspace, me, suffix string) (string, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find the hangar binary for the ProxyCommand: %w", err)
	}
	knownHosts, err := a.knownHostsPath()
	if err != nil {
		return "", nil, err
	}
	flagAddr, addrSet := a.value(cmd, flagSSHAddress)
	var global []string // flags ssh --stdio needs to find the same server
	if u, ok := a.value(cmd, flagURL); ok {
		global = append(global, "--url", quoteSSH(u))
	}
	if addrSet {
		global = append(global, "--ssh-address", quoteSSH(flagAddr))
	}
	sort.Slice(wss, func(i, j int) bool { return wss[i].Ref() < wss[j].Ref() })
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n# Written by 'hangar config-ssh' at %s; run it again after creating or deleting workspaces.\n",
		sshConfigStart, a.now().UTC().Format(time.RFC3339))
	probes := map[string]bool{}
	agentAddrs := map[string]string{}
	for _, ws := range wss {
		if ws.Backend != "kubernetes" && ws.Backend != "terraform" || ws.DesiredState == "Terminated" || ws.ActualState == "Terminated" {
			continue
		}
		host := ws.Name + suffix
		if ws.Owner != "" && ws.Owner != me {
			host = ws.Name + "--" + ws.Owner + suffix
		}
		if ws.Backend == "terraform" {
			// Through the server to the workspace's helper, which asks for no key (the ProxyCommand
			// authenticates with the CLI's token); its host key is the helper's, trusted on first
			// use under an alias of the workspace.
			fmt.Fprintf(&b, "\nHost %s\n", host)
			fmt.Fprintf(&b, "  User %s\n", ws.Ref())
			proxyCommand := slices.Concat([]string{quoteSSH(exe), "ssh", "--stdio"}, global, []string{ws.Ref()})
			fmt.Fprintf(&b, "  ProxyCommand %s\n", strings.Join(proxyCommand, " "))
			fmt.Fprintf(&b, "  HostKeyAlias %s\n", workspaceHostKeyAlias(ws))
			fmt.Fprintf(&b, "  UserKnownHostsFile %s\n", quoteSSH(knownHosts))
			b.WriteString("  StrictHostKeyChecking accept-new\n  ServerAliveInterval 30\n")
			continue
		}
		addr, known := flagAddr, addrSet
		if !known {
			addr, known = agentAddrs[ws.Agent]
		}
		if !known {
			if addr, err = proxySSHAddress(cmd.Context(), c, ws.Agent); err != nil {
				return "", nil, err
			}
			agentAddrs[ws.Agent] = addr
		}
		if addr == "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "hangar: skipping %s: its agent %s has no proxy_ssh_address\n", ws.Ref(), ws.Agent)
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", nil, fmt.Errorf("the proxy's SSH address %q of %s: want HOST:PORT", addr, ws.Ref())
		}
		probes[addr] = true
		fmt.Fprintf(&b, "\nHost %s\n", host)
		fmt.Fprintf(&b, "  User %s\n", ws.Ref())
		proxyCommand := slices.Concat([]string{quoteSSH(exe), "ssh", "--stdio"}, global, []string{ws.Ref()})
		fmt.Fprintf(&b, "  ProxyCommand %s\n", strings.Join(proxyCommand, " "))
		fmt.Fprintf(&b, "  HostKeyAlias %s\n", knownhosts.Normalize(addr))
		fmt.Fprintf(&b, "  UserKnownHostsFile %s\n", quoteSSH(knownHosts))
		b.WriteString("  StrictHostKeyChecking yes\n  ServerAliveInterval 30\n")
	}
	b.WriteString(sshConfigEnd + "\n")
	out := make([]string, 0, len(probes))
	for p := range probes {
		out = append(out, p)
	}
	sort.Strings(out)
	return b.String(), out, nil
}

// quoteSSH quotes a word for ssh_config when it needs it.
func quoteSSH(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\#") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// learnHostKey connects to a proxy until its host key is checked (trusted on first use), without
// logging in.
func (a *app) learnHostKey(cmd *cobra.Command, addr string) error {
	check, _, err := a.hostKeyCallback(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	var keyErr error
	cfg := &ssh.ClientConfig{User: "hangar-config-ssh", Timeout: 15 * time.Second,
		HostKeyCallback: func(h string, r net.Addr, k ssh.PublicKey) error { keyErr = check(h, r, k); return keyErr }}
	c, err := ssh.Dial("tcp", addr, cfg)
	if c != nil {
		c.Close()
	}
	if keyErr != nil {
		return keyErr
	}
	var ne net.Error
	if err != nil && (errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED)) {
		return fmt.Errorf("connect to the proxy's SSH at %s: %w", addr, err)
	}
	return nil // refused authentication: expected, the key was seen
}

// replaceSSHConfigBlock writes block into file in place of the previous one (or at the top: the
// first value ssh_config finds wins, so a Host * further down cannot override ours), atomically.
func replaceSSHConfigBlock(file, block string) error {
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", file, err)
	}
	mode := fs.FileMode(0o600)
	if st, err := os.Stat(file); err == nil {
		mode = st.Mode().Perm()
	}
	var out []byte
	start := bytes.Index(old, []byte(sshConfigStart))
	end := bytes.Index(old, []byte(sshConfigEnd))
	switch {
	case start >= 0 && end > start:
		end += len(sshConfigEnd)
		if end < len(old) && old[end] == '\n' {
			end++
		}
		out = append(append(append(out, old[:start]...), block...), old[end:]...)
	case start >= 0 || end >= 0:
		return fmt.Errorf("%s has a START-HANGAR or END-HANGAR line without the other: fix it by hand, then run again", file)
	default:
		out = append([]byte(block), old...)
		if len(old) > 0 {
			out = append([]byte(block+"\n"), old...)
		}
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".config-hangar-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
