package imagebuild

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// dockerFeatures are the features that run Docker in the container (docker-in-docker) or reach
// the host's daemon (docker-outside-of-docker, formerly docker-from-docker), by their id: the last
// element of the reference's path. Neither can work in a workspace, which is unprivileged and has
// no host socket, so they are refused before anything is built.
var dockerFeatures = []string{"docker-in-docker", "docker-outside-of-docker", "docker-from-docker"}

// FeatureID is a feature reference's id: the last path element, without tag or digest
// ("ghcr.io/devcontainers/features/node:1" -> "node").
func FeatureID(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	id := path.Base(ref)
	if i := strings.LastIndex(id, ":"); i >= 0 {
		id = id[:i]
	}
	return id
}

// CheckFeature says why a feature reference cannot be built ("" when it can): it must be an OCI
// reference (features are fetched from registries only, not from local folders or tarball URLs),
// and not one of the features that need Docker.
func CheckFeature(ref string) string {
	if !workspace.IsImageReference(ref) || !strings.Contains(ref, "/") {
		return fmt.Sprintf("%q is not an OCI reference such as ghcr.io/devcontainers/features/node:1: Hangar installs features from OCI registries only (not local folders or tarball URLs)", ref)
	}
	if id := FeatureID(ref); slices.Contains(dockerFeatures, id) {
		return fmt.Sprintf("%s runs Docker, and Docker cannot run in a Hangar workspace, which is unprivileged (no Docker daemon, no host socket); remove it, or build images with a remote builder", id)
	}
	return ""
}

// Check calls add for each problem of a Spec that did not come from the translator (a devfile's
// hangar.dev/image-build attribute): field is relative to the Spec ("features[0].ref").
func (s Spec) Check(add func(field, detail string)) {
	if !workspace.IsImageReference(s.Base) {
		add("base", fmt.Sprintf("must be a container image reference, got %q", s.Base))
	}
	ops := []string{OpRun, OpCopy, OpEnv, OpWorkdir, OpUser, OpLabel}
	for i, st := range s.Steps {
		if !slices.Contains(ops, st.Op) {
			add(fmt.Sprintf("steps[%d].op", i), fmt.Sprintf("must be one of %s, got %q", strings.Join(ops, ", "), st.Op))
		}
	}
	for i, f := range s.Features {
		if msg := CheckFeature(f.Ref); msg != "" {
			add(fmt.Sprintf("features[%d].ref", i), msg)
		}
		for k, v := range f.Options {
			switch v.(type) {
			case string, bool:
			default:
				add(fmt.Sprintf("features[%d].options[%q]", i, k), "must be a string or true/false")
			}
		}
	}
	for i, id := range s.FeatureOrder {
		if !slices.ContainsFunc(s.Features, func(f Feature) bool { return SameFeature(f.Ref, id) }) {
			add(fmt.Sprintf("feature_order[%d]", i), fmt.Sprintf("names %q, which is not one of the features", id))
		}
	}
	for _, u := range []struct{ f, v string }{{"remote_user", s.RemoteUser}, {"container_user", s.ContainerUser}} {
		if strings.ContainsFunc(u.v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			add(u.f, fmt.Sprintf("must be a user name, got %q", u.v))
		}
	}
}

// SameFeature reports whether the feature reference ref (with its tag or digest) is the one name
// names (overrideFeatureInstallOrder's entries), with or without a tag or digest of its own.
func SameFeature(ref, name string) bool {
	strip := func(s string) string {
		s, _, _ = strings.Cut(s, "@")
		if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
			s = s[:i]
		}
		return s
	}
	return ref == name || strip(ref) == strip(name)
}
