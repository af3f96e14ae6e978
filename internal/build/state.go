package build

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/hangar-dev/hangar/internal/errs"
)

// StateMeta is what Hangar reads of a Terraform state: the fields that say what it is and how it
// relates to another state of the same infrastructure. Terraform bumps serial at every write of a
// state and keeps lineage for the life of the state (a new lineage means a different state).
type StateMeta struct {
	Version          int
	TerraformVersion string
	Serial           uint64
	Lineage          string
}

// StateError is a pushed state that is refused, naming the field (of the state) at fault. Behind is
// a state that is a Terraform state but does not follow the saved one (a conflict, which force
// overrides); otherwise the bytes are not a Terraform state at all.
type StateError struct {
	Field, Detail string
	Behind        bool
}

func (e *StateError) Error() string { return e.Field + ": " + e.Detail }

// ErrStateBehind is matched by every StateError with Behind set.
var ErrStateBehind = errs.New(errs.Conflict, "the pushed state does not follow the saved one")

func (e *StateError) Is(target error) bool { return target == ErrStateBehind && e.Behind }

// Code is Conflict for a state that does not follow the saved one (force overrides it), else
// Invalid.
func (e *StateError) Code() errs.Code {
	if e.Behind {
		return errs.Conflict
	}
	return errs.Invalid
}

// ParseState reads b as a Terraform state: one JSON object with a positive integer version, a
// non-empty terraform_version, an integer serial of at least 0 and a non-empty lineage. `{}`, an
// array or a truncated file is refused with the first field at fault.
func ParseState(b []byte) (StateMeta, error) {
	b = bytes.TrimSpace(b)
	var raw map[string]stateValue
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &raw) != nil {
		return StateMeta{}, &StateError{Field: "body", Detail: "must be a Terraform state: a JSON object"}
	}
	var m StateMeta
	field := func(name string, into any, valid func() bool, want string) error {
		v, ok := raw[name]
		if !ok || string(v.raw) == "null" {
			return &StateError{Field: name, Detail: "is missing: a Terraform state has " + want}
		}
		if v.long || json.Unmarshal(v.raw, into) != nil || !valid() {
			return &StateError{Field: name, Detail: fmt.Sprintf("must be %s, got %s", want, kindOf(v.raw))}
		}
		return nil
	}
	for _, err := range []error{
		field("version", &m.Version, func() bool { return m.Version > 0 }, "a positive integer (4 for the Terraform versions Hangar runs)"),
		field("terraform_version", &m.TerraformVersion, func() bool { return m.TerraformVersion != "" }, "the version of Terraform that wrote it (a non-empty string)"),
		field("serial", &m.Serial, func() bool { return true }, "an integer of at least 0"),
		field("lineage", &m.Lineage, func() bool { return m.Lineage != "" }, "a non-empty string (the state's lineage)"),
	} {
		if err != nil {
			return StateMeta{}, err
		}
	}
	return m, nil
}

// maxStateFieldBytes bounds the top-level values ParseState keeps whole: the fields it reads are
// a few bytes in any real state.
const maxStateFieldBytes = 4096

// stateValue is a top-level value of a state as ParseState keeps it: whole when it is short, else
// its first byte only (its kind), so that reading a state of many megabytes copies none of its
// resources.
type stateValue struct {
	raw  []byte
	long bool
}

func (v *stateValue) UnmarshalJSON(b []byte) error {
	if len(b) > maxStateFieldBytes {
		v.raw, v.long = []byte{b[0]}, true
		return nil
	}
	v.raw, v.long = bytes.Clone(b), false
	return nil
}

// kindOf says what kind of JSON value v is, without quoting it: a state's content is never quoted
// in an answer or a log (a wrong field could hold anything).
func kindOf(v json.RawMessage) string {
	switch v[0] {
	case '"':
		if string(v) == `""` {
			return "an empty string"
		}
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "another number"
}

// CheckPush decides whether pushed may replace saved (the latest build's state) without a build:
// pushed must be a Terraform state (ParseState), and unless force, it must follow saved — the same
// lineage and a greater serial — so that an old copy of the state, or another workspace's, does
// not silently replace the state the resources were recorded in. With no saved state, or a saved
// one that is not a Terraform state (nothing to compare with), any Terraform state is accepted.
func CheckPush(saved, pushed []byte, force bool) (StateMeta, error) {
	p, err := ParseState(pushed)
	if err != nil || force || len(saved) == 0 {
		return p, err
	}
	s, err := ParseState(saved)
	if err != nil {
		return p, nil
	}
	if p.Lineage != s.Lineage {
		return p, &StateError{Field: "lineage", Behind: true, Detail: fmt.Sprintf(
			"is %q, the saved state's is %q: this is not a newer copy of the workspace's state (another workspace's, or made anew); push it with force to replace the state anyway", p.Lineage, s.Lineage)}
	}
	if p.Serial <= s.Serial {
		return p, &StateError{Field: "serial", Behind: true, Detail: fmt.Sprintf(
			"is %d, not greater than the saved state's %d: the pushed state is not newer than the saved one (an older copy?); bump its serial after editing it, or push it with force to replace the state anyway", p.Serial, s.Serial)}
	}
	return p, nil
}
