// Package cmdopt declares a command's options once each: flag, environment variable, default and
// help together.
package cmdopt

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Option is one string option.
type Option struct {
	Target *string
	Flag   string
	Env    string
	Def    string
	Help   string
}

// Register adds the options as flags of cmd; an option's environment variable, when set, replaces
// its default, and an explicit flag wins over both.
func Register(cmd *cobra.Command, opts []Option) {
	for _, o := range opts {
		def := o.Def
		if v, ok := os.LookupEnv(o.Env); ok {
			def = v
		}
		cmd.Flags().StringVar(o.Target, o.Flag, def, fmt.Sprintf("%s (env %s)", o.Help, o.Env))
	}
}

// String declares a string option.
func String(target *string, flag, env, def, help string) Option {
	return Option{Target: target, Flag: flag, Env: env, Def: def, Help: help}
}

// ReadToken reads a token from the file a --token-file option names; createdBy says which command
// printed it, for the error that says the option is missing.
func ReadToken(path, createdBy string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("--token-file is required: the file holding the token `%s` printed", createdBy)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--token-file %s is empty", path)
	}
	return token, nil
}
