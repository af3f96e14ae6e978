package devcontainer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Description is a devcontainer.json as a machine other than a Kubernetes pod can honour it (a
// Terraform template's data source hangar_devcontainer): what Translate made of it, flat. The same
// fields are honoured, refused and warned about as for a Kubernetes workspace.
type Description struct {
	Image string
	// User is the uid the workspace runs as (remoteUser/containerUser; 0 when the file names none).
	User int64
	// WorkspaceFolder is where the workspace's files are (${containerWorkspaceFolder}).
	WorkspaceFolder string
	// ContainerEnv and RemoteEnv are the variables; RemoteEnv's values may name others as ${NAME}.
	ContainerEnv, RemoteEnv map[string]string
	// ForwardPorts are the ports served, in the file's order.
	ForwardPorts []int
	// PostCreateCommand (once per workspace: onCreate, updateContent and postCreate, in order),
	// PostStartCommand and PostAttachCommand are shell command lines ("" when none), each run in
	// WorkspaceFolder.
	PostCreateCommand, PostStartCommand, PostAttachCommand string
	Warnings                                               []string
}

// Describe translates a devcontainer.json (Translate) and describes the result.
func Describe(data []byte, opts Options) (*Description, error) {
	r, err := Translate(data, opts)
	if err != nil {
		return nil, err
	}
	var d translated
	if err := json.Unmarshal(r.Devfile, &d); err != nil {
		return nil, fmt.Errorf("describe the translated devcontainer.json: %w", err)
	}
	i := slices.IndexFunc(d.Components, func(c translatedComponent) bool { return c.Name == componentName && c.Container != nil })
	if i < 0 {
		return nil, fmt.Errorf("describe the translated devcontainer.json: no %s container", componentName)
	}
	c := d.Components[i]
	out := &Description{Image: c.Container.Image, User: d.Attributes.PodOverrides.Spec.SecurityContext.RunAsUser,
		WorkspaceFolder: c.Container.SourceMapping, ContainerEnv: map[string]string{}, RemoteEnv: map[string]string{}, Warnings: r.Warnings}
	for _, e := range c.Container.Env {
		out.ContainerEnv[e.Name] = e.Value
	}
	for _, e := range c.Attributes.RemoteEnv {
		out.RemoteEnv[e.Name] = e.Value
	}
	for _, ep := range c.Container.Endpoints {
		out.ForwardPorts = append(out.ForwardPorts, ep.TargetPort)
	}
	var once []string
	for _, cmd := range d.Commands {
		switch {
		case cmd.Attributes.Once:
			once = append(once, cmd.Exec.CommandLine)
		case cmd.ID == "post-start":
			out.PostStartCommand = cmd.Exec.CommandLine
		case cmd.ID == "post-attach":
			out.PostAttachCommand = cmd.Exec.CommandLine
		}
	}
	if len(once) == 1 {
		out.PostCreateCommand = once[0]
	} else if len(once) > 1 {
		out.PostCreateCommand = "(\n" + strings.Join(once, "\n) && (\n") + "\n)" // each may span lines
	}
	return out, nil
}

// translated is what Describe reads of the devfile Translate wrote.
type translated struct {
	Attributes struct {
		PodOverrides struct {
			Spec struct {
				SecurityContext struct {
					RunAsUser int64 `json:"runAsUser"`
				} `json:"securityContext"`
			} `json:"spec"`
		} `json:"pod-overrides"`
	} `json:"attributes"`
	Components []translatedComponent `json:"components"`
	Commands   []struct {
		ID         string `json:"id"`
		Attributes struct {
			Once bool `json:"hangar.dev/once-per-workspace"`
		} `json:"attributes"`
		Exec struct {
			CommandLine string `json:"commandLine"`
		} `json:"exec"`
	} `json:"commands"`
}

type translatedComponent struct {
	Name       string `json:"name"`
	Attributes struct {
		RemoteEnv []struct{ Name, Value string } `json:"hangar.dev/remote-env"`
	} `json:"attributes"`
	Container *struct {
		Image         string                         `json:"image"`
		SourceMapping string                         `json:"sourceMapping"`
		Env           []struct{ Name, Value string } `json:"env"`
		Endpoints     []struct {
			TargetPort int `json:"targetPort"`
		} `json:"endpoints"`
	} `json:"container"`
}
