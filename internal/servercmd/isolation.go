package servercmd

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
)

// isolation is how the in-process provisioners isolate template code (package sandbox,
// docs/decisions.md "Template isolation").
type isolation struct {
	passEnv []string
	// sandboxes[n] is provisioner n's sandbox, its build user claimed (nil when insecure).
	sandboxes []*sandbox.Config
}

// templateIsolation reads the isolation options, claims the build users of the n in-process
// provisioners (sandbox.ClaimUser: another installation's, or any process's, user is never shared)
// and checks, by running `terraform version` in the sandbox of provisioner 0, that templates can
// be isolated here. It refuses (an error naming --insecure-no-template-isolation) when they cannot,
// and logs what is at risk when that flag is given: it never falls back to running templates
// unisolated by itself. The caller releases the claims (release) when the provisioners end.
func templateIsolation(ctx context.Context, cfg Config, n int, exe string, log *slog.Logger) (*isolation, error) {
	opts, passEnv, err := cfg.Isolation.Parse()
	if err != nil {
		return nil, err
	}
	iso := &isolation{passEnv: passEnv, sandboxes: make([]*sandbox.Config, n)}
	if opts.Insecure {
		log.Warn(sandbox.InsecureWarning, "flag", "--"+sandbox.InsecureFlag)
		return iso, nil
	}
	// What no template may read: the data directory (the SQLite database, the admin token, the
	// provisioners' work roots), the server's secret files, its config file, and /etc/hangar, where
	// docs/deploy-vm.md keeps the environment file with the database URL.
	hide := []string{cfg.DataDir, cfg.Hardening.TLSKeyFile, cfg.OIDC.ClientSecretFile, cfg.ConfigFile, sandbox.SecretsDir}
	auto := opts.User == "" || opts.User == "auto"
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("the data directory: %w", err)
	}
	for i := range n {
		offset := i
		if auto && i > 0 {
			// After the users of the provisioners before it, which may have moved up.
			offset = iso.sandboxes[i-1].User.UID + 1 - sandbox.DefaultUID
		}
		sb, err := sandbox.Decide(opts, sandbox.DefaultUID, offset, exe, hide, fmt.Sprintf("hangar server %s provisioner %d", dataDir, i))
		if err != nil {
			iso.release()
			return nil, fmt.Errorf("in-process provisioners: %w; or run with --provisioners 0 and `hangar provisioner` elsewhere", err)
		}
		iso.sandboxes[i] = sb
		if sb.Claim.Leftover != "" {
			log.Info("the build user runs what this server's earlier run left (its builds are adopted)", "provisioner", i, "user", sb.User.UID, "process", sb.Claim.Leftover)
		}
		if len(sb.Claim.Skipped) > 0 {
			log.Warn("the default build user is taken: using a free one", "provisioner", i, "user", sb.User.UID, "taken", strings.Join(sb.Claim.Skipped, "; "))
		}
	}
	r := &terraform.Runner{TerraformPath: cfg.Terraform}
	iso.apply(r, 0)
	if _, err := r.Check(ctx); err != nil {
		iso.release()
		return nil, fmt.Errorf("in-process provisioners: cannot isolate templates: %w; fix it, pass --%s (templates then read what the server can), or run with --provisioners 0 and `hangar provisioner` elsewhere", err, sandbox.InsecureFlag)
	}
	log.Info("template isolation on: builds run terraform as an unprivileged user in a private mount namespace, without the data directory, the server's tokens or environment",
		"users", iso.users())
	return iso, nil
}

// apply sets the isolation of in-process provisioner n's runner.
func (iso *isolation) apply(r *terraform.Runner, n int) {
	r.PassEnv = iso.passEnv
	r.Sandbox = iso.sandboxes[n]
}

// users lists the build users' ids ("2000000000, 2000000001"); empty when templates are not
// isolated.
func (iso *isolation) users() string {
	var ids []string
	for _, sb := range iso.sandboxes {
		if sb != nil {
			ids = append(ids, fmt.Sprint(sb.User.UID))
		}
	}
	return strings.Join(ids, ", ")
}

// notice is the start message's line on the build users.
func (iso *isolation) notice() string {
	if iso == nil || len(iso.sandboxes) == 0 || iso.sandboxes[0] == nil {
		return ""
	}
	var taken []string
	for _, sb := range iso.sandboxes {
		taken = append(taken, sb.Claim.Skipped...)
	}
	s := "Builds: templates run as build user uid " + iso.users()
	if len(taken) > 0 {
		s += "; the default was taken, so free ones were picked (" + strings.Join(taken, "; ") + ")"
	}
	return s
}

// release gives the build users back.
func (iso *isolation) release() {
	for _, sb := range iso.sandboxes {
		if sb != nil {
			sb.Claim.Release()
		}
	}
}
