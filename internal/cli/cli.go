// Package cli holds Hangar's client commands (login, users, agents, workspaces). They talk to the
// user API through sdk.Client only. cmd/hangar builds the root command and adds these with
// AddCommands; Execute runs the tree and turns an error into a message and an exit code.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// localURL is `hangar server`'s default listen address, named in the hint when no server is given.
// It is never used unasked: a CLI that silently talked to it when not logged in confused new users
// (docs/decisions.md, "No server without a login").
const localURL = "http://127.0.0.1:7080"

// errNoServer: no flag, environment variable or login names a server.
var errNoServer = usageError{errors.New("no server: you are not logged in. Run 'hangar login --url URL --token TOKEN' " +
	"(hangar server prints both when it starts; a server on this machine listens on " + localURL + " by default), " +
	"or pass --url or set HANGAR_URL")}

// app holds what the commands take from their surroundings, so that tests can replace it.
type app struct {
	getenv func(string) string
	// configPath returns the login file's path.
	configPath func() (string, error)
	now        func() time.Time
	// loc is the zone times are shown in.
	loc *time.Location
	// pollInterval is the time between two reads of a workspace while waiting.
	pollInterval time.Duration
	http         *http.Client
	// isTerminal says whether the command's stdin is a terminal someone can answer a question on.
	isTerminal func(io.Reader) bool
}

// stdinIsTerminal is app.isTerminal outside tests.
func stdinIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func defaultApp() *app {
	return &app{
		getenv:       os.Getenv,
		configPath:   func() (string, error) { return configPath(os.Getenv, os.UserHomeDir) },
		now:          time.Now,
		loc:          time.Local,
		pollInterval: 500 * time.Millisecond,
		// Each request gets its own bound; a --wait is bounded by --timeout on top.
		http:       &http.Client{Timeout: 30 * time.Second},
		isTerminal: stdinIsTerminal,
	}
}

// AddCommands adds the client commands to root.
func AddCommands(root *cobra.Command) { addCommands(root, defaultApp()) }

// The groups of `hangar --help`: the client commands here are grouped by what a user does;
// cmd/hangar adds a group of its own for the daemons (server, agent, provisioner, proxy).
const (
	GroupWorkspaces = "workspaces"
	GroupAccount    = "account"
	GroupAdmin      = "admin"
)

// groupOf is each client command's group; a command not listed (help, completion, version) is
// under "Additional Commands".
var groupOf = map[string]string{
	"create": GroupWorkspaces, "list": GroupWorkspaces, "show": GroupWorkspaces, "start": GroupWorkspaces,
	"stop": GroupWorkspaces, "restart": GroupWorkspaces, "delete": GroupWorkspaces, "update": GroupWorkspaces,
	"schedule": GroupWorkspaces, "ssh": GroupWorkspaces, "port-forward": GroupWorkspaces, "config-ssh": GroupWorkspaces,
	"builds": GroupWorkspaces, "logs": GroupWorkspaces, "cancel": GroupWorkspaces, "state": GroupWorkspaces,
	"login": GroupAccount, "logout": GroupAccount, "whoami": GroupAccount, "profile": GroupAccount, "tokens": GroupAccount, "ssh-keys": GroupAccount, "external-auth": GroupAccount, "gitssh": GroupAccount,
	"templates": GroupAdmin, "agents": GroupAdmin, "provisioners": GroupAdmin, "users": GroupAdmin, "audit": GroupAdmin,
}

func addCommands(root *cobra.Command, a *app) {
	root.AddGroup(
		&cobra.Group{ID: GroupWorkspaces, Title: "Workspaces:"},
		&cobra.Group{ID: GroupAccount, Title: "Your login, tokens and keys:"},
		&cobra.Group{ID: GroupAdmin, Title: "Templates and administration:"},
	)
	cmds := []*cobra.Command{
		a.loginCmd(),
		a.logoutCmd(),
		a.whoamiCmd(),
		a.profileCmd(),
		a.tokensCmd(),
		a.usersCmd(),
		a.sshKeysCmd(),
		a.externalAuthCmd(),
		a.gitSSHCmd(),
		a.agentsCmd(),
		a.createCmd(),
		a.listCmd(),
		a.showCmd(),
		a.scheduleCmd(),
		a.auditCmd(),
	}
	for _, t := range transitions {
		cmds = append(cmds, a.transitionCmd(t))
	}
	cmds = append(cmds, a.updateCmd())
	cmds = append(cmds, a.sshCmd(), a.portForwardCmd(), a.configSSHCmd())
	cmds = append(cmds, a.templatesCmd(), a.buildsCmd(), a.logsCmd(), a.cancelCmd(), a.stateCmd(), a.provisionersCmd())
	// version needs no server: it takes none of the global flags.
	root.AddCommand(versionCmd())
	for _, c := range cmds {
		addGlobalFlags(c, root)
		c.PersistentPreRunE = a.traceCommand // trace.go
		// Each Use line already shows the flags that matter.
		disableFlagsInUseLine(c)
		c.GroupID = groupOf[c.Name()]
		root.AddCommand(c)
	}
}

func disableFlagsInUseLine(c *cobra.Command) {
	c.DisableFlagsInUseLine = true
	for _, sub := range c.Commands() {
		disableFlagsInUseLine(sub)
	}
}

// globalFlag is an option every client command takes: flag, environment variable, default and help
// are declared here and nowhere else.
type globalFlag struct {
	name, short, env, def, usage string
}

var (
	flagURL = globalFlag{name: "url", env: "HANGAR_URL",
		usage: "server `URL` (env HANGAR_URL; default: the URL saved by 'hangar login')"}
	flagToken = globalFlag{name: "token", env: "HANGAR_TOKEN",
		usage: "`TOKEN` to authenticate with (env HANGAR_TOKEN; default: the token saved by 'hangar login' for the same URL)"}
	flagOutput = globalFlag{name: "output", short: "o", def: "table",
		usage: "`FORMAT` of the output: table or json"}
	globalFlags = []globalFlag{flagURL, flagToken, flagOutput}
)

// addGlobalFlags declares the global flags on every command of c's tree that does the work (one
// without subcommands), unless root already has them as persistent flags (then they inherit
// root's). They are each command's own flags, not root's persistent ones, because the same root
// holds `hangar server` and the other daemons, which take none of them; and not a group's
// persistent ones, which would list them as Flags under `hangar stop` but as Global Flags under
// `hangar agents create` (docs/decisions.md, "CLI help").
// runsItself is the annotation of a command with subcommands that also does something itself
// (`hangar profile` shows the profile), so it takes the global flags as its subcommands do.
const runsItself = "hangar.runs-itself"

func addGlobalFlags(c, root *cobra.Command) {
	if c.HasSubCommands() {
		for _, sub := range c.Commands() {
			addGlobalFlags(sub, root)
		}
		if c.Annotations[runsItself] == "" {
			return
		}
	}
	for _, f := range globalFlags {
		if root.PersistentFlags().Lookup(f.name) != nil {
			continue
		}
		c.Flags().StringP(f.name, f.short, f.def, f.usage)
	}
}

// value returns a global option: the flag if given, else its environment variable if set, else ""
// and false.
func (a *app) value(cmd *cobra.Command, f globalFlag) (string, bool) {
	if fl := cmd.Flag(f.name); fl != nil && fl.Changed {
		return fl.Value.String(), true
	}
	if f.env != "" {
		if v := a.getenv(f.env); v != "" {
			return v, true
		}
	}
	return "", false
}

// outputFormat returns "table" or "json".
func (a *app) outputFormat(cmd *cobra.Command) (string, error) {
	v, ok := a.value(cmd, flagOutput)
	if !ok {
		v = flagOutput.def
	}
	switch v {
	case "table", "json":
		return v, nil
	}
	return "", usageError{fmt.Errorf("--output %q: must be table or json", v)}
}

// connection returns the server URL and token to use. Each comes from its flag, else its
// environment variable, else the login file; with no URL from any of them it is errNoServer. The
// saved token is used only with the URL it was saved for, so that it is never sent to another server.
func (a *app) connection(cmd *cobra.Command) (serverURL, token string, err error) {
	serverURL, urlSet := a.value(cmd, flagURL)
	token, tokenSet := a.value(cmd, flagToken)
	if urlSet && tokenSet {
		return serverURL, token, nil
	}
	saved, err := a.loadConfig()
	if err != nil {
		return "", "", err
	}
	if !urlSet {
		serverURL = saved.URL
		if serverURL == "" {
			return "", "", errNoServer
		}
	}
	if !tokenSet && saved.Token != "" && sameURL(saved.URL, serverURL) {
		token = saved.Token
	}
	return serverURL, token, nil
}

func sameURL(a, b string) bool {
	return strings.TrimRight(strings.TrimSpace(a), "/") == strings.TrimRight(strings.TrimSpace(b), "/")
}

// formatAndClient is outputFormat then client: what most commands begin with.
func (a *app) formatAndClient(cmd *cobra.Command) (string, *sdk.Client, error) {
	format, err := a.outputFormat(cmd)
	if err != nil {
		return "", nil, err
	}
	c, err := a.client(cmd)
	return format, c, err
}

// client returns an API client for the command's connection.
func (a *app) client(cmd *cobra.Command) (*sdk.Client, error) {
	serverURL, token, err := a.connection(cmd)
	if err != nil {
		return nil, err
	}
	return a.newClient(serverURL, token)
}

func (a *app) newClient(serverURL, token string) (*sdk.Client, error) {
	c, err := sdk.New(serverURL, token)
	if err != nil {
		return nil, err
	}
	if a.http != nil {
		c.HTTP = a.http
	}
	c.HTTP = tracing.Client(c.HTTP) // itself when tracing is off
	return c, nil
}

// usageError is a mistake in the command line rather than a failure to do the work.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// oneName is the Args check of commands that take exactly one name.
func oneName(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s takes exactly one %s name, got %d arguments", cmd.CommandPath(), what, len(args))}
		}
		return nil
	}
}

// noSubcommand is the Args check of a command that only groups others: `hangar users bogus` is a
// mistake, not a request for help.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}

func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// Execute runs root and returns the process exit code: 0 on success, 1 after printing the error to
// stderr as `error: <message>`, one line per invalid field after it. Ctrl-C cancels the command's
// context, which ends a --wait.
func Execute(root *cobra.Command) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			if s == os.Interrupt && interrupts.dispatch() {
				continue // a command asked for Ctrl-C (followBuild: cancel the build?)
			}
			cancel()
			return
		}
	}()
	return execute(ctx, root)
}

// interruptRouter hands Ctrl-C to the command that took it, instead of ending the command.
type interruptRouter struct {
	mu      sync.Mutex
	handler func() bool
}

var interrupts = &interruptRouter{}

// take routes Ctrl-C to fn until release is called; fn returns false to let this Ctrl-C end the
// command after all.
func (r *interruptRouter) take(fn func() bool) (release func()) {
	r.mu.Lock()
	r.handler = fn
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.handler = nil
		r.mu.Unlock()
	}
}

func (r *interruptRouter) dispatch() bool {
	r.mu.Lock()
	fn := r.handler
	r.mu.Unlock()
	return fn != nil && fn()
}

// execute is Execute with the command's context given: the end of ctx ends a --wait.
func execute(ctx context.Context, root *cobra.Command) int {
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cmd, err := root.ExecuteContextC(ctx)
	endCommandTrace(err)
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // a remote command's status (hangar ssh): nothing to print
	}
	w := root.ErrOrStderr()
	printError(w, err)
	if errors.As(err, new(usageError)) && cmd != nil {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 1
}

// printError writes err as `error: <message>`. An API error shows its message and detail, then one
// line per validation, after whatever context wraps it.
func printError(w io.Writer, err error) {
	var ae *sdk.APIError
	if !errors.As(err, &ae) {
		fmt.Fprintf(w, "error: %s\n", err)
		return
	}
	prefix := strings.TrimSuffix(err.Error(), ae.Error())
	msg := ae.Body.Message
	if ae.Body.Detail != "" {
		msg += ": " + ae.Body.Detail
	}
	if ae.Body.Code == sdk.CodeUnauthorized {
		msg += " (log in with 'hangar login --url URL --token TOKEN', or set HANGAR_TOKEN)"
	}
	fmt.Fprintf(w, "error: %s%s\n", prefix, msg)
	for _, v := range ae.Body.Validations {
		fmt.Fprintf(w, "  %s: %s\n", v.Field, v.Detail)
	}
}
