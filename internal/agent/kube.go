package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side-apply field manager of every object the agent applies.
const FieldManager = "hangar-agent"

// Kube is the agent's access to the cluster: server-side apply, pruning and deletion by inventory.
type Kube struct {
	Clientset kubernetes.Interface
	// Lease is the client leader election renews its Lease with. It has a rate limiter of its own:
	// behind a burst of applies on Clientset's limiter a renewal would wait longer than the renew
	// deadline, and the replica would lose its Lease in the middle of its own work (found by
	// BenchmarkAgent1000Workspaces, docs/benchmarks.md).
	Lease    kubernetes.Interface
	dynamic  dynamic.Interface
	metadata metadata.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	// Requests counts the requests made through Clientset and the applier (not the Lease's).
	Requests *RequestCounter
	// Metrics records each apply (nil: none).
	Metrics *Metrics
}

// Rate limits of the leader-election client: a renewal every 2 s at most, plus the occasional read.
const leaseQPS, leaseBurst = 5, 10

// NewKube builds the clients from a REST config. The clients other than the Lease's share one rate
// limiter (cfg.QPS, cfg.Burst).
func NewKube(cfg *rest.Config) (*Kube, error) {
	lcfg := rest.CopyConfig(cfg)
	lcfg.QPS, lcfg.Burst, lcfg.RateLimiter = leaseQPS, leaseBurst, nil
	cfg = rest.CopyConfig(cfg)
	counter := &RequestCounter{}
	cfg.Wrap(counter.wrap)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, max(cfg.Burst, 1))
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	lease, err := kubernetes.NewForConfig(lcfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for leader election: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	return &Kube{Clientset: cs, Lease: lease, dynamic: dyn, metadata: md, mapper: mapper, Requests: counter}, nil
}

// RequestCounter counts the HTTP requests a client makes: watches (long-running) apart from the
// rest.
type RequestCounter struct {
	requests, watches atomic.Int64
}

// Counts returns the requests and the watches started so far.
func (c *RequestCounter) Counts() (requests, watches int64) {
	if c == nil {
		return 0, 0
	}
	return c.requests.Load(), c.watches.Load()
}

func (c *RequestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") == "true" {
			c.watches.Add(1)
		} else {
			c.requests.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// ParseConfig splits a config_to_apply stream into objects.
func ParseConfig(config string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i, doc := range splitDocuments(config) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("config document %d: %w", i+1, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("config document %d: %w", i+1, err)
		}
		out = append(out, u)
	}
	return out, nil
}

func splitDocuments(s string) []string {
	var docs []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	return append(docs, cur.String())
}

// Ref names one object of a workspace, as its inventory lists it.
type Ref struct {
	APIVersion, Kind, Namespace, Name string
}

func (r Ref) String() string { return r.APIVersion + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name }

// ParseInventory reads an inventory ConfigMap's list: one `<apiVersion>/<kind>/<namespace>/<name>`
// per line, read from the right (apiVersion may contain a slash).
func ParseInventory(text string) []Ref {
	var out []Ref
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := strings.Split(line, "/")
		if len(parts) < 4 {
			continue
		}
		n := len(parts)
		out = append(out, Ref{APIVersion: strings.Join(parts[:n-3], "/"), Kind: parts[n-3], Namespace: parts[n-2], Name: parts[n-1]})
	}
	return out
}

func refOf(u *unstructured.Unstructured) Ref {
	return Ref{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func (k *Kube) resource(ref Ref) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	gvk := gv.WithKind(ref.Kind)
	if kd, ok := knownKinds[gvk]; ok {
		if kd.namespaced {
			return k.dynamic.Resource(kd.gvr).Namespace(ref.Namespace), nil
		}
		return k.dynamic.Resource(kd.gvr), nil
	}
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		k.mapper.Reset()
		if m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return nil, fmt.Errorf("%s: no such resource in the cluster: %w", ref, err)
		}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dynamic.Resource(m.Resource).Namespace(ref.Namespace), nil
	}
	return k.dynamic.Resource(m.Resource), nil
}

// inventoryRef finds the inventory ConfigMap among a workspace's objects.
func inventoryOf(objs []*unstructured.Unstructured) (*unstructured.Unstructured, []Ref) {
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetLabels()[protocol.LabelInventory] == "true" {
			text, _, _ := unstructured.NestedString(o.Object, "data", protocol.InventoryKey)
			return o, ParseInventory(text)
		}
	}
	return nil, nil
}

// Apply server-side-applies the objects of a workspace that live does not show in sync with the
// cluster (each carries its content hash, AnnotationConfigHash), then prunes the objects the
// previous inventory listed that the new one does not. It applies in three stages, the objects of a
// stage at once: Namespaces; everything else but the Deployments (the service account, inventory,
// secret, claims, Service, NetworkPolicy, quota); then the Deployments. A stage runs only once the
// one before it applied cleanly: what follows depends on it (a Deployment on its claim and secret),
// and applying it would only hide the error behind a workspace that half runs — except Deployments
// scaled to zero, which go anyway, so that nothing holds back a stop. It returns how many objects it
// applied and the errors in the order the config lists the objects.
//
// A stop or a start changes only the Deployment: one request. The previous inventory is read only
// when the inventory itself changes and may exist.
func (k *Kube) Apply(ctx context.Context, objs []*unstructured.Unstructured, live *Live) (applied int, errs []error) {
	hashes := make(map[*unstructured.Unstructured]string, len(objs))
	for _, o := range objs {
		h, err := ConfigHash(o)
		if err != nil {
			return 0, []error{err}
		}
		hashes[o] = h
	}
	inv, newRefs := inventoryOf(objs)
	var oldRefs []Ref
	if inv != nil && !live.inSync(inv, hashes[inv]) && live.mayExist(inv) {
		// An unchanged inventory lists what it listed: nothing to prune, nothing to read.
		cm, err := k.Clientset.CoreV1().ConfigMaps(inv.GetNamespace()).Get(ctx, inv.GetName(), metav1.GetOptions{})
		if err == nil {
			oldRefs = ParseInventory(cm.Data[protocol.InventoryKey])
		}
	}
	var stages [3][]*unstructured.Unstructured
	for _, o := range objs {
		if live.inSync(o, hashes[o]) {
			continue
		}
		stage := 1
		switch o.GetKind() {
		case "Namespace":
			stage = 0
		case "Deployment":
			stage = 2
		}
		stages[stage] = append(stages[stage], o)
	}
	for n, stage := range stages {
		results := make([]error, len(stage))
		var wg sync.WaitGroup
		for i, o := range stage {
			apply := func() { results[i] = k.applyOne(ctx, o, hashes[o], live) }
			if len(stage) == 1 {
				apply()
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); apply() }()
		}
		wg.Wait()
		for _, err := range results {
			if err != nil {
				errs = append(errs, err)
			} else {
				applied++
			}
		}
		if len(errs) > 0 {
			// A Deployment scaled to zero still goes: a stop or a delete must not wait on an object
			// that only a running workspace needs (a NetworkPolicy an admission policy refuses, say),
			// and a workspace that half runs is not a risk when nothing runs.
			if deployments := stages[2]; n < 2 && len(deployments) > 0 && allScaledToZero(deployments) {
				for _, o := range deployments {
					if err := k.applyOne(ctx, o, hashes[o], live); err != nil {
						errs = append(errs, err)
					} else {
						applied++
					}
				}
			}
			return applied, errs // prune only after a clean apply
		}
	}
	keep := map[Ref]bool{}
	for _, r := range newRefs {
		keep[r] = true
	}
	for _, r := range oldRefs {
		if keep[r] || r.Kind == "Namespace" {
			continue
		}
		if err := k.delete(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("prune %s: %w", r, err))
		}
	}
	return applied, errs
}

// allScaledToZero reports whether every Deployment of objs asks for no replicas.
func allScaledToZero(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		r, found, err := unstructured.NestedInt64(o.Object, "spec", "replicas")
		if err != nil || !found || r != 0 {
			return false
		}
	}
	return true
}

// applyOne server-side-applies o with its content hash h and records the outcome in live.
func (k *Kube) applyOne(ctx context.Context, o *unstructured.Unstructured, h string, live *Live) error {
	ref := refOf(o)
	ri, err := k.resource(ref)
	if err != nil {
		return err
	}
	o = o.DeepCopy()
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationConfigHash] = h
	o.SetAnnotations(ann)
	start := time.Now()
	_, err = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	k.Metrics.observeApply(ref.Kind, time.Since(start), err)
	live.record(ref, h, err == nil)
	if err != nil {
		return fmt.Errorf("apply %s: %w", ref, err)
	}
	return nil
}

func (k *Kube) delete(ctx context.Context, r Ref) error {
	ri, err := k.resource(r)
	if err != nil {
		return err
	}
	policy := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (k *Kube) exists(ctx context.Context, r Ref) (bool, error) {
	ri, err := k.resource(r)
	if err != nil {
		return false, err
	}
	_, err = ri.Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Terminate deletes everything a workspace owns — what its inventory lists (PVCs and Secrets
// included), the inventory itself, its namespace last when it has its own — and reports whether it
// is all gone. It is idempotent: each cycle calls it again until it reports gone.
func (k *Kube) Terminate(ctx context.Context, name, namespace string, known []Ref) (gone bool, err error) {
	refs := append([]Ref(nil), known...)
	invName := name + "-inventory"
	cm, err := k.Clientset.CoreV1().ConfigMaps(namespace).Get(ctx, invName, metav1.GetOptions{})
	switch {
	case err == nil:
		refs = append(refs, ParseInventory(cm.Data[protocol.InventoryKey])...)
		refs = append(refs, Ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: namespace, Name: invName})
	case apierrors.IsNotFound(err):
	default:
		return false, fmt.Errorf("read inventory of %s: %w", name, err)
	}
	if len(refs) == 0 {
		// Nothing known but the Deployment the informer saw.
		refs = append(refs, Ref{APIVersion: "apps/v1", Kind: "Deployment", Namespace: namespace, Name: name})
	}
	refs = dedupe(refs)
	sort.SliceStable(refs, func(i, j int) bool { return refs[i].Kind != "Namespace" && refs[j].Kind == "Namespace" })
	var errs []error
	gone = true
	for _, r := range refs {
		ok, err := k.exists(ctx, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("check %s: %w", r, err))
			gone = false
			continue
		}
		if !ok {
			continue
		}
		gone = false
		if err := k.delete(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", r, err))
		}
	}
	return gone, errors.Join(errs...)
}

func dedupe(refs []Ref) []Ref {
	seen := map[Ref]bool{}
	out := refs[:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// ensureNamespace creates a namespace if it does not exist (for the leader-election Lease).
func (k *Kube) ensureNamespace(ctx context.Context, name string) error {
	_, err := k.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
