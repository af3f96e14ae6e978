package terraform

import (
	"bytes"
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
