package tfmodule

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/hangar-dev/hangar/internal/parameter"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// Module is what Inspect learns of a module.
type Module struct {
	// Variables are the names of the module's input variables, sorted.
	Variables []string
	// Declared are the same variables in full (type, default, description, sensitive, validation
	// blocks, and whether a `# hangar:mutable` comment marks them mutable), in the same order.
	Declared []parameter.Parameter
}

var variableSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "variable", LabelNames: []string{"name"}}, {Type: "terraform"}},
}

// Inspect parses the configuration files at the top of a module archive (*.tf and *.tf.json, as
// terraform loads them: not in subdirectories, and not hidden or editor backup files) and returns
// the input variables the module declares. The archive is checked as Extract checks it. A module
// without such a file, or a file with a syntax error or nested deeper than MaxNesting, is an error
// naming the file and line.
func Inspect(archive []byte) (Module, error) {
	type source struct {
		name string
		json bool
		src  []byte
	}
	var sources []source
	err := walkArchive(archive, func(e entry, r io.Reader) error {
		if e.dir || strings.Contains(e.name, "/") || ignoredFile(e.name) {
			return nil
		}
		isJSON := strings.HasSuffix(e.name, ".tf.json")
		if !isJSON && !strings.HasSuffix(e.name, ".tf") {
			return nil
		}
		src, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		sources = append(sources, source{name: e.name, json: isJSON, src: src})
		return nil
	})
	if err != nil {
		return Module{}, fmt.Errorf("inspect module: %w", err)
	}
	if len(sources) == 0 {
		return Module{}, errors.New("inspect module: no .tf or .tf.json file at the top of the module")
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i].name < sources[j].name })

	p := hclparse.NewParser()
	seen := map[string]bool{}
	var m Module
	for _, s := range sources {
		vars, err := fileVariables(p, s.name, s.src, s.json)
		if err != nil {
			return Module{}, fmt.Errorf("inspect module: %w", err)
		}
		for _, v := range vars {
			if !seen[v.Name] {
				seen[v.Name] = true
				m.Declared = append(m.Declared, v)
			}
		}
	}
	sort.Slice(m.Declared, func(i, j int) bool { return m.Declared[i].Name < m.Declared[j].Name })
	for _, v := range m.Declared {
		m.Variables = append(m.Variables, v.Name)
	}
	return m, nil
}

// fileVariables returns the variables one file declares.
func fileVariables(p *hclparse.Parser, name string, src []byte, isJSON bool) (vars []parameter.Parameter, err error) {
	defer func() {
		// The parser is not expected to panic; if it does on hostile input, the module is refused
		// rather than the provisioner brought down.
		if r := recover(); r != nil {
			vars, err = nil, fmt.Errorf("%s: cannot be parsed (parser failure: %v)", name, r)
		}
	}()
	// Bounded before parsing: a stack overflow in the parser is fatal, not a panic to recover.
	if err := checkNesting(name, src, isJSON); err != nil {
		return nil, err
	}
	var f *hcl.File
	var diags hcl.Diagnostics
	if isJSON {
		f, diags = p.ParseJSON(src, name)
	} else {
		f, diags = p.ParseHCL(src, name)
	}
	if diags.HasErrors() {
		return nil, diagError(name, diags)
	}
	if f == nil || f.Body == nil {
		return nil, fmt.Errorf("%s: cannot be parsed", name)
	}
	content, _, diags := f.Body.PartialContent(variableSchema)
	if diags.HasErrors() {
		return nil, diagError(name, diags)
	}
	for _, b := range content.Blocks {
		if b.Type == "terraform" {
			if err := noBackend(name, b); err != nil {
				return nil, err
			}
			continue
		}
		if len(b.Labels) == 1 {
			v, err := readVariable(name, src, isJSON, b)
			if err != nil {
				return nil, err
			}
			vars = append(vars, v)
		}
	}
	return vars, nil
}

// backendSchema finds where a terraform block would send the state elsewhere.
var backendSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "backend", LabelNames: []string{"type"}}, {Type: "cloud"}},
}

// noBackend refuses a terraform block that configures a backend or HCP Terraform: Hangar keeps
// every build's state itself, and a state kept elsewhere would leave it with none (a later delete
// would then destroy nothing and forget live resources).
func noBackend(name string, b *hcl.Block) error {
	content, _, diags := b.Body.PartialContent(backendSchema)
	if diags.HasErrors() {
		return diagError(name, diags)
	}
	for _, inner := range content.Blocks {
		return fmt.Errorf("%s:%d: the module configures a %q block: remove it, Hangar keeps the Terraform state of every build itself",
			name, inner.DefRange.Start.Line, inner.Type)
	}
	return nil
}

// diagError is the first error of diags as "file:line: summary: detail", with a count of the rest.
func diagError(name string, diags hcl.Diagnostics) error {
	var errs []*hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs = append(errs, d)
		}
	}
	d := errs[0]
	where := name
	if d.Subject != nil {
		where = fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line)
	}
	msg := fmt.Sprintf("%s: %s", where, d.Summary)
	if d.Detail != "" {
		msg += ": " + d.Detail
	}
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more errors)", len(errs)-1)
	}
	return errors.New(msg)
}

// ignoredFile reports whether terraform skips a configuration file by name: hidden files and editor
// backups.
func ignoredFile(name string) bool {
	base := path.Base(name)
	return strings.HasPrefix(base, ".") || strings.HasSuffix(base, "~") ||
		(strings.HasPrefix(base, "#") && strings.HasSuffix(base, "#"))
}
