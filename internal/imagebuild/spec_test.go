package imagebuild

import "testing"

// The hash is the cache key: equal specs share it, and any field that changes what is built
// changes it.
func TestHashIdentifiesTheBuild(t *testing.T) {
	a := Spec{Base: "debian:12", Features: []Feature{{Ref: "ghcr.io/devcontainers/features/node:1", Options: map[string]any{"version": "20"}}}}
	b := Spec{Base: "debian:12", Features: []Feature{{Ref: "ghcr.io/devcontainers/features/node:1", Options: map[string]any{"version": "20"}}}}
	if a.Hash() != b.Hash() {
		t.Fatalf("equal specs hash differently: %s, %s", a.Hash(), b.Hash())
	}
	if len(a.Hash()) != 64 {
		t.Fatalf("hash %q is not 64 hex digits", a.Hash())
	}
	for name, c := range map[string]Spec{
		"base":    {Base: "debian:13", Features: a.Features},
		"option":  {Base: "debian:12", Features: []Feature{{Ref: a.Features[0].Ref, Options: map[string]any{"version": "22"}}}},
		"step":    {Base: "debian:12", Features: a.Features, Steps: []Step{{Op: OpRun, Args: []string{"/bin/sh", "-c", "true"}}}},
		"user":    {Base: "debian:12", Features: a.Features, RemoteUser: "vscode"},
		"nothing": {Base: "debian:12"},
	} {
		if c.Hash() == a.Hash() {
			t.Errorf("changing the %s leaves the hash %s", name, a.Hash())
		}
	}
	if got, want := Ref("10.99.0.2:5000/hangar/builds/", "abc"), "10.99.0.2:5000/hangar/builds:abc"; got != want {
		t.Errorf("Ref = %q, want %q", got, want)
	}
}
