// Package registrytest runs a real OCI registry in the test process (go-containerregistry's
// pkg/registry, the distribution spec's push and pull API over plain HTTP) so that tests never
// reach an outside registry: images and devcontainer Features are pushed to it from their sources
// in this repository (PushArchive, PushWorkspaceGitImage, PublishFeature).
//
// Start serves on loopback only, for the test process. StartInCluster also serves the same
// storage inside the test cluster's network namespace, at kubetest.NodeIP (10.99.0.2, on that
// namespace's loopback interface, where the relay and the test forge listen too): the real node's
// containerd runs in that namespace and the cluster's pods route to it, while the host has an
// unreachable route for 10.99.0.0/16 and never dials it. StartInCluster writes the node's
// containerd a certs.d/<10.99.0.2:PORT>/hosts.toml (plain HTTP, pull and resolve), which
// containerd reads at each pull, so that an image named 10.99.0.2:PORT/... is pulled from here
// while every other registry still goes to kubetest.NoRegistry and fails at once.
//
// Blobs are kept on disk in the test's temporary directory (registry.NewDiskBlobHandler), so the
// registry's memory does not grow with the images pushed, except for an upload in progress: the
// package holds a chunked (PATCH) upload in memory until its final PUT, so one upload costs up to
// its blob's size while it lasts. Manifests (small) stay in memory. Everything stops, and the
// hosts.toml is removed, when the test ends.
package registrytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// MaxRequests is how many requests Requests remembers (the latest ones).
const MaxRequests = 1000

// Registry is a running registry.
type Registry struct {
	// Addr is its loopback address (127.0.0.1:PORT), for the test process on the host.
	Addr string
	// InsideAddr is its address inside the cluster's network namespace (10.99.0.2:PORT), for the
	// real node's containerd and the cluster's pods; "" when it serves on loopback only. The host
	// cannot reach it.
	InsideAddr string
	// HostsTOML is the containerd hosts.toml written for InsideAddr ("" without one).
	HostsTOML string

	mu       sync.Mutex
	requests []Request
}

// Request is one request the registry answered.
type Request struct {
	Listener string // "loopback" or "inside"
	Method   string
	Path     string
	Status   int
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s %s %d", r.Listener, r.Method, r.Path, r.Status)
}

// Start runs a registry on loopback only.
func Start(t testing.TB) *Registry {
	t.Helper()
	return start(t, nil)
}

// StartInCluster runs a registry on loopback and inside c's network namespace, and points the real
// node's containerd at the inside address.
func StartInCluster(t testing.TB, c *kubetest.Cluster) *Registry {
	t.Helper()
	return start(t, c)
}

func start(t testing.TB, c *kubetest.Cluster) *Registry {
	blobs := filepath.Join(t.TempDir(), "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	h := registry.New(
		registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)),
		registry.Logger(log.New(io.Discard, "", 0)),
	)
	reg := &Registry{}
	var servers []*http.Server
	serve := func(name string, l net.Listener) {
		srv := &http.Server{
			Handler:           reg.record(name, h),
			ReadHeaderTimeout: 30 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("registrytest: serve %s %s: %v", name, l.Addr(), err)
			}
		}()
	}
	t.Cleanup(func() {
		for _, srv := range servers {
			_ = srv.Close()
		}
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("registrytest: listen on loopback: %v", err)
	}
	reg.Addr = l.Addr().String()
	serve("loopback", l)
	if c == nil {
		return reg
	}

	in, err := c.ListenInside(kubetest.NodeIP + ":0")
	if err != nil {
		t.Fatalf("registrytest: listen inside the cluster's network namespace: %v", err)
	}
	reg.InsideAddr = in.Addr().String()
	serve("inside", in)

	// containerd names a registry's host directory after its host:port, as the reference has it.
	dir := filepath.Join(c.Dir, "containerd", "certs.d", reg.InsideAddr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("registrytest: remove the node's registry configuration: %v", err)
		}
	})
	reg.HostsTOML = filepath.Join(dir, "hosts.toml")
	if err := os.WriteFile(reg.HostsTOML, []byte(hostsTOML(reg.InsideAddr)), 0o644); err != nil {
		t.Fatalf("registrytest: %v", err)
	}
	return reg
}

// hostsTOML is the node's containerd configuration for the registry at addr: plain HTTP, and only
// pulls (nothing on the node pushes).
func hostsTOML(addr string) string {
	return fmt.Sprintf(`# Written by internal/testutil/registrytest for a test's registry; removed when the test ends.
server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, addr)
}

// Ref is the reference of repoTag ("hangar/workspace-git:dev" or "name@sha256:...") at the
// address pods and the node use: InsideAddr, or Addr for a registry on loopback only.
func (r *Registry) Ref(repoTag string) string {
	if r.InsideAddr != "" {
		return r.InsideAddr + "/" + repoTag
	}
	return r.LocalRef(repoTag)
}

// LocalRef is the reference of repoTag at the loopback address, for the test process.
func (r *Registry) LocalRef(repoTag string) string { return r.Addr + "/" + repoTag }

// Requests returns the requests answered so far (the latest MaxRequests), oldest first.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

func (r *Registry) record(listener string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, req)
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.requests) == MaxRequests {
			r.requests = append(r.requests[:0], r.requests[1:]...)
		}
		r.requests = append(r.requests, Request{Listener: listener, Method: req.Method, Path: req.URL.Path, Status: sw.status})
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// ctx bounds one push or check.
func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Minute)
}
