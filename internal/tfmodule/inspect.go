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
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
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

// MaxConfigFileBytes bounds each configuration file of a module: every file terraform parses
// (*.tf, *.tf.json, *.tfvars, *.tfvars.json, at any depth). Parsing HCL costs memory per token,
// about 0.4 GB per MB of token-dense source (a file of parentheses or newlines): unbounded, one
// small archive could exhaust the server's memory at a push. 256 KiB is thousands of lines, far
// above a hand-written file; a larger generated file can be split, since terraform loads every file
// of the directory.
const MaxConfigFileBytes = 256 << 10

// Inspect parses the configuration files at the top of a module archive (*.tf and *.tf.json, as
// terraform loads them: not in subdirectories, and not hidden or editor backup files) and returns
// the input variables the module declares. The archive is checked as Extract checks it. A module
// without such a file, a configuration file larger than MaxConfigFileBytes, or a file with a syntax
// error or nested deeper than MaxNesting, is an error naming the file (and line).
//
// Memory is bounded by one file: files are parsed one at a time as the archive streams, and
// nothing of a file but its variables is kept once the next one is read.
func Inspect(archive []byte) (Module, error) {
	type fileVars struct {
		name string
		vars []parameter.Parameter
	}
	var files []fileVars
	err := walkArchive(archive, func(e entry, r io.Reader) error {
		if e.dir || ignoredFile(e.name) || !isConfigFile(e.name) {
			return nil
		}
		if e.size > MaxConfigFileBytes {
			return fileTooLarge(e.name, e.size)
		}
		isJSON := strings.HasSuffix(e.name, ".tf.json")
		if strings.Contains(e.name, "/") || (!isJSON && !strings.HasSuffix(e.name, ".tf")) {
			return nil // checked for size only: terraform reads it, Hangar does not
		}
		src, err := io.ReadAll(io.LimitReader(r, MaxConfigFileBytes+1))
		if err != nil {
			return err
		}
		if len(src) > MaxConfigFileBytes {
			return fileTooLarge(e.name, int64(len(src)))
		}
		vars, err := fileVariables(e.name, src, isJSON)
		if err != nil {
			return err
		}
		files = append(files, fileVars{name: e.name, vars: vars})
		return nil
	})
	if err != nil {
		return Module{}, fmt.Errorf("inspect module: %w", err)
	}
	if len(files) == 0 {
		return Module{}, errors.New("inspect module: no .tf or .tf.json file at the top of the module")
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	seen := map[string]bool{}
	var m Module
	for _, f := range files {
		for _, v := range f.vars {
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

// isConfigFile reports whether terraform parses a file of this name: configuration and variable
// definitions, native or JSON.
func isConfigFile(name string) bool {
	for _, ext := range []string{".tf", ".tf.json", ".tfvars", ".tfvars.json"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

func fileTooLarge(name string, size int64) error {
	return fmt.Errorf("%s is %d bytes: a configuration file (.tf, .tf.json, .tfvars) may be at most %d bytes (%d KiB); split it into several files",
		name, size, MaxConfigFileBytes, MaxConfigFileBytes>>10)
}

// fileVariables returns the variables one file declares. It parses the file on its own, without a
// parser that caches every file it has parsed.
func fileVariables(name string, src []byte, isJSON bool) (vars []parameter.Parameter, err error) {
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
		f, diags = hcljson.Parse(src, name)
	} else {
		f, diags = hclsyntax.ParseConfig(src, name, hcl.InitialPos)
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
