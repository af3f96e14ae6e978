package tfmodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/hangar-dev/hangar/internal/parameter"
)

// MutableMarker, on the line right above a variable block (a `#` or `//` comment), marks the
// parameter mutable: a workspace's value may change after create (hangar update --parameter).
// Without it a parameter is immutable. Terraform ignores comments, so the module stays plain
// Terraform; a module written in JSON has no comments, and its parameters are immutable.
const MutableMarker = "hangar:mutable"

var variableBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}, {Name: "description"}, {Name: "sensitive"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "condition"}, {Name: "error_message"}},
}

// readVariable reads one variable block. A type, default, description or sensitive flag Hangar
// cannot read as terraform would is an error naming the file and line.
func readVariable(file string, src []byte, isJSON bool, b *hcl.Block) (parameter.Parameter, error) {
	v := parameter.Parameter{Name: b.Labels[0]}
	at := func(r hcl.Range) string { return fmt.Sprintf("%s:%d: variable %q", file, r.Start.Line, v.Name) }
	content, _, diags := b.Body.PartialContent(variableBodySchema)
	if diags.HasErrors() {
		return v, diagError(file, diags)
	}
	ty := cty.DynamicPseudoType
	if a, ok := content.Attributes["type"]; ok {
		expr := a.Expr
		if isJSON {
			// In JSON the type is a string holding the type expression.
			text, diags := a.Expr.Value(nil)
			if diags.HasErrors() || text.Type() != cty.String || text.IsNull() {
				return v, fmt.Errorf("%s: type must be a string holding a type, such as \"list(string)\"", at(a.Range))
			}
			e, diags := hclsyntax.ParseExpression([]byte(text.AsString()), file, a.Expr.Range().Start)
			if diags.HasErrors() {
				return v, diagError(file, diags)
			}
			expr = e
		}
		t, diags := typeexpr.TypeConstraint(expr)
		if diags.HasErrors() {
			return v, fmt.Errorf("%s: type: %s", at(a.Range), diags[0].Summary)
		}
		ty = t
	}
	tj, err := json.Marshal(ty)
	if err != nil {
		return v, fmt.Errorf("%s: type %s is not supported", at(b.DefRange), typeexpr.TypeString(ty))
	}
	v.Type, v.TypeJSON = typeexpr.TypeString(ty), tj
	if a, ok := content.Attributes["default"]; ok {
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return v, fmt.Errorf("%s: default must be a constant value: %s", at(a.Range), diags[0].Summary)
		}
		v.HasDefault = true
		if !val.IsNull() {
			text, err := valueText(val)
			if err != nil {
				return v, fmt.Errorf("%s: default: %v", at(a.Range), err)
			}
			v.Default = text
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() || val.Type() != cty.String || val.IsNull() {
			return v, fmt.Errorf("%s: description must be a string", at(a.Range))
		}
		v.Description = val.AsString()
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		val, diags := a.Expr.Value(nil)
		if !diags.HasErrors() {
			val, err = convert.Convert(val, cty.Bool)
		}
		if diags.HasErrors() || err != nil || val.IsNull() {
			return v, fmt.Errorf("%s: sensitive must be true or false", at(a.Range))
		}
		v.Sensitive = val.True()
	}
	for _, vb := range content.Blocks {
		vc, _, diags := vb.Body.PartialContent(validationSchema)
		if diags.HasErrors() {
			return v, diagError(file, diags)
		}
		cond, ok := vc.Attributes["condition"]
		if !ok {
			return v, fmt.Errorf("%s: a validation block needs a condition", at(vb.DefRange))
		}
		val := parameter.Validation{Condition: string(rangeOf(src, cond.Expr.Range()))}
		if isJSON {
			var text string
			if err := json.Unmarshal([]byte(val.Condition), &text); err != nil {
				return v, fmt.Errorf("%s: a validation condition must be a string in JSON", at(cond.Range))
			}
			val.Condition, val.Template = text, true
		}
		if m, ok := vc.Attributes["error_message"]; ok {
			if mv, diags := m.Expr.Value(nil); !diags.HasErrors() && mv.Type() == cty.String && !mv.IsNull() {
				val.ErrorMessage = mv.AsString()
			} else {
				val.ErrorMessage = string(rangeOf(src, m.Expr.Range()))
			}
		}
		v.Validations = append(v.Validations, val)
	}
	v.Mutable = !isJSON && markedMutable(src, b.DefRange.Start.Byte)
	return v, nil
}

// valueText is a value as a parameter's text: a primitive as text, anything else as JSON.
func valueText(val cty.Value) (string, error) {
	if !val.IsWhollyKnown() {
		return "", fmt.Errorf("must be known")
	}
	if val.Type().IsPrimitiveType() {
		s, err := convert.Convert(val, cty.String)
		if err != nil {
			return "", err
		}
		return s.AsString(), nil
	}
	b, err := ctyjson.Marshal(val, val.Type())
	return string(b), err
}

func rangeOf(src []byte, r hcl.Range) []byte {
	if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte > r.End.Byte {
		return nil
	}
	return src[r.Start.Byte:r.End.Byte]
}

// markedMutable reports whether the line above the one holding byte offset at is a comment holding
// MutableMarker. It reads those two lines only (a file of many variables costs no more than its
// length).
func markedMutable(src []byte, at int) bool {
	if at < 0 || at > len(src) {
		return false
	}
	start := bytes.LastIndexByte(src[:at], '\n') // the end of the line above
	if start < 0 {
		return false
	}
	above := src[bytes.LastIndexByte(src[:start], '\n')+1 : start]
	text := strings.TrimSpace(string(above))
	for _, p := range []string{"#", "//"} {
		if rest, ok := strings.CutPrefix(text, p); ok {
			return strings.TrimSpace(rest) == MutableMarker
		}
	}
	return false
}
