package tfmodule

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	archive := makeArchive(t,
		tarEntry{name: "main.tf", body: `
variable "start_count" {
  type = number
}
variable "workspace_name" {}
resource "terraform_data" "x" {
  count = var.start_count
}
`},
		tarEntry{name: "vars.tf.json", body: `{
  "variable": {
    "workspace_owner": {"type": "string"},
    "start_count": {}
  }
}`},
		tarEntry{name: "./more.tf", body: `variable "is_prebuild" { default = false }`},
		// Not loaded by terraform: nested modules, hidden files, editor backups, other files.
		tarEntry{name: "modules/", typ: tar.TypeDir},
		tarEntry{name: "modules/m/main.tf", body: `variable "nested" {}`},
		tarEntry{name: ".hidden.tf", body: `variable "hidden" {}`},
		tarEntry{name: "main.tf~", body: `variable "backup" {}`},
		tarEntry{name: "#main.tf#", body: `variable "autosave" {}`},
		tarEntry{name: "notes.txt", body: `variable "text" {}`},
		tarEntry{name: "terraform.tfvars", body: `workspace_id = "x"`},
	)
	m, err := Inspect(archive)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	want := []string{"is_prebuild", "start_count", "workspace_name", "workspace_owner"}
	if !slices.Equal(m.Variables, want) {
		t.Errorf("Variables = %v, want %v", m.Variables, want)
	}

	m, err = Inspect(makeArchive(t, tarEntry{name: "main.tf", body: `resource "terraform_data" "x" {}`}))
	if err != nil || len(m.Variables) != 0 {
		t.Errorf("module without variables: %v, %v", m, err)
	}
}

func TestInspectErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    []string
	}{
		{"no tf file", []tarEntry{{name: "README.md", body: "# hi"}, {name: "sub/main.tf", body: ""}}, []string{"no .tf or .tf.json file"}},
		{"empty archive", nil, []string{"no .tf or .tf.json file"}},
		{"hcl syntax error", []tarEntry{
			{name: "a.tf", body: "variable \"ok\" {}\n"},
			{name: "main.tf", body: "variable \"x\" {\n  type = string\n}\n\nresource \"terraform_data\" \"y\" {\n  input = \"unterminated\n}\n"},
		}, []string{"main.tf:6", "Invalid multi-line string"}},
		{"json syntax error", []tarEntry{{name: "main.tf.json", body: "{\n  \"variable\": {\n    \"x\": {,}\n  }\n}"}}, []string{"main.tf.json:3"}},
		{"variable without a name", []tarEntry{{name: "main.tf", body: "\n\nvariable {\n}\n"}}, []string{"main.tf:3"}},
		{"unsafe archive", []tarEntry{{name: "../main.tf", body: `variable "x" {}`}}, []string{`"../main.tf"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Inspect(makeArchive(t, tc.entries...))
			if err == nil {
				t.Fatal("Inspect succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := Inspect([]byte("not gzip")); err == nil {
		t.Error("Inspect of garbage succeeded")
	}
}

func TestInspectTestdata(t *testing.T) {
	for dir, want := range map[string][]string{
		"markers":   {"marker_dir", "start_count", "workspace_name"},
		"onlycount": {"start_count"},
		"slow":      {"marker_dir"},
	} {
		archive, err := Pack("../provisioner/terraform/testdata/" + dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Inspect(archive)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if !slices.Equal(m.Variables, want) {
			t.Errorf("%s: Variables = %v, want %v", dir, m.Variables, want)
		}
	}
}

// TestInspectRefusesBackends: a module that keeps its state elsewhere is refused at push, naming
// the file and line.
func TestInspectRefusesBackends(t *testing.T) {
	for name, src := range map[string]string{
		"backend": "variable \"start_count\" {}\nterraform {\n  backend \"local\" {\n    path = \"/tmp/elsewhere.tfstate\"\n  }\n}\n",
		"cloud":   "terraform {\n  cloud {\n    organization = \"x\"\n  }\n}\n",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		archive, err := Pack(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Inspect(archive); err == nil || !strings.Contains(err.Error(), "main.tf:") || !strings.Contains(err.Error(), "Hangar keeps the Terraform state") {
			t.Errorf("%s: Inspect = %v", name, err)
		}
	}
	// A terraform block without a backend is fine (required_providers).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("terraform {\n  required_version = \">= 1.0\"\n}\nvariable \"start_count\" {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, _ := Pack(dir)
	if m, err := Inspect(archive); err != nil || len(m.Variables) != 1 {
		t.Errorf("plain terraform block: %+v %v", m, err)
	}
}
