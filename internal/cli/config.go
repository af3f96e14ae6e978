package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
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
				return err
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
