package tfmodule

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// inspectChildEnv, when set, makes the test binary a child that inspects the archive in the file it
// names, prints the outcome as JSON and exits: the parent reads the child's peak memory (its
// maximum resident set) from the operating system, which counts everything the inspection made
// the process hold, garbage the collector had not yet returned included.
const inspectChildEnv = "HANGAR_TFMODULE_INSPECT_ARCHIVE"

type childOutcome struct {
	Err       string   `json:"err"`
	Variables []string `json:"variables"`
}

func TestMain(m *testing.M) {
	if p := os.Getenv(inspectChildEnv); p != "" {
		archive, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var out childOutcome
		mod, err := Inspect(archive)
		if err != nil {
			out.Err = err.Error()
		}
		out.Variables = mod.Variables
		_ = json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// inspectInChild inspects archive in a child process and returns the outcome and the child's peak
// resident memory in bytes.
func inspectInChild(t *testing.T, archive []byte) (childOutcome, int64) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "module.tar.gz")
	if err := os.WriteFile(p, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), inspectChildEnv+"="+p)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, stderr.String())
	}
	var out childOutcome
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("child output %q: %v", stdout, err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no resource usage of the child")
	}
	return out, ru.Maxrss << 10 // kilobytes on Linux
}

// maxInspectRSS is the most memory inspecting any archive within the limits may take, the process
// included: what a server can afford for a template push.
const maxInspectRSS = 200 << 20

// TestInspectMemoryIsBounded: the archives that cost the server gigabytes before (8 MiB of nested
// parentheses in an archive of a few KiB peaked at 2.97 GB; 4 MiB of newlines was accepted at
// 1.72 GB) are refused, naming the file and the limit, and the worst archives within the limits
// (the most token-dense files of MaxConfigFileBytes, one or many; a gzip bomb as large as MaxBytes)
// peak under maxInspectRSS.
func TestInspectMemoryIsBounded(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	at := func(prefix, unit, suffix string) string { // as many units as fit in one file
		return prefix + strings.Repeat(unit, (MaxConfigFileBytes-len(prefix)-len(suffix))/len(unit)) + suffix
	}
	tokenDense := at("variable \"v\" {\n  default = [", "1,", "]\n}\n")
	var manyFiles []tarEntry
	for i := range 40 {
		manyFiles = append(manyFiles, tarEntry{name: fmt.Sprintf("f%02d.tf", i), body: at(fmt.Sprintf("locals {\n  l%d = [", i), "{},", "]\n}\n")})
	}
	manyFiles = append(manyFiles, tarEntry{name: "vars.tf", body: tokenDense})
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		wantErr []string // substrings of the error; none when the module is accepted
	}{
		{"8 MiB of nested parentheses", []tarEntry{{name: "main.tf", body: "x = " + strings.Repeat("(", 8*mib)}},
			[]string{"main.tf is 8388612 bytes", "at most 262144 bytes (256 KiB)"}},
		{"4 MiB of newlines", []tarEntry{{name: "main.tf", body: strings.Repeat("\n", 4*mib)}},
			[]string{"main.tf is 4194304 bytes", "at most 262144 bytes"}},
		{"a tfvars file too large", []tarEntry{{name: "main.tf", body: `variable "v" {}`}, {name: "sub/terraform.tfvars", body: strings.Repeat("\n", MaxConfigFileBytes+1)}},
			[]string{"sub/terraform.tfvars is 262145 bytes"}},
		{"nested parentheses at the limit", []tarEntry{{name: "main.tf", body: at("x = ", "(", "")}}, []string{"main.tf:1: nested more than 1000 levels"}},
		{"newlines at the limit", []tarEntry{{name: "main.tf", body: at(`variable "v" {}`, "\n", "")}}, nil},
		{"a token-dense default at the limit", []tarEntry{{name: "main.tf", body: tokenDense}}, nil},
		{"a token-dense JSON default at the limit", []tarEntry{{name: "main.tf.json", body: at(`{"variable": {"v": {"default": [`, "1,", `1]}}}`)}}, nil},
		{"variables at the limit", []tarEntry{{name: "main.tf", body: at("", "# hangar:mutable\nvariable \"v\" {}\n", "")}}, nil},
		{"41 token-dense files at the limit", manyFiles, nil},
		{"a gzip bomb as large as the module limit", []tarEntry{{name: "main.tf", body: `variable "v" {}`}, {name: "zeros.bin", size: MaxBytes - int64(len(`variable "v" {}`))}}, nil},
		{"a gzip bomb over the module limit", []tarEntry{{name: "main.tf", body: `variable "v" {}`}, {name: "zeros.bin", size: MaxBytes}}, []string{`"zeros.bin"`, "larger than 100 MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive := makeArchive(t, tc.entries...)
			out, peak := inspectInChild(t, archive)
			t.Logf("archive %d bytes, peak resident memory %.1f MiB, error %q", len(archive), float64(peak)/mib, out.Err)
			if len(tc.wantErr) == 0 && out.Err != "" {
				t.Errorf("Inspect refused the module: %s", out.Err)
			}
			if len(tc.wantErr) > 0 && out.Err == "" {
				t.Errorf("Inspect accepted the module (variables %q)", out.Variables)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(out.Err, w) {
					t.Errorf("error %q does not contain %q", out.Err, w)
				}
			}
			if peak > maxInspectRSS {
				t.Errorf("peak resident memory %.1f MiB, want at most %d MiB", float64(peak)/mib, maxInspectRSS>>20)
			}
		})
	}
}
