// Package parameter is a template version's parameters: the input variables of its module that the
// user gives values for (at create, and at update for the mutable ones), and the checks those
// values pass before any build: the variable's type, whether it is required, and its validation
// blocks, whose conditions are evaluated here as Terraform would (HCL with go-cty functions).
//
// Values travel as text: a string, number or bool as typed ("3", "true"), any other type (list,
// map, object, ...) as JSON. The provisioner's runner passes the JSON of the complex ones as JSON
// in the variables file, so terraform reads them with their type.
package parameter

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// Bounds of what a user gives and a template declares.
const (
	// MaxParameters caps the parameters of a template version, and the values of one request.
	MaxParameters = 64
	// MaxValueBytes caps one value.
	MaxValueBytes = 16 << 10
	// MaxNameBytes caps a parameter name given in a request.
	MaxNameBytes = 128
	// maxConditionBytes caps a validation condition Hangar evaluates (longer ones are left to
	// terraform at the build).
	maxConditionBytes = 4 << 10
)

// Parameter is one parameter of a template version, as stored with it.
type Parameter struct {
	Name string `json:"name"`
	// Type is the type constraint as Terraform writes it ("string", "number", "list(string)",
	// "any" for a variable without one); TypeJSON is its cty JSON, what values are checked against.
	Type     string          `json:"type"`
	TypeJSON json.RawMessage `json:"type_json"`
	// Description is the variable's description.
	Description string `json:"description,omitempty"`
	// HasDefault: the module gives a default (Default, as a value's text), so the parameter is
	// optional; without one it is required.
	HasDefault bool   `json:"has_default"`
	Default    string `json:"default,omitempty"`
	// Sensitive values are never shown: not in the API, the CLI or the logs.
	Sensitive bool `json:"sensitive,omitempty"`
	// Mutable parameters may change after create (hangar update --parameter); the others are
	// immutable: set once, at create.
	Mutable     bool         `json:"mutable,omitempty"`
	Validations []Validation `json:"validations,omitempty"`
}

// Validation is one validation block of the variable.
type Validation struct {
	// Condition is the expression's source: HCL native syntax, or a template (Template) for a
	// module written in JSON.
	Condition    string `json:"condition"`
	Template     bool   `json:"template,omitempty"`
	ErrorMessage string `json:"error_message"`
}

// Required reports whether the user must give a value.
func (p Parameter) Required() bool { return !p.HasDefault }

// CtyType is the parameter's type (cty.DynamicPseudoType when it cannot be read).
func (p Parameter) CtyType() cty.Type {
	if len(p.TypeJSON) == 0 {
		return cty.DynamicPseudoType
	}
	var ty cty.Type
	if err := json.Unmarshal(p.TypeJSON, &ty); err != nil {
		return cty.DynamicPseudoType
	}
	return ty
}

// Primitive reports whether ty's values are given as plain text rather than JSON.
func Primitive(ty cty.Type) bool { return ty == cty.DynamicPseudoType || ty.IsPrimitiveType() }

// Check checks one value against the parameter's type and validations. The error never quotes the
// value (it may be sensitive).
func (p Parameter) Check(text string) error {
	if len(text) > MaxValueBytes {
		return fmt.Errorf("is %d bytes, the limit is %d", len(text), MaxValueBytes)
	}
	v, err := p.parse(text)
	if err != nil {
		return err
	}
	return p.validate(v)
}

func (p Parameter) parse(text string) (cty.Value, error) {
	ty := p.CtyType()
	if ty == cty.DynamicPseudoType {
		return cty.StringVal(text), nil
	}
	if ty.IsPrimitiveType() {
		v, err := convert.Convert(cty.StringVal(strings.TrimSpace(text)), ty)
		if ty == cty.String {
			v, err = cty.StringVal(text), nil
		}
		if err != nil {
			return cty.NilVal, fmt.Errorf("must be a %s", typeexpr.TypeString(ty))
		}
		return v, nil
	}
	v, err := ctyjson.Unmarshal([]byte(text), ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("must be JSON of type %s (%s)", typeexpr.TypeString(ty), errWithoutValue(err))
	}
	return v, nil
}

// errWithoutValue keeps a JSON decoding error's shape, never the value.
func errWithoutValue(err error) string {
	var pe cty.PathError
	if errors.As(err, &pe) {
		return "at " + formatPath(pe.Path)
	}
	return "not JSON of that shape"
}

func formatPath(p cty.Path) string {
	if len(p) == 0 {
		return "the top level"
	}
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case cty.GetAttrStep:
			b.WriteString("." + s.Name)
		case cty.IndexStep:
			if !s.Key.IsKnown() || s.Key.IsNull() {
				b.WriteString("[?]")
			} else if s.Key.Type() == cty.String {
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				fmt.Fprintf(&b, "[%s]", s.Key.AsBigFloat().String())
			}
		}
	}
	return strings.TrimPrefix(b.String(), ".")
}

// validate evaluates the validation blocks with var.<name> set to v. A condition Hangar cannot
// evaluate on its own (it refers to another variable, a resource, or a function Hangar does not
// offer) is left to terraform at the build.
func (p Parameter) validate(v cty.Value) error {
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{p.Name: v})},
		Functions: functions,
	}
	for _, val := range p.Validations {
		ok, evaluated := evalCondition(val, ctx)
		if evaluated && !ok {
			msg := strings.TrimSpace(val.ErrorMessage)
			if msg == "" {
				msg = "the template's validation condition is not met"
			}
			return errors.New(msg)
		}
	}
	return nil
}

func evalCondition(val Validation, ctx *hcl.EvalContext) (ok, evaluated bool) {
	if len(val.Condition) > maxConditionBytes {
		return false, false
	}
	defer func() {
		// A function panicking on odd input leaves the check to terraform rather than failing the
		// request.
		if r := recover(); r != nil {
			ok, evaluated = false, false
		}
	}()
	var expr hclsyntax.Expression
	var diags hcl.Diagnostics
	if val.Template {
		expr, diags = hclsyntax.ParseTemplate([]byte(val.Condition), "condition", hcl.InitialPos)
	} else {
		expr, diags = hclsyntax.ParseExpression([]byte(val.Condition), "condition", hcl.InitialPos)
	}
	if diags.HasErrors() {
		return false, false
	}
	res, diags := expr.Value(ctx)
	if diags.HasErrors() || res.IsNull() || !res.IsWhollyKnown() {
		return false, false
	}
	res, err := convert.Convert(res, cty.Bool)
	if err != nil {
		return false, false
	}
	return res.True(), true
}

// functions are the Terraform functions a condition may call here (the go-cty standard library's
// share of Terraform's, and can/try).
var functions = map[string]function.Function{
	"abs": stdlib.AbsoluteFunc, "can": tryfunc.CanFunc, "ceil": stdlib.CeilFunc, "chomp": stdlib.ChompFunc,
	"coalesce": stdlib.CoalesceFunc, "compact": stdlib.CompactFunc, "concat": stdlib.ConcatFunc,
	"contains": stdlib.ContainsFunc, "distinct": stdlib.DistinctFunc, "element": stdlib.ElementFunc,
	"flatten": stdlib.FlattenFunc, "floor": stdlib.FloorFunc, "format": stdlib.FormatFunc, "index": stdlib.IndexFunc,
	"join": stdlib.JoinFunc, "jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc,
	"keys": stdlib.KeysFunc, "length": lengthFunc, "lookup": stdlib.LookupFunc, "lower": stdlib.LowerFunc,
	"max": stdlib.MaxFunc, "merge": stdlib.MergeFunc, "min": stdlib.MinFunc, "parseint": stdlib.ParseIntFunc,
	"range": stdlib.RangeFunc, "regex": stdlib.RegexFunc, "regexall": stdlib.RegexAllFunc, "replace": stdlib.ReplaceFunc,
	"reverse": stdlib.ReverseListFunc, "signum": stdlib.SignumFunc, "slice": stdlib.SliceFunc, "sort": stdlib.SortFunc,
	"split": stdlib.SplitFunc, "strlen": stdlib.StrlenFunc, "substr": stdlib.SubstrFunc, "title": stdlib.TitleFunc,
	"trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc, "trimspace": stdlib.TrimSpaceFunc,
	"trimsuffix": stdlib.TrimSuffixFunc, "try": tryfunc.TryFunc, "upper": stdlib.UpperFunc, "values": stdlib.ValuesFunc,
}

// lengthFunc is Terraform's length: of a collection, a structure, or a string (in characters).
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true, AllowMarked: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if args[0].Type() == cty.String {
			return stdlib.Strlen(args[0])
		}
		return stdlib.Length(args[0])
	},
})

// Field names the request field of a parameter in validation errors.
func Field(name string) string { return "parameters." + name }

// Resolve returns a workspace's values after a create (previous nil, creating) or an update: the
// values given, checked, over the previous ones. It refuses, naming each parameter: more than
// MaxParameters values, a name the version does not declare, a value that fails its check, a
// change to an immutable parameter after create, and a required parameter with no value. A
// previous value the version still declares is checked again; values of names the version no
// longer declares are kept (a stop runs the previous version's module, which may still need
// them). Defaults are not stored: terraform applies the module's own.
func Resolve(defs []Parameter, previous []workspace.ParameterValue, given map[string]string, creating bool) ([]workspace.ParameterValue, error) {
	v := &workspace.ValidationError{}
	if len(given) > MaxParameters {
		v.Add("parameters", "has %d values, the limit is %d", len(given), MaxParameters)
		return nil, v
	}
	byName := make(map[string]Parameter, len(defs))
	for _, p := range defs {
		byName[p.Name] = p
	}
	names := make([]string, 0, len(given))
	for n := range given {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if len(n) > MaxNameBytes {
			v.Add("parameters", "a name is %d bytes, the limit is %d", len(n), MaxNameBytes)
			continue
		}
		if _, ok := byName[n]; !ok {
			v.Add(Field(n), "the template version has no such parameter (its parameters: %s)", list(defs))
		}
	}
	prev := make(map[string]workspace.ParameterValue, len(previous))
	for _, pv := range previous {
		prev[pv.Name] = pv
	}
	out := make([]workspace.ParameterValue, 0, len(defs))
	for _, p := range defs {
		old, had := prev[p.Name]
		delete(prev, p.Name)
		text, ok := given[p.Name]
		switch {
		case ok && !creating && had && !p.Mutable && text != old.Value:
			v.Add(Field(p.Name), "is immutable: it was set when the workspace was created and cannot change")
			continue
		case ok:
		case had:
			text = old.Value
		case p.Required():
			v.Add(Field(p.Name), "is required (%s): give it with --parameter %s=VALUE", describe(p), p.Name)
			continue
		default:
			continue // the module's default applies
		}
		if err := p.Check(text); err != nil {
			if !ok {
				v.Add(Field(p.Name), "its current value no longer passes the template's checks: %v; give a new one", err)
			} else {
				v.Add(Field(p.Name), "%v", err)
			}
			continue
		}
		out = append(out, workspace.ParameterValue{Name: p.Name, Value: text, Sensitive: p.Sensitive})
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	for _, pv := range previous {
		if _, gone := prev[pv.Name]; gone {
			out = append(out, pv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func describe(p Parameter) string {
	d := p.Type
	if p.Description != "" {
		d += ": " + p.Description
	}
	return d
}

func list(defs []Parameter) string {
	if len(defs) == 0 {
		return "none"
	}
	names := make([]string, len(defs))
	for i, p := range defs {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// Map returns the values as a map (the variables a build passes).
func Map(values []workspace.ParameterValue) map[string]string {
	out := make(map[string]string, len(values))
	for _, v := range values {
		out[v.Name] = v.Value
	}
	return out
}

// Changed reports whether after differs from before.
func Changed(before, after []workspace.ParameterValue) bool {
	a, b := Map(before), Map(after)
	if len(a) != len(b) {
		return true
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return true
		}
	}
	return false
}
