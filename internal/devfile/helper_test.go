package devfile

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestHelperWrapsTheMainContainer: the main container runs `hangar workspace-helper` around its
// command, or alone when it has none; args without a command (the image's entrypoint) and an
// endpoint on the helper's port leave the pod without the helper, with a warning. Other containers
// are never wrapped.
func TestHelperWrapsTheMainContainer(t *testing.T) {
	for _, tc := range []struct {
		name, container string
		wantCmd         []string
		wantArgs        []string
		warning         string // "" means the helper runs
	}{
		{"no command", `{image: busybox}`, []string{HelperBinary, "workspace-helper"}, nil, ""},
		{"command and args", `{image: busybox, command: [sh, -c], args: ["exec sleep 1000"]}`,
			[]string{HelperBinary, "workspace-helper", "--", "sh", "-c", "exec sleep 1000"}, nil, ""},
		{"args only", `{image: busybox, args: [tail, -f, /dev/null]}`, nil, []string{"tail", "-f", "/dev/null"}, "SSH is not available"},
		{"helper's port taken", `{image: busybox, endpoints: [{name: ssh, targetPort: 60022}]}`,
			[]string{"/bin/sh", "-c", KeepAliveScript}, nil, "port 60022"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, []byte("schemaVersion: 2.2.0\ncomponents:\n  - name: side\n    container: {image: busybox, command: [sleep, inf]}\n  - name: main\n    attributes: {hangar.dev/main: true}\n    container: "+tc.container+"\n"))
			warned := slices.ContainsFunc(d.Warnings(), func(w string) bool {
				return strings.Contains(w, tc.warning) && strings.Contains(w, `components[1] ("main")`)
			})
			if tc.warning != "" && !warned || tc.warning == "" && len(d.Warnings()) > 0 {
				t.Errorf("warnings %q, want one with %q", d.Warnings(), tc.warning)
			}
			p := defaultParams(t)
			p.Agent.ProxySSHPublicKeys = []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl b"}
			out, err := Generate(d, p)
			if err != nil {
				t.Fatal(err)
			}
			g := readBack(t, out)
			spec := g.deployment.Spec.Template.Spec
			side, main := spec.Containers[0], spec.Containers[1]
			if !slices.Equal(side.Command, []string{"sleep", "inf"}) {
				t.Errorf("side container command %q, want it unchanged", side.Command)
			}
			if !slices.Equal(main.Command, tc.wantCmd) || !slices.Equal(main.Args, tc.wantArgs) {
				t.Errorf("main command %q args %q, want %q %q", main.Command, main.Args, tc.wantCmd, tc.wantArgs)
			}
			checkHelper(t, g, spec, "main", tc.warning == "")
			secret := sshSecret(t, out)
			if tc.warning != "" {
				if secret != nil || strings.Contains(out, "alice-demo-ssh") {
					t.Errorf("no helper, but the Secret alice-demo-ssh is generated or listed")
				}
				return
			}
			if secret == nil || secret.StringData[AuthorizedKeysKey] != strings.Join(p.Agent.ProxySSHPublicKeys, "\n")+"\n" {
				t.Fatalf("Secret alice-demo-ssh: %+v, want the agent's keys one per line", secret)
			}
			if !strings.Contains(out, "v1/Secret/hangar-ws-alice-demo/alice-demo-ssh\n") {
				t.Errorf("the inventory does not list the Secret alice-demo-ssh")
			}
			for _, c := range spec.InitContainers {
				if c.Name == ToolsContainerName && (c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
					len(c.SecurityContext.Capabilities.Drop) != 1 || c.Resources.Limits.Memory().IsZero()) {
					t.Errorf("tools init container %+v, want the restricted security context and limits", c)
				}
			}
		})
	}
}

func sshSecret(t *testing.T, stream string) *corev1.Secret {
	t.Helper()
	for _, doc := range documents(t, stream) {
		var s corev1.Secret
		if !strings.Contains(string(doc), "kind: Secret\n") {
			continue
		}
		if err := yaml.Unmarshal(doc, &s); err != nil {
			t.Fatal(err)
		}
		if s.Name == "alice-demo-ssh" {
			return &s
		}
	}
	return nil
}
