package devcontainer

import (
	"slices"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	d, err := Describe([]byte(`{
  // a comment
  "image": "mcr.microsoft.com/devcontainers/go:1",
  "forwardPorts": [8000, "3000"],
  "containerEnv": {"A": "1"},
  "remoteEnv": {"B": "${containerEnv:PATH}:/x"},
  "onCreateCommand": "go mod download",
  "postCreateCommand": "make setup",
  "postStartCommand": ["echo", "hi"],
}`), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if d.Image != "mcr.microsoft.com/devcontainers/go:1" || d.User != 1000 || d.WorkspaceFolder != "/workspaces/demo" ||
		d.ContainerEnv["A"] != "1" || d.RemoteEnv["B"] != "${PATH}:/x" || !slices.Equal(d.ForwardPorts, []int{8000, 3000}) ||
		!strings.Contains(d.PostCreateCommand, "go mod download") || !strings.Contains(d.PostCreateCommand, "make setup") ||
		d.PostStartCommand != "echo hi" || d.PostAttachCommand != "" {
		t.Fatalf("%+v", d)
	}
	// Refused as for a Kubernetes workspace, naming the field.
	if _, err := Describe([]byte(`{"image": "x", "privileged": true}`), testOptions()); err == nil || !strings.Contains(err.Error(), "devcontainer.privileged") {
		t.Fatalf("privileged: %v", err)
	}
}
