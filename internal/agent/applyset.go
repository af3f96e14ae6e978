package agent

import (
	"crypto/sha256"
	"encoding/base64"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hangar-dev/hangar/internal/agent/errtrack"
)

// The recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/)
// and the ApplySet labels and annotations (KEP 3659) the agent puts on what it applies, so that
// kubectl, dashboards and GitOps tools see which objects Hangar owns and which workspace each
// belongs to (docs/decisions.md, "Recommended and ApplySet labels").
const (
	LabelAppName      = "app.kubernetes.io/name"
	LabelAppInstance  = "app.kubernetes.io/instance"
	LabelAppManagedBy = "app.kubernetes.io/managed-by"
	LabelAppPartOf    = "app.kubernetes.io/part-of"
	LabelAppComponent = "app.kubernetes.io/component"

	LabelApplySetPartOf          = "applyset.kubernetes.io/part-of"
	LabelApplySetID              = "applyset.kubernetes.io/id"
	AnnotationApplySetTooling    = "applyset.kubernetes.io/tooling"
	AnnotationApplySetGroupKinds = "applyset.kubernetes.io/contains-group-kinds"

	// ApplySetTooling is this tool, as the ApplySet's tooling annotation names it: other tools
	// (kubectl apply --prune --applyset) refuse to change a set another tool manages.
	ApplySetTooling = "hangar/v1"
)

// recommendedLabels are set on every object the agent applies where the config does not set them
// (an agent config's own labels win).
var recommendedLabels = map[string]string{
	LabelAppName:      "hangar-workspace",
	LabelAppManagedBy: "hangar",
	LabelAppPartOf:    "hangar",
	LabelAppComponent: "workspace",
}

// ApplySetID is the id of the ApplySet whose parent is the namespaced object of that group, kind,
// namespace and name: "applyset-" + base64url(sha256(<name>.<namespace>.<kind>.<group>)) + "-v1".
func ApplySetID(group, kind, namespace, name string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{name, namespace, kind, group}, ".")))
	return "applyset-" + base64.RawURLEncoding.EncodeToString(sum[:]) + "-v1"
}

// labelForTools adds to a workspace's objects, before they are hashed and applied: the recommended
// labels on all of them (instance: the workspace's cluster name); and, when the config has an
// inventory ConfigMap, the ApplySet: that ConfigMap is the parent (the id label, the tooling and the
// group kinds of the members), every other object a member (the part-of label). The labels go on
// the objects' metadata only, never on a Deployment's pod template: a new pod label would restart
// every running workspace when the agent is upgraded. Pruning is not affected: it follows the
// inventory's list, which names objects, not labels.
func labelForTools(k errtrack.Key, objs []*unstructured.Unstructured) {
	inv, _ := inventoryOf(objs)
	id := ""
	if inv != nil {
		id = ApplySetID(inv.GroupVersionKind().Group, inv.GetKind(), inv.GetNamespace(), inv.GetName())
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for key, v := range recommendedLabels {
			if _, ok := labels[key]; !ok {
				labels[key] = v
			}
		}
		if _, ok := labels[LabelAppInstance]; !ok {
			labels[LabelAppInstance] = k.Name
		}
		switch {
		case id == "":
		case o == inv:
			labels[LabelApplySetID] = id
		default:
			labels[LabelApplySetPartOf] = id
			gk := o.GroupVersionKind().GroupKind()
			kinds[strings.TrimSuffix(gk.Kind+"."+gk.Group, ".")] = true
		}
		o.SetLabels(labels)
	}
	if inv == nil {
		return
	}
	list := make([]string, 0, len(kinds))
	for gk := range kinds {
		list = append(list, gk)
	}
	sort.Strings(list)
	ann := inv.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationApplySetTooling] = ApplySetTooling
	ann[AnnotationApplySetGroupKinds] = strings.Join(list, ",")
	inv.SetAnnotations(ann)
}
