package cmdopt

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds a config file: a daemon's options fit in a few kilobytes.
const MaxFileBytes = 1 << 20

// FileValue is one key's value in a config file: a scalar as text, or a list of scalars.
type FileValue struct {
	Text   string
	List   []string
	IsList bool
}

// ReadFile reads and decodes the config file at path.
func ReadFile(path string) (map[string]FileValue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("config file %s: larger than %d bytes", path, MaxFileBytes)
	}
	m, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return m, nil
}

// Decode decodes a config file: a YAML (or JSON) mapping of option names to scalars (text,
// numbers, booleans) or lists of scalars. A scalar is kept as written (every: 010 stays "010";
// y and no are text, as in YAML 1.2). An empty document is an empty mapping. Nested mappings, null
// values and repeated keys are errors naming the key.
func Decode(data []byte) (map[string]FileValue, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return map[string]FileValue{}, nil
	}
	top := resolve(doc.Content[0])
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return map[string]FileValue{}, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, errors.New("want a mapping of option names to values (log-level: debug)")
	}
	out := make(map[string]FileValue, len(top.Content)/2)
	for i := 0; i+1 < len(top.Content); i += 2 {
		kn, vn := resolve(top.Content[i]), resolve(top.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: want an option name as the key", kn.Line)
		}
		k := kn.Value
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("key %q: given twice (line %d)", k, kn.Line)
		}
		if vn.Kind == yaml.SequenceNode {
			fv := FileValue{IsList: true, List: []string{}}
			for j, it := range vn.Content {
				s, err := scalar(resolve(it))
				if err != nil {
					return nil, fmt.Errorf("key %q, item %d: %w", k, j+1, err)
				}
				fv.List = append(fv.List, s)
			}
			out[k] = fv
			continue
		}
		s, err := scalar(vn)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		out[k] = FileValue{Text: s}
	}
	return out, nil
}

// resolve follows an alias (&x ... *x) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func scalar(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.MappingNode:
		return "", errors.New("want a value, got a mapping")
	case yaml.SequenceNode:
		return "", errors.New("want a value, got a list")
	case yaml.ScalarNode:
	default:
		return "", errors.New("want a value")
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool":
		return n.Value, nil
	case "!!null":
		return "", errors.New("no value (null); leave the key out for the default, or write \"\" for empty text")
	}
	return "", fmt.Errorf("want text, a number or true/false, got a value tagged %s", n.Tag)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
