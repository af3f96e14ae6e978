package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

func ptr[T any](v T) *T { return &v }

// service is what devfile.Generate makes for a workspace with public port 8080, internal 9000.
func service(ns, name, agent, hostTemplate string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{protocol.LabelAgentID: agent},
			Annotations: map[string]string{protocol.AnnotationHostTemplate: hostTemplate, protocol.AnnotationPublicPorts: "8080"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
			{Name: "web", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
			{Name: "api", Port: 9000, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9000)},
		}},
	}
}

func slice(ns, svc, agent, ip string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-abcde",
			Labels: map[string]string{protocol.LabelAgentID: agent, discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("web"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)},
			{Name: ptr("api"), Port: ptr(int32(9000)), Protocol: ptr(corev1.ProtocolTCP)},
		},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}},
	}
}

// routesOn starts Routes on a fake clientset and returns a function that waits until lookup of
// host satisfies ok (informer events arrive asynchronously; no sleeps, a deadline).
func routesOn(t *testing.T, client *fake.Clientset, agent string) (*Routes, func(host string, ok func(Route) bool) Route) {
	t.Helper()
	r, err := NewRoutes(client, agent)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 1)
	r.OnChange(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if !r.Start(ctx) {
		t.Fatal("informers did not sync")
	}
	wait := func(host string, ok func(Route) bool) Route {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			got := r.Lookup(host)
			if ok(got) {
				return got
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("Lookup(%q) = %+v after 10 s", host, got)
			}
		}
	}
	return r, wait
}

func TestRoutes(t *testing.T) {
	ctx := context.Background()
	const ns, agent = "hangar-dev-1", "agent-1"
	tmpl := "{{.port}}-dev--alice.ws.example.com"
	client := fake.NewClientset(service(ns, "dev-1", agent, tmpl), slice(ns, "dev-1", agent, "10.0.0.7", true),
		// Another agent's workspace under the same host: never seen.
		service("other", "dev-2", "agent-2", "{{.port}}-bob--alice.ws.example.com"), slice("other", "dev-2", "agent-2", "10.0.0.9", true))
	r, wait := routesOn(t, client, agent)

	host := "8080-dev--alice.ws.example.com"
	got := wait(host, func(r Route) bool { return r.Addr != "" })
	if got != (Route{Known: true, Addr: "10.0.0.7:8080", Namespace: ns, Service: "dev-1"}) {
		t.Fatalf("Lookup = %+v", got)
	}
	for _, h := range []string{
		"9000-dev--alice.ws.example.com", // internal: a Service port, no route
		"5005-dev--alice.ws.example.com", // none: not even a Service port
		"8080-dev--alice.other.example.com",
		"8080-bob--alice.ws.example.com", // another agent's
		"8080-dev--alice", "", "ws.example.com",
	} {
		if got := r.Lookup(h); got.Known || got.Addr != "" {
			t.Errorf("Lookup(%q) = %+v, want no route", h, got)
		}
	}
	if s, e := r.Count(); s != 1 || e != 1 {
		t.Errorf("Count = %d services, %d slices; want only the agent's 1 and 1", s, e)
	}

	// Stopping: the endpoint is no longer ready (terminating), then gone. The route goes at once;
	// the host stays known (503, not 404).
	sl := slice(ns, "dev-1", agent, "10.0.0.7", false)
	sl.Endpoints[0].Conditions.Terminating = ptr(true)
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = wait(host, func(r Route) bool { return r.Addr == "" })
	if !got.Known {
		t.Errorf("a stopped workspace's host is unknown: %+v", got)
	}
	// Started again on a new pod.
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice(ns, "dev-1", agent, "10.0.0.8", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(host, func(r Route) bool { return r.Addr == "10.0.0.8:8080" })
	// Deleted: the Service goes, and the route with it even before the slice does.
	if err := client.CoreV1().Services(ns).Delete(ctx, "dev-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(host, func(r Route) bool { return !r.Known && r.Addr == "" })
}
