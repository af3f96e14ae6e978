// Package provisionercmd is `hangar provisioner`: a provisioner daemon that runs Terraform builds
// for a Hangar server, authenticated by a token from `hangar provisioners create`.
package provisionercmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/logging"
	"github.com/hangar-dev/hangar/internal/provisioner"
	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/tfprovider"
)

// Config is the daemon's configuration.
type Config struct {
	Server, TokenFile, Terraform, WorkDir, Identity, LogLevel, LogFormat string
	// Isolation: how template code is isolated (package sandbox).
	Isolation sandbox.Flags
	// ConfigFile is the --config file, hidden from templates with the other secrets (set by Command).
	ConfigFile string
}

// Command returns `hangar provisioner`.
func Command() *cobra.Command {
	var cfg Config
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "provisioner",
		Short: "Run a provisioner daemon: it runs Terraform for workspace builds",
		Long: "Run a Hangar provisioner daemon. It claims the builds of workspaces made from terraform templates,\n" +
			"runs terraform (init, then apply or destroy) with the state the server keeps, streams the log,\n" +
			"and reports the state Terraform wrote. Several may run at once, on any machine that reaches the server.\n\n" +
			"`hangar server` runs one in process by default (--provisioners).\n\n" +
			cmdopt.Precedence,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg.ConfigFile = cmdopt.ConfigFile(cmd, "HANGAR_PROVISIONER_CONFIG")
			return Run(ctx, cfg, cmd.OutOrStdout())
		},
	}
	cmdopt.RegisterWithFile(cmd, "HANGAR_PROVISIONER_CONFIG", append([]cmdopt.Option{
		cmdopt.String(&cfg.Server, "server", "HANGAR_SERVER", "http://127.0.0.1:7080", "URL of the Hangar server"),
		cmdopt.String(&cfg.TokenFile, "token-file", "HANGAR_PROVISIONER_TOKEN_FILE", "", "file holding the provisioner's token (printed by hangar provisioners create)"),
		cmdopt.String(&cfg.Terraform, "terraform", "HANGAR_TERRAFORM", "terraform", "the terraform binary to run").Arg("PATH"),
		cmdopt.String(&cfg.WorkDir, "work-dir", "HANGAR_PROVISIONER_WORK_DIR", "", "where builds run (one directory each, removed after); default <tmp>/hangar-provisioner-<identity>. Keep it across restarts: a daemon adopts the builds a killed one left there"),
		cmdopt.String(&cfg.Identity, "identity", "HANGAR_PROVISIONER_IDENTITY", host, "this daemon's name among the provisioner's daemons; keep it across restarts (the builds it ran stay its own)").Arg("NAME"),
		cmdopt.String(&cfg.LogLevel, "log-level", "HANGAR_LOG_LEVEL", "info", "debug, info, warn or error").Arg("LEVEL"),
		cmdopt.String(&cfg.LogFormat, "log-format", "HANGAR_LOG_FORMAT", "text", "text or json").Arg("FORMAT"),
	}, cfg.Isolation.Options(false)...))
	return cmd
}

// Run runs the daemon until ctx ends. It says on out which user builds run as.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if err := terraform.Supported(); err != nil {
		return err
	}
	log, err := logging.New(cfg.LogLevel, cfg.LogFormat, os.Stderr)
	if err != nil {
		return err
	}
	token, err := cmdopt.ReadToken(cfg.TokenFile, "hangar provisioners create")
	if err != nil {
		return err
	}
	if cfg.Identity == "" || strings.ContainsAny(cfg.Identity, `/\`) {
		return fmt.Errorf("--identity: want a name without slashes, got %q", cfg.Identity)
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(os.TempDir(), "hangar-provisioner-"+cfg.Identity)
	}
	unlock, err := provisioner.LockWorkRoot(cfg.WorkDir)
	if err != nil {
		return fmt.Errorf("--work-dir: %w", err)
	}
	defer unlock()
	shim, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the hangar executable (the terraform shim): %w", err)
	}
	mirror, err := tfprovider.Mirror(filepath.Join(cfg.WorkDir, ".plugins"), shim)
	if err != nil {
		return err
	}
	runner := &terraform.Runner{TerraformPath: cfg.Terraform, WorkRoot: cfg.WorkDir, KeepWorkDir: true, Shim: shim, PluginMirror: mirror}
	if err := isolate(runner, cfg, shim, log); err != nil {
		return err
	}
	if runner.Sandbox != nil {
		defer runner.Sandbox.Claim.Release()
	}
	v, err := runner.Check(ctx)
	if err != nil {
		if runner.Sandbox != nil {
			return fmt.Errorf("cannot isolate templates: %w; fix it, or pass --%s (templates then read what this process can)", err, sandbox.InsecureFlag)
		}
		return fmt.Errorf("--terraform: %w", err)
	}
	log.Info("terraform found", "version", v)
	if runner.Sandbox != nil {
		log.Info("template isolation on: builds run terraform as an unprivileged user in a private mount namespace, without the work directory's other builds, the token file or this process's environment",
			"user", runner.Sandbox.User.UID, "group", runner.Sandbox.User.GID)
		if c := runner.Sandbox.Claim; len(c.Skipped) > 0 {
			log.Warn("the default build user is taken: using a free one", "user", c.User.UID, "taken", strings.Join(c.Skipped, "; "))
		}
		fmt.Fprintf(out, "Builds: templates run as build user %s\n", runner.Sandbox.Claim.Summary())
	}
	d := &provisioner.Daemon{
		Coord:    &provisioner.Client{URL: cfg.Server, Token: token, HTTP: &http.Client{Timeout: 2 * time.Minute}},
		Runner:   runner,
		WorkerID: cfg.Identity,
		Logger:   log,
		// The state of builds the server no longer takes from this daemon is kept here.
		UnreportedDir: filepath.Join(cfg.WorkDir, ".unreported"),
	}
	err = d.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// isolate sets how the runner isolates template code: in a sandbox (the default, which needs root
// on Linux), or, with --insecure-no-template-isolation, not at all, said at start. The environment
// is scrubbed either way.
func isolate(r *terraform.Runner, cfg Config, exe string, log *slog.Logger) error {
	opts, passEnv, err := cfg.Isolation.Parse()
	if err != nil {
		return err
	}
	r.PassEnv = passEnv
	if opts.Insecure {
		log.Warn(sandbox.InsecureWarning, "flag", "--"+sandbox.InsecureFlag)
		return nil
	}
	// What no template may read besides the work directory: the provisioner's token.
	r.Sandbox, err = sandbox.Decide(opts, sandbox.DefaultStandaloneUID, 0, exe, []string{cfg.TokenFile, cfg.ConfigFile, sandbox.SecretsDir}, "hangar provisioner "+workDirAbs(cfg.WorkDir))
	return err
}

// workDirAbs is the work directory's absolute path (the daemon's name in its build user's lock), or
// dir as given if it has none.
func workDirAbs(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}
