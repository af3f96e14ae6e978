package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxBytes caps a devcontainer.json: the same cap as a devfile in a create request
// (sdk.MaxDevfileBytes; a test keeps them equal).
const MaxBytes = 256 << 10

// MaxDepth caps the nesting of objects and arrays. Real files nest 4 or 5 deep
// (customizations.vscode.settings."[go]"."editor.codeActionsOnSave").
const MaxDepth = 32

// standardize turns JSONC (JSON with // and /* */ comments and trailing commas, as VS Code and the
// devcontainer CLI read it) into plain JSON of the same length: comments become spaces (newlines
// kept, so that offsets and line numbers stay those of the user's text) and a trailing comma before
// } or ] becomes a space. It refuses an unterminated comment or string, and nesting deeper than
// MaxDepth. Everything else (is it JSON at all?) is left to encoding/json.
func standardize(in []byte) ([]byte, error) {
	out := bytes.Clone(in)
	depth := 0
	lastComma := -1 // index of a comma after which only spaces and comments came
	for i := 0; i < len(out); i++ {
		switch c := out[i]; c {
		case '"':
			j := i + 1
			for ; j < len(out); j++ {
				if out[j] == '\\' {
					j++
				} else if out[j] == '"' {
					break
				}
			}
			if j >= len(out) {
				return nil, fmt.Errorf("line %d: unterminated string", line(in, i))
			}
			i, lastComma = j, -1
		case '/':
			switch {
			case i+1 < len(out) && out[i+1] == '/':
				j := i
				for ; j < len(out) && out[j] != '\n'; j++ {
					out[j] = ' '
				}
				i = j - 1
			case i+1 < len(out) && out[i+1] == '*':
				end := bytes.Index(out[i+2:], []byte("*/"))
				if end < 0 {
					return nil, fmt.Errorf("line %d: unterminated /* comment", line(in, i))
				}
				end += i + 2 + 2
				for j := i; j < end; j++ {
					if out[j] != '\n' {
						out[j] = ' '
					}
				}
				i = end - 1
			default:
				lastComma = -1 // not JSON: encoding/json says where
			}
		case ',':
			lastComma = i
		case '}', ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
			depth--
		case '{', '[':
			if depth++; depth > MaxDepth {
				return nil, fmt.Errorf("line %d: nested more than %d levels deep", line(in, i), MaxDepth)
			}
			lastComma = -1
		case ' ', '\t', '\r', '\n':
		default:
			lastComma = -1
		}
	}
	return out, nil
}

func line(b []byte, off int) int { return bytes.Count(b[:off], []byte("\n")) + 1 }

// decodeObject decodes JSONC text holding one object into its members, in no particular order.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("is %d bytes, the limit is %d", len(data), MaxBytes)
	}
	js, err := standardize(data)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&m); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("line %d: %v", line(js, int(min(se.Offset, int64(len(js))))), se)
		case errors.As(err, &te):
			return nil, fmt.Errorf("must be a JSON object, got %s", te.Value)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, errors.New("ends before the object is complete")
		}
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("must be a JSON object, got null")
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("text after the object")
	}
	return m, nil
}
