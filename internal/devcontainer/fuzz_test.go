package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/workspace"
)

var fuzzSeeds = []string{
	`{"image":"i"}`,
	"// c\n{\"image\": \"i\", /* x */ \"forwardPorts\": [1, \"2\",],}",
	`{"image":"i","remoteUser":"root","runArgs":["--privileged","-e","A=1"],"mounts":["type=bind,source=/,target=/x"]}`,
	`{"image":"i","postCreateCommand":{"a":["x","y"],"b":"z"},"hostRequirements":{"cpus":1.5,"memory":"1.5gb"}}`,
	`{"image":"${localEnv:X:y}","workspaceMount":"source=${localWorkspaceFolder},target=/w,type=bind","workspaceFolder":"/w"}`,
	`{"a": "\"//", "b": [[[{}]]], "c": "/*"}`,
	`{"image":"debian:12","features":{"ghcr.io/devcontainers/features/node:1":"20","ghcr.io/a/b/c:1":{"x":true,"n":3}},"overrideFeatureInstallOrder":["ghcr.io/a/b/c"]}`,
	`{"image":"debian:12","features":{"./local":{},"ghcr.io/devcontainers/features/docker-in-docker:2":{},"a/b":false}}`,
	`[`, `{"image":"i"`, `/*`, `"\`,
}

// FuzzStandardize: the JSONC reader never panics, keeps the text's length (so that line numbers
// stay the user's), and leaves plain JSON unchanged.
func FuzzStandardize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := standardize(in)
		if err != nil {
			return
		}
		if len(out) != len(in) {
			t.Fatalf("length %d, want %d", len(out), len(in))
		}
		if json.Valid(in) && !bytes.Equal(out, in) {
			t.Fatalf("plain JSON changed: %q -> %q", in, out)
		}
	})
}

// FuzzTranslate: any text is either translated into a devfile that Hangar parses, or refused with
// problems that each name a devcontainer field.
func FuzzTranslate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Translate(in, testOptions())
		if err != nil {
			var ve *workspace.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("not a ValidationError: %v", err)
			}
			for _, p := range ve.Problems {
				if !strings.HasPrefix(p.Field, "devcontainer") && !strings.HasPrefix(p.Field, "devfile") || p.Detail == "" {
					t.Fatalf("problem %q: %q names no field", p.Field, p.Detail)
				}
			}
			return
		}
		if _, err := devfile.Parse(r.Devfile); err != nil {
			t.Fatalf("the translation does not parse: %v\n%s", err, r.Devfile)
		}
	})
}

var composeSeeds = []string{
	"services:\n  app: {image: i}\n",
	templateFiles[".devcontainer/docker-compose.yml"],
	"x: &a [1, *a]\n",
	"services:\n  app:\n    image: \"${X:-y}$$\"\n    volumes: [\"..:/workspaces/demo\", \"v:/v\", /etc:/etc]\n    ports: [\"1-3:1-3/udp\"]\nvolumes: {v: }\n",
	"services: {app: !reset null}\n",
	"services:\n  app: {image: i, command: \"a 'b\"}\n  db: {image: j, user: root, privileged: true, tmpfs: /t}\n",
}

// FuzzComposeDecode: the compose reader never panics, and what it returns is bounded by
// maxComposeValues, whatever the aliases.
func FuzzComposeDecode(f *testing.F) {
	for _, s := range append(composeSeeds, laughs()) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, _, err := decodeCompose(in, map[string]string{"X": "x"})
		if err != nil {
			return
		}
		if n := countValues(m); n > maxComposeValues {
			t.Fatalf("%d values, more than %d", n, maxComposeValues)
		}
	})
}

func countValues(v any) int {
	n := 1
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += countValues(e)
		}
	case []any:
		for _, e := range x {
			n += countValues(e)
		}
	case overrideTag:
		n += countValues(x.v)
	}
	return n
}

// FuzzTranslateCompose: any compose file is either translated into a devfile that Hangar parses,
// or refused with problems that each name a devcontainer field.
func FuzzTranslateCompose(f *testing.F) {
	for _, s := range composeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Translate([]byte(templateDC), composeOptions(map[string]string{".devcontainer/docker-compose.yml": string(in)}))
		if err != nil {
			var ve *workspace.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("not a ValidationError: %v", err)
			}
			for _, p := range ve.Problems {
				if !strings.HasPrefix(p.Field, "devcontainer") && !strings.HasPrefix(p.Field, "devfile") || p.Detail == "" {
					t.Fatalf("problem %q: %q names no field", p.Field, p.Detail)
				}
			}
			return
		}
		if _, err := devfile.Parse(r.Devfile); err != nil {
			t.Fatalf("the translation does not parse: %v\n%s", err, r.Devfile)
		}
	})
}
