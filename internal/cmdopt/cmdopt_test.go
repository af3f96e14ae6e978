package cmdopt

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

type testConfig struct{ Name, Every, Count, Debug, Scopes string }

// testCommand is a command with one option of each kind; run records what RunE saw.
func testCommand(seen *testConfig) *cobra.Command {
	var cfg testConfig
	cmd := &cobra.Command{
		Use:           "thing",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			*seen = cfg
			return nil
		},
	}
	RegisterWithFile(cmd, "THING_CONFIG", []Option{
		String(&cfg.Name, "name", "THING_NAME", "default-name", "the thing's name (from `hangar things create`)").Arg("NAME"),
		Duration(&cfg.Every, "every", "THING_EVERY", "1m", "how often"),
		Int(&cfg.Count, "count", "THING_COUNT", "3", "how many"),
		Bool(&cfg.Debug, "debug", "THING_DEBUG", "false", "say more"),
		List(&cfg.Scopes, "scopes", "THING_SCOPES", "a,b", "which scopes"),
	})
	return cmd
}

func run(t *testing.T, args ...string) (testConfig, error) {
	t.Helper()
	var seen testConfig
	cmd := testCommand(&seen)
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return seen, err
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "thing.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each option takes the flag if given, else the environment variable, else the config file, else
// the default; each source is tried for every option on its own.
func TestPrecedenceFlagEnvFileDefault(t *testing.T) {
	file := writeFile(t, "name: from-file\nevery: 5m\ncount: 7\ndebug: true\nscopes: [x, y]\n")

	got, err := run(t)
	if err != nil {
		t.Fatal(err)
	}
	if want := (testConfig{"default-name", "1m", "3", "false", "a,b"}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}

	got, err = run(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if want := (testConfig{"from-file", "5m", "7", "true", "x,y"}); got != want {
		t.Errorf("file over defaults: got %+v, want %+v", got, want)
	}

	t.Setenv("THING_NAME", "from-env")
	t.Setenv("THING_COUNT", "9")
	got, err = run(t, "--config", file, "--count", "11", "--every=2s")
	if err != nil {
		t.Fatal(err)
	}
	// name: env over file; count: flag over env; every: flag over file; debug, scopes: file.
	if want := (testConfig{"from-env", "2s", "11", "true", "x,y"}); got != want {
		t.Errorf("flag > env > file: got %+v, want %+v", got, want)
	}

	// The file may come from the environment variable too; an explicit --config wins over it.
	t.Setenv("THING_CONFIG", writeFile(t, "every: 9h\n"))
	got, err = run(t)
	if err != nil {
		t.Fatal(err)
	}
	if got.Every != "9h" {
		t.Errorf("THING_CONFIG: every = %q, want 9h", got.Every)
	}
	got, err = run(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if got.Every != "5m" {
		t.Errorf("--config over THING_CONFIG: every = %q, want 5m", got.Every)
	}

	// A bare bool flag is true; an empty variable of a text option is an empty value, as before;
	// an empty variable of a duration or number is not given (the file's value, else the default).
	t.Setenv("THING_NAME", "")
	t.Setenv("THING_COUNT", "")
	t.Setenv("THING_CONFIG", "")
	got, err = run(t, "--debug")
	if err != nil {
		t.Fatal(err)
	}
	if got.Debug != "true" || got.Name != "" || got.Count != "3" || got.Every != "1m" {
		t.Errorf("--debug, THING_NAME=\"\", THING_COUNT=\"\": got %+v", got)
	}
	got, err = run(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != "7" {
		t.Errorf("THING_COUNT=\"\" with a file: count %q, want the file's 7", got.Count)
	}
}

// A value of the wrong kind, or a key no option has, is refused with an error naming the flag,
// the variable or the file and key.
func TestErrorsNameTheSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		file string
		args []string
		want string
	}{
		{name: "flag duration", args: []string{"--every", "5"}, want: `invalid argument "5" for "--every" flag: want a duration such as 90s, 5m or 1h30m, got "5"`},
		{name: "flag int", args: []string{"--count", "many"}, want: `invalid argument "many" for "--count" flag: want a whole number, got "many"`},
		{name: "env int", env: map[string]string{"THING_COUNT": "2.5"}, want: `environment variable THING_COUNT (--count): want a whole number, got "2.5"`},
		{name: "env bool", env: map[string]string{"THING_DEBUG": "yes please"}, want: `environment variable THING_DEBUG (--debug): want true or false, got "yes please"`},
		{name: "file unknown key", file: "name: x\nevry: 5m\n", want: `unknown key "evry"`},
		{name: "file duration", file: "every: 10\n", want: `key "every" (--every): want a duration such as 90s, 5m or 1h30m, got "10"`},
		{name: "file list for a value", file: "count: [1, 2]\n", want: `key "count" (--count): want a single value, got a list`},
		{name: "file mapping", file: "name: {first: a}\n", want: `key "name": want a value, got a mapping`},
		{name: "file null", file: "name:\n", want: `key "name": no value (null)`},
		{name: "file not a mapping", file: "- name\n", want: "want a mapping of option names to values"},
		{name: "file not YAML", file: "name: [unclosed\n", want: "not YAML"},
		{name: "file comma in a list item", file: "scopes: [\"a,b\"]\n", want: `key "scopes" (--scopes): an item may not hold a comma`},
		{name: "file missing", args: []string{"--config", "/nonexistent/thing.yaml"}, want: "config file: open /nonexistent/thing.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file != "" {
				p := writeFile(t, tc.file)
				args = append(args, "--config", p)
				tc.want = strings.ReplaceAll(tc.want, "FILE", p)
			}
			_, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
			if tc.file != "" && !strings.Contains(err.Error(), "config file "+args[len(args)-1]) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// A file larger than MaxFileBytes is refused before it is decoded.
func TestFileSizeLimit(t *testing.T) {
	p := writeFile(t, "name: "+strings.Repeat("x", MaxFileBytes)+"\n")
	_, err := run(t, "--config", p)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v, want the size limit", err)
	}
}

// --help shows each option's kind or placeholder, never a backquoted phrase of the help text, and
// the defaults rather than the environment's values.
func TestHelpShowsKindsAndPlaceholders(t *testing.T) {
	t.Setenv("THING_COUNT", "42")
	var seen testConfig
	cmd := testCommand(&seen)
	usage := cmd.Flags().FlagUsages()
	for _, want := range []string{
		"--name NAME ", "the thing's name (from 'hangar things create') (env THING_NAME)",
		"--every duration ", "--count int ", "(default 3)", "--debug ", "--scopes strings ", "--config FILE ",
	} {
		if !strings.Contains(usage, want) {
			t.Errorf("help lacks %q:\n%s", want, usage)
		}
	}
	if strings.Contains(usage, "42") {
		t.Errorf("help shows the environment's value as the default:\n%s", usage)
	}
}

// Repeated keys are an error, not a silent last-one-wins.
func TestDecodeRepeatedKey(t *testing.T) {
	if _, err := Decode([]byte("name: a\nname: b\n")); err == nil {
		t.Fatal("a repeated key was accepted")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "name: a\n", "every: 5m\ncount: 7\ndebug: true\nscopes: [x, y]\n", "{\"name\": 1.5}", "- a\n",
		"a: &x [1]\nb: *x\n", "name:\n", "a: {b: c}\n", "a: !!binary aGk=\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if m != nil {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		for k, v := range m {
			if v.IsList && v.Text != "" || !v.IsList && v.List != nil {
				t.Fatalf("key %q: both a list and a scalar: %+v", k, v)
			}
		}
	})
}
