package cli

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/sdk"
)

// config is the login file: where `hangar login` saves the server URL and the token it checked.
type config struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// configPath is $XDG_CONFIG_HOME/hangar/config.json, else ~/.config/hangar/config.json (on every
// OS, so that the documented path is the real one).
func configPath(getenv func(string) string, home func() (string, error)) (string, error) {
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "hangar", "config.json"), nil
	}
	h, err := home()
	if err != nil {
		return "", fmt.Errorf("find the login file: %w", err)
	}
	return filepath.Join(h, ".config", "hangar", "config.json"), nil
}

// loadConfig reads the login file; a missing file is an empty config.
func (a *app) loadConfig() (config, error) {
	path, err := a.configPath()
	if err != nil {
		return config{}, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return config{}, nil
	}
	if err != nil {
		return config{}, fmt.Errorf("read login file: %w", err)
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return config{}, fmt.Errorf("read login file %s: %w (run 'hangar login' again to replace it)", path, err)
	}
	return c, nil
}

// saveConfig writes the login file with mode 0600 (it holds a token), replacing it atomically so that
// a crash never leaves half a file.
func (a *app) saveConfig(c config) (string, error) {
	path, err := a.configPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return "", fmt.Errorf("write login file: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write login file: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write login file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write login file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("write login file: %w", err)
	}
	return path, nil
}

func (a *app) loginCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "login --url URL --token TOKEN",
		Short: "Check a token and save it with the server URL",
		Long: `Login checks the token against the server (GET /api/v1/users/me) and saves the URL and the
token in $XDG_CONFIG_HOME/hangar/config.json (default ~/.config/hangar/config.json), mode 0600.
Later commands use them when neither a flag nor an environment variable says otherwise.`,
		Example: `  hangar login --url https://hangar.example.com --token "$(cat admin-token)"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := a.outputFormat(cmd)
			if err != nil {
				return err
			}
			serverURL, token, err := a.connection(cmd)
			if errors.Is(err, errNoServer) {
				return usageError{errors.New("the server's URL is required: pass --url (hangar server prints it when it starts) or set HANGAR_URL")}
			}
			if err != nil {
				return err
			}
			if token == "" {
				return usageError{errors.New("a token is required: pass --token or set HANGAR_TOKEN")}
			}
			c, err := a.newClient(serverURL, token)
			if err != nil {
				return err
			}
			me, err := c.Me(cmd.Context())
			if err != nil {
				return loginError(c.URL.String(), err)
			}
			// Save the normalised URL, so that later commands compare it with theirs.
			if _, err := a.saveConfig(config{URL: c.URL.String(), Token: token}); err != nil {
				return err
			}
			if format == "json" {
				return printJSON(cmd.OutOrStdout(), me)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s\n", c.URL, me.Username)
			return nil
		},
	}
}

// loginError says why `hangar login` could not check the token: the server refused it (what is
// wrong with it, and how to get a new one), or the server could not be reached (at which URL, and
// the likely cause) — not the API's or the dialer's raw words.
func loginError(serverURL string, err error) error {
	var ae *sdk.APIError
	if errors.As(err, &ae) && ae.Body.Code == sdk.CodeUnauthorized {
		why := ae.Body.Message
		if why == "invalid token" {
			why = "no user of this server has this token (check that it was copied whole, and that the URL is the server that issued it)"
		}
		return fmt.Errorf("the server at %s refused the token: %s. A new token: an admin runs 'hangar users rotate-token NAME' "+
			"(a new server prints where its admin token is), or create one with 'hangar tokens create' where you are logged in", serverURL, why)
	}
	if errors.As(err, &ae) {
		return err
	}
	return unreachable(serverURL, err)
}

// unreachable is the error of a request that got no HTTP answer from serverURL: where, and the
// likely cause.
func unreachable(serverURL string, err error) error {
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		netErr  net.Error
	)
	cause := "is the URL right?"
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		cause = "nothing listens there: is `hangar server` running, and are the host and port the ones it printed when it started?"
	case errors.As(err, &dnsErr):
		cause = fmt.Sprintf("the host name %q does not resolve: check the URL", dnsErr.Name)
	case errors.As(err, &certErr), strings.Contains(err.Error(), "http: server gave HTTP response to HTTPS client"), strings.Contains(err.Error(), "tls: "):
		cause = "TLS failed (" + tlsCause(err) + "): check http:// against https://, and that the server's certificate is trusted"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		cause = "no route to the host: check the address, or the network between here and the server"
	case errors.As(err, &netErr) && netErr.Timeout():
		cause = "no answer in time: a firewall, or the wrong address"
	}
	return fmt.Errorf("could not reach the Hangar server at %s: %s", serverURL, cause)
}

// tlsCause is the innermost error's words, without the request's method and URL.
func tlsCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
