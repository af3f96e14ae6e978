package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/hangar-dev/hangar/internal/agent/errtrack"
	"github.com/hangar-dev/hangar/internal/protocol"
)

// reconciler is the state one full sync builds and the next drops (workspaces-architecture-
// kubernetes.md, "Types of messages"; tracking-applier-errors.md): the Deployment informer, the
// resource versions the server acknowledged, the error tracker, the terminations in progress and the
// applies in flight.
type reconciler struct {
	log     *slog.Logger
	kube    *Kube
	agentID string

	ctx    context.Context // ends when the reconciler is dropped: in-flight applies stop
	cancel context.CancelFunc

	informer cache.SharedIndexInformer
	pods     cache.SharedIndexInformer
	live     *Live // what the cluster holds of each object: applies skip what is in sync
	stop     chan struct{}
	// wake asks the loop for a cycle now: a Deployment changed, or an apply failed. Reports go out
	// as things happen instead of at the next interval.
	wake chan<- struct{}

	errs *errtrack.Tracker
	// steps follows the image build's logs and knows which steps the server has (steps.go): the
	// agent's loop owns it, across reconcilers.
	steps *stepLogs
	// events records Kubernetes Events on the workspaces' Deployments (nil: none; events.go).
	events EventRecorder

	mu          sync.Mutex
	acked       map[errtrack.Key]string // deployment_resource_version the server echoed
	podFailures map[errtrack.Key]string // the pod failure last reported and answered ("" none)
	podAlerts   map[errtrack.Key]string // the pod alerts last reported and answered (alertsKey)
	podEvents   map[errtrack.Key]string // the pod failure last recorded as an Event
	terminating map[errtrack.Key]string // protocol.TerminationTerminating or TerminationTerminated
	known       map[errtrack.Key][]Ref  // objects of the last config applied, for termination
	applies     map[errtrack.Key]*applySlot
	applying    sync.WaitGroup
	// applySem holds a token per workspace being applied: at most cap(applySem) at once.
	applySem chan struct{}
}

// applySlot runs one workspace's applies one after the other; a newer config replaces one that has
// not started yet (latest wins), so an old config is never applied after a newer one.
type applySlot struct {
	running bool
	next    *applyJob
}

type applyJob struct {
	version errtrack.Version
	objs    []*unstructured.Unstructured
	// change is the trace of the change the config carries out (the answer's traceparent), cycle
	// the agent's reconcile that received it; both empty when tracing is off (trace.go).
	change, cycle trace.SpanContext
}

func newReconciler(ctx context.Context, log *slog.Logger, kube *Kube, agentID string, wake chan<- struct{}, applyConcurrency int, steps *stepLogs) (*reconciler, error) {
	rctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(kube.Clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = protocol.LabelAgentID + "=" + agentID }))
	inf := factory.Apps().V1().Deployments().Informer()
	pods := factory.Core().V1().Pods().Informer()
	if err := pods.AddIndexers(cache.Indexers{byWorkspace: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels[protocol.LabelWorkspaceName] == "" {
			return nil, nil
		}
		return []string{p.Namespace + "/" + p.Labels[protocol.LabelWorkspaceName]}, nil
	}}); err != nil {
		cancel()
		return nil, fmt.Errorf("index pods: %w", err)
	}
	r := &reconciler{
		log: log, kube: kube, agentID: agentID, ctx: rctx, cancel: cancel, steps: steps,
		informer: inf, pods: pods, stop: make(chan struct{}), wake: wake, errs: errtrack.New(),
		acked: map[errtrack.Key]string{}, podFailures: map[errtrack.Key]string{}, podAlerts: map[errtrack.Key]string{}, podEvents: map[errtrack.Key]string{}, terminating: map[errtrack.Key]string{}, known: map[errtrack.Key][]Ref{},
		applies: map[errtrack.Key]*applySlot{}, applySem: make(chan struct{}, max(applyConcurrency, 1)),
	}
	poke := func(any) { r.poke() }
	for _, i := range []cache.SharedIndexInformer{inf, pods} {
		if _, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, n any) { r.poke() },
		}); err != nil {
			cancel()
			return nil, fmt.Errorf("watch Deployments and Pods: %w", err)
		}
	}
	live, err := newLive(kube, agentID, inf, r.stop)
	if err != nil {
		cancel()
		return nil, err
	}
	r.live = live
	go inf.Run(r.stop)
	go pods.Run(r.stop)
	if !cache.WaitForCacheSync(rctx.Done(), inf.HasSynced, pods.HasSynced, live.hasSynced) {
		r.close()
		return nil, fmt.Errorf("sync the informers: %w", context.Cause(rctx))
	}
	return r, nil
}

const byWorkspace = "workspace"

// workspacePods are the pods of a workspace the informer holds.
func (r *reconciler) workspacePods(k errtrack.Key) []*corev1.Pod {
	objs, err := r.pods.GetIndexer().ByIndex(byWorkspace, k.Namespace+"/"+k.Name)
	if err != nil {
		return nil
	}
	return podsOf(objs)
}

// alertsKey identifies a list of pod alerts, to tell whether it changed since it was answered.
func alertsKey(alerts []protocol.PodAlert) string {
	var b strings.Builder
	for _, a := range alerts {
		b.WriteString(a.Kind + "\x00" + a.Subject + "\x00" + a.At.UTC().Format(time.RFC3339Nano) + "\x00")
	}
	return b.String()
}

func failureKey(f *protocol.PodFailure) string {
	if f == nil {
		return ""
	}
	return f.Reason + "\x00" + f.Message
}

// poke asks for a cycle without blocking (requests coalesce).
func (r *reconciler) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// terminationsInProgress reports whether a deletion is still going on, so the loop looks again soon.
func (r *reconciler) terminationsInProgress() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.terminating {
		if p == protocol.TerminationTerminating {
			return true
		}
	}
	return false
}

// close drops the reconciler: the informer stops and in-flight applies are cancelled.
func (r *reconciler) close() {
	r.cancel()
	close(r.stop)
	r.applying.Wait()
	r.mu.Lock()
	for _, slot := range r.applies {
		if slot.next != nil { // dropped: the next full sync sends it again
			slot.next = nil
			r.kube.Metrics.queued(-1)
		}
	}
	r.mu.Unlock()
}

func keyOf(d *appsv1.Deployment) (errtrack.Key, bool) {
	name := d.Labels[protocol.LabelWorkspaceName]
	if name == "" {
		return errtrack.Key{}, false
	}
	return errtrack.Key{Name: name, Namespace: d.Namespace}, true
}

// DeploymentInfo trims a Deployment to what the server reads.
func DeploymentInfo(d *appsv1.Deployment) *protocol.DeploymentInfo {
	info := &protocol.DeploymentInfo{
		Metadata: protocol.DeploymentMetadata{ResourceVersion: d.ResourceVersion, Generation: d.Generation},
		Spec:     &protocol.DeploymentSpec{Replicas: d.Spec.Replicas},
		Status: &protocol.DeploymentStatus{
			ObservedGeneration: d.Status.ObservedGeneration, Replicas: d.Status.Replicas, UpdatedReplicas: d.Status.UpdatedReplicas,
			ReadyReplicas: d.Status.ReadyReplicas, AvailableReplicas: d.Status.AvailableReplicas, UnavailableReplicas: d.Status.UnavailableReplicas,
		},
	}
	for _, c := range d.Status.Conditions {
		info.Status.Conditions = append(info.Status.Conditions, protocol.DeploymentCondition{
			Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return info
}

// report builds a cycle's request: on full, every Deployment; on partial, those whose resource
// version the server has not acknowledged; in both, the terminations in progress and the errors of
// the snapshot.
func (r *reconciler) report(ctx context.Context, ut protocol.UpdateType, snap errtrack.Snapshot) protocol.ReconcileRequest {
	r.progressTerminations(ctx)
	infos := map[errtrack.Key]*protocol.WorkspaceAgentInfo{}
	get := func(k errtrack.Key) *protocol.WorkspaceAgentInfo {
		if i, ok := infos[k]; ok {
			return i
		}
		i := &protocol.WorkspaceAgentInfo{Name: k.Name, Namespace: k.Namespace}
		infos[k] = i
		return i
	}
	allPods := podsOf(r.pods.GetStore().List())
	live := make(map[types.UID]bool, len(allPods))
	for _, p := range allPods {
		live[p.UID] = true
	}
	now := time.Now()
	r.steps.follow(allPods, live, now)
	r.mu.Lock()
	for _, obj := range r.informer.GetStore().List() {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			continue
		}
		k, ok := keyOf(d)
		if !ok {
			continue
		}
		pods := r.workspacePods(k)
		failure := PodFailure(pods, now)
		r.recordPodFailure(k, failure)
		steps := StartupSteps(pods, r.steps.get)
		newSteps := len(steps) > 0 && r.steps.unsent(k, steps)
		alerts := PodAlerts(pods)
		newAlerts := alertsKey(alerts) != r.podAlerts[k]
		if ut == protocol.UpdateFull || r.acked[k] != d.ResourceVersion || failureKey(failure) != r.podFailures[k] || newSteps || newAlerts {
			i := get(k)
			i.LatestK8sDeploymentInfo = DeploymentInfo(d)
			i.PodFailure = failure
			i.PodAlerts = alerts
			// Steps go when they changed since the server last answered: a full reconcile does
			// not send every build's log again.
			if newSteps {
				i.StartupSteps = steps
			}
		}
	}
	for k, progress := range r.terminating {
		get(k).TerminationProgress = progress
	}
	r.mu.Unlock()
	for _, e := range snap.Entries() {
		get(e.Key).ErrorDetails = &protocol.ErrorDetails{ErrorType: protocol.ErrorTypeApplier, ErrorMessage: e.Err.Error()}
	}
	req := protocol.ReconcileRequest{UpdateType: ut, WorkspaceAgentInfos: make([]protocol.WorkspaceAgentInfo, 0, len(infos))}
	for _, i := range infos {
		req.WorkspaceAgentInfos = append(req.WorkspaceAgentInfos, *i)
	}
	sort.Slice(req.WorkspaceAgentInfos, func(i, j int) bool { return req.WorkspaceAgentInfos[i].Name < req.WorkspaceAgentInfos[j].Name })
	// The server cuts them too; cut here, they are not sent at all.
	protocol.TruncateMessages(&req)
	return req
}

// progressTerminations re-issues the deletions of every terminating workspace and marks those
// whose objects are all gone Terminated.
func (r *reconciler) progressTerminations(ctx context.Context) {
	r.mu.Lock()
	var keys []errtrack.Key
	for k, p := range r.terminating {
		if p == protocol.TerminationTerminating {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	for _, k := range keys {
		r.mu.Lock()
		known := r.known[k]
		r.mu.Unlock()
		gone, err := r.kube.Terminate(ctx, k.Name, k.Namespace, known)
		if err != nil {
			r.log.Warn("deleting workspace", "workspace", k.Name, "namespace", k.Namespace, "err", err)
			r.errs.Fail(k, fmt.Errorf("delete workspace: %w", err))
		}
		if gone {
			r.poke() // report Terminated now
			r.mu.Lock()
			r.terminating[k] = protocol.TerminationTerminated
			r.mu.Unlock()
			r.log.Info("workspace deleted", "workspace", k.Name, "namespace", k.Namespace)
		}
	}
}

// handle acts on the server's answer: acknowledge resource versions, start or finish terminations,
// and start applies.
func (r *reconciler) handle(ctx context.Context, req protocol.ReconcileRequest, resp protocol.ReconcileResponse) {
	sent := map[errtrack.Key]string{}
	sentAlerts := map[errtrack.Key]string{}
	sentSteps := map[errtrack.Key][]protocol.StartupStep{}
	for _, i := range req.WorkspaceAgentInfos {
		if i.LatestK8sDeploymentInfo != nil {
			sent[errtrack.Key{Name: i.Name, Namespace: i.Namespace}] = failureKey(i.PodFailure)
			sentAlerts[errtrack.Key{Name: i.Name, Namespace: i.Namespace}] = alertsKey(i.PodAlerts)
		}
		if len(i.StartupSteps) > 0 {
			sentSteps[errtrack.Key{Name: i.Name, Namespace: i.Namespace}] = i.StartupSteps
		}
	}
	for _, w := range resp.WorkspaceRailsInfos {
		k := errtrack.Key{Name: w.Name, Namespace: w.Namespace}
		r.mu.Lock()
		r.acked[k] = w.DeploymentResourceVersion
		if reported, ok := sent[k]; ok {
			r.podFailures[k] = reported
			r.podAlerts[k] = sentAlerts[k]
		}
		if reported, ok := sentSteps[k]; ok {
			r.steps.answered(k, reported)
		}
		if w.DesiredState == protocol.TerminationTerminated {
			if w.ActualState == protocol.TerminationTerminated {
				// The server has recorded the end: forget the workspace.
				delete(r.terminating, k)
				delete(r.acked, k)
				delete(r.podFailures, k)
				delete(r.podAlerts, k)
				delete(r.podEvents, k)
				r.steps.answered(k, nil)
				delete(r.known, k)
				r.mu.Unlock()
				r.errs.Forget(k)
				continue
			}
			if _, ok := r.terminating[k]; !ok {
				r.terminating[k] = protocol.TerminationTerminating
				r.log.Info("deleting workspace", "workspace", k.Name, "namespace", k.Namespace)
			}
			r.mu.Unlock()
			continue
		}
		delete(r.terminating, k) // desired no longer Terminated (a stale orphan answer, or a new workspace of the same name)
		r.mu.Unlock()
		if w.ConfigToApply == "" {
			continue
		}
		objs, err := ParseConfig(w.ConfigToApply)
		if err != nil {
			r.errs.Fail(k, fmt.Errorf("parse config_to_apply: %w", err))
			continue
		}
		labelForTools(k, objs)
		r.mu.Lock()
		r.known[k] = refsOf(objs)
		r.mu.Unlock()
		job := applyJob{version: r.errs.Start(k), objs: objs}
		job.change, job.cycle = applyTrace(ctx, w.TraceParent)
		r.enqueue(k, job)
	}
}

func refsOf(objs []*unstructured.Unstructured) []Ref {
	out := make([]Ref, len(objs))
	for i, o := range objs {
		out[i] = refOf(o)
	}
	return out
}

// enqueue hands a config to the workspace's apply slot; applies run on their own goroutines so that
// a slow apply never holds up the next cycle.
func (r *reconciler) enqueue(k errtrack.Key, job applyJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot := r.applies[k]
	if slot == nil {
		slot = &applySlot{}
		r.applies[k] = slot
	}
	if slot.next == nil {
		r.kube.Metrics.queued(1)
	}
	slot.next = &job
	if slot.running {
		return
	}
	slot.running = true
	r.applying.Add(1)
	go r.runApplies(k, slot)
}

func (r *reconciler) runApplies(k errtrack.Key, slot *applySlot) {
	defer r.applying.Done()
	for {
		// Wait for a turn before taking the job, so that a config that arrives meanwhile replaces
		// the one waiting (latest wins) instead of being applied after it.
		select {
		case r.applySem <- struct{}{}:
		case <-r.ctx.Done():
			return
		}
		r.mu.Lock()
		job := slot.next
		slot.next = nil
		if job != nil {
			r.kube.Metrics.queued(-1)
		}
		if job == nil || r.ctx.Err() != nil {
			slot.running = false
			r.mu.Unlock()
			<-r.applySem
			return
		}
		r.mu.Unlock()
		actx, span := startApplySpan(r.ctx, k, *job)
		applied, errs := r.kube.Apply(actx, job.objs, r.live)
		endApplySpan(span, applied, errs)
		<-r.applySem
		if r.ctx.Err() != nil {
			return
		}
		if len(errs) > 0 {
			r.log.Warn("applying workspace failed", "workspace", k.Name, "namespace", k.Namespace, "errors", len(errs), "first", errs[0])
		} else {
			r.log.Debug("applied workspace", "workspace", k.Name, "namespace", k.Namespace, "objects", len(job.objs), "applied", applied)
		}
		r.errs.Complete(k, job.version, errs...)
		r.recordApplyFailed(k, errs)
		if len(errs) > 0 {
			r.poke() // report the error now
		}
	}
}
