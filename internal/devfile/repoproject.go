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
	if err := caseTwin(doc, "devfile", "projects"); err != nil {
		return nil, err
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
	// The keys this writes or reads of the project moved first, each in its one case.
	git, _ := first["git"].(map[string]any)
	checkout, _ := git["checkoutFrom"].(map[string]any)
	for _, c := range []struct {
		m      map[string]any
		field  string
		fields []string
	}{{first, "devfile.projects[0]", []string{"name", "git"}}, {git, "devfile.projects[0].git", []string{"remotes", "checkoutFrom"}},
		{checkout, "devfile.projects[0].git.checkoutFrom", []string{"remote", "revision"}}} {
		if err := caseTwin(c.m, c.field, c.fields...); err != nil {
			return nil, err
		}
	}
	if revision != "" {
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

// caseTwin refuses a key of m that is one of the fields in another case: a case-insensitive
// decoder (Go's JSON, the devfile parser's) would read it as that field, and it could shadow what
// WithFirstProject writes.
func caseTwin(m map[string]any, field string, fields ...string) error {
	for k := range m {
		for _, f := range fields {
			if k != f && strings.EqualFold(k, f) {
				return fmt.Errorf("%s.%s: is %q in another case; write it %q", field, k, f, f)
			}
		}
	}
	return nil
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
