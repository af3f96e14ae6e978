package servercmd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
)

// isolation is how the in-process provisioners isolate template code (package sandbox,
// docs/decisions.md "Template isolation").
type isolation struct {
	opts    sandbox.Options
	passEnv []string
	exe     string
	hide    []string
}

// templateIsolation reads the isolation options and checks, by running `terraform version` in the
// sandbox of provisioner 0, that templates can be isolated here. It refuses (an error naming
// --insecure-no-template-isolation) when they cannot, and logs what is at risk when that flag is
// given: it never falls back to running templates unisolated by itself.
func templateIsolation(ctx context.Context, cfg Config, exe string, log *slog.Logger) (*isolation, error) {
	opts, passEnv, err := cfg.Isolation.Parse()
	if err != nil {
		return nil, err
	}
	// What no template may read: the data directory (the SQLite database, the admin token, the
	// provisioners' work roots), the server's secret files, its config file, and /etc/hangar, where
	// docs/deploy-vm.md keeps the environment file with the database URL.
	iso := &isolation{opts: opts, passEnv: passEnv, exe: exe,
		hide: []string{cfg.DataDir, cfg.Hardening.TLSKeyFile, cfg.OIDC.ClientSecretFile, cfg.ConfigFile, sandbox.SecretsDir}}
	if opts.Insecure {
		log.Warn(sandbox.InsecureWarning, "flag", "--"+sandbox.InsecureFlag)
		return iso, nil
	}
	r := &terraform.Runner{TerraformPath: cfg.Terraform}
	if err := iso.apply(r, 0); err != nil {
		return nil, err
	}
	if _, err := r.Check(ctx); err != nil {
		return nil, fmt.Errorf("in-process provisioners: cannot isolate templates: %w; fix it, pass --%s (templates then read what the server can), or run with --provisioners 0 and `hangar provisioner` elsewhere", err, sandbox.InsecureFlag)
	}
	log.Info("template isolation on: builds run terraform as an unprivileged user in a private mount namespace, without the data directory, the server's tokens or environment",
		"user", r.Sandbox.User.UID, "group", r.Sandbox.User.GID)
	return iso, nil
}

// apply sets the isolation of in-process provisioner n's runner.
func (iso *isolation) apply(r *terraform.Runner, n int) error {
	r.PassEnv = iso.passEnv
	sb, err := sandbox.Decide(iso.opts, sandbox.DefaultUID, n, iso.exe, iso.hide)
	if err != nil {
		return fmt.Errorf("in-process provisioners: %w; or run with --provisioners 0 and `hangar provisioner` elsewhere", err)
	}
	r.Sandbox = sb
	return nil
}
