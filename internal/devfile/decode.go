package devfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// decode reads data as exactly one YAML (or JSON) document and decodes it into the devfile/api types.
// Every problem of shape — a second document, content past the end, a duplicate key, a field the
// devfile format does not have, a value of the wrong type — is added to v with the field's full
// path, list indices included, so that the user sees all of them at once. metadata is informational
// (Hangar reads none of it), so any key and value is accepted there.
func decode(v *workspace.ValidationError, data []byte) (v1alpha2.Devfile, bool) {
	var spec v1alpha2.Devfile
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var root yaml3.Node
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		return spec, true // empty: the checks that follow say what is missing
	case err != nil:
		v.Add("devfile", "is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return spec, false
	}
	var next yaml3.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		v.Add("devfile", "has content Hangar cannot read after the first document (%s): a devfile is one YAML document whose top-level keys start in the first column", strings.TrimPrefix(err.Error(), "yaml: "))
	case !isEmptyDocument(&next):
		v.Add("devfile", "holds a second YAML document (from line %d): a devfile is one document; remove the '---' line and what follows, or merge it into the first", next.Line)
	}
	checkDuplicateKeys(v, "devfile", &root, 0)
	if len(v.Problems) > 0 {
		return spec, false
	}

	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		v.Add("devfile", "is not a valid devfile: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		return spec, false
	}
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		v.Add("devfile", "is not a valid devfile: %s", err)
		return spec, false
	}
	if generic == nil {
		return spec, true
	}
	top, ok := generic.(map[string]any)
	if !ok {
		v.Add("devfile", "must be a mapping of devfile fields (schemaVersion, components, ...), got %s", describe(generic))
		return spec, false
	}
	if _, v1 := top["apiVersion"]; v1 && top["schemaVersion"] == nil {
		v.Add("devfile.apiVersion", "%s is devfile 1.x, which Hangar does not read: write a devfile 2.x (schemaVersion: 2.2.0, see devfile.io)", describe(top["apiVersion"]))
		return spec, false
	}
	delete(top, "metadata")
	checkShape(v, "devfile", top, reflect.TypeFor[v1alpha2.Devfile]())
	if len(v.Problems) > 0 {
		return spec, false
	}
	js, err = json.Marshal(top)
	if err == nil {
		err = json.Unmarshal(js, &spec)
	}
	if err != nil { // checkShape should have said why; never accept what the types refuse
		v.Add("devfile", "is not a valid devfile: %s", strings.TrimPrefix(err.Error(), "json: "))
		return spec, false
	}
	return spec, true
}

func isEmptyDocument(n *yaml3.Node) bool {
	if n.Kind == yaml3.DocumentNode {
		for _, c := range n.Content {
			if !isEmptyDocument(c) {
				return false
			}
		}
		return true
	}
	return n.Kind == yaml3.ScalarNode && n.Tag == "!!null"
}

// checkDuplicateKeys reports a key set twice in one mapping; YAML parsers disagree on which value
// wins, so Hangar refuses to guess. Aliases are not followed (their target is checked where it is).
func checkDuplicateKeys(v *workspace.ValidationError, path string, n *yaml3.Node, depth int) {
	if depth > 200 {
		return
	}
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			checkDuplicateKeys(v, path, c, depth+1)
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			checkDuplicateKeys(v, fmt.Sprintf("%s[%d]", path, i), c, depth+1)
		}
	case yaml3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := fieldPath(path, k.Value)
			if line, dup := seen[k.Value]; dup && k.Kind == yaml3.ScalarNode {
				v.Add(p, "is set twice (lines %d and %d); set it once", line, k.Line)
			}
			seen[k.Value] = k.Line
			checkDuplicateKeys(v, p, val, depth+1)
		}
	}
}

// fieldPath appends a key to a path: `.key` for plain keys, `["key"]` for keys with other characters.
func fieldPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			plain = false
			break
		}
	}
	if plain {
		return path + "." + key
	}
	return fmt.Sprintf("%s[%q]", path, key)
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkShape compares a decoded JSON value with the Go type it will be decoded into and reports
// unknown fields and values of the wrong type with their paths. Types that decode themselves
// (free-form attributes, raw extensions) accept anything.
func checkShape(v *workspace.ValidationError, path string, val any, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if val == nil || t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			typeProblem(v, path, "a mapping", val, false)
			return
		}
		fields := structFields(t)
		for _, k := range slices.Sorted(mapKeys(m)) {
			ft, known := fields[k]
			if !known {
				v.Add(fieldPath(path, k), "is not a field of the devfile format here%s", knownFieldsHint(fields))
				continue
			}
			checkShape(v, fieldPath(path, k), m[k], ft)
		}
	case reflect.Map:
		m, ok := val.(map[string]any)
		if !ok {
			typeProblem(v, path, "a mapping", val, false)
			return
		}
		for _, k := range slices.Sorted(mapKeys(m)) {
			checkShape(v, fieldPath(path, k), m[k], t.Elem())
		}
	case reflect.Slice, reflect.Array:
		l, ok := val.([]any)
		if !ok {
			typeProblem(v, path, "a list", val, false)
			return
		}
		for i, e := range l {
			checkShape(v, fmt.Sprintf("%s[%d]", path, i), e, t.Elem())
		}
	case reflect.String:
		if _, ok := val.(string); !ok {
			typeProblem(v, path, "a string", val, true)
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			typeProblem(v, path, "true or false", val, false)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, ok := val.(float64)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			typeProblem(v, path, "a whole number", val, false)
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := val.(float64); !ok {
			typeProblem(v, path, "a number", val, false)
		}
	}
}

func typeProblem(v *workspace.ValidationError, path, want string, got any, stringWanted bool) {
	hint := ""
	switch got.(type) {
	case bool, float64:
		if stringWanted {
			hint = " (YAML reads unquoted numbers, yes, no, on, off, true and false as such: quote the value)"
		}
	}
	v.Add(path, "must be %s, got %s%s", want, describe(got), hint)
}

func describe(val any) string {
	switch val.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	b, _ := json.Marshal(val)
	s := string(b)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func knownFieldsHint(fields map[string]reflect.Type) string {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range fields {
			if !yield(k) {
				return
			}
		}
	})
	if len(names) > 12 {
		return ""
	}
	return " (known here: " + strings.Join(names, ", ") + ")"
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields lists the JSON names of a struct's fields, with embedded structs flattened as
// encoding/json does.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range structFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}
