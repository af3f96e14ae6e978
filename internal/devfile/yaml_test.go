package devfile

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// roundTrip converts v to YAML with appendYAML and reads it back with sigs.k8s.io/yaml, as the agent
// does; the result must equal v's own JSON.
func roundTrip(t *testing.T, v any) string {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := appendYAML(nil, js)
	if err != nil {
		t.Fatalf("appendYAML(%s): %v", js, err)
	}
	back, err := yaml.YAMLToJSON(out)
	if err != nil {
		t.Fatalf("YAML does not parse: %v\n%s", err, out)
	}
	var want, got any
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(back, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("round trip changed the value\njson: %s\nyaml:\n%s\nback: %s", js, out, back)
	}
	return string(out)
}

func TestAppendYAMLScalars(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the line written for {"k": in}
	}{
		{"plain", "k: plain\n"},
		{"/projects", "k: /projects\n"},
		{"registry.example.com/a/b:1.2", "k: registry.example.com/a/b:1.2\n"},
		{"2Gi", "k: 2Gi\n"},
		{"500m", "k: 500m\n"},
		{"2", "k: \"2\"\n"},
		{"0.5", "k: \"0.5\"\n"},
		{"1e3", "k: \"1e3\"\n"},
		{"0x1F", "k: \"0x1F\"\n"},
		{"1:20", "k: \"1:20\"\n"},
		{"2001-12-14", "k: \"2001-12-14\"\n"},
		{"true", "k: \"true\"\n"},
		{"yes", "k: \"yes\"\n"},
		{"No", "k: \"No\"\n"},
		{"y", "k: \"y\"\n"},
		{"null", "k: \"null\"\n"},
		{"~", "k: \"~\"\n"},
		{"", "k: \"\"\n"},
		{"-c", "k: \"-c\"\n"},
		{".inf", "k: \".inf\"\n"},
		{"a: b", "k: \"a: b\"\n"},
		{"a #b", "k: \"a #b\"\n"},
		{"x:", "k: \"x:\"\n"},
		{"{{.port}}-a.b", "k: \"{{.port}}-a.b\"\n"},
		{"say \"hi\"", "k: \"say \\\"hi\\\"\"\n"},
		{"tab\there", "k: \"tab\\there\"\n"},
		{"über", "k: \"\\xfcber\"\n"},
		{"snow☃", "k: \"snow\\u2603\"\n"},
		{"emoji😀", "k: \"emoji\\U0001f600\"\n"},
		{"one\ntwo\n", "k: |\n  one\n  two\n"},
		{"one\n\ntwo\n", "k: |\n  one\n\n  two\n"},
		{"no final break\nx", "k: \"no final break\\nx\"\n"},
		{"two final\n\n", "k: \"two final\\n\\n\"\n"},
		{" indented\nx\n", "k: \" indented\\nx\\n\"\n"},
		{"<<", "k: \"<<\"\n"},
		{"=", "k: \"=\"\n"},
		{"a@b.c", "k: a@b.c\n"},
		{"@a", "k: \"@a\"\n"},
	} {
		got := roundTrip(t, map[string]string{"k": tc.in})
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAppendYAMLStructure(t *testing.T) {
	v := map[string]any{
		"a": map[string]any{},
		"b": []any{},
		"c": []any{1, "x", true, nil, 2.5, -3},
		"d": []any{map[string]any{"n": "one", "m": map[string]any{"x": []any{"p", "q"}}}, map[string]any{}},
		"e": []any{[]any{1, 2}, []any{}, []any{[]any{"deep"}}},
		"f": map[string]any{"g": map[string]any{"h": "multi\nline\n"}},
		"g": []any{"item\nblock\n"},
		"h": nil,
		"i": 1234567890123,
	}
	out := roundTrip(t, v)
	want := `a: {}
b: []
c:
- 1
- x
- true
- null
- 2.5
- -3
d:
- m:
    x:
    - p
    - q
  "n": one
- {}
e:
- - 1
  - 2
- []
- - - deep
f:
  g:
    h: |
      multi
      line
g:
- |
  item
  block
h: null
i: 1234567890123
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	long := strings.Repeat("k", 1100)
	if out := roundTrip(t, map[string]any{long: map[string]any{"x": 1}}); !strings.HasPrefix(out, "? "+long+"\n:\n  x: 1\n") {
		t.Errorf("long key written as %.40q...", out)
	}
	if _, err := appendYAML(nil, []byte(`[1]`)); err == nil {
		t.Error("a top-level array was accepted")
	}
	if got, _ := appendYAML(nil, []byte(`{}`)); string(got) != "{}\n" {
		t.Errorf("empty document = %q", got)
	}
}

func FuzzAppendYAML(f *testing.F) {
	for _, s := range []string{"plain", "2", "yes", "a: b", "one\ntwo\n", "", " x", "\x00\x7f\u2028", "-", "#", "1:2", "0o17", ".5", "1_000"} {
		f.Add(s, s+"k")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.Count(a, "")+strings.Count(b, "") > 4096 {
			return
		}
		roundTrip(t, map[string]any{
			a:   b,
			"l": []any{a, b, map[string]any{b: a, a: []any{b}}},
			"m": map[string]any{"x": a},
		})
	})
}
