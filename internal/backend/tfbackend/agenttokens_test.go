package tfbackend

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const agentState = `{"version":4,"resources":[
 {"mode":"managed","type":"hangar_agent","name":"main","provider":"provider[\"hangar.dev/hangar/hangar\"]","instances":[{"attributes":{"id":"a","token":"hwa_one"}},{"attributes":{"token":"hwa_two"}}]},
 {"mode":"managed","type":"hangar_agent","name":"other","provider":"provider[\"example.com/x/hangar\"]","instances":[{"attributes":{"token":"hwa_foreign"}}]},
 {"mode":"data","type":"hangar_agent","name":"d","provider":"provider[\"hangar.dev/hangar/hangar\"]","instances":[{"attributes":{"token":"hwa_data"}}]},
 {"mode":"managed","type":"terraform_data","name":"m","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"attributes":{"token":"hwa_notagent"}}]},
 {"mode":"managed","type":"hangar_agent","name":"odd","provider":"provider[\"hangar.dev/hangar/hangar\"]","instances":[{"attributes":{"token":"hgu_user"}},{"attributes":{"token":42}}]}
]}`

// AgentTokens finds the tokens of Hangar's hangar_agent resources, and nothing else.
func TestAgentTokens(t *testing.T) {
	got, err := AgentTokens([]byte(agentState))
	if err != nil || !slices.Equal(got, []string{"hwa_one", "hwa_two"}) {
		t.Fatalf("AgentTokens = %q, %v", got, err)
	}
	for _, empty := range []string{"", "  \n"} {
		if got, err := AgentTokens([]byte(empty)); err != nil || got != nil {
			t.Fatalf("AgentTokens(%q) = %q, %v; want none", empty, got, err)
		}
	}
	if _, err := AgentTokens([]byte(`{"resources": 3}`)); err == nil || !strings.Contains(err.Error(), "terraform state") {
		t.Fatalf("a malformed state: %v", err)
	}
}

// FuzzAgentTokens: any input is an answer or an error, never a panic; every token returned is a
// helper token that appears in the input, and a state built from the tokens returns them again.
func FuzzAgentTokens(f *testing.F) {
	f.Add([]byte(agentState))
	f.Add([]byte(`{"resources":[{"mode":"managed","type":"hangar_agent","provider":"\"hangar.dev/hangar/hangar\"","instances":[{"attributes":{"token":"hwa_\u0000"}}]}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, state []byte) {
		got, err := AgentTokens(state)
		if err != nil {
			return
		}
		if len(got) > maxAgentTokens {
			t.Fatalf("%d tokens", len(got))
		}
		type inst struct {
			Attributes map[string]string `json:"attributes"`
		}
		res := map[string]any{"mode": "managed", "type": "hangar_agent", "provider": `provider["hangar.dev/hangar/hangar"]`}
		var insts []inst
		for _, tok := range got {
			if !strings.HasPrefix(tok, "hwa_") {
				t.Fatalf("token %q lacks the prefix", tok)
			}
			insts = append(insts, inst{Attributes: map[string]string{"token": tok}})
		}
		res["instances"] = insts
		b, _ := json.Marshal(map[string]any{"version": 4, "resources": []any{res}})
		again, err := AgentTokens(b)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("round trip: %q, %v; want %q", again, err, got)
		}
	})
}
