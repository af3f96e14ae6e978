package devfile

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/devfile/api/v2/pkg/apis/workspaces/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// The web editor Hangar injects when a devfile asks for it (docs/decisions.md "The web editor"):
// code-server, a VS Code built for the browser, from EditorImage, which scripts/build-editor-image
// builds as a self-contained bundle (its Node.js, loader and libraries) at EditorDir. When the main
// container asks for it and runs the helper, an init container (EditorInstallContainerName) copies
// the bundle into the pod and the main container's helper runs it there, so that its terminal has
// the project's image and toolchain; otherwise it runs in a container of its own
// (EditorContainerName). Either way it serves the data volume at the PROJECTS_ROOT of the container
// that asked for it, opens PROJECT_SOURCE, and listens on EditorPort, a public endpoint: the
// workspace URL opens it, through the access proxy, which authenticates (the editor's own password
// is off, and the NetworkPolicy admits the proxy's pods only).
const (
	EditorContainerName = "hangar-editor"
	// EditorImage is code-server 4.139.1 on Node.js 24.21.0 (scripts/build-editor-image).
	EditorImage = "hangar.local/code-server:4.139.1"
	// EditorPort is GitLab's editor port.
	EditorPort         = 60001
	EditorEndpointName = "hangar-editor"
	// EditorBinary runs code-server in EditorImage.
	EditorBinary = "/usr/local/bin/code-server"
	// EditorDir is the editor's bundle, in EditorImage and, copied, in the main container: Node.js
	// (whose loader and libraries are the bundle's own, so it runs in any image), code-server.
	EditorDir = "/hangar/editor"
	// EditorInstallContainerName is the init container that copies the bundle into the pod.
	EditorInstallContainerName = "hangar-editor-install"
	editorVolume               = "hangar-editor"
	editorVolumeSize           = "1Gi"
	editorInstallMount         = "/mnt/hangar-editor"
	// EditorCodeServer is the value of EditorAttribute that asks for code-server; EditorNone
	// declines the editor gl/inject-editor would bring.
	EditorCodeServer = "code-server"
	EditorNone       = "none"
)

// HasEditor reports whether the workspace gets the web editor.
func (d *Devfile) HasEditor() bool { return d.editor }

// EditorInMain reports whether the web editor runs inside the main container (run by its helper),
// not in a container of its own (EditorContainerName).
func (d *Devfile) EditorInMain() bool { return d.editorInMain }

// injectEditor appends the editor container when a container component asks for it: the one whose
// EditorAttribute is code-server, else the first whose gl/inject-editor is true and whose
// EditorAttribute is not none. An endpoint on EditorPort leaves it out, with a warning (GitLab's
// devfiles as GitLab stores them after injecting its own editor have one). fields[i] is
// devfile.components[n] of d.containers[i].
func (d *Devfile) injectEditor(v *workspace.ValidationError, comps map[string]*componentInfo, fields []string) {
	asking, byGitLab := -1, -1
	infos := slices.SortedFunc(maps.Values(comps), func(a, b *componentInfo) int { return a.index - b.index })
	for _, info := range infos {
		if !info.attrs.Exists(EditorAttribute) {
			continue
		}
		f := fmt.Sprintf("devfile.components[%d].attributes[%q]", info.index, EditorAttribute)
		var err error
		switch val := info.attrs.GetString(EditorAttribute, &err); {
		case err != nil || val != EditorCodeServer && val != EditorNone:
			v.Add(f, "must be %q (inject the web editor) or %q (none, even with %s)", EditorCodeServer, EditorNone, GitLabMainAttribute)
		case info.initOnly && val == EditorCodeServer:
			v.Add(f, "asks for the editor on a component that runs as an init container (a preStart event applies it); put it on a container that keeps running")
		}
	}
	for i := range d.containers {
		info := comps[d.containers[i].name]
		var err error
		switch val := info.attrs.GetString(EditorAttribute, &err); {
		case val == EditorCodeServer:
			if asking >= 0 {
				v.Add(fmt.Sprintf("%s.attributes[%q]", fields[i], EditorAttribute), "%s already asks for the editor; ask once", fields[asking])
			} else {
				asking = i
			}
		case val == EditorNone:
		default:
			if gl, _ := info.boolAttr(GitLabMainAttribute); gl && byGitLab < 0 {
				byGitLab = i
			}
		}
	}
	if asking < 0 {
		asking = byGitLab
	}
	if asking < 0 {
		return
	}
	for i, c := range d.containers {
		for _, ep := range c.endpoints {
			if ep.port == EditorPort {
				d.warnings = append(d.warnings, fmt.Sprintf("%s (%q) has an endpoint on port %d, the port of Hangar's web editor, so the editor %s asks for is not injected", strings.TrimPrefix(fields[i], "devfile."), c.name, EditorPort, strings.TrimPrefix(fields[asking], "devfile.")))
				return
			}
		}
	}
	d.editor = true
	if asking == d.main && d.helper && d.containers[asking].mountSources {
		// Inside the main container, run by its helper.
		m := &d.containers[d.main]
		m.editor = &workspace.EditorProcess{Argv: editorArgv(*m, d.source, EditorDir+"/bin/node", EditorDir+"/node_modules/code-server/out/node/entry.js"), Port: EditorPort}
		m.endpoints = append(slices.Clip(m.endpoints), endpoint{name: EditorEndpointName, port: EditorPort, protocol: corev1.ProtocolTCP, exposure: v1alpha2.PublicEndpointExposure})
		q := func(s string) resource.Quantity { return resource.MustParse(s) }
		m.extraReq = corev1.ResourceList{corev1.ResourceCPU: q(editorCPURequest), corev1.ResourceMemory: q(editorMemoryRequest)}
		m.extraLimit = corev1.ResourceList{corev1.ResourceCPU: q(editorCPULimit), corev1.ResourceMemory: q(editorMemoryLimit)}
		d.editorInMain = true
		return
	}
	reason := "the main container does not run Hangar's helper"
	switch {
	case asking != d.main:
		reason = "it is not the main container"
	case !d.containers[asking].mountSources:
		reason = "it does not mount the project sources (mountSources: false), which the editor serves"
	}
	d.warnings = append(d.warnings, fmt.Sprintf("the web editor runs in a container of its own beside %q (%s), so its terminal has the editor image's tools, not that container's", d.containers[asking].name, reason))
	d.containers = append(d.containers, editorContainer(d.containers[asking], d.source))
}

// What the editor needs, in its own container or on top of the main container's resources.
const (
	editorCPURequest, editorCPULimit       = "100m", "1"
	editorMemoryRequest, editorMemoryLimit = "256Mi", "1Gi"
)

// editorRoot is the PROJECTS_ROOT the editor serves for c, the container that asked for it, and
// the volume mounts that put it there in a container of the editor's own.
func editorRoot(c container) (string, []corev1.VolumeMount) {
	root := projectsPath
	var mounts []corev1.VolumeMount
	if c.mountSources {
		root = c.sourcePath
		if c.ownSources {
			for _, m := range c.mounts {
				if m.MountPath == root {
					mounts = append(mounts, m)
				}
			}
		}
	}
	return root, mounts
}

// editorArgv runs code-server (node and its entry script) for c: its configuration, settings and
// extensions kept on the data volume under .hangar/code-server, PROJECT_SOURCE open.
func editorArgv(c container, source string, program ...string) []string {
	root, _ := editorRoot(c)
	state := editorState(root)
	return slices.Concat(program, []string{
		"--bind-addr", "0.0.0.0:" + strconv.Itoa(EditorPort),
		"--auth", "none", // the access proxy authenticates; the NetworkPolicy admits only it
		"--disable-telemetry", "--disable-update-check",
		// Everything it keeps is on the volume: the image's HOME may not be writable.
		"--config", path.Join(state, "config.yaml"),
		"--user-data-dir", path.Join(state, "data"),
		"--extensions-dir", path.Join(state, "extensions"),
		path.Join(root, source)})
}

// editorState is where the web editor keeps its configuration, settings and extensions, under
// the PROJECTS_ROOT root of the container that asked for it.
func editorState(root string) string { return path.Join(root, ".hangar", "code-server") }

// EditorSettingsFile is the web editor's user settings.json when the container that asks for it
// has its PROJECTS_ROOT at root (devcontainer.json's customizations.vscode.settings go there).
func EditorSettingsFile(root string) string {
	return path.Join(editorState(root), "data", "User", "settings.json")
}

// editorInstallContainer is the init container that copies the editor's bundle from EditorImage
// into the pod (the editorVolume emptyDir, which the main container mounts at EditorDir).
func editorInstallContainer() container {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	return container{
		name:          EditorInstallContainerName,
		image:         EditorImage,
		command:       []string{"/bin/cp", "-R", EditorDir + "/.", editorInstallMount + "/"},
		mounts:        []corev1.VolumeMount{{Name: editorVolume, MountPath: editorInstallMount}},
		cpuRequest:    q("10m"),
		cpuLimit:      q("1"),
		memoryRequest: q("64Mi"),
		memoryLimit:   q("256Mi"),
		logsAsMessage: true,
	}
}

// editorContainer is code-server beside c, the container that asked for it: the same data volume at
// the same PROJECTS_ROOT (or c's own volume there), its settings and extensions kept on that volume
// under .hangar/code-server, and PROJECT_SOURCE open.
func editorContainer(c container, source string) container {
	root, mounts := editorRoot(c)
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	return container{
		name:         EditorContainerName,
		image:        EditorImage,
		command:      editorArgv(c, source, EditorBinary),
		endpoints:    []endpoint{{name: EditorEndpointName, port: EditorPort, protocol: corev1.ProtocolTCP, exposure: v1alpha2.PublicEndpointExposure}},
		mounts:       mounts,
		mountSources: true,
		ownSources:   len(mounts) > 0,
		sourcePath:   root,
		// Enough for the editor and a few extensions; the workspace's own tools run elsewhere.
		cpuRequest:    q(editorCPURequest),
		cpuLimit:      q(editorCPULimit),
		memoryRequest: q(editorMemoryRequest),
		memoryLimit:   q(editorMemoryLimit),
		// Ready when it answers: until then the proxy says "not running" instead of failing to
		// connect, and the workspace is not Running.
		readiness: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(EditorPort)}},
			PeriodSeconds:    2,
			FailureThreshold: 3,
		},
	}
}
