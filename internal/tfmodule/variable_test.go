package tfmodule

import (
	"strings"
	"testing"
)

// TestInspectVariableDetails: types, defaults, descriptions, sensitive flags, validation blocks and
// the mutable marker are read as terraform declares them, in native syntax and in JSON.
func TestInspectVariableDetails(t *testing.T) {
	m, err := Inspect(makeArchive(t, tarEntry{name: "main.tf", body: `
# hangar:mutable
variable "size" {
  type        = number
  default     = 2
  description = "How many"
  validation {
    condition     = var.size >= 1
    error_message = "at least one"
  }
}

variable "token" {
  type      = string
  sensitive = true
}
// hangar:mutable
variable "tags" {
  type    = map(string)
  default = { team = "a" }
}
variable "free" {}
`}, tarEntry{name: "more.tf.json", body: `{"variable": {"zone": {"type": "list(string)", "description": "zones",
  "validation": [{"condition": "${length(var.zone) > 0}", "error_message": "one zone"}]}}}`}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range m.Declared {
		var vals []string
		for _, c := range v.Validations {
			vals = append(vals, c.Condition+"|"+c.ErrorMessage)
		}
		got[v.Name] = strings.Join([]string{v.Type, v.Default, v.Description, map[bool]string{true: "default"}[v.HasDefault],
			map[bool]string{true: "sensitive"}[v.Sensitive], map[bool]string{true: "mutable"}[v.Mutable], strings.Join(vals, ";")}, ",")
	}
	want := map[string]string{
		"size":  "number,2,How many,default,,mutable,var.size >= 1|at least one",
		"token": "string,,,,sensitive,,",
		"tags":  `map(string),{"team":"a"},,default,,mutable,`,
		"free":  "any,,,,,,",
		"zone":  "list(string),,zones,,,,${length(var.zone) > 0}|one zone",
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s = %q, want %q", n, got[n], w)
		}
	}
	if err := m.Declared[len(m.Declared)-1].Check(`["eu"]`); err != nil || m.Declared[len(m.Declared)-1].Check(`[]`) == nil {
		t.Errorf("zone's JSON condition: %v", err)
	}

	for name, src := range map[string]string{
		"bad type":         `variable "x" { type = lisst(string) }`,
		"computed default": `variable "x" { default = var.y }`,
		"sensitive text":   `variable "x" { sensitive = "maybe" }`,
	} {
		if _, err := Inspect(makeArchive(t, tarEntry{name: "main.tf", body: src})); err == nil || !strings.Contains(err.Error(), `main.tf:1: variable "x"`) {
			t.Errorf("%s: %v, want an error naming the file, line and variable", name, err)
		}
	}
}
