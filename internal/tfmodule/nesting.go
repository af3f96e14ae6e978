package tfmodule

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxNesting bounds how deeply a configuration file may nest before Hangar parses it. HCL's parsers
// (native syntax and JSON) are recursive descent: every nested bracket, brace, parenthesis,
// template, unary operator or conditional costs stack, and a file nested 100,000 deep overflows
// the goroutine stack — a fatal error that no recover catches, which would take the whole server
// down at a template push. Real modules nest a few levels; 1000 is far above any of them and far
// below what the parser survives.
const MaxNesting = 1000

// checkNesting refuses a file that nests deeper than MaxNesting, naming the file and the line,
// without parsing it. Native syntax is measured on HCL's own scanner (a state machine, no
// recursion), so brackets inside strings and comments do not count and closing ones there cannot
// hide real nesting; JSON is measured on its bytes, outside strings.
func checkNesting(name string, src []byte, isJSON bool) error {
	var depth, line int
	if isJSON {
		depth, line = jsonNesting(src)
	} else {
		depth, line = hclNesting(src, name)
	}
	if depth > MaxNesting {
		return fmt.Errorf("%s:%d: nested more than %d levels deep (brackets, braces, parentheses, templates, unary operators and conditionals count): Hangar refuses it before parsing; flatten the expression", name, line, MaxNesting)
	}
	return nil
}

// hclNesting returns the deepest nesting of a native-syntax file, an upper bound of the parser's
// recursion, and the line where it is first exceeded (or reached). It counts:
//   - every open bracket, brace, parenthesis, quoted or heredoc template, and template
//     interpolation or directive (`${`, `%{`), until its closer;
//   - the `if` and `for` template directives, until their `endif` and `endfor`;
//   - each conditional's `?`, until the item it is in ends (a comma; a newline at the top level or
//     in a block or object, where a newline ends an item; or its enclosing bracket closing);
//   - a run of unary operators (`!`, `-`), each of which is one more level for the operand after it.
func hclNesting(src []byte, name string) (maxDepth, atLine int) {
	tokens, _ := hclsyntax.LexConfig(src, name, hcl.InitialPos)
	type frame struct {
		opener    hclsyntax.TokenType
		questions int
	}
	var stack []frame
	top := frame{} // the top level: no opener
	depth, directives, unary := 0, 0, 0
	cur := func() *frame {
		if len(stack) == 0 {
			return &top
		}
		return &stack[len(stack)-1]
	}
	for i, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			stack = append(stack, frame{opener: tok.Type})
			depth++
			if tok.Type == hclsyntax.TokenTemplateControl && i+1 < len(tokens) && tokens[i+1].Type == hclsyntax.TokenIdent {
				switch string(tokens[i+1].Bytes) {
				case "if", "for":
					directives++
				case "endif", "endfor":
					directives = max(directives-1, 0)
				}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if len(stack) > 0 {
				depth -= 1 + stack[len(stack)-1].questions
				stack = stack[:len(stack)-1]
			}
		case hclsyntax.TokenQuestion:
			cur().questions++
			depth++
		case hclsyntax.TokenComma:
			depth -= cur().questions
			cur().questions = 0
		case hclsyntax.TokenNewline:
			if f := cur(); f == &top || f.opener == hclsyntax.TokenOBrace {
				depth -= f.questions
				f.questions = 0
			}
		}
		switch tok.Type {
		case hclsyntax.TokenBang, hclsyntax.TokenMinus:
			unary++
		case hclsyntax.TokenNewline, hclsyntax.TokenComment:
			// A run of unary operators may span lines.
		default:
			unary = 0
		}
		if d := depth + directives + unary; d > maxDepth {
			maxDepth, atLine = d, tok.Range.Start.Line
			if d > MaxNesting {
				return maxDepth, atLine
			}
		}
	}
	return maxDepth, atLine
}

// jsonNesting returns the deepest nesting of arrays and objects of a JSON file, outside strings,
// and the line where it is first exceeded (or reached). Bytes that are not JSON are left to the
// parser to refuse.
func jsonNesting(src []byte) (maxDepth, atLine int) {
	depth, line := 0, 1
	inString, escaped := false, false
	for _, c := range src {
		if c == '\n' {
			line++
		}
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > maxDepth {
				maxDepth, atLine = depth, line
				if depth > MaxNesting {
					return maxDepth, atLine
				}
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return maxDepth, atLine
}
