package parameter

import (
	"errors"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/workspace"
)

func typed(name, ty, tyJSON string) Parameter {
	return Parameter{Name: name, Type: ty, TypeJSON: []byte(tyJSON)}
}

func TestCheck(t *testing.T) {
	num := typed("n", "number", `"number"`)
	num.Validations = []Validation{{Condition: "var.n >= 1 && var.n <= 3", ErrorMessage: "n must be 1 to 3"}}
	region := typed("region", "string", `"string"`)
	region.Validations = []Validation{{Condition: `can(regex("^[a-z]+-[0-9]$", var.region))`, ErrorMessage: "region looks like eu-1"}}
	other := typed("o", "string", `"string"`)
	other.Validations = []Validation{{Condition: "var.o != var.elsewhere", ErrorMessage: "never shown"}}
	tmpl := typed("j", "string", `"string"`)
	tmpl.Validations = []Validation{{Condition: "${length(var.j) > 2}", Template: true, ErrorMessage: "j is too short"}}
	list := typed("l", "list(string)", `["list","string"]`)
	list.Validations = []Validation{{Condition: "length(var.l) > 0", ErrorMessage: "give at least one"}}
	flag := typed("b", "bool", `"bool"`)
	anyT := Parameter{Name: "a", Type: "any"}
	for _, tc := range []struct {
		p     Parameter
		value string
		want  string // "" for accepted
	}{
		{num, "2", ""},
		{num, "x", "must be a number"},
		{num, "7", "n must be 1 to 3"},
		{region, "eu-1", ""},
		{region, "Europe", "region looks like eu-1"},
		{other, "anything", ""}, // refers to another variable: left to terraform
		{tmpl, "abc", ""},
		{tmpl, "ab", "j is too short"},
		{list, `["a","b"]`, ""},
		{list, `[]`, "give at least one"},
		{list, `"a"`, "must be JSON of type list(string)"},
		{list, `[1, {}]`, "must be JSON of type list(string)"},
		{flag, "true", ""},
		{flag, "maybe", "must be a bool"},
		{anyT, "whatever", ""},
		{region, strings.Repeat("a", MaxValueBytes+1), "the limit is"},
	} {
		err := tc.p.Check(tc.value)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s = %.20q: %v, want accepted", tc.p.Name, tc.value, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s = %.20q: %v, want an error with %q", tc.p.Name, tc.value, err, tc.want)
		}
		if err != nil && len(tc.value) > 3 && strings.Contains(err.Error(), tc.value) {
			t.Errorf("%s: the error %q quotes the value", tc.p.Name, err)
		}
	}
}

func TestResolve(t *testing.T) {
	size := typed("size", "number", `"number"`)
	size.Mutable = true
	zone := typed("zone", "string", `"string"`) // required, immutable
	token := typed("token", "string", `"string"`)
	token.Sensitive = true
	token.HasDefault = true
	defs := []Parameter{size, zone, token}
	defs[0].HasDefault, defs[0].Default = true, "1"

	fields := func(_ []workspace.ParameterValue, err error) map[string]string {
		var ve *workspace.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("want a ValidationError, got %v", err)
		}
		out := map[string]string{}
		for _, p := range ve.Problems {
			out[p.Field] = p.Detail
		}
		return out
	}

	// Create: zone is required; an unknown name is refused.
	if f := fields(Resolve(defs, nil, map[string]string{"size": "2", "nope": "x"}, true)); !strings.Contains(f["parameters.zone"], "is required") ||
		!strings.Contains(f["parameters.nope"], "no such parameter") {
		t.Errorf("missing and unknown: %v", f)
	}
	got, err := Resolve(defs, nil, map[string]string{"zone": "eu", "token": "s3cret"}, true)
	if err != nil || len(got) != 2 || got[0] != (workspace.ParameterValue{Name: "token", Value: "s3cret", Sensitive: true}) || got[1] != (workspace.ParameterValue{Name: "zone", Value: "eu"}) {
		t.Fatalf("create = %+v, %v (defaults are not stored)", got, err)
	}
	// Update: a mutable one changes, an immutable one may not, the same value is fine.
	after, err := Resolve(defs, got, map[string]string{"size": "3", "zone": "eu"}, false)
	if err != nil || Map(after)["size"] != "3" || Map(after)["zone"] != "eu" || Map(after)["token"] != "s3cret" || !Changed(got, after) {
		t.Fatalf("update = %+v, %v", after, err)
	}
	if f := fields(Resolve(defs, got, map[string]string{"zone": "us"}, false)); !strings.Contains(f["parameters.zone"], "immutable") {
		t.Errorf("immutable change: %v", f)
	}
	// A new version adds a required parameter: a start without it is refused; values of dropped
	// names are kept for the old module's stop.
	disk := typed("disk", "number", `"number"`)
	newDefs := []Parameter{zone, disk}
	if f := fields(Resolve(newDefs, got, nil, false)); !strings.Contains(f["parameters.disk"], "is required") {
		t.Errorf("new required: %v", f)
	}
	moved, err := Resolve(newDefs, got, map[string]string{"disk": "10"}, false)
	if err != nil || Map(moved)["disk"] != "10" || Map(moved)["token"] != "s3cret" {
		t.Fatalf("moved = %+v, %v", moved, err)
	}
	// Bounds.
	many := map[string]string{}
	for i := range MaxParameters + 1 {
		many[strings.Repeat("x", i+1)] = "v"
	}
	if f := fields(Resolve(defs, nil, many, true)); !strings.Contains(f["parameters"], "limit") {
		t.Errorf("too many: %v", f)
	}
}

// FuzzCheck: any value, against each kind of type, is accepted or refused with an error that never
// quotes it, and never panics.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"", "1", "true", `["a"]`, `{"a":"b"}`, `{"a":1}`, "[[[[", `"x"`, "1e999999", "-0"} {
		f.Add(s)
	}
	ps := []Parameter{
		typed("s", "string", `"string"`), typed("n", "number", `"number"`), typed("b", "bool", `"bool"`),
		typed("l", "list(string)", `["list","string"]`), typed("m", "map(number)", `["map","number"]`),
		typed("o", "object({a=string})", `["object",{"a":"string"}]`), {Name: "a"},
	}
	ps[1].Validations = []Validation{{Condition: "var.n > 0 && floor(var.n) == var.n", ErrorMessage: "a positive integer"}}
	ps[3].Validations = []Validation{{Condition: "alltrue([for s in var.l : length(s) < 5])", ErrorMessage: "short ones"}}
	f.Fuzz(func(t *testing.T, value string) {
		for _, p := range ps {
			err := p.Check(value)
			if err != nil && len(value) > 8 && strings.Contains(err.Error(), value) {
				t.Fatalf("%s: the error %q quotes the value", p.Name, err)
			}
		}
	})
}
