package agentcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfig writes a kubeconfig with one cluster, user and context per name (server
// https://NAME.example:6443), current-context current.
func kubeconfig(t *testing.T, current string, names ...string) string {
	t.Helper()
	var clusters, users, contexts strings.Builder
	for _, n := range names {
		clusters.WriteString("- name: " + n + "\n  cluster:\n    server: https://" + n + ".example:6443\n")
		users.WriteString("- name: " + n + "\n  user:\n    token: token-" + n + "\n")
		contexts.WriteString("- name: " + n + "\n  context:\n    cluster: " + n + "\n    user: " + n + "\n")
	}
	text := "apiVersion: v1\nkind: Config\ncurrent-context: " + current + "\nclusters:\n" + clusters.String() +
		"users:\n" + users.String() + "contexts:\n" + contexts.String()
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// KUBECONFIG with several files merges them (the first file's current-context wins) and --context
// picks any context of any file; --kubeconfig reads that one file only.
func TestRESTConfigFollowsKubeconfigRules(t *testing.T) {
	first := kubeconfig(t, "alpha", "alpha")
	second := kubeconfig(t, "gamma", "beta", "gamma")
	t.Setenv("KUBECONFIG", first+string(os.PathListSeparator)+second)

	for _, tc := range []struct {
		kubeconfig, context, wantHost, wantToken string
	}{
		{"", "", "https://alpha.example:6443", "token-alpha"},      // first file's current context
		{"", "beta", "https://beta.example:6443", "token-beta"},    // a context of the second file
		{"", "gamma", "https://gamma.example:6443", "token-gamma"}, // the second file's own current one
		{second, "", "https://gamma.example:6443", "token-gamma"},  // explicit file, its current context
	} {
		cfg, source, err := RESTConfig(tc.kubeconfig, tc.context)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if cfg.Host != tc.wantHost || cfg.BearerToken != tc.wantToken {
			t.Errorf("%+v: host %s token %s, want %s %s", tc, cfg.Host, cfg.BearerToken, tc.wantHost, tc.wantToken)
		}
		if !strings.Contains(source, "context ") {
			t.Errorf("%+v: source %q does not name the context", tc, source)
		}
	}
	// An explicit file does not see the contexts of KUBECONFIG's files.
	if _, _, err := RESTConfig(second, "alpha"); err == nil || !strings.Contains(err.Error(), "alpha") {
		t.Errorf("--kubeconfig with a context of another file: %v", err)
	}
	if _, _, err := RESTConfig("", "nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("an unknown --context: %v", err)
	}
}

// With no configuration at all (and not in a cluster) the agent says what it looked for.
func TestRESTConfigNothingConfigured(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", empty)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, _, err := RESTConfig("", "")
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") || !strings.Contains(err.Error(), "~/.kube/config") {
		t.Fatalf("err = %v", err)
	}
}

// `hangar agent` reads its options from --config (or HANGAR_AGENT_CONFIG): a value of the file
// reaches Run unless the environment or a flag gives one, and a bad key or value is refused naming
// the file and the key.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) error {
		cmd := Command()
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return cmd.Execute()
	}
	good := write("agent.yaml", "token-file: /nonexistent/from-file\nkube-qps: 50\nlog-level: warn\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"file", nil, []string{"--config", good}, "--token-file: open /nonexistent/from-file"},
		{"file by env", map[string]string{"HANGAR_AGENT_CONFIG": good}, nil, "--token-file: open /nonexistent/from-file"},
		{"env over file", map[string]string{"HANGAR_AGENT_TOKEN_FILE": "/nonexistent/from-env"}, []string{"--config", good}, "open /nonexistent/from-env"},
		{"flag over env", map[string]string{"HANGAR_AGENT_TOKEN_FILE": "/nonexistent/from-env"}, []string{"--config", good, "--token-file", "/nonexistent/from-flag"}, "open /nonexistent/from-flag"},
		{"unknown key", nil, []string{"--config", write("typo.yaml", "kube-qsp: 50\n")}, `typo.yaml: unknown key "kube-qsp"`},
		{"bad int", nil, []string{"--config", write("bad.yaml", "kube-qps: fast\n")}, `bad.yaml: key "kube-qps" (--kube-qps): want a whole number, got "fast"`},
		{"bad otel endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, []string{"--config", good}, "--otel-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT): want an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
