package devfile

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWithFirstProject(t *testing.T) {
	const remote = "https://git.example.com/team/My_App.git"
	// A devfile without projects gets the repository, at the ref, and parses with it first.
	out, err := WithFirstProject(Default(), remote, "feature/x")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(out)
	if err != nil {
		t.Fatalf("the result does not parse: %v\n%s", err, out)
	}
	if len(d.projects) != 1 || d.projects[0].Name != "my-app" || d.projects[0].Remotes["origin"] != remote || d.projects[0].Revision != "feature/x" {
		t.Fatalf("projects %+v", d.projects)
	}
	// A devfile that clones other projects keeps them, after the repository; a name taken gets a
	// suffix.
	withOthers := []byte(`schemaVersion: 2.2.0
metadata: {name: x}
components:
- name: dev
  container: {image: busybox}
projects:
- name: my-app
  git: {remotes: {origin: "https://git.example.com/other/my-app.git"}}
`)
	out, err = WithFirstProject(withOthers, remote, "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err = Parse(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(d.projects) != 2 || d.projects[0].Name != "my-app-2" || d.projects[1].Name != "my-app" || d.projects[0].Revision != "" {
		t.Fatalf("projects %+v", d.projects)
	}
	// The repository already a project (not first): moved first, its revision set.
	already := []byte(strings.Replace(string(withOthers), "https://git.example.com/other/my-app.git", remote, 1) + `- name: docs
  git: {remotes: {origin: "https://git.example.com/team/docs.git"}}
`)
	already = []byte(strings.Replace(string(already), "projects:\n- name: my-app", "projects:\n- name: docs0\n  git: {remotes: {origin: \"https://git.example.com/x/y.git\"}}\n- name: my-app", 1))
	out, err = WithFirstProject(already, remote, "v2")
	if err != nil {
		t.Fatal(err)
	}
	if d, err = Parse(out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(d.projects) != 3 || d.projects[0].Name != "my-app" || d.projects[0].Revision != "v2" || d.projects[1].Name != "docs0" {
		t.Fatalf("projects %+v", d.projects)
	}
	if _, err := WithFirstProject([]byte("projects: 3\n"), remote, ""); err == nil || !strings.Contains(err.Error(), "devfile.projects: is not a list") {
		t.Fatalf("projects not a list: %v", err)
	}
	if _, err := WithFirstProject([]byte("- a\n"), remote, ""); err == nil {
		t.Fatal("a list accepted as a devfile")
	}
}

func TestProjectName(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/team/App.git":                    "app",
		"git@h:team/my_app.git":                     "my-app",
		"https://h/team/..git":                      "project",
		"https://h/team/" + strings.Repeat("a", 80): strings.Repeat("a", 63),
		"https://h/team/--x--":                      "x",
	} {
		if got := ProjectName(in); got != want {
			t.Errorf("ProjectName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzWithFirstProject: whatever devfile text a repository holds, the result is an error or a
// document whose first project clones the repository.
func FuzzWithFirstProject(f *testing.F) {
	f.Add(string(Default()))
	f.Add("projects:\n- name: a\n  git: {remotes: {origin: x}}\n")
	f.Add("projects: [1, {git: 2}, {git: {remotes: 3}}]\n")
	f.Add("{}")
	f.Fuzz(func(t *testing.T, text string) {
		out, err := WithFirstProject([]byte(text), "https://h/t/app.git", "main")
		if err != nil {
			return
		}
		var doc struct{ Projects []json.RawMessage } // the others are the repository's, valid or not
		var p struct {
			Git struct {
				Remotes      map[string]string
				CheckoutFrom struct{ Revision string }
			}
		}
		if err := json.Unmarshal(out, &doc); err != nil || len(doc.Projects) == 0 || json.Unmarshal(doc.Projects[0], &p) != nil {
			t.Fatalf("%q gave %q (%v)", text, out, err)
		}
		first := p.Git
		found := false
		for _, u := range first.Remotes {
			found = found || u == "https://h/t/app.git"
		}
		if !found || first.CheckoutFrom.Revision != "main" {
			t.Fatalf("%q gave a first project %+v", text, first)
		}
	})
}

// A key that a case-insensitive decoder would read as one WithFirstProject writes is refused,
// naming it: it could shadow the project added or moved first (the fuzzer's "projeCts: 0").
func TestWithFirstProjectRefusesCaseTwins(t *testing.T) {
	for text, want := range map[string]string{
		"projeCts: 0\n": `devfile.projeCts: is "projects" in another case`,
		"projects:\n- name: a\n  GIT: {}\n  git: {remotes: {origin: 'https://h/t/app.git'}}\n":                   `devfile.projects[0].GIT: is "git" in another case`,
		"projects:\n- name: a\n  git: {Remotes: {}, remotes: {origin: 'https://h/t/app.git'}}\n":                 `devfile.projects[0].git.Remotes: is "remotes" in another case`,
		"projects:\n- name: a\n  git: {remotes: {origin: 'https://h/t/app.git'}, checkoutFrom: {Revision: x}}\n": `devfile.projects[0].git.checkoutFrom.Revision: is "revision" in another case`,
	} {
		if _, err := WithFirstProject([]byte(text), "https://h/t/app.git", "main"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
}
