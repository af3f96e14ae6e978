package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeTerminalControl(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    TerminalControl
	}{
		{in: `{"type":"resize","cols":120,"rows":40}`, want: TerminalControl{Type: TerminalResize, Cols: 120, Rows: 40}},
		{in: `{"type":"resize","cols":2000,"rows":1000}`, want: TerminalControl{Type: TerminalResize, Cols: 2000, Rows: 1000}},
		{in: `{"type":"resize","cols":0,"rows":40}`, err: "cols must be from 1 to 2000, got 0"},
		{in: `{"type":"resize","cols":2001,"rows":40}`, err: "cols must be from 1 to 2000, got 2001"},
		{in: `{"type":"resize","cols":80,"rows":-1}`, err: "rows must be from 1 to 1000, got -1"},
		{in: `{"type":"paste","cols":80,"rows":24}`, err: `type must be "resize", got "paste"`},
		{in: `{"type":"resize","cols":80,"rows":24,"x":1}`, err: `unknown field "x"`},
		{in: `{"type":"resize","cols":80,"rows":24}{}`, err: "one JSON object, then nothing"},
		{in: `{"type":"resize","cols":1e99,"rows":24}`, err: "cannot unmarshal"},
		{in: `not json`, err: "invalid character"},
		{in: `{"type":"resize","cols":80,"rows":24,"pad":"` + strings.Repeat("x", 300) + `"}`, err: "at most 256"},
	} {
		got, err := DecodeTerminalControl([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzDecodeTerminalControl: whatever a browser sends, the decoder answers a control within its
// bounds or an error, and a control it accepts encodes back to itself.
func FuzzDecodeTerminalControl(f *testing.F) {
	f.Add([]byte(`{"type":"resize","cols":80,"rows":24}`))
	f.Add([]byte(`{"type":"resize","cols":0,"rows":0}`))
	f.Add([]byte(`{"type":"exit"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeTerminalControl(b)
		if err != nil {
			if c != (TerminalControl{}) {
				t.Fatalf("an error with a control: %+v", c)
			}
			return
		}
		if len(b) > MaxTerminalControlBytes {
			t.Fatalf("accepted %d bytes", len(b))
		}
		if c.Type != TerminalResize || c.Cols < 1 || c.Cols > MaxTerminalCols || c.Rows < 1 || c.Rows > MaxTerminalRows {
			t.Fatalf("accepted %+v", c)
		}
		again, _ := json.Marshal(c)
		if c2, err := DecodeTerminalControl(again); err != nil || c2 != c {
			t.Fatalf("%+v encodes to %s, which decodes to %+v, %v", c, again, c2, err)
		}
	})
}
