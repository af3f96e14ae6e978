package devfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// WithFirstProject returns the devfile text with the repository a workspace is created from as
// its first project (PROJECT_SOURCE: the editor opens it), checked out at revision ("": the
// remote's default branch). A project that already clones that remote is moved first (its
// revision set when one is given); otherwise a project named after the repository (its last path
// element, made a DNS label) is added, renamed with a suffix if the name is taken. The text comes
// back as JSON, which is YAML: comments of the original are not kept (the repository has them).
func WithFirstProject(text []byte, remote, revision string) ([]byte, error) {
	js, err := yaml.YAMLToJSON(text)
	if err != nil {
		return nil, fmt.Errorf("devfile: %v", err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, fmt.Errorf("devfile: not a YAML mapping")
	}
	var projects []any
	if p, ok := doc["projects"]; ok && p != nil {
		if projects, ok = p.([]any); !ok {
			return nil, fmt.Errorf("devfile.projects: is not a list")
		}
	}
	found := -1
	names := map[string]bool{}
	for i, p := range projects {
		m, _ := p.(map[string]any)
		if n, ok := m["name"].(string); ok {
			names[n] = true
		}
		git, _ := m["git"].(map[string]any)
		remotes, _ := git["remotes"].(map[string]any)
		for _, u := range remotes {
			if s, _ := u.(string); found < 0 && s == remote {
				found = i
			}
		}
	}
	var first map[string]any
	if found >= 0 {
		first = projects[found].(map[string]any)
		projects = append(projects[:found:found], projects[found+1:]...)
	} else {
		name := ProjectName(remote)
		for i := 2; names[name]; i++ {
			name = fmt.Sprintf("%s-%d", strings.TrimSuffix(ProjectName(remote)[:min(len(ProjectName(remote)), 58)], "-"), i)
		}
		first = map[string]any{"name": name, "git": map[string]any{"remotes": map[string]any{"origin": remote}}}
	}
	if revision != "" {
		git, _ := first["git"].(map[string]any)
		checkout, _ := git["checkoutFrom"].(map[string]any)
		if checkout == nil {
			checkout = map[string]any{}
		}
		checkout["revision"] = revision
		if _, ok := checkout["remote"]; !ok && found < 0 {
			checkout["remote"] = "origin"
		}
		git["checkoutFrom"] = checkout
	}
	doc["projects"] = append([]any{first}, projects...)
	return json.Marshal(doc)
}

// ProjectName is the project name a repository's URL gives: its last path element without .git,
// made a DNS label ("app" for https://host/team/App.git); "project" when nothing is left.
func ProjectName(remote string) string {
	base := remote
	if i := strings.LastIndexAny(base, "/:"); i >= 0 {
		base = base[i+1:]
	}
	base = strings.ToLower(strings.TrimSuffix(path.Clean("/" + base)[1:], ".git"))
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	if !workspace.IsDNSLabel(name, 63) {
		return "project"
	}
	return name
}
