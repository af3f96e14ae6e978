package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hangar-dev/hangar/internal/agent/errtrack"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The id kubectl computes for a ConfigMap parent (KEP 3659: base64url of the SHA-256 of
// <name>.<namespace>.<kind>.<group>, here computed with Python's hashlib).
func TestApplySetIDIsKubectls(t *testing.T) {
	got := ApplySetID("", "ConfigMap", "hangar-web", "web-inventory")
	if want := "applyset-Y0eN6M0t4iur_BZgI75ohERPkHwOPuh5EQ6Un3gOrdI-v1"; got != want {
		t.Fatalf("ApplySetID = %s, want %s", got, want)
	}
}

// Every object of a generated workspace gets the recommended labels; the inventory is the ApplySet
// parent and lists the members' group kinds; the members carry its id; the pod template is left
// alone; an agent config's own value of a recommended label wins; and labelling is deterministic,
// so the content hash the agent skips applies by is stable.
func TestLabelForTools(t *testing.T) {
	objs := generated(t, "web", "a1", workspace.Running)
	for _, o := range objs {
		if o.GetKind() == "Service" {
			l := o.GetLabels()
			l[LabelAppName] = "admins-choice"
			o.SetLabels(l)
		}
	}
	k := errtrack.Key{Name: "web", Namespace: "hangar-web"}
	labelForTools(k, objs)
	id := ApplySetID("", "ConfigMap", "hangar-web", "web-inventory")
	var parents int
	for _, o := range objs {
		l := o.GetLabels()
		wantName := "hangar-workspace"
		if o.GetKind() == "Service" {
			wantName = "admins-choice"
		}
		if l[LabelAppName] != wantName || l[LabelAppInstance] != "web" || l[LabelAppManagedBy] != "hangar" ||
			l[LabelAppPartOf] != "hangar" || l[LabelAppComponent] != "workspace" {
			t.Errorf("%s %s: recommended labels %v", o.GetKind(), o.GetName(), l)
		}
		if o.GetLabels()[protocol.LabelInventory] == "true" {
			parents++
			if l[LabelApplySetID] != id || l[LabelApplySetPartOf] != "" {
				t.Errorf("parent labels %v, want id %s and no part-of", l, id)
			}
			ann := o.GetAnnotations()
			if ann[AnnotationApplySetTooling] != "hangar/v1" ||
				ann[AnnotationApplySetGroupKinds] != "Deployment.apps,Namespace,NetworkPolicy.networking.k8s.io,PersistentVolumeClaim,Secret,Service,ServiceAccount" {
				t.Errorf("parent annotations %v", ann)
			}
			continue
		}
		if l[LabelApplySetPartOf] != id || l[LabelApplySetID] != "" {
			t.Errorf("%s %s: member labels %v", o.GetKind(), o.GetName(), l)
		}
		if o.GetKind() == "Deployment" {
			pod, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			if _, ok := pod[LabelAppName]; ok {
				t.Errorf("pod template labelled %v: a label there restarts running workspaces", pod)
			}
		}
	}
	if parents != 1 {
		t.Fatalf("%d parents", parents)
	}
	again := generated(t, "web", "a1", workspace.Running)
	for _, o := range again {
		if o.GetKind() == "Service" {
			l := o.GetLabels()
			l[LabelAppName] = "admins-choice"
			o.SetLabels(l)
		}
	}
	labelForTools(k, again)
	labelForTools(k, again) // twice: no change
	for i := range objs {
		h1, _ := ConfigHash(objs[i])
		h2, _ := ConfigHash(again[i])
		if h1 != h2 {
			t.Errorf("%s %s: hash %s then %s", objs[i].GetKind(), objs[i].GetName(), h1, h2)
		}
	}
}

func TestEventNoteFitsTheAPIServersLimit(t *testing.T) {
	long := strings.Repeat("é", 700) // 1,400 bytes
	n := eventNote(long)
	if len(n) > maxEventNote || !utf8.ValidString(n) || !strings.HasSuffix(n, "…") {
		t.Fatalf("note of %d bytes, valid %v", len(n), utf8.ValidString(n))
	}
	if eventNote(" short \n") != "short" {
		t.Fatal("a short note is changed")
	}
}

// Readiness as /readyz answers it (docs/decisions.md, "Agent readiness").
func TestReadiness(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *readiness
		want string // "" ready
	}{
		{"before the server answered", &readiness{}, "not connected"},
		{"standby", &readiness{connected: true}, ""},
		{"leading, syncing", &readiness{connected: true, leading: true}, "caches have not synced"},
		{"leading, synced, no cycle yet", &readiness{connected: true, leading: true, synced: true}, "no reconcile"},
		{"leading, reconciling", &readiness{connected: true, leading: true, synced: true, cycled: true}, ""},
		{"leading, latest cycle failed", &readiness{connected: true, leading: true, synced: true, cycled: true, lastErr: errors.New("server down")}, "latest reconcile failed: server down"},
	} {
		err := tc.r.check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The leader gauge and the readiness follow leadership; a cycle is counted by type and result.
func TestLeadershipAndCyclesAreExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	a := New(Options{Metrics: m})
	a.ready.update(func(r *readiness) { r.connected = true })
	a.leading(true)
	if v := gauge(t, reg, "hangar_agent_leader"); v != 1 {
		t.Fatalf("leader %v", v)
	}
	if a.Ready() == nil {
		t.Fatal("a new leader is ready before its caches synced")
	}
	a.ready.update(func(r *readiness) { r.synced = true })
	a.cycled(protocol.UpdateFull, 0, nil)
	a.cycled(protocol.UpdatePartial, 0, errors.New("boom"))
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("ready after a failed cycle: %v", err)
	}
	a.cycled(protocol.UpdatePartial, 0, nil)
	if err := a.Ready(); err != nil {
		t.Fatal(err)
	}
	a.leading(false)
	if v := gauge(t, reg, "hangar_agent_leader"); v != 0 || a.Ready() != nil {
		t.Fatalf("standby: leader %v, ready %v", v, a.Ready())
	}
	counts := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hangar_agent_reconcile_cycle_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			counts[key] = s.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{"result=ok update_type=full ": 1, "result=error update_type=partial ": 1,
		"result=ok update_type=partial ": 1, "result=error update_type=full ": 0}
	for k, v := range want {
		if got, ok := counts[k]; !ok || got != v {
			t.Errorf("cycles {%s} = %d (exported %v), want %d", k, got, ok, v)
		}
	}
}

// gauge is the value of the unlabelled gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// An agent upgraded to labelling: a workspace an older agent applied gets every object re-applied
// once (their hash now covers the labels), without restarting it (the Deployment's pod template
// does not change); after that a stop and a start are one request each,
// as before.
func TestLabelsAreAppliedOnceWithoutARestart(t *testing.T) {
	c := kubetest.Start(t)
	name, agentID := unique("labels"), "apply-labels"
	deleteNamespaceAtEnd(t, c, "hangar-"+name)
	k := errtrack.Key{Name: name, Namespace: "hangar-" + name}
	old := generated(t, name, agentID, workspace.Running)
	a := newApplier(t, c, agentID)
	if applied, _ := a.apply(t, old); applied != 9 {
		t.Fatalf("the older agent applied %d objects, want 9", applied)
	}
	a.waitInSync(t, old, true, "the caches to show the workspace")
	before, err := c.Client.AppsV1().Deployments(k.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	labelled := func(desired workspace.State) []*unstructured.Unstructured {
		objs := generated(t, name, agentID, desired)
		labelForTools(k, objs)
		return objs
	}
	// 9 applies and one read: the inventory changed, so the previous one is read to prune by.
	if applied, requests := a.apply(t, labelled(workspace.Running)); applied != 9 || requests != 10 {
		t.Fatalf("upgrade: %d applied in %d requests, want 9 in 10", applied, requests)
	}
	after, err := c.Client.AppsV1().Deployments(k.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The pod template as the API server holds it is the same: no new ReplicaSet, no new pod. (The
	// generation moves: a Deployment's annotations, the content hash among them, count for it.)
	if !apiequality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template) || after.Labels[LabelApplySetPartOf] == "" {
		t.Fatalf("pod template changed (a rollout restarts the workspace):\n%+v\n%+v\nlabels %v", before.Spec.Template, after.Spec.Template, after.Labels)
	}
	a.waitInSync(t, labelled(workspace.Running), true, "the caches to show the labelled workspace")
	for i, desired := range []workspace.State{workspace.Stopped, workspace.Running} {
		if applied, requests := a.apply(t, labelled(desired)); applied != 1 || requests != 1 {
			t.Fatalf("step %d: %d applied in %d requests, want 1 in 1", i, applied, requests)
		}
	}
}
