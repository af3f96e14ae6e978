package workspace

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckDesiredChange(t *testing.T) {
	tests := []struct {
		from, to State
		want     error
	}{
		{Running, Stopped, nil},
		{Running, Terminated, nil},
		{Running, RestartRequested, nil},
		{RestartRequested, RestartRequested, nil},
		{RestartRequested, Stopped, nil},
		{Stopped, Running, nil},
		{Stopped, RestartRequested, ErrIllegalTransition},
		{Terminated, Terminated, nil},
		{Terminated, Running, ErrTerminated},
		{Terminated, Stopped, ErrTerminated},
		{Terminated, RestartRequested, ErrTerminated},
		{Running, Starting, ErrIllegalTransition},
	}
	for _, tc := range tests {
		err := CheckDesiredChange(tc.from, Running, tc.to)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s → %s: %v, want %v", tc.from, tc.to, err, tc.want)
		}
	}
}

func TestParseStates(t *testing.T) {
	if _, err := ParseDesired("Starting"); err == nil || !strings.Contains(err.Error(), "RestartRequested") {
		t.Errorf("ParseDesired(Starting) = %v", err)
	}
	for _, s := range DesiredStates {
		if got, err := ParseDesired(string(s)); err != nil || got != s {
			t.Errorf("ParseDesired(%s) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseActual("RestartRequested"); err == nil {
		t.Error("RestartRequested parsed as an actual state")
	}
}

func TestAgentConfigValidate(t *testing.T) {
	neg := -2
	tests := []struct {
		name  string
		cfg   AgentConfig
		field string
	}{
		{"defaults are valid", AgentConfig{}, ""},
		{"bad zone", AgentConfig{DNSZone: "Not A Zone"}, "config.dns_zone"},
		{"shared without namespace", AgentConfig{NamespaceMode: NamespaceShared}, "config.shared_namespace"},
		{"unknown mode", AgentConfig{NamespaceMode: "per-user"}, "config.namespace_mode"},
		{"bad quantity", AgentConfig{DefaultResources: Resources{Limits: ResourceList{CPU: "lots"}}}, "config.default_resources_per_workspace_container.limits.cpu"},
		{"negative cpu request", AgentConfig{DefaultResources: Resources{Requests: ResourceList{CPU: "-100m"}}}, "config.default_resources_per_workspace_container.requests.cpu"},
		{"negative memory limit", AgentConfig{DefaultResources: Resources{Limits: ResourceList{Memory: "-1Gi"}}}, "config.default_resources_per_workspace_container.limits.memory"},
		{"negative max cpu", AgentConfig{MaxResources: Resources{Limits: ResourceList{CPU: "-2"}}}, "config.max_resources_per_workspace.limits.cpu"},
		{"negative max memory request", AgentConfig{MaxResources: Resources{Requests: ResourceList{Memory: "-0.5Gi"}}}, "config.max_resources_per_workspace.requests.memory"},
		{"zero quantity is valid", AgentConfig{MaxResources: Resources{Requests: ResourceList{CPU: "0", Memory: "-0"}}}, ""},
		{"bad cidr", AgentConfig{NetworkPolicy: NetworkPolicy{Egress: []EgressRule{{Allow: "10.0.0.0/33"}}}}, "config.network_policy.egress[0].allow"},
		{"reserved label", AgentConfig{Labels: map[string]string{"hangar.dev/team": "a"}}, "config.labels"},
		{"bad label value", AgentConfig{Labels: map[string]string{"team": "a b"}}, "config.labels"},
		{"quota below -1", AgentConfig{WorkspacesQuota: &neg}, "config.workspaces_quota"},
		{"lifetimes over a year", AgentConfig{MaxActiveHoursBeforeStop: 8000, MaxStoppedHoursBeforeTermination: 800}, "config.max_active_hours_before_stop"},
		{"partial interval", AgentConfig{PartialReconcileIntervalSeconds: 7200}, "config.partial_reconciliation_interval_seconds"},
		{"kwok scheduling is valid", AgentConfig{ToolsImage: "registry.example.com:5000/team/hangar@sha256:" + strings.Repeat("a", 64), NodeSelector: map[string]string{"type": "kwok"}, Tolerations: []Toleration{{Key: "kwok.x-k8s.io/node", Operator: "Equal", Value: "fake", Effect: "NoSchedule"}, {Operator: "Exists"}}}, ""},
		{"bad tools image", AgentConfig{ToolsImage: "Hangar Tools"}, "config.tools_image"},
		{"bad node selector key", AgentConfig{NodeSelector: map[string]string{"bad key": "x"}}, `config.node_selector["bad key"]`},
		{"bad node selector value", AgentConfig{NodeSelector: map[string]string{"type": "a b"}}, `config.node_selector["type"]`},
		{"toleration operator", AgentConfig{Tolerations: []Toleration{{Key: "k", Operator: "In"}}}, "config.tolerations[0].operator"},
		{"toleration effect", AgentConfig{Tolerations: []Toleration{{Key: "k", Effect: "Sometimes"}}}, "config.tolerations[0].effect"},
		{"toleration Equal needs a key", AgentConfig{Tolerations: []Toleration{{Value: "v"}}}, "config.tolerations[0].key"},
		{"proxy ssh keys are valid", AgentConfig{ProxySSHPublicKeys: []string{testSSHKey, testSSHKey + " proxy@cluster"}}, ""},
		{"bad proxy ssh key", AgentConfig{ProxySSHPublicKeys: []string{testSSHKey, "ssh-ed25519 notbase64"}}, "config.proxy_ssh_public_keys[1]"},
		{"two proxy ssh keys in one", AgentConfig{ProxySSHPublicKeys: []string{testSSHKey + "\n" + testSSHKey}}, "config.proxy_ssh_public_keys[0]"},
		{"proxy ssh key with options", AgentConfig{ProxySSHPublicKeys: []string{`from="10.0.0.1" ` + testSSHKey}}, "config.proxy_ssh_public_keys[0]"},
		{"proxy ssh address without port", AgentConfig{ProxySSHAddress: "ssh.example.com"}, "config.proxy_ssh_address"},
		{"proxy ssh address port zero", AgentConfig{ProxySSHAddress: "ssh.example.com:0"}, "config.proxy_ssh_address"},
		{"proxy ssh address without host", AgentConfig{ProxySSHAddress: ":22"}, "config.proxy_ssh_address"},
		{"proxy ssh host key is valid", AgentConfig{ProxySSHAddress: "ssh.example.com:22", ProxySSHHostKey: testSSHKey + " proxy"}, ""},
		{"bad proxy ssh host key", AgentConfig{ProxySSHAddress: "ssh.example.com:22", ProxySSHHostKey: "ssh-ed25519 notbase64"}, "config.proxy_ssh_host_key"},
		{"two proxy ssh host keys", AgentConfig{ProxySSHAddress: "ssh.example.com:22", ProxySSHHostKey: testSSHKey + "\n" + testSSHKey}, "config.proxy_ssh_host_key"},
		{"proxy ssh host key without the address", AgentConfig{ProxySSHHostKey: testSSHKey}, "config.proxy_ssh_host_key"},
		{"image build is valid", AgentConfig{ImageBuild: ImageBuild{Registry: "registry.hangar-system.svc:5000/hangar/builds", InsecureRegistries: []string{"registry.hangar-system.svc:5000", "127.0.0.1:5000"},
			PushSecret: &ImagePullSecret{Name: "push", Namespace: "hangar-system"}, Prebuilt: []PrebuiltImage{{Hash: strings.Repeat("ab", 32), Image: "registry.example.com/team/dev:1"}}}}, ""},
		{"image build registry with a tag", AgentConfig{ImageBuild: ImageBuild{Registry: "registry.example.com/builds:latest"}}, "config.image_build.registry"},
		{"image build registry without a path", AgentConfig{ImageBuild: ImageBuild{Registry: "registry.example.com:5000"}}, "config.image_build.registry"},
		{"image build registry with a digest", AgentConfig{ImageBuild: ImageBuild{Registry: "registry.example.com/b@sha256:" + strings.Repeat("a", 64)}}, "config.image_build.registry"},
		{"insecure registry without a port", AgentConfig{ImageBuild: ImageBuild{InsecureRegistries: []string{"registry.local"}}}, "config.image_build.insecure_registries[0]"},
		{"push secret without a namespace", AgentConfig{ImageBuild: ImageBuild{PushSecret: &ImagePullSecret{Name: "push"}}}, "config.image_build.push_secret.namespace"},
		{"image build resources", AgentConfig{ImageBuild: ImageBuild{Resources: Resources{Limits: ResourceList{Memory: "lots"}}}}, "config.image_build.resources.limits.memory"},
		{"prebuilt hash", AgentConfig{ImageBuild: ImageBuild{Prebuilt: []PrebuiltImage{{Hash: "abc", Image: "debian:12"}}}}, "config.image_build.prebuilt[0].hash"},
		{"prebuilt hash twice", AgentConfig{ImageBuild: ImageBuild{Prebuilt: []PrebuiltImage{{Hash: strings.Repeat("a", 64), Image: "debian:12"}, {Hash: strings.Repeat("a", 64), Image: "debian:13"}}}}, "config.image_build.prebuilt[1].hash"},
		{"prebuilt image", AgentConfig{ImageBuild: ImageBuild{Prebuilt: []PrebuiltImage{{Hash: strings.Repeat("a", 64), Image: "Not An Image"}}}}, "config.image_build.prebuilt[0].image"},
		{"toleration Exists takes no value", AgentConfig{Tolerations: []Toleration{{Key: "k", Operator: "Exists", Value: "v"}}}, "config.tolerations[0].value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.WithDefaults().Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a ValidationError on %s", err, tc.field)
			}
			for _, p := range ve.Problems {
				if p.Field == tc.field {
					return
				}
			}
			t.Fatalf("no problem on %s: %v", tc.field, err)
		})
	}
}

// testSSHKey is an ed25519 public key in authorized_keys form.
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
