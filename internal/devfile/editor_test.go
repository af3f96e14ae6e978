package devfile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestEditorInjection: which devfiles get the web editor, in or beside which container, and what
// the workspace URL then opens.
func TestEditorInjection(t *testing.T) {
	const head = "schemaVersion: 2.2.0\ncomponents:\n"
	for _, tc := range []struct {
		name, devfile string
		want          bool   // the editor is injected
		inMain        bool   // in the main container, run by its helper (else beside it)
		root          string // its PROJECTS_ROOT, and the volume there
		volume        string
		open          string // the folder it opens
		url           int    // the port the workspace URL opens
		warning       string
	}{
		{"none asked", head + "  - name: dev\n    container: {image: busybox, endpoints: [{name: web, targetPort: 3000}]}\n",
			false, false, "", "", "", 3000, ""},
		{"gitlab", head + "  - name: dev\n    attributes: {gl/inject-editor: true}\n    container: {image: busybox, endpoints: [{name: web, targetPort: 3000}]}\n",
			true, true, "/projects", projectsVolume, "/projects", EditorPort, ""},
		{"hangar's attribute on a side container", head + "  - name: dev\n    container: {image: busybox}\n  - name: side\n    attributes: {hangar.dev/editor: code-server}\n    container: {image: busybox, sourceMapping: /src}\n",
			true, false, "/src", projectsVolume, "/src", EditorPort, `beside "side" (it is not the main container)`},
		{"declined", head + "  - name: dev\n    attributes: {gl/inject-editor: true, hangar.dev/editor: none}\n    container: {image: busybox, endpoints: [{name: web, targetPort: 3000}]}\n",
			false, false, "", "", "", 3000, ""},
		{"the container's own volume at its sources", head + "  - name: dev\n    attributes: {hangar.dev/editor: code-server}\n    container: {image: busybox, volumeMounts: [{name: src, path: /projects}]}\n  - name: src\n    volume: {size: 5Gi}\n",
			true, true, "/projects", "src", "/projects", EditorPort, ""},
		{"the container mounts no sources", head + "  - name: dev\n    attributes: {hangar.dev/editor: code-server}\n    container: {image: busybox, mountSources: false}\n",
			true, false, "/projects", projectsVolume, "/projects", EditorPort, "(mountSources: false)"},
		{"opens the first project", "schemaVersion: 2.2.0\nprojects: [{name: app, git: {remotes: {origin: https://git.example.com/app.git}}}]\ncomponents:\n  - name: dev\n    attributes: {gl/inject-editor: true}\n    container: {image: busybox}\n",
			true, true, "/projects", projectsVolume, "/projects/app", EditorPort, ""},
		{"port taken", head + "  - name: dev\n    attributes: {gl/inject-editor: true}\n    container: {image: busybox, endpoints: [{name: editor-server, targetPort: 60001}]}\n",
			false, false, "", "", "", EditorPort, `components[0] ("dev") has an endpoint on port 60001`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, []byte(tc.devfile))
			if tc.warning == "" && len(d.Warnings()) > 0 || tc.warning != "" && !slices.ContainsFunc(d.Warnings(), func(w string) bool { return strings.Contains(w, tc.warning) }) {
				t.Errorf("warnings %q, want %q", d.Warnings(), tc.warning)
			}
			if d.HasEditor() != tc.want {
				t.Errorf("HasEditor() = %v, want %v", d.HasEditor(), tc.want)
			}
			if port, _, _ := d.PublicEndpoint(); port != tc.url {
				t.Errorf("the workspace URL opens port %d, want %d", port, tc.url)
			}
			out, err := Generate(d, defaultParams(t))
			if err != nil {
				t.Fatal(err)
			}
			g := readBack(t, out)
			spec := g.deployment.Spec.Template.Spec
			i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == EditorContainerName })
			if (i >= 0) != (tc.want && !tc.inMain) {
				t.Fatalf("editor container at %d, want one: %v", i, tc.want && !tc.inMain)
			}
			if !tc.want {
				if strings.Contains(out, EditorImage) {
					t.Error("no editor, but its image is in the objects")
				}
				return
			}
			if tc.inMain {
				main := spec.Containers[0]
				if !slices.ContainsFunc(main.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tc.volume && m.MountPath == tc.root }) {
					t.Errorf("main mounts %v, want %s at %s", main.VolumeMounts, tc.volume, tc.root)
				}
				// Its resources are the devfile's (the agent's defaults) plus the editor's.
				if got := main.Resources.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse("256Mi")) <= 0 {
					t.Errorf("main memory request %s, want the editor's 256Mi on top of the container's", got.String())
				}
				checkEditor(t, g, spec, "dev")
				return
			}
			if i != len(spec.Containers)-1 || spec.Containers[0].Name != "dev" {
				t.Errorf("containers %v: want the devfile's, then the editor", spec.Containers)
			}
			ed := spec.Containers[i]
			if got := ed.Command[len(ed.Command)-1]; got != tc.open {
				t.Errorf("the editor opens %q, want %q", got, tc.open)
			}
			if !slices.ContainsFunc(ed.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tc.volume && m.MountPath == tc.root }) {
				t.Errorf("editor mounts %v, want %s at %s", ed.VolumeMounts, tc.volume, tc.root)
			}
			if !slices.ContainsFunc(ed.Env, func(e corev1.EnvVar) bool { return e.Name == "PROJECTS_ROOT" && e.Value == tc.root }) || len(ed.EnvFrom) != 1 {
				t.Errorf("editor env %v from %v, want PROJECTS_ROOT %s and the workspace's variables", ed.Env, ed.EnvFrom, tc.root)
			}
			if sc := ed.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 {
				t.Errorf("editor security context %+v, want the restricted one", sc)
			}
			asking := "dev"
			if strings.Contains(tc.devfile, "name: side") {
				asking = "side"
			}
			checkEditor(t, g, spec, asking)
		})
	}
}

// TestEditorRefusals: what Parse refuses about the editor attribute, naming the field.
func TestEditorRefusals(t *testing.T) {
	const head = "schemaVersion: 2.2.0\ncomponents:\n"
	for _, tc := range []struct{ name, devfile, field, detail string }{
		{"unknown editor", head + "  - name: dev\n    attributes: {hangar.dev/editor: vim}\n    container: {image: busybox}\n",
			`devfile.components[0].attributes["hangar.dev/editor"]`, `"code-server"`},
		{"not a string", head + "  - name: dev\n    attributes: {hangar.dev/editor: true}\n    container: {image: busybox}\n",
			`devfile.components[0].attributes["hangar.dev/editor"]`, `"none"`},
		{"asked twice", head + "  - name: a\n    attributes: {hangar.dev/editor: code-server}\n    container: {image: busybox}\n  - name: b\n    attributes: {hangar.dev/editor: code-server}\n    container: {image: busybox}\n",
			`devfile.components[1].attributes["hangar.dev/editor"]`, "devfile.components[0] already asks"},
		{"on a volume", head + "  - name: dev\n    container: {image: busybox}\n  - name: v\n    attributes: {hangar.dev/editor: code-server}\n    volume: {}\n",
			`devfile.components[1].attributes["hangar.dev/editor"]`, "only applies to a container"},
		{"on an init container", head + "  - name: dev\n    container: {image: busybox}\n  - name: setup\n    attributes: {hangar.dev/editor: code-server}\n    container: {image: busybox}\ncommands: [{id: s, apply: {component: setup}}]\nevents: {preStart: [s]}\n",
			`devfile.components[1].attributes["hangar.dev/editor"]`, "init container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.devfile))
			var ve *workspace.ValidationError
			if !errors.As(err, &ve) || !slices.ContainsFunc(ve.Problems, func(p workspace.FieldError) bool { return p.Field == tc.field && strings.Contains(p.Detail, tc.detail) }) {
				t.Errorf("err = %v, want a problem on %s saying %q", err, tc.field, tc.detail)
			}
		})
	}
}
