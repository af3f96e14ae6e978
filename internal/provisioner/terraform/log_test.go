package terraform

import (
	"slices"
	"strings"
	"testing"
)

func TestLineWriter(t *testing.T) {
	var got []Line
	l := &logger{fn: func(line Line) { got = append(got, line) }, stage: StageApply}
	out := &lineWriter{log: l}
	for _, chunk := range []string{"first", " line\nsecond\r\n", "\nWarning: Value for undeclared variable\n", "  detail\n", "no newline"} {
		if n, err := out.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	out.flush()
	out.flush()
	want := []Line{
		{StageApply, LevelInfo, "first line"},
		{StageApply, LevelInfo, "second"},
		{StageApply, LevelInfo, ""},
		{StageApply, LevelWarn, "Warning: Value for undeclared variable"},
		{StageApply, LevelInfo, "  detail"},
		{StageApply, LevelInfo, "no newline"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}

	got = nil
	errw := &lineWriter{log: l, stderr: true}
	for i := range 30 {
		errw.Write([]byte("\n│ Error: number " + strings.Repeat("x", i) + "\n"))
	}
	if len(got) != 60 || got[0].Level != LevelError || got[1].Output != "│ Error: number " {
		t.Errorf("stderr lines: %d, first %q", len(got), got[:2])
	}
	last := errw.lastLines()
	if len(last) != maxErrorLines || last[len(last)-1] != "Error: number "+strings.Repeat("x", 29) {
		t.Errorf("lastLines = %q", last)
	}

	got = nil
	long := strings.Repeat("a", maxLineBytes*2+10)
	out.Write([]byte(long[:100]))
	out.Write([]byte(long[100:] + "\nb\n"))
	if len(got) != 4 || len(got[0].Output) != maxLineBytes || len(got[2].Output) != 10 || got[3].Output != "b" {
		t.Errorf("long line split into %d lines", len(got))
	}
}

// TestLineWriterDebugLines: terraform's own log lines (TF_LOG, a debug build) on stderr are
// level debug and are not kept for the run's error; its other stderr lines stay errors.
func TestLineWriterDebugLines(t *testing.T) {
	var got []Line
	l := &logger{fn: func(line Line) { got = append(got, line) }, stage: StageApply}
	errw := &lineWriter{log: l, stderr: true}
	errw.Write([]byte("2026-01-01T05:00:00.123Z [DEBUG] provider: starting plugin\n" +
		"2026-01-01T05:00:00.124+0100 [TRACE] graph walk\n" +
		"│ Error: boom\n" +
		"2026-01-01 [DEBUG] not a log line\n"))
	want := []Line{
		{StageApply, LevelDebug, "2026-01-01T05:00:00.123Z [DEBUG] provider: starting plugin"},
		{StageApply, LevelDebug, "2026-01-01T05:00:00.124+0100 [TRACE] graph walk"},
		{StageApply, LevelError, "│ Error: boom"},
		{StageApply, LevelError, "2026-01-01 [DEBUG] not a log line"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
	if last := errw.lastLines(); !slices.Equal(last, []string{"Error: boom", "2026-01-01 [DEBUG] not a log line"}) {
		t.Errorf("kept for the error: %q", last)
	}
}
