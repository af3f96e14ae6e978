package tfmodule

import (
	"fmt"
	"strings"
	"testing"
)

// deepFiles are files nested in each way HCL's parsers recurse, as deep as MaxConfigFileBytes
// allows (100,000 levels for one-byte openers). Parsed, the deepest would overflow the goroutine
// stack and kill the process (no recover catches that); Inspect must refuse them all first. Also
// seeds of FuzzInspect.
func deepFiles() []struct {
	name, body string
	json       bool
} {
	// rep repeats open n times and close n times around mid, n as large as fits in a file (at
	// most 100,000).
	rep := func(prefix, open, mid, close, suffix string) string {
		n := min(100_000, (MaxConfigFileBytes-len(prefix)-len(mid)-len(suffix))/(len(open)+len(close)))
		return prefix + strings.Repeat(open, n) + mid + strings.Repeat(close, n) + suffix
	}
	return []struct {
		name, body string
		json       bool
	}{
		{"brackets", rep("x = ", "[", "", "]", "\n"), false},
		{"braces", rep("x = ", "{a=", "1", "}", "\n"), false},
		{"parentheses", rep("x = ", "(", "1", ")", "\n"), false},
		{"blocks", rep("", "a {\n", "", "}\n", ""), false},
		{"unclosed", rep("x = ", "[", "", "", ""), false},
		{"interpolations", rep("x = ", `"${`, "1", `}"`, "\n"), false},
		{"directives", rep("x = \"", "%{if true}", "", "%{endif}", "\"\n"), false},
		{"unary", rep("x = ", "!", "true", "", "\n"), false},
		{"negations", rep("x = ", "- ", "1", "", "\n"), false},
		{"conditionals", rep("x = ", "true ? 1 : ", "2", "", "\n"), false},
		{"json arrays", rep(`{"variable": {"x": {"default": `, "[", "", "]", `}}}`), true},
		{"json objects", rep(`{"locals": `, `{"a":`, "1", "}", `}`), true},
	}
}

// TestInspectRefusesDeepNesting: a template nested 100,000 deep is refused with an error naming the
// file, instead of crashing the server with a stack overflow in the HCL parser.
func TestInspectRefusesDeepNesting(t *testing.T) {
	for _, f := range deepFiles() {
		t.Run(f.name, func(t *testing.T) {
			name := "main.tf"
			if f.json {
				name = "main.tf.json"
			}
			_, err := Inspect(makeArchive(t, tarEntry{name: "variables.tf", body: `variable "start_count" {}`}, tarEntry{name: name, body: f.body}))
			if err == nil || !strings.HasPrefix(err.Error(), "inspect module: "+name+":") || !strings.Contains(err.Error(), ": nested more than 1000 levels deep") {
				t.Fatalf("Inspect: %v, want the nesting refused, naming %s", err, name)
			}
		})
	}
}

// Nesting that real modules use, and brackets in strings, comments and heredocs (which the parser
// does not nest on), are not refused; closing brackets there cannot hide real nesting either.
func TestInspectNestingThatIsFine(t *testing.T) {
	deepButFine := "x = " + strings.Repeat("[", MaxNesting-1) + strings.Repeat("]", MaxNesting-1) + "\n"
	manyItems := "x = [" + strings.Repeat("true ? 1 : 2,\n", 5000) + "]\n"
	for i := range 5000 {
		manyItems += fmt.Sprintf("y%d = a ? b : c\n", i)
	}
	text := "x = \"" + strings.Repeat("[{(", 5000) + "\"\n# " + strings.Repeat("[", 5000) + "\n/* " + strings.Repeat("{", 5000) + " */\n" +
		"y = <<EOT\n" + strings.Repeat("(", 5000) + "\nEOT\n" + "z = \"a-b-c\" != \"-\" ? -1 : - 2\n"
	for name, body := range map[string]string{"deep but fine": deepButFine, "many conditionals": manyItems, "brackets in text": text} {
		if _, err := Inspect(makeArchive(t, tarEntry{name: "main.tf", body: `variable "v" {}` + "\n" + body})); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Inspect(makeArchive(t, tarEntry{name: "main.tf.json", body: `{"variable": {"v": {"default": "` + strings.Repeat("[", 5000) + `\"]"}}}`})); err != nil {
		t.Errorf("json strings: %v", err)
	}
	// Closing brackets in a string do not undo the nesting around it.
	hidden := "x = " + strings.Repeat(`[ "]]" `, MaxNesting+1) + strings.Repeat("]", MaxNesting+1) + "\n"
	if _, err := Inspect(makeArchive(t, tarEntry{name: "main.tf", body: hidden})); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("nesting behind closing brackets in strings: %v", err)
	}
}
