package terraform

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Levels of a Line.
const (
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
	// LevelDebug is a line of terraform's own log (TF_LOG), in a debug build.
	LevelDebug = "debug"
)

// maxLineBytes caps a line; a longer one is passed on in pieces.
const maxLineBytes = 64 << 10

// maxErrorLines is how many of terraform's last error lines an error carries.
const maxErrorLines = 20

// logger serialises the Lines of one run: terraform-exec copies stdout and stderr from two
// goroutines, and the cancel watcher logs too.
type logger struct {
	mu    sync.Mutex
	fn    func(Line)
	stage string
}

func (l *logger) emit(level, output string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fn != nil {
		l.fn(Line{Stage: l.stage, Level: level, Output: output})
	}
}

// begin starts a stage and announces it.
func (l *logger) begin(stage string) {
	l.mu.Lock()
	l.stage = stage
	l.mu.Unlock()
	l.emit(LevelInfo, stage)
}

// lineWriter splits what terraform writes into lines and logs them. On stdout, the first line of a
// warning ("Warning: ...") is level warn, the rest info; everything on stderr is level error, and
// its last lines are kept for the run's error.
type lineWriter struct {
	log    *logger
	stderr bool
	// varFile is the variables file the runner writes: terraform's diagnostics about it are told
	// as the parameter's (diagnosis).
	varFile string
	diag    diagnosis

	mu      sync.Mutex
	partial []byte
	last    []string // stderr only: last non-blank lines
	written int64    // bytes since resetCount
}

func (w *lineWriter) resetCount() {
	w.mu.Lock()
	w.written = 0
	w.mu.Unlock()
}

// count is the number of bytes written since resetCount.
func (w *lineWriter) count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	w.written += int64(n)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			for len(w.partial) >= maxLineBytes {
				w.line(string(w.partial[:maxLineBytes]))
				w.partial = append(w.partial[:0], w.partial[maxLineBytes:]...)
			}
			break
		}
		w.partial = append(w.partial, p[:i]...)
		p = p[i+1:]
		for len(w.partial) > maxLineBytes {
			w.line(string(w.partial[:maxLineBytes]))
			w.partial = append(w.partial[:0], w.partial[maxLineBytes:]...)
		}
		w.line(string(w.partial))
		w.partial = w.partial[:0]
	}
	return n, nil
}

// flush logs an unterminated last line.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(string(w.partial))
		w.partial = w.partial[:0]
	}
}

func (w *lineWriter) line(s string) {
	s = strings.TrimSuffix(s, "\r")
	if w.stderr && tfLogLine.MatchString(s) {
		// terraform's own log (TF_LOG, a debug build): not an error, and not kept for the run's
		// error message.
		w.log.emit(LevelDebug, s)
		return
	}
	s, keep := w.diag.rewrite(s, w.varFile)
	if !keep {
		return
	}
	if w.stderr {
		if t := undecorate(s); t != "" {
			w.last = append(w.last, t)
			if len(w.last) > maxErrorLines {
				w.last = w.last[1:]
			}
		}
		w.log.emit(LevelError, s)
		return
	}
	level := LevelInfo
	if strings.HasPrefix(undecorate(s), "Warning: ") {
		level = LevelWarn
	}
	w.log.emit(level, s)
}

// tfLogLine matches a line of terraform's log: a timestamp and a level in brackets
// ("2026-01-01T05:00:00.123Z [DEBUG] provider: ...").
var tfLogLine = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T[0-9:.]+(Z|[+-]\d{2}:?\d{2})? \[(TRACE|DEBUG|INFO|WARN|ERROR)\] `)

// lastLines returns the kept stderr lines and forgets them.
func (w *lineWriter) lastLines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.last
	w.last = nil
	return l
}

// undecorate strips spaces and the box drawing of terraform's diagnostics (drawn when colours are
// on) from a line; "" for a line with nothing else.
func undecorate(s string) string {
	s = strings.TrimSpace(s)
	switch s {
	case "╷", "╵", "│":
		return ""
	}
	s = strings.TrimPrefix(s, "│ ")
	return strings.TrimSpace(s)
}

// diagnosis rewrites terraform's diagnostics about a variable's value in the variables file the
// runner wrote. terraform shows where the value came from: the file's path in the provisioner's
// work directory and its line, which holds every variable's value (sensitive ones too), then
// "var.NAME is VALUE". None of it is the user's: they gave a parameter. So the source lines are
// dropped, and the diagnostic's detail is told as the parameter's:
//
//	Error: Invalid value for variable
//
//	parameter "size": value must be one of s, m.
type diagnosis struct {
	state int
	param string
}

const (
	diagNone    = iota
	diagSource  // in the source lines after "on <varFile> line N:": dropped up to a blank line
	diagDetail  // before the detail's first line, which names the parameter
	diagNotSuit // "The given value is not suitable for var.X declared at ...:" was dropped
)

var (
	diagVarIs       = regexp.MustCompile(`^(?:│\s*)?var\.([A-Za-z_][A-Za-z0-9_-]*) is `)
	diagNotSuitable = regexp.MustCompile(`^The given value is not suitable for var\.([A-Za-z_][A-Za-z0-9_-]*) declared at \S+?:?$`)
	diagVarName     = regexp.MustCompile(`\bvar\.([A-Za-z_][A-Za-z0-9_-]*)`)
)

// rewrite returns the line to log instead of s, or keep false to drop it.
func (d *diagnosis) rewrite(s, varFile string) (string, bool) {
	u := undecorate(s)
	switch d.state {
	case diagSource:
		if m := diagVarIs.FindStringSubmatch(u); m != nil {
			d.param = m[1]
		}
		if u == "" {
			d.state = diagDetail
		}
		return "", false
	case diagDetail, diagNotSuit:
		if u == "" {
			return s, true
		}
		if d.state == diagDetail {
			if m := diagNotSuitable.FindStringSubmatch(u); m != nil {
				d.param, d.state = m[1], diagNotSuit
				return "", false // the reason follows on the next line
			}
		}
		param := d.param
		if m := diagVarName.FindStringSubmatch(u); param == "" && m != nil {
			param = m[1]
		}
		*d = diagnosis{}
		if param == "" {
			return s, true
		}
		return fmt.Sprintf("parameter %q: %s", param, u), true
	}
	if varFile != "" && strings.HasPrefix(u, "on "+varFile+" line ") {
		*d = diagnosis{state: diagSource}
		return "", false
	}
	return s, true
}
