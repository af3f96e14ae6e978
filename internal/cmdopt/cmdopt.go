// Package cmdopt declares a command's options once each: flag, environment variable, config-file
// key, default and help together.
//
// A value comes from, in this order of precedence: the flag, the environment variable, the config
// file (--config FILE, YAML, keys are the flag names), the default. Each option has a kind (string,
// duration, int, bool, list) that --help shows and that is checked when the value is read, with an
// error naming where the value came from (the flag, the variable, or the file and key).
package cmdopt

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Precedence is the sentence the daemons' long help ends with.
const Precedence = "Every flag can also be set with the environment variable shown, or in a YAML config file\n" +
	"(--config FILE) under the flag's name without the dashes (log-level: debug). A flag wins over\n" +
	"its environment variable, which wins over the file, which wins over the default."

type kind int

const (
	kindString kind = iota
	kindDuration
	kindInt
	kindBool
	kindList
)

// Option is one option. Its value is kept as text in Target (callers check ranges and meaning);
// the kind is checked when it is set.
type Option struct {
	Target *string
	Flag   string
	Env    string
	Def    string
	Help   string
	// Placeholder is the word --help shows after the flag (--token-file FILE).
	Placeholder string
	kind        kind
}

// String declares a text option. Its placeholder follows from the flag's name (FILE for *-file,
// URL for *-url and server, ADDR for *listen, DIR for *-dir, else STRING); Arg changes it.
func String(target *string, flag, env, def, help string) Option {
	return Option{Target: target, Flag: flag, Env: env, Def: def, Help: help, Placeholder: placeholderFor(flag)}
}

// Duration declares an option that holds a Go duration (90s, 5m, 1h30m; 0).
func Duration(target *string, flag, env, def, help string) Option {
	return Option{Target: target, Flag: flag, Env: env, Def: def, Help: help, Placeholder: "duration", kind: kindDuration}
}

// Int declares an option that holds a whole number.
func Int(target *string, flag, env, def, help string) Option {
	return Option{Target: target, Flag: flag, Env: env, Def: def, Help: help, Placeholder: "int", kind: kindInt}
}

// Bool declares a switch: --flag alone is true; the variable and the file take true or false.
func Bool(target *string, flag, env, def, help string) Option {
	return Option{Target: target, Flag: flag, Env: env, Def: def, Help: help, Placeholder: "bool", kind: kindBool}
}

// List declares a comma-separated list; in the config file it may also be a YAML sequence.
func List(target *string, flag, env, def, help string) Option {
	return Option{Target: target, Flag: flag, Env: env, Def: def, Help: help, Placeholder: "strings", kind: kindList}
}

// Arg returns o with another placeholder (an upper-case word, such as NAME or PATH).
func (o Option) Arg(placeholder string) Option {
	o.Placeholder = placeholder
	return o
}

func placeholderFor(flag string) string {
	switch {
	case strings.HasSuffix(flag, "-file") || flag == "kubeconfig":
		return "FILE"
	case strings.HasSuffix(flag, "-url") || flag == "server":
		return "URL"
	case strings.HasSuffix(flag, "listen") || strings.HasSuffix(flag, "-addr"):
		return "ADDR"
	case strings.HasSuffix(flag, "-dir"):
		return "DIR"
	}
	return "STRING"
}

// value is an option's flag value: pflag shows Type() as the placeholder unless the usage holds a
// backquoted word, which Register never lets it hold.
type value struct {
	o Option
}

func (v *value) String() string {
	if v.o.Target == nil {
		return ""
	}
	return *v.o.Target
}

func (v *value) Type() string { return v.o.Placeholder }

func (v *value) IsBoolFlag() bool { return v.o.kind == kindBool }

// Set checks s against the option's kind and stores it.
func (v *value) Set(s string) error {
	t, err := v.o.check(s)
	if err != nil {
		return err
	}
	*v.o.Target = t
	return nil
}

// check returns s as the option keeps it, or why s is not of the option's kind.
func (o Option) check(s string) (string, error) {
	switch o.kind {
	case kindDuration:
		if _, err := time.ParseDuration(strings.TrimSpace(s)); err != nil {
			return "", fmt.Errorf("want a duration such as 90s, 5m or 1h30m, got %q", s)
		}
		return strings.TrimSpace(s), nil
	case kindInt:
		if _, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil {
			return "", fmt.Errorf("want a whole number, got %q", s)
		}
		return strings.TrimSpace(s), nil
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return "", fmt.Errorf("want true or false, got %q", s)
		}
		return strconv.FormatBool(b), nil
	case kindList:
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		return strings.Join(items, ","), nil
	}
	return s, nil
}

// Register adds the options as flags of cmd and makes cmd's RunE first resolve every option that
// no flag set from its environment variable, else its default. cmd.RunE must be set; call it (or
// RegisterWithFile) once per command, with all its options, so that the file is checked against
// all of them.
func Register(cmd *cobra.Command, opts []Option) { register(cmd, "", opts) }

// RegisterWithFile is Register plus --config FILE (or the environment variable configEnv): a YAML
// file of option values, below the flags and environment variables and above the defaults.
func RegisterWithFile(cmd *cobra.Command, configEnv string, opts []Option) {
	register(cmd, configEnv, opts)
}

func register(cmd *cobra.Command, configEnv string, opts []Option) {
	var configFile string
	for _, o := range opts {
		*o.Target = o.Def
		f := cmd.Flags().VarPF(&value{o: o}, o.Flag, "", fmt.Sprintf("%s (env %s)", plainHelp(o.Help), o.Env))
		f.DefValue = o.Def
		if o.kind == kindBool {
			f.NoOptDefVal = "true"
		}
	}
	if configEnv != "" {
		cmd.Flags().StringVar(&configFile, "config", "", fmt.Sprintf("read options from this YAML `FILE`, one key per flag name, such as log-level (env %s); flags and environment variables win over it", configEnv))
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := Resolve(c.Flags(), os.LookupEnv, configFile, configEnv, opts); err != nil {
			return err
		}
		return run(c, args)
	}
}

// ConfigFile is the config file a command registered with RegisterWithFile was given (--config,
// else its environment variable; "" for none), so that the command can keep it from others, such as
// the templates its provisioners run.
func ConfigFile(cmd *cobra.Command, configEnv string) string {
	if f := cmd.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return os.Getenv(configEnv)
}

// emptyIsUnset: an empty value of a duration, number or switch means "not given" (a deployment's
// template that renders HANGAR_AUDIT_RETENTION="" keeps the default, as it did when these were
// text); for text and lists, empty is a value (HANGAR_LEASE_NAMESPACE="" turns leader election off).
func (o Option) emptyIsUnset(s string) bool {
	return strings.TrimSpace(s) == "" && (o.kind == kindDuration || o.kind == kindInt || o.kind == kindBool)
}

// plainHelp keeps pflag from taking a backquoted command in the help for the placeholder: it
// reads `hangar agents create` as quoting one.
func plainHelp(help string) string { return strings.ReplaceAll(help, "`", "'") }

// Resolve sets every option that no flag set: from its environment variable (lookup), else from
// the config file (configFile, or the file configEnv names when no --config was given), else its
// default (already in place).
func Resolve(flags *pflag.FlagSet, lookup func(string) (string, bool), configFile, configEnv string, opts []Option) error {
	if configFile == "" && configEnv != "" {
		configFile, _ = lookup(configEnv)
	}
	var file map[string]FileValue
	if configFile != "" {
		var err error
		if file, err = ReadFile(configFile); err != nil {
			return err
		}
		known := make(map[string]bool, len(opts))
		for _, o := range opts {
			known[o.Flag] = true
		}
		for _, k := range sortedKeys(file) {
			if !known[k] {
				return fmt.Errorf("config file %s: unknown key %q (the keys are the flag names of --help, without the dashes)", configFile, k)
			}
		}
	}
	for _, o := range opts {
		if f := flags.Lookup(o.Flag); f != nil && f.Changed {
			continue
		}
		if s, ok := lookup(o.Env); ok && !o.emptyIsUnset(s) {
			t, err := o.check(s)
			if err != nil {
				return fmt.Errorf("environment variable %s (--%s): %w", o.Env, o.Flag, err)
			}
			*o.Target = t
			continue
		}
		fv, ok := file[o.Flag]
		if !ok || (!fv.IsList && o.emptyIsUnset(fv.Text)) {
			continue
		}
		s := fv.Text
		if fv.IsList {
			if o.kind != kindList {
				return fmt.Errorf("config file %s: key %q (--%s): want a single value, got a list", configFile, o.Flag, o.Flag)
			}
			for _, it := range fv.List {
				if strings.Contains(it, ",") {
					return fmt.Errorf("config file %s: key %q (--%s): an item may not hold a comma, got %q", configFile, o.Flag, o.Flag, it)
				}
			}
			s = strings.Join(fv.List, ",")
		}
		t, err := o.check(s)
		if err != nil {
			return fmt.Errorf("config file %s: key %q (--%s): %w", configFile, o.Flag, o.Flag, err)
		}
		*o.Target = t
	}
	return nil
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
