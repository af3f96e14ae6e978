package sandbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/cmdopt"
)

// Flags are the isolation options of `hangar server` (its in-process provisioners) and `hangar
// provisioner`, as given.
type Flags struct {
	User, Env, Insecure string
}

// InsecureFlag is the option that runs templates without isolation.
const InsecureFlag = "insecure-no-template-isolation"

// Options declares the flags; inProcess says they are the server's (several provisioners).
func (f *Flags) Options(inProcess bool) []cmdopt.Option {
	userHelp := "the unprivileged user terraform, its providers and local-exec run as, in a private mount namespace without the server's data, tokens or /tmp (needs root): auto, UID, UID:GID or a user name; auto is " +
		strconv.Itoa(DefaultStandaloneUID) + ". Give each provisioner on a machine a user of its own, used by nothing else: every process of it is killed when a build ends"
	if inProcess {
		userHelp = "the unprivileged user the in-process provisioners run terraform, its providers and local-exec as, in a private mount namespace without the data directory, tokens or /tmp (needs root): auto, UID (provisioner n uses UID+n, group the same), or a user name (one provisioner); auto is " +
			strconv.Itoa(DefaultUID) + ". Use ids nothing else uses: every process of a provisioner's user is killed when its build ends"
	}
	return []cmdopt.Option{
		cmdopt.String(&f.User, "provisioner-user", "HANGAR_PROVISIONER_USER", "auto", userHelp),
		cmdopt.String(&f.Env, "provisioner-env", "HANGAR_PROVISIONER_ENV", "", "comma-separated names of variables of this process's environment that every build's terraform gets (such as cloud credentials; by default builds get only PATH, the locale, TZ and the proxy and CA settings)"),
		cmdopt.String(&f.Insecure, InsecureFlag, "HANGAR_INSECURE_NO_TEMPLATE_ISOLATION", "false", "run templates as this process's user, with its file access (the data directory, the database, the tokens): for a machine where nothing else is at stake. Without it, a provisioner that cannot isolate templates (not root, not Linux) refuses to start"),
	}
}

// Register adds the options to cmd (--insecure-no-template-isolation needs no value).
func (f *Flags) Register(cmd *cobra.Command, inProcess bool) {
	cmdopt.Register(cmd, f.Options(inProcess))
	cmd.Flags().Lookup(InsecureFlag).NoOptDefVal = "true"
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse checks the options.
func (f *Flags) Parse() (Options, []string, error) {
	insecure, err := strconv.ParseBool(f.Insecure)
	if err != nil {
		return Options{}, nil, fmt.Errorf("--%s: want true or false, got %q", InsecureFlag, f.Insecure)
	}
	var names []string
	for _, n := range strings.Split(f.Env, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !envName.MatchString(n) {
			return Options{}, nil, fmt.Errorf("--provisioner-env: %q is not a variable name", n)
		}
		if strings.HasPrefix(n, "HANGAR_") || strings.HasPrefix(n, "TF_") || n == "HOME" || n == "CHECKPOINT_DISABLE" {
			return Options{}, nil, fmt.Errorf("--provisioner-env: %s is Hangar's or terraform's own setting, never passed to templates", n)
		}
		names = append(names, n)
	}
	if _, err := ParseUser(f.User, DefaultUID, 0); err != nil && f.User != "" {
		return Options{}, nil, fmt.Errorf("--provisioner-user: %w", err)
	}
	return Options{User: f.User, Insecure: insecure}, names, nil
}
