package build

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestParseStateCopiesNoResources: reading what identifies a state of 32 MiB allocates a small
// fraction of it (the decoder used to copy every top-level value, the resources included).
func TestParseStateCopiesNoResources(t *testing.T) {
	resources := `[{"mode":"managed","type":"terraform_data","name":"x","instances":[{"attributes":{"input":"` + strings.Repeat("a", 32<<20) + `"}}]}]`
	state := []byte(`{"version":4,"terraform_version":"1.9.8","serial":7,"lineage":"l","resources":` + resources + `}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := ParseState(state)
	runtime.ReadMemStats(&after)
	if err != nil || m != (StateMeta{Version: 4, TerraformVersion: "1.9.8", Serial: 7, Lineage: "l"}) {
		t.Fatalf("ParseState = %+v, %v", m, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("ParseState of a %d MiB state allocated %d KiB, want under 1 MiB", len(state)>>20, alloc>>10)
	}
	// A field Hangar reads that is implausibly long is refused by kind, not copied.
	_, err = ParseState([]byte(`{"version":4,"terraform_version":"1.9.8","serial":7,"lineage":"` + strings.Repeat("l", maxStateFieldBytes) + `"}`))
	if err == nil || !strings.Contains(err.Error(), "lineage: must be a non-empty string") {
		t.Errorf("a long lineage: %v", err)
	}
}

// FuzzParseState: ParseState never panics, and on states whose top-level values are short it
// decides as a plain decode of every top-level value would.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version":4,"terraform_version":"1.9.8","serial":7,"lineage":"l","resources":[]}`))
	f.Add([]byte(`{"version":"4","terraform_version":"1.9.8","serial":-1,"lineage":""}`))
	f.Add([]byte(`{"version":4,"version":null}`))
	f.Add([]byte(`[{"version":4}]`))
	f.Add([]byte(`{"version":4,`))
	f.Add([]byte(` {"Version":4,"terraform_version":"x","serial":0,"lineage":"y"} `))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseState(b)
		if err == nil && (m.Version <= 0 || m.TerraformVersion == "" || m.Lineage == "") {
			t.Fatalf("accepted %+v", m)
		}
		var raw map[string]json.RawMessage
		if json.Unmarshal(bytes.TrimSpace(b), &raw) != nil {
			if err == nil {
				t.Fatalf("accepted bytes that are not a JSON object")
			}
			return
		}
		for _, v := range raw {
			if len(v) > maxStateFieldBytes {
				return
			}
		}
		var want StateMeta
		ok := json.Unmarshal(raw["version"], &want.Version) == nil && want.Version > 0 &&
			json.Unmarshal(raw["terraform_version"], &want.TerraformVersion) == nil && want.TerraformVersion != "" &&
			json.Unmarshal(raw["serial"], &want.Serial) == nil && string(raw["serial"]) != "null" &&
			json.Unmarshal(raw["lineage"], &want.Lineage) == nil && want.Lineage != ""
		if ok != (err == nil) || (ok && m != want) {
			t.Fatalf("ParseState = %+v, %v; a plain decode: %+v, ok %v", m, err, want, ok)
		}
	})
}
