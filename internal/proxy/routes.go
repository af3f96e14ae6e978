// Package proxy is `hangar proxy`'s logic: it routes a workspace host to the ready pod of the
// workspace's public endpoint (Routes, from informers on the agent's Services and EndpointSlices),
// authenticates every request through the server (Auth, a short cache in front of
// /api/v1/proxy/check) and forwards HTTP/1.1, HTTP/2 and WebSocket requests (Handler).
package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Route is where a host goes.
type Route struct {
	// Known: a Service of the agent serves this host's port as a public endpoint.
	Known bool
	// Addr is a ready endpoint (pod IP and port), "" when none is ready (the workspace is stopped
	// or starting).
	Addr      string
	Namespace string
	Service   string
	// WorkspaceID is the Service's workspace (label hangar.dev/workspace-id), for activity.
	WorkspaceID string
	// Why, when Addr is "", tells the user why the workspace cannot be reached, when it is not
	// simply stopped (the page then says that instead of "not running").
	Why string
}

// Routes answers which pod serves a host, from the cluster as the informers last saw it. Nothing is
// kept besides the informers' caches, so a route is gone as soon as they see its Service or its
// ready endpoints go (the stale routes of GitLab's proxy cannot happen).
type Routes struct {
	services, slices cache.SharedIndexInformer
	factory          informers.SharedInformerFactory
}

const (
	byHostTemplate = "hostTemplate"
	byService      = "service"
	byWorkspace    = "workspace"
)

// NewRoutes watches the Services and EndpointSlices that carry the agent's label. The EndpointSlice
// controller copies a Service's labels to its slices.
func NewRoutes(client kubernetes.Interface, agentID string) (*Routes, error) {
	sel := labels.SelectorFromSet(labels.Set{protocol.LabelAgentID: agentID}).String()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = sel
	}))
	r := &Routes{factory: f, services: f.Core().V1().Services().Informer(), slices: f.Discovery().V1().EndpointSlices().Informer()}
	if err := r.services.AddIndexers(cache.Indexers{byHostTemplate: func(obj any) ([]string, error) {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return nil, nil
		}
		if t := svc.Annotations[protocol.AnnotationHostTemplate]; t != "" {
			return []string{strings.ToLower(t)}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index services: %w", err)
	}
	if err := r.services.AddIndexers(cache.Indexers{byWorkspace: func(obj any) ([]string, error) {
		if svc, ok := obj.(*corev1.Service); ok && svc.Labels[protocol.LabelWorkspaceID] != "" {
			return []string{svc.Labels[protocol.LabelWorkspaceID]}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index services: %w", err)
	}
	if err := r.slices.AddIndexers(cache.Indexers{byService: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, nil
		}
		if n := s.Labels[discoveryv1.LabelServiceName]; n != "" {
			return []string{s.Namespace + "/" + n}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index endpoint slices: %w", err)
	}
	return r, nil
}

// Start runs the informers until ctx ends and waits for their first list; false if ctx ended first.
func (r *Routes) Start(ctx context.Context) bool {
	r.factory.Start(ctx.Done())
	return cache.WaitForCacheSync(ctx.Done(), r.services.HasSynced, r.slices.HasSynced)
}

// OnChange calls fn (without arguments, from the informers' goroutines) after every change the
// informers see, for metrics and tests.
func (r *Routes) OnChange(fn func()) {
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { fn() }, UpdateFunc: func(any, any) { fn() }, DeleteFunc: func(any) { fn() }}
	_, _ = r.services.AddEventHandler(h)
	_, _ = r.slices.AddEventHandler(h)
}

// Lookup finds the route of a host `<port>-<name>--<owner>.<zone>` (no port; NormalizeHost's name).
func (r *Routes) Lookup(host string) Route {
	label, zone, ok := strings.Cut(host, ".")
	if !ok {
		return Route{}
	}
	port, name, owner, ok := workspace.ParseHostLabel(label)
	if !ok {
		return Route{}
	}
	objs, err := r.services.GetIndexer().ByIndex(byHostTemplate, workspace.HostTemplate(name, owner, zone))
	if err != nil {
		return Route{}
	}
	for _, obj := range objs {
		svc := obj.(*corev1.Service)
		if route, ok := r.route(svc, port); ok {
			return route
		}
	}
	return Route{}
}

// route is the route to svc's public port, if it has one.
func (r *Routes) route(svc *corev1.Service, port int) (Route, bool) {
	public := false
	for _, p := range strings.Split(svc.Annotations[protocol.AnnotationPublicPorts], ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil && n == port {
			public = true
		}
	}
	if !public {
		return Route{}, false // an internal port (none ports have no Service port at all)
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if int(svc.Spec.Ports[i].Port) == port && (svc.Spec.Ports[i].Protocol == corev1.ProtocolTCP || svc.Spec.Ports[i].Protocol == "") {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return Route{}, false
	}
	route := Route{Known: true, Namespace: svc.Namespace, Service: svc.Name, WorkspaceID: svc.Labels[protocol.LabelWorkspaceID]}
	route.Addr = r.readyAddr(svc, sp.Name)
	return route, true
}

// SSHAddr is the address of the helper's SSH port in a ready pod of the workspace, "" when none.
func (r *Routes) SSHAddr(workspaceID string) string {
	objs, err := r.services.GetIndexer().ByIndex(byWorkspace, workspaceID)
	if err != nil {
		return ""
	}
	for _, obj := range objs {
		svc := obj.(*corev1.Service)
		for _, p := range svc.Spec.Ports {
			if p.Name == protocol.HelperSSHPortName {
				if addr := r.readyAddr(svc, p.Name); addr != "" {
					return addr
				}
			}
		}
	}
	return ""
}

// readyAddr is a ready endpoint (pod IP and target port) of svc's port named portName, "" if none.
func (r *Routes) readyAddr(svc *corev1.Service, portName string) string {
	objs, err := r.slices.GetIndexer().ByIndex(byService, svc.Namespace+"/"+svc.Name)
	if err != nil {
		return ""
	}
	for _, obj := range objs {
		s := obj.(*discoveryv1.EndpointSlice)
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		target := int32(0)
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == portName && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			// Ready nil means ready (the API's rule); a terminating pod is not ready.
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			return net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(target)))
		}
	}
	return ""
}

// AnyAddr is a ready endpoint of any Service of the agent (the first found), "" when none is
// ready: what the proxy dials at start to see whether the pod network is reachable.
func (r *Routes) AnyAddr() string {
	for _, obj := range r.services.GetStore().List() {
		svc := obj.(*corev1.Service)
		for _, p := range svc.Spec.Ports {
			if addr := r.readyAddr(svc, p.Name); addr != "" {
				return addr
			}
		}
	}
	return ""
}

// Count returns how many Services and EndpointSlices the informers hold.
func (r *Routes) Count() (services, slices int) {
	return len(r.services.GetStore().ListKeys()), len(r.slices.GetStore().ListKeys())
}
