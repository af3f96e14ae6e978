package imagebuild

import (
	"errors"
	"fmt"
	"strings"
)

// maxNesting bounds ${...} inside ${...}: the expansion recurses once per level.
const maxNesting = 16

// lexer processes a Dockerfile instruction's words as Docker's shell lexer does: quotes removed,
// the escape character honoured, and $NAME, ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:+word},
// ${NAME+word}, ${NAME:?word}, ${NAME?word} expanded. It knows the variables the Dockerfile sets
// (ARG, ENV); the base image's own environment is known only when the image is built.
type lexer struct {
	esc rune
	// lookup returns a variable's value and state.
	lookup func(name string) (value string, state varState)
	// imageEnv: write the ENV form (a $ in the text is $$, and a variable the Dockerfile does not
	// set stays ${NAME}, for the executor to expand against the image's environment). Else an
	// unset variable is empty, as in Docker with an image that does not set it, and noted in unset.
	imageEnv bool
	unset    []string
}

// varState is what the Dockerfile says of a variable at one instruction.
type varState int

const (
	// varUnknown: neither ARG nor ENV names it; only the base image may set it.
	varUnknown varState = iota
	// varUnset: an ARG without a value that was not given: unset.
	varUnset
	varSet
	// varDeferred: set by ENV to a value that names the base image's environment (it holds
	// ${NAME} references and $$ for $, see Step).
	varDeferred
)

type scan struct {
	s     []rune
	i     int
	depth int
}

func (sc *scan) eof() bool  { return sc.i >= len(sc.s) }
func (sc *scan) peek() rune { return sc.s[sc.i] }
func (sc *scan) next() rune { r := sc.s[sc.i]; sc.i++; return r }

// errLex is a problem in a word (unbalanced quotes, a bad substitution): the caller names the line.
var errLex = errors.New("")

func lexErr(format string, args ...any) error {
	return fmt.Errorf("%w%s", errLex, fmt.Sprintf(format, args...))
}

// word processes s as one word: quotes and escapes removed, variables expanded, spaces kept.
func (l *lexer) word(s string) (string, error) {
	sc := &scan{s: []rune(s)}
	var b strings.Builder
	if err := l.process(sc, &b, 0, false); err != nil {
		return "", err
	}
	return b.String(), nil
}

// words splits s into words at unquoted white space, each processed as word does.
func (l *lexer) words(s string) ([]string, error) {
	var out []string
	for _, raw := range rawWords(s, l.esc) {
		w, err := l.word(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// rawWords splits s at unquoted white space, keeping the quotes and escapes (Docker's parseWords).
func rawWords(s string, esc rune) []string {
	var out []string
	var b strings.Builder
	var quote rune
	inWord, escaped := false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case r == esc:
			escaped = true
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if inWord {
				out = append(out, b.String())
				b.Reset()
				inWord = false
			}
			continue
		}
		inWord = true
		b.WriteRune(r)
	}
	if inWord {
		out = append(out, b.String())
	}
	return out
}

// process writes the processed text of sc to b until its end, or until an unquoted stop ('}')
// when inBrace (the word of ${NAME:-word}).
func (l *lexer) process(sc *scan, b *strings.Builder, depth int, inBrace bool) error {
	for !sc.eof() {
		r := sc.peek()
		switch {
		case inBrace && r == '}':
			return nil
		case r == '\'':
			sc.next()
			closed := false
			for !sc.eof() {
				c := sc.next()
				if c == '\'' {
					closed = true
					break
				}
				l.lit(b, c)
			}
			if !closed {
				return lexErr("a single quote (') is not closed")
			}
		case r == '"':
			sc.next()
			closed := false
			for !sc.eof() {
				c := sc.peek()
				if c == '"' {
					sc.next()
					closed = true
					break
				}
				if c == '$' {
					sc.next()
					if err := l.dollar(sc, b, depth); err != nil {
						return err
					}
					continue
				}
				sc.next()
				if c == l.esc && !sc.eof() {
					if n := sc.peek(); n == '"' || n == '$' || n == l.esc {
						c = sc.next()
					}
				}
				l.lit(b, c)
			}
			if !closed {
				return lexErr("a double quote (\") is not closed")
			}
		case r == '$':
			sc.next()
			if err := l.dollar(sc, b, depth); err != nil {
				return err
			}
		case r == l.esc:
			sc.next()
			if !sc.eof() {
				l.lit(b, sc.next())
			}
		default:
			l.lit(b, sc.next())
		}
	}
	if inBrace {
		return lexErr("a ${ is not closed by }")
	}
	return nil
}

func (l *lexer) lit(b *strings.Builder, r rune) {
	if l.imageEnv && r == '$' {
		b.WriteString("$$")
		return
	}
	b.WriteRune(r)
}

func isNameRune(r rune, first bool) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || !first && r >= '0' && r <= '9'
}

// dollar expands what follows a $.
func (l *lexer) dollar(sc *scan, b *strings.Builder, depth int) error {
	if sc.eof() {
		l.lit(b, '$')
		return nil
	}
	if sc.peek() != '{' {
		start := sc.i
		for !sc.eof() && isNameRune(sc.peek(), sc.i == start) {
			sc.next()
		}
		if sc.i == start {
			l.lit(b, '$')
			return nil
		}
		return l.value(b, string(sc.s[start:sc.i]))
	}
	sc.next()
	if depth >= maxNesting {
		return lexErr("${...} is nested more than %d deep", maxNesting)
	}
	start := sc.i
	for !sc.eof() && isNameRune(sc.peek(), sc.i == start) {
		sc.next()
	}
	name := string(sc.s[start:sc.i])
	if name == "" || sc.eof() {
		return lexErr("bad substitution: ${ must be followed by a variable name and }")
	}
	op := string(sc.next())
	switch op {
	case "}":
		return l.value(b, name)
	case ":":
		if sc.eof() || !strings.ContainsRune("-+?", sc.peek()) {
			return lexErr("${%s:...}: only ${%s:-word}, ${%s:+word} and ${%s:?word} are supported", name, name, name, name)
		}
		op += string(sc.next())
	case "-", "+", "?":
	default:
		return lexErr("${%s%s...}: only the substitutions ${NAME}, ${NAME:-word}, ${NAME:+word} and ${NAME:?word} (and without the colon) are supported", name, op)
	}
	var w strings.Builder
	if err := l.process(sc, &w, depth+1, true); err != nil {
		return err
	}
	sc.next() // the closing }
	val, st := l.lookup(name)
	set, deferred := st == varSet || st == varDeferred, st == varDeferred
	if st == varUnknown && l.imageEnv {
		return lexErr("${%s%s...} tests %s, which the Dockerfile does not set: it would come from the base image's environment, which Hangar reads only when it builds", name, op, name)
	}
	if deferred && strings.TrimPrefix(op, ":") != op {
		return lexErr("${%s%s...} tests %s, whose value comes from the base image's environment, which Hangar reads only when it builds", name, op, name)
	}
	empty := !set || (op[0] == ':' && val == "")
	switch strings.TrimPrefix(op, ":") {
	case "-":
		if empty {
			b.WriteString(w.String())
		} else if err := l.insert(b, val, deferred); err != nil {
			return err
		}
	case "+":
		if !empty {
			b.WriteString(w.String())
		}
	case "?":
		if empty {
			msg := w.String()
			if msg == "" {
				msg = "is not set"
			}
			return lexErr("%s: %s", name, msg)
		}
		return l.insert(b, val, deferred)
	}
	return nil
}

// value writes a variable's value (${NAME}, $NAME).
func (l *lexer) value(b *strings.Builder, name string) error {
	val, st := l.lookup(name)
	deferred := st == varDeferred
	switch {
	case st == varUnknown && l.imageEnv:
		b.WriteString("${" + name + "}")
	case st == varUnknown:
		l.unset = append(l.unset, name)
	case st == varUnset:
	default:
		if deferred && !l.imageEnv {
			return lexErr("$%s comes from the base image's environment (ENV %s=...${...}), which Hangar reads only when it builds: write the value here", name, name)
		}
		return l.insert(b, val, deferred)
	}
	return nil
}

// maxWordBytes bounds a word after substitution: $A$A$A... cannot grow without bound.
const maxWordBytes = 64 << 10

// insert writes a known value: in the ENV form, a plain value's $ doubles.
func (l *lexer) insert(b *strings.Builder, val string, deferred bool) error {
	if l.imageEnv && !deferred {
		val = strings.ReplaceAll(val, "$", "$$")
	}
	if b.Len()+len(val) > maxWordBytes {
		return lexErr("a value is longer than %d KiB after its substitutions", maxWordBytes>>10)
	}
	b.WriteString(val)
	return nil
}
