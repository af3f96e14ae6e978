// Package agentcmd is `hangar agent`: it reads options (flags, each also an environment variable),
// connects to the cluster (a kubeconfig, or the in-cluster config) and to the server, and runs the
// agent until interrupted.
package agentcmd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/agent"
	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/logging"
)

// Config is the agent's configuration.
type Config struct {
	Server, TokenFile, Kubeconfig, LeaseNamespace, Identity, LogLevel, LogFormat string
	ApplyConcurrency                                                             string
}

// Command returns `hangar agent`.
func Command() *cobra.Command {
	var cfg Config
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a Hangar agent next to a Kubernetes cluster",
		Long: "Run a Hangar agent. It watches the Deployments of its workspaces, reports their state to the server\n" +
			"(full and partial reconciles) and applies the configuration the server sends back.\n\n" +
			"Every flag can also be set with the environment variable shown.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cfg)
		},
	}
	cmdopt.Register(cmd, []cmdopt.Option{
		cmdopt.String(&cfg.Server, "server", "HANGAR_SERVER", "http://127.0.0.1:7080", "URL of the Hangar server"),
		cmdopt.String(&cfg.TokenFile, "token-file", "HANGAR_AGENT_TOKEN_FILE", "", "file holding the agent's token (from `hangar agents create`)"),
		cmdopt.String(&cfg.Kubeconfig, "kubeconfig", "KUBECONFIG", "", "kubeconfig of the cluster; empty uses the in-cluster configuration"),
		cmdopt.String(&cfg.LeaseNamespace, "lease-namespace", "HANGAR_LEASE_NAMESPACE", "hangar-agent", "namespace of the leader-election Lease; empty disables leader election (run one replica only)"),
		cmdopt.String(&cfg.Identity, "identity", "HANGAR_AGENT_IDENTITY", fmt.Sprintf("%s-%d", host, os.Getpid()), "this replica's name in leader election"),
		cmdopt.String(&cfg.ApplyConcurrency, "apply-concurrency", "HANGAR_APPLY_CONCURRENCY", "8", "how many workspaces the agent applies at once (they share the client's 50 requests/s)"),
		cmdopt.String(&cfg.LogLevel, "log-level", "HANGAR_LOG_LEVEL", "info", "debug, info, warn or error"),
		cmdopt.String(&cfg.LogFormat, "log-format", "HANGAR_LOG_FORMAT", "text", "text or json"),
	})
	return cmd
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log, err := logging.New(cfg.LogLevel, cfg.LogFormat, os.Stderr)
	if err != nil {
		return err
	}
	token, err := cmdopt.ReadToken(cfg.TokenFile, "hangar agents create")
	if err != nil {
		return err
	}
	applyConcurrency, err := strconv.Atoi(cfg.ApplyConcurrency)
	if err != nil || applyConcurrency < 1 || applyConcurrency > 1000 {
		return fmt.Errorf("--apply-concurrency: want a whole number from 1 to 1000, got %q", cfg.ApplyConcurrency)
	}
	var rc *rest.Config
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes configuration: %w (pass --kubeconfig outside a cluster)", err)
	}
	rc.QPS, rc.Burst = 50, 100
	kube, err := agent.NewKube(rc)
	if err != nil {
		return err
	}
	a := agent.New(agent.Options{
		Server: &agent.ServerClient{URL: cfg.Server, Token: token, HTTP: &http.Client{Timeout: 2 * time.Minute}},
		Kube:   kube, Logger: log, Identity: cfg.Identity, LeaseNamespace: cfg.LeaseNamespace,
		ApplyConcurrency: applyConcurrency,
	})
	err = a.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
