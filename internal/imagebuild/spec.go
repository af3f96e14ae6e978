// Package imagebuild builds a workspace's image in the cluster without Docker and without
// privileges: a devcontainer.json's `build` (a Dockerfile) and `features` become one Spec, which
// `hangar image-build` executes in three init containers of the workspace's pod: prepare (the
// registry credential, no user code) fetches the features, run (in an image of the Spec's Base,
// the user's code, no credential) runs the steps in the container's root filesystem and snapshots
// what changed into one layer, and push (the credential) pushes Base plus that layer to the
// cluster's registry under the Spec's hash, so that the same definition is built once
// (docs/decisions.md, "Image builds in the cluster").
//
// Spec is the one language between the parts: internal/devcontainer (and the Dockerfile parser)
// write it, the agent runs it as a Job and names the result with Ref, and the executor reads it.
package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Version is the executor's format version: it is part of every Spec's hash, so that a change
// in what a build produces from the same Spec builds again instead of reusing an old image.
const Version = 1

// Spec is one image build: start from Base, run Steps (a Dockerfile's instructions after its
// FROM), then install Features.
type Spec struct {
	// Base is the image the build starts from and the build pod runs: the devcontainer's `image`,
	// or its Dockerfile's FROM after ARG substitution. A full reference (registry/repository:tag
	// or @digest).
	Base string `json:"base"`
	// Steps are a Dockerfile's instructions after its FROM, resolved: ARGs substituted, COPY's
	// sources read from the build context into Files.
	Steps []Step `json:"steps,omitempty"`
	// Features are the devcontainer's features, in the order the user gave them;
	// FeatureOrder is its overrideFeatureInstallOrder. The executor orders them (dependsOn,
	// installsAfter, then this order), as the Dev Containers spec says.
	Features     []Feature `json:"features,omitempty"`
	FeatureOrder []string  `json:"feature_order,omitempty"`
	// RemoteUser and ContainerUser are the devcontainer's users, given to features' install
	// scripts as _REMOTE_USER and _CONTAINER_USER (empty: root, as the spec says).
	RemoteUser    string `json:"remote_user,omitempty"`
	ContainerUser string `json:"container_user,omitempty"`
}

// Step is one Dockerfile instruction after FROM, resolved.
type Step struct {
	// Line is the instruction's first line in the Dockerfile, for messages ("Dockerfile:7").
	Line int `json:"line,omitempty"`
	// Op is one of the Op* constants.
	Op string `json:"op"`
	// Run: the argv to execute (the exec form as given; the shell form as the SHELL instruction's
	// argv plus the command, ["/bin/sh", "-c", cmd] by default). Env is what the run sees on top
	// of the image's environment at that point: the build ARGs in scope, as NAME=value.
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Copy: the files to write, already read from the build context, with --chown resolved to
	// numbers where it was given as numbers (User/Group otherwise, resolved by the executor
	// against the image's /etc/passwd and /etc/group).
	Files []File `json:"files,omitempty"`
	// Env (OpEnv) and Label (OpLabel): Key=Value. Workdir and User: Value.
	// An OpEnv's Value may name the base image's environment, which the parser does not know:
	// ${NAME} (as in ENV PATH=$PATH:/x) is NAME's value in the image's environment at that step,
	// and $$ is a literal $; the executor expands them.
	// An OpCopy's Value, when set, is the name of its one file in the build context: the copy had
	// no trailing / (COPY app.sh /usr/local/bin), so if the image has a directory at Files[0].Path
	// the file goes into it under that name, as Docker does.
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
}

// The operations a Step can be. What else a Dockerfile says (EXPOSE, CMD, ENTRYPOINT, HEALTHCHECK,
// ...) either has no meaning for a workspace, whose pod Hangar generates, or is refused by the
// parser naming the instruction and its line.
const (
	OpRun     = "run"
	OpCopy    = "copy"
	OpEnv     = "env"
	OpWorkdir = "workdir"
	OpUser    = "user"
	OpLabel   = "label"
)

// File is one file (or directory, or symlink) a COPY writes.
type File struct {
	// Path is absolute in the image, cleaned.
	Path string `json:"path"`
	// Mode is the file's permission bits and type as an fs.FileMode.
	Mode uint32 `json:"mode"`
	// Data is a regular file's content; Target a symlink's.
	Data   []byte `json:"data,omitempty"`
	Target string `json:"target,omitempty"`
	// UID and GID, or User and Group when --chown named them (looked up in the image; a User
	// without a Group has the group whose number is the user's uid, as in Docker). The parent
	// directories the image lacks are created 0755, owned like the file.
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
}

// Feature is one devcontainer feature: an OCI reference (ghcr.io/devcontainers/features/node:1)
// and the options the user gave (strings and booleans, as devcontainer.json allows).
type Feature struct {
	Ref     string         `json:"ref"`
	Options map[string]any `json:"options,omitempty"`
}

// Hash is the build's identity: SHA-256 over the Spec's canonical JSON and Version, in hex. Two
// workspaces with the same definition share one image.
func (s Spec) Hash() string {
	b, err := json.Marshal(struct {
		V    int  `json:"v"`
		Spec Spec `json:"spec"`
	}{Version, s})
	if err != nil { // strings, numbers, bytes and option values from JSON: cannot fail
		panic("imagebuild: hash a spec: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Ref is where the build's image goes: the registry repository (host[:port]/path, from the
// agent's config) and the hash as the tag.
func Ref(repository string, hash string) string {
	return strings.TrimSuffix(repository, "/") + ":" + hash
}
