package tfprovider

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// printMetadata writes a fake hangar that prints the metadata specification the init script gives
// the helper, and returns its path.
func printMetadata(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hangar")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nprintf '%s' \"${"+protocol.HelperMetadataEnv+"-unset}\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// helperSpec runs an init script with the fake hangar and returns the specification the helper
// got, as the helper reads it.
func helperSpec(t *testing.T, script string) (protocol.MetadataSpec, string) {
	t.Helper()
	out, err := runInit(t, script, "/usr/bin:/bin")
	if err != nil {
		t.Fatalf("the init script: %v\n%s", err, out)
	}
	if out == "unset" {
		return protocol.MetadataSpec{}, out
	}
	spec, err := protocol.ParseMetadataSpec(out)
	if err != nil {
		t.Fatalf("the helper cannot read its specification %q: %v", out, err)
	}
	return spec, out
}

const agentOutputs = `
output "id" {
  value = hangar_agent.main.id
}
output "token" {
  value     = hangar_agent.main.token
  sensitive = true
}
output "host_key" {
  value     = hangar_agent.main.host_key
  sensitive = true
}
output "init_script" {
  value     = hangar_agent.main.init_script
  sensitive = true
}
`

// A template's metadata and resources_monitoring blocks reach the helper: the init script that
// terraform gives exports them in HANGAR_HELPER_METADATA, quoted whatever they hold, as the
// specification the helper reads (defaults filled in; a disabled alert has threshold 0).
func TestAgentMetadataInInitScript(t *testing.T) {
	tf := newTFModule(t, EnvAgentToken+"=hwa_first", EnvAgentURL+"=http://127.0.0.1:1")
	bin := printMetadata(t)
	tf.write(`
resource "hangar_agent" "main" {
  hangar_binary = "` + bin + `"
  metadata {
    key          = "answer"
    display_name = "The answer's value"
    script       = "echo '42-from-template' \"$HOME\" | tr -d x"
    interval     = 30
    timeout      = 3
  }
  metadata {
    key    = "load"
    script = "cut -d ' ' -f 1 /proc/loadavg"
  }
  resources_monitoring {
    memory {
      enabled   = true
      threshold = 80
    }
    volume {
      path      = "/home/dev"
      threshold = 95
    }
    volume {
      path      = "/tmp"
      enabled   = false
      threshold = 50
    }
  }
}
` + agentOutputs)
	tf.must("init", "-input=false")
	tf.must("apply", "-input=false", "-auto-approve")
	got, raw := helperSpec(t, tf.outputs()["init_script"])
	memory := 80
	want := protocol.MetadataSpec{
		Items: []protocol.MetadataItemSpec{
			{Key: "answer", DisplayName: "The answer's value", Script: `echo '42-from-template' "$HOME" | tr -d x`, Interval: 30, Timeout: 3},
			{Key: "load", DisplayName: "load", Script: "cut -d ' ' -f 1 /proc/loadavg", Interval: 10, Timeout: 5},
		},
		Monitoring: protocol.ResourcesMonitoring{Memory: &memory, Volumes: []protocol.VolumeThreshold{{Path: "/home/dev", Threshold: 95}, {Path: "/tmp", Threshold: 0}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the helper got\n%s\nwant %+v", raw, want)
	}

	// Without the blocks, the script exports nothing: the helper's defaults.
	tf.write(`resource "hangar_agent" "main" {
  hangar_binary = "` + bin + `"
}` + agentOutputs)
	tf.must("apply", "-input=false", "-auto-approve")
	if _, raw := helperSpec(t, tf.outputs()["init_script"]); raw != "unset" {
		t.Fatalf("an agent without blocks gives the helper %q", raw)
	}
	// A disabled memory alert is threshold 0; an empty resources_monitoring block is the defaults.
	tf.write(`resource "hangar_agent" "main" {
  hangar_binary = "` + bin + `"
  resources_monitoring {
    memory {
      enabled = false
    }
  }
}` + agentOutputs)
	tf.must("apply", "-input=false", "-auto-approve")
	if got, raw := helperSpec(t, tf.outputs()["init_script"]); got.Monitoring.Memory == nil || *got.Monitoring.Memory != 0 || len(got.Monitoring.Volumes) != 0 {
		t.Fatalf("memory { enabled = false } gives the helper %s", raw)
	}
}

// A bad block is a diagnostic on its attribute: terraform names the field in the block's terms and
// points at the line that holds it.
func TestAgentMetadataBadBlockNamesTheAttribute(t *testing.T) {
	tf := newTFModule(t)
	tf.write(`resource "hangar_agent" "main" {}`)
	tf.must("init", "-input=false")
	item := func(attrs string) string { return "  metadata {\n" + attrs + "\n  }\n" }
	good := item(`    key = "ok"
    script = "true"`)
	many := func(n int, block func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(block(i))
		}
		return b.String()
	}
	volume := func(attrs string) string { return "    volume {\n" + attrs + "\n    }\n" }
	monitoring := func(blocks string) string { return "  resources_monitoring {\n" + blocks + "  }\n" }
	for _, tc := range []struct {
		name, body   string
		path, detail string
		line         string // the source line terraform shows, "" when it shows the block
	}{
		{"key", item(`    key = "Bad Key"
    script = "true"`), "metadata[0].key", `want lower-case letters, digits, '_', '.' and '-'`, `key = "Bad Key"`},
		{"duplicate key", good + item(`    key = "ok"
    script = "date"`), "metadata[1].key", `"ok" is given twice`, `key = "ok"`},
		{"empty script", good + item(`    key = "blank"
    script = "   "`), "metadata[1].script", "want a shell command", `script = "   "`},
		{"display name", item(`    key = "k"
    display_name = "two\nlines"
    script = "true"`), "metadata[0].display_name", "want one line of text", `display_name = "two\nlines"`},
		{"interval", item(`    key = "k"
    script = "true"
    interval = 86401`), "metadata[0].interval", "want seconds from 1 to 86400, got 86401", "interval = 86401"},
		{"interval overflowing a duration", item(`    key = "k"
    script = "true"
    interval = 18446744084`), "metadata[0].interval", "want seconds from 1 to 86400", "interval = 18446744084"},
		{"timeout over interval", item(`    key = "k"
    script = "true"
    interval = 5
    timeout = 10`), "metadata[0].timeout", "10 s is longer than its interval (5 s)", "timeout = 10"},
		{"too many", many(protocol.MaxMetadataItems+1, func(i int) string {
			return item("    key = \"k" + strconv.Itoa(i) + "\"\n    script = \"true\"")
		}), "metadata", "17 commands; at most 16", ""},
		{"memory threshold", monitoring(`    memory {
      threshold = 150
    }
`), "resources_monitoring.memory.threshold", "want a percentage from 0 (off) to 100, got 150", "threshold = 150"},
		{"memory on at 0", monitoring(`    memory {
      enabled = true
      threshold = 0
    }
`), "resources_monitoring.memory.threshold", "want a percentage from 1 to 100 for an alert that is on (enabled = false turns it off), got 0", "threshold = 0"},
		{"volume path", monitoring(volume(`      path = "home/dev"`)), "resources_monitoring.volume[0].path", `want an absolute path of at most 512 bytes, got "home/dev"`, `path = "home/dev"`},
		{"volume threshold", monitoring(volume(`      path = "/"`) + volume(`      path = "/tmp"
      threshold = -1`)), "resources_monitoring.volume[1].threshold", "want a percentage from 0 (off) to 100, got -1", "threshold = -1"},
		{"too many volumes", monitoring(many(protocol.MaxMonitoredVolumes+1, func(i int) string {
			return volume("      path = \"/v" + strconv.Itoa(i) + "\"")
		})), "resources_monitoring.volume", "9 volumes; at most 8", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf.write("resource \"hangar_agent\" \"main\" {\n" + tc.body + "}\n")
			out, code := tf.run(true, nil, "validate", "-json")
			var res struct {
				Diagnostics []struct {
					Severity, Summary, Detail string
					Snippet                   *struct {
						Code string `json:"code"`
					} `json:"snippet"`
				} `json:"diagnostics"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("terraform validate -json: %v\n%s", err, out)
			}
			if code == 0 || len(res.Diagnostics) != 1 {
				t.Fatalf("terraform validate: exit %d, want one error:\n%s", code, out)
			}
			d := res.Diagnostics[0]
			if d.Severity != "error" || !strings.HasPrefix(d.Detail, tc.path+": ") || !strings.Contains(d.Detail, tc.detail) {
				t.Fatalf("the diagnostic is %s %q: %q\nwant %q naming %s", d.Severity, d.Summary, d.Detail, tc.detail, tc.path)
			}
			if tc.line != "" && (d.Snippet == nil || !strings.Contains(d.Snippet.Code, tc.line)) {
				t.Fatalf("terraform shows %+v, want the line %q", d.Snippet, tc.line)
			}
		})
	}
}

// A change of the blocks rewrites the init script in place: the agent keeps its id, token and host
// key (users' known_hosts pin the key), and the machine that runs the script is made anew; a
// change that asks the helper nothing new, and an agent whose state predates the blocks, plan no
// change at all.
func TestAgentMetadataChangeRewritesTheInitScript(t *testing.T) {
	tf := newTFModule(t, EnvAgentToken+"=hwa_first", EnvAgentURL+"=http://127.0.0.1:1")
	bin := printMetadata(t)
	module := func(blocks string) {
		tf.write(`resource "hangar_agent" "main" {
  hangar_binary = "` + bin + `"
` + blocks + `}
# The machine, made anew when the script changes (as hangar_kubernetes_pod's init_script does).
resource "terraform_data" "machine" {
  triggers_replace = sha256(hangar_agent.main.init_script)
}
output "machine" {
  value = terraform_data.machine.id
}
` + agentOutputs)
	}
	// plan says whether the module has changes and what it would do to the agent.
	plan := func() (int, string) {
		t.Helper()
		_, code := tf.run(false, nil, "plan", "-input=false", "-detailed-exitcode", "-out=tfplan")
		var p struct {
			ResourceChanges []struct {
				Address string
				Change  struct{ Actions []string }
			} `json:"resource_changes"`
		}
		if err := json.Unmarshal([]byte(tf.must("show", "-json", "tfplan")), &p); err != nil {
			t.Fatal(err)
		}
		for _, rc := range p.ResourceChanges {
			if rc.Address == "hangar_agent.main" {
				return code, strings.Join(rc.Change.Actions, ",")
			}
		}
		return code, ""
	}
	module("")
	tf.must("init", "-input=false")
	tf.must("apply", "-input=false", "-auto-approve")
	first := tf.outputs()

	// A state written before the blocks existed (the provider's previous version) has neither
	// attribute: nothing changes, so running workspaces keep their machines.
	stateFile := filepath.Join(tf.dir, "terraform.tfstate")
	b, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(b, &state); err != nil {
		t.Fatal(err)
	}
	stripped := 0
	for _, r := range state["resources"].([]any) {
		if r.(map[string]any)["type"] == "hangar_agent" {
			attrs := r.(map[string]any)["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
			for _, k := range []string{"metadata", "resources_monitoring"} {
				if _, ok := attrs[k]; ok {
					delete(attrs, k)
					stripped++
				}
			}
		}
	}
	if b, err = json.Marshal(state); err != nil || stripped != 2 {
		t.Fatalf("the state's agent has %d of the blocks' attributes (%v)", stripped, err)
	}
	if err := os.WriteFile(stateFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, action := plan(); code != 0 {
		t.Fatalf("an agent whose state predates the blocks plans a change: %s", action)
	}

	// The next build has a token and URL of its own; the agent keeps its token.
	next := []string{EnvAgentToken + "=hwa_second", EnvAgentURL + "=http://127.0.0.1:2"}
	tf.env = append(tf.env, next...)
	module(`  metadata {
    key    = "answer"
    script = "echo 42"
  }
`)
	if code, action := plan(); code != 2 || action != "update" {
		t.Fatalf("adding a metadata block plans %q (exit %d), want an update in place", action, code)
	}
	tf.must("apply", "-input=false", "-auto-approve", "tfplan")
	second := tf.outputs()
	for _, k := range []string{"id", "token", "host_key"} {
		if second[k] != first[k] || second[k] == "" {
			t.Errorf("%s changed from %q to %q", k, first[k], second[k])
		}
	}
	if second["machine"] == first["machine"] {
		t.Error("the machine was not made anew with the new init script")
	}
	spec, raw := helperSpec(t, second["init_script"])
	if len(spec.Items) != 1 || spec.Items[0].Script != "echo 42" {
		t.Fatalf("after the change, the helper gets %s", raw)
	}
	for _, want := range []string{"HANGAR_HELPER_TOKEN='hwa_first'", "--connect-url 'http://127.0.0.1:2'"} {
		if !strings.Contains(second["init_script"], want) {
			t.Errorf("the rewritten init script lacks %q:\n%s", want, second["init_script"])
		}
	}

	// Saying explicitly what the defaults are asks the helper nothing new: the agent's blocks are
	// updated, its script and the machine are not.
	module(`  metadata {
    key          = "answer"
    display_name = "answer"
    script       = "echo 42"
    interval     = 10
  }
  resources_monitoring {}
`)
	if code, action := plan(); code != 2 || action != "update" {
		t.Fatalf("restating the defaults plans %q (exit %d)", action, code)
	}
	tf.must("apply", "-input=false", "-auto-approve", "tfplan")
	if third := tf.outputs(); third["init_script"] != second["init_script"] || third["machine"] != second["machine"] {
		t.Error("restating the defaults rewrote the init script or remade the machine")
	}
	if code, action := plan(); code != 0 {
		t.Fatalf("an unchanged module plans %q", action)
	}
}
