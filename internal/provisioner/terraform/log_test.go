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
