package devfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// appendYAML converts one JSON document, as encoding/json writes it, to block-style YAML and appends
// it to out.
//
// Why not sigs.k8s.io/yaml.Marshal: it marshals to JSON, decodes that JSON again into generic maps
// with go-yaml and encodes those with go-yaml's reflection-driven emitter. For the handful of objects
// of one workspace that costs several hundred microseconds, which a full reconcile of thousands of
// workspaces pays every time. This converter walks the JSON bytes once. It keeps the key order
// encoding/json chose (struct field order; map keys sorted) and quotes every string that a YAML 1.1
// or 1.2 parser could read as anything but that string. The tests check that sigs.k8s.io/yaml reads
// its output back to the same JSON, on the golden objects and under fuzzing.
func appendYAML(out, js []byte) ([]byte, error) {
	c := converter{in: js, out: out}
	if err := c.document(); err != nil {
		return out, err
	}
	return c.out, nil
}

type converter struct {
	in  []byte
	pos int
	out []byte
}

// maxSimpleKey is how long a key may be written as "key:"; YAML allows up to 1024 characters.
const maxSimpleKey = 1000

type position int

const (
	afterKey  position = iota // the value follows "key:"
	afterDash                 // the value follows "- "
)

func (c *converter) document() error {
	c.skipSpace()
	if c.peek() != '{' {
		return c.errorf("a document must be a JSON object")
	}
	c.pos++
	c.skipSpace()
	if c.peek() == '}' {
		c.pos++
		c.out = append(c.out, "{}\n"...)
		return c.end()
	}
	if err := c.mapEntries(0, false); err != nil {
		return err
	}
	return c.end()
}

func (c *converter) end() error {
	c.skipSpace()
	if c.pos != len(c.in) {
		return c.errorf("trailing data")
	}
	return nil
}

// value converts the JSON value at c.pos; indent is the column of the key or dash that owns it.
func (c *converter) value(indent int, at position) error {
	c.skipSpace()
	switch c.peek() {
	case '{':
		c.pos++
		c.skipSpace()
		if c.peek() == '}' {
			c.pos++
			c.out = append(c.out, c.sep(at)...)
			c.out = append(c.out, "{}\n"...)
			return nil
		}
		if at == afterKey {
			c.out = append(c.out, '\n')
			return c.mapEntries(indent+2, false)
		}
		return c.mapEntries(indent+2, true)
	case '[':
		c.pos++
		c.skipSpace()
		if c.peek() == ']' {
			c.pos++
			c.out = append(c.out, c.sep(at)...)
			c.out = append(c.out, "[]\n"...)
			return nil
		}
		if at == afterKey {
			c.out = append(c.out, '\n')
			return c.listItems(indent, false)
		}
		return c.listItems(indent+2, true)
	case '"':
		s, err := c.str()
		if err != nil {
			return err
		}
		c.out = append(c.out, c.sep(at)...)
		c.scalar(s, indent+2, true)
		c.out = append(c.out, '\n')
		return nil
	default:
		start := c.pos
		for c.pos < len(c.in) && !isDelim(c.in[c.pos]) {
			c.pos++
		}
		lit := c.in[start:c.pos]
		if len(lit) == 0 {
			return c.errorf("expected a value")
		}
		c.out = append(c.out, c.sep(at)...)
		c.out = append(c.out, lit...)
		c.out = append(c.out, '\n')
		return nil
	}
}

func (c *converter) sep(at position) string {
	if at == afterKey {
		return " "
	}
	return ""
}

// mapEntries converts the entries of an object whose '{' has been read, through its '}'.
func (c *converter) mapEntries(indent int, firstInline bool) error {
	for first := true; ; first = false {
		c.skipSpace()
		if c.peek() != '"' {
			return c.errorf("expected a key")
		}
		key, err := c.str()
		if err != nil {
			return err
		}
		c.skipSpace()
		if c.peek() != ':' {
			return c.errorf("expected ':'")
		}
		c.pos++
		if !first || !firstInline {
			c.indent(indent)
		}
		start := len(c.out)
		c.scalar(key, indent, false)
		if len(c.out)-start > maxSimpleKey {
			// YAML limits an implicit key to 1024 characters; longer ones need the explicit "? key".
			c.out = append(c.out, "  "...)
			copy(c.out[start+2:], c.out[start:len(c.out)-2])
			c.out[start], c.out[start+1] = '?', ' '
			c.out = append(c.out, '\n')
			c.indent(indent)
		}
		c.out = append(c.out, ':')
		if err := c.value(indent, afterKey); err != nil {
			return err
		}
		c.skipSpace()
		switch c.peek() {
		case ',':
			c.pos++
		case '}':
			c.pos++
			return nil
		default:
			return c.errorf("expected ',' or '}'")
		}
	}
}

// listItems converts the items of an array whose '[' has been read, through its ']'.
func (c *converter) listItems(indent int, firstInline bool) error {
	for first := true; ; first = false {
		if !first || !firstInline {
			c.indent(indent)
		}
		c.out = append(c.out, "- "...)
		if err := c.value(indent, afterDash); err != nil {
			return err
		}
		c.skipSpace()
		switch c.peek() {
		case ',':
			c.pos++
		case ']':
			c.pos++
			return nil
		default:
			return c.errorf("expected ',' or ']'")
		}
	}
}

func (c *converter) indent(n int) {
	for range n {
		c.out = append(c.out, ' ')
	}
}

// str reads a JSON string and returns its contents. Without escapes (the common case) the result
// aliases the input and nothing is allocated.
func (c *converter) str() ([]byte, error) {
	start := c.pos
	c.pos++ // the opening quote
	end := bytes.IndexByte(c.in[c.pos:], '"')
	if end < 0 {
		return nil, c.errorf("unterminated string")
	}
	if bytes.IndexByte(c.in[c.pos:c.pos+end], '\\') < 0 {
		s := c.in[c.pos : c.pos+end]
		c.pos += end + 1
		return s, nil
	}
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case '\\':
			c.pos += 2
			continue
		case '"':
			c.pos++
			var s string
			if err := json.Unmarshal(c.in[start:c.pos], &s); err != nil {
				return nil, c.errorf("bad string: %v", err)
			}
			return []byte(s), nil
		}
		c.pos++
	}
	return nil, c.errorf("unterminated string")
}

// scalar writes s as a plain scalar when that reads back as the same string, as a literal block for
// tidy multi-line text (when allowed), and double-quoted otherwise. blockIndent is the column of a
// literal block's lines.
func (c *converter) scalar(s []byte, blockIndent int, blockOK bool) {
	switch {
	case isPlainSafe(s):
		c.out = append(c.out, s...)
	case blockOK && isLiteralSafe(s):
		c.out = append(c.out, '|')
		body := s[:len(s)-1] // the final line break is the one the caller writes after every value
		for {
			line := body
			next := -1
			for i, b := range body {
				if b == '\n' {
					line, next = body[:i], i+1
					break
				}
			}
			c.out = append(c.out, '\n')
			if len(line) > 0 {
				c.indent(blockIndent)
				c.out = append(c.out, line...)
			}
			if next < 0 {
				break
			}
			body = body[next:]
		}
	default:
		c.quoted(s)
	}
}

// quoted writes s double-quoted, escaping everything but printable ASCII.
func (c *converter) quoted(s []byte) {
	const hex = "0123456789abcdef"
	c.out = append(c.out, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b < 0x7f {
			if b == '"' || b == '\\' {
				c.out = append(c.out, '\\')
			}
			c.out = append(c.out, b)
			i++
			continue
		}
		switch b {
		case '\n':
			c.out = append(c.out, `\n`...)
			i++
			continue
		case '\t':
			c.out = append(c.out, `\t`...)
			i++
			continue
		case '\r':
			c.out = append(c.out, `\r`...)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		switch {
		case r < 0x100:
			c.out = append(c.out, '\\', 'x', hex[r>>4], hex[r&0xf])
		case r < 0x10000:
			c.out = append(c.out, '\\', 'u', hex[r>>12], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			c.out = append(c.out, '\\', 'U')
			for shift := 28; shift >= 0; shift -= 4 {
				c.out = append(c.out, hex[r>>shift&0xf])
			}
		}
	}
	c.out = append(c.out, '"')
}

// isPlainSafe reports whether s can be written unquoted and read back as the same string by YAML 1.1
// and 1.2 parsers. It is deliberately narrow: names, paths, image references and quantities.
func isPlainSafe(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	switch s[0] {
	case '-', '.', ':', '?', '@', '`', '!', '&', '*', '#', '|', '>', '\'', '"', '%', '{', '}', '[', ']', ',', '~', '=', '<', '+':
		return false
	}
	for i, b := range s {
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '/', b == '-', b == '@':
		case b == ':':
			if i == len(s)-1 {
				return false
			}
		default:
			return false
		}
	}
	if s[0] >= '0' && s[0] <= '9' {
		return isQuantityLike(s)
	}
	return !isReservedWord(s)
}

// isQuantityLike reports whether s, which starts with a digit, is digits followed by letters that no
// YAML number, date or sexagesimal uses (as in 2Gi, 500m, 50Gi).
func isQuantityLike(s []byte) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == len(s) {
		return false
	}
	telling := false
	for _, b := range s[i:] {
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z') {
			return false
		}
		switch b {
		case 'a', 'b', 'c', 'd', 'e', 'f', 'A', 'B', 'C', 'D', 'E', 'F', 'x', 'X', 'o', 'O', 't', 'T', 'z', 'Z':
		default:
			telling = true
		}
	}
	return telling
}

// isReservedWord reports the words YAML 1.1 reads as booleans or null.
func isReservedWord(s []byte) bool {
	switch string(s) {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF",
		"null", "Null", "NULL":
		return true
	}
	return false
}

// isLiteralSafe reports whether s reads back unchanged from a literal block ("|"): printable ASCII
// lines, none starting with a space, ending with exactly one line break.
func isLiteralSafe(s []byte) bool {
	n := len(s)
	if n < 2 || s[n-1] != '\n' || s[n-2] == '\n' || s[0] == '\n' {
		return false
	}
	lineStart := true
	for _, b := range s {
		switch {
		case b == '\n':
			lineStart = true
			continue
		case b < 0x20 || b >= 0x7f:
			return false
		case lineStart && (b == ' ' || b == '#'):
			return false
		}
		lineStart = false
	}
	return true
}

func isDelim(b byte) bool {
	switch b {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (c *converter) peek() byte {
	if c.pos < len(c.in) {
		return c.in[c.pos]
	}
	return 0
}

func (c *converter) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *converter) errorf(format string, args ...any) error {
	return fmt.Errorf("convert JSON to YAML at byte %d: %s", c.pos, fmt.Sprintf(format, args...))
}
