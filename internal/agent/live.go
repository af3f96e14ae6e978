package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// AnnotationConfigHash is set by the agent on every object it applies: the hash of the object as
// the server generated it (without this annotation). An object whose desired hash equals the one
// the cluster holds is not applied again (docs/decisions.md, "Apply only what changed").
const AnnotationConfigHash = workspace.ReservedPrefix + "config-hash"

// ConfigHash is the content hash of a desired object: SHA-256 of its JSON (map keys sorted), without
// AnnotationConfigHash.
func ConfigHash(o *unstructured.Unstructured) (string, error) {
	c := o
	if _, ok := o.GetAnnotations()[AnnotationConfigHash]; ok {
		c = o.DeepCopy()
		ann := c.GetAnnotations()
		delete(ann, AnnotationConfigHash)
		c.SetAnnotations(ann)
	}
	js, err := c.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", refOf(o), err)
	}
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:16]), nil
}

// kind is a kind the server generates, with its resource.
type kind struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// knownKinds are the kinds the server generates. The agent maps them to resources without asking
// the API server (discovery costs requests at every start), and caches the metadata of those
// besides Deployments (which the reconciler's own informer holds) to know, without a request,
// which hash each object in the cluster carries. Objects of any other kind go through discovery and
// are always applied.
var knownKinds = map[schema.GroupVersionKind]kind{
	{Version: "v1", Kind: "Namespace"}:                                 {schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
	{Version: "v1", Kind: "ServiceAccount"}:                            {schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
	{Version: "v1", Kind: "ConfigMap"}:                                 {schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
	{Version: "v1", Kind: "Secret"}:                                    {schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, true},
	{Version: "v1", Kind: "PersistentVolumeClaim"}:                     {schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, true},
	{Version: "v1", Kind: "Service"}:                                   {schema.GroupVersionResource{Version: "v1", Resource: "services"}, true},
	{Version: "v1", Kind: "ResourceQuota"}:                             {schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, true},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}: {schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, true},
	deploymentKind: {schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
}

// deploymentKind is the kind the reconciler's typed informer holds.
var deploymentKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// unknownHash marks an object whose last apply failed: whether it landed is unknown, so the caches
// are not trusted for it until an apply succeeds.
const unknownHash = "?"

// Live is what the agent knows of its objects in the cluster, from informer caches (no request),
// and of its own applies. It decides which objects of a config need applying. A nil *Live knows
// nothing: everything is applied.
type Live struct {
	deployments cache.SharedIndexInformer
	meta        map[schema.GroupVersionKind]cache.SharedIndexInformer

	mu sync.Mutex
	// applied holds the hash of the last apply of each object by this reconciler (unknownHash after
	// a failed one). It wins over a cache that has not caught up with that apply yet.
	applied map[Ref]string
}

// newLive starts metadata informers (this agent's objects only: its agent-id label) for
// knownKinds; stop ends them. deployments is the reconciler's Deployment informer.
func newLive(k *Kube, agentID string, deployments cache.SharedIndexInformer, stop <-chan struct{}) (*Live, error) {
	l := &Live{deployments: deployments, meta: map[schema.GroupVersionKind]cache.SharedIndexInformer{}, applied: map[Ref]string{}}
	if k.metadata == nil {
		return l, nil
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(k.metadata, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = protocol.LabelAgentID + "=" + agentID })
	for gvk, kd := range knownKinds {
		if gvk == deploymentKind {
			continue
		}
		inf := factory.ForResource(kd.gvr).Informer()
		// Keep only what the decision reads: name, namespace, deletion, our hash.
		if err := inf.SetTransform(func(obj any) (any, error) {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return obj, nil
			}
			slim := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
				Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}}
			if h, ok := m.Annotations[AnnotationConfigHash]; ok {
				slim.Annotations = map[string]string{AnnotationConfigHash: h}
			}
			return slim, nil
		}); err != nil {
			return nil, fmt.Errorf("metadata informer of %s: %w", kd.gvr, err)
		}
		l.meta[gvk] = inf
	}
	factory.Start(stop)
	return l, nil
}

// hasSynced is true once every cache has its initial list.
func (l *Live) hasSynced() bool {
	for _, inf := range l.meta {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// inSync reports whether the cluster holds o as applied with hash h, from the caches: the object
// exists, is not being deleted and carries h; a Deployment also has the replica count o asks for
// (a scale by hand leaves the annotation, and is the drift the server's full reconcile repairs).
// An object this reconciler last applied with another hash, or whose last apply failed, is never
// in sync: the cache may not show that apply yet.
func (l *Live) inSync(o *unstructured.Unstructured, h string) bool {
	if l == nil {
		return false
	}
	ref := refOf(o)
	l.mu.Lock()
	last, ok := l.applied[ref]
	l.mu.Unlock()
	if ok && last != h {
		return false
	}
	gvk := o.GroupVersionKind()
	key := o.GetName()
	if o.GetNamespace() != "" {
		key = o.GetNamespace() + "/" + key
	}
	if gvk == deploymentKind {
		if l.deployments == nil {
			return false
		}
		obj, exists, err := l.deployments.GetStore().GetByKey(key)
		d, isDeployment := obj.(*appsv1.Deployment)
		if err != nil || !exists || !isDeployment || d.DeletionTimestamp != nil || d.Annotations[AnnotationConfigHash] != h {
			return false
		}
		want, found, err := unstructured.NestedInt64(o.Object, "spec", "replicas")
		if err != nil {
			return false
		}
		if !found {
			want = 1
		}
		return d.Spec.Replicas != nil && int64(*d.Spec.Replicas) == want
	}
	inf := l.meta[gvk]
	if inf == nil {
		return false
	}
	obj, exists, err := inf.GetStore().GetByKey(key)
	m, isMeta := obj.(*metav1.PartialObjectMetadata)
	return err == nil && exists && isMeta && m.DeletionTimestamp == nil && m.Annotations[AnnotationConfigHash] == h
}

// mayExist reports whether o may exist in the cluster: false only when this reconciler never
// applied it and the cache of its kind does not hold it.
func (l *Live) mayExist(o *unstructured.Unstructured) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	_, applied := l.applied[refOf(o)]
	l.mu.Unlock()
	inf := l.meta[o.GroupVersionKind()]
	if applied || inf == nil {
		return true
	}
	key := o.GetName()
	if o.GetNamespace() != "" {
		key = o.GetNamespace() + "/" + key
	}
	_, exists, err := inf.GetStore().GetByKey(key)
	return err != nil || exists
}

// record notes the outcome of one object's apply.
func (l *Live) record(ref Ref, h string, ok bool) {
	if l == nil {
		return
	}
	if !ok {
		h = unknownHash
	}
	l.mu.Lock()
	l.applied[ref] = h
	l.mu.Unlock()
}
