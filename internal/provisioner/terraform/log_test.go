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

// diagnosis tells terraform's diagnostics about the variables file as the parameter's, with or
// without the box drawing of a coloured output.
func TestDiagnosisNamesTheParameter(t *testing.T) {
	const varFile = "/var/lib/hangar/work/job-1/hangar.tfvars.json"
	plain := []string{
		"Error: Invalid value for variable", "",
		"  on " + varFile + " line 1:", `   1: {"size":"xl","token":"s3cret"}`, "    ├────────────────", `    │ var.size is "xl"`, "",
		"value must be one of s, m.", "", "This was checked by the validation rule at main.tf:4,3-13.",
		"Error: Invalid value for input variable", "",
		"  on " + varFile + " line 1:", `   1: {"size":"xl","token":"s3cret"}`, "",
		"The given value is not suitable for var.count_of declared at main.tf:10,1-20:", "a number is required.",
		"  on main.tf line 3:", "Unrelated.",
	}
	want := []string{
		"Error: Invalid value for variable", "", `parameter "size": value must be one of s, m.`, "",
		"This was checked by the validation rule at main.tf:4,3-13.",
		"Error: Invalid value for input variable", "", `parameter "count_of": a number is required.`,
		"  on main.tf line 3:", "Unrelated.",
	}
	decorated := make([]string, len(plain))
	for i, l := range plain {
		decorated[i] = "│ " + l
	}
	for name, in := range map[string][]string{"plain": plain, "decorated": decorated} {
		var d diagnosis
		var got []string
		for _, l := range in {
			if out, keep := d.rewrite(l, varFile); keep {
				got = append(got, undecorate(out))
			}
		}
		for i := range want {
			want[i] = undecorate(want[i])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// Whatever terraform prints, the variables file's path and its lines never come out.
func FuzzDiagnosis(f *testing.F) {
	const varFile = "/work/job/hangar.tfvars.json"
	f.Add("Error: x\n\n  on /work/job/hangar.tfvars.json line 1:\n   1: {\"a\":\"SECRET\"}\n\nmsg var.a\n")
	f.Add("│   on /work/job/hangar.tfvars.json line 2:\n│ \n│ The given value is not suitable for var.n declared at main.tf:1,1-2:\n│ bad\n")
	f.Fuzz(func(t *testing.T, text string) {
		var d diagnosis
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			out, keep := d.rewrite(l, varFile)
			if !keep {
				continue
			}
			if strings.HasPrefix(undecorate(out), "on "+varFile+" line ") {
				t.Fatalf("line %d %q kept the file's location", i, out)
			}
			if out != l && !strings.HasPrefix(out, "parameter ") {
				t.Fatalf("line %d %q rewritten to %q", i, l, out)
			}
		}
	})
}
