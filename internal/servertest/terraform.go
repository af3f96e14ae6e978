package servertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/provisioner"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// TF is a server on the fake clock whose Terraform builds run the real terraform binary in
// in-process provisioners, with the user "dev" (besides the admin).
type TF struct {
	*Env
	T       testing.TB
	Ctx     context.Context
	Builder *tfbackend.Service
	Admin   *sdk.Client
	Dev     *sdk.Client
	// Ended receives every build that ends.
	Ended chan build.Build

	tfPath  string
	mu      sync.Mutex
	stops   []func()
	started int
}

// NewTF starts a TF on engine with provisioners in-process provisioner daemons; opts change the
// server's options.
func NewTF(t testing.TB, engine string, provisioners int, opts ...Option) *TF {
	t.Helper()
	tfPath, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("this test runs the real terraform, which is not on PATH: %v", err)
	}
	w := &TF{T: t, Ended: make(chan build.Build, 256), tfPath: tfPath}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.Ctx = ctx
	w.Env = NewWith(t, engine, func(o *server.Options) {
		w.Builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger})
		w.Builder.Observe(func(b build.Build) { w.Ended <- b })
		o.Builder = w.Builder
		for _, opt := range opts {
			opt(o)
		}
	})
	t.Cleanup(w.StopProvisioners)
	for range provisioners {
		w.StartProvisioner()
	}
	if w.Admin, err = sdk.New(w.URL, w.AdminToken); err != nil {
		t.Fatal(err)
	}
	u, err := w.Admin.CreateUser(ctx, sdk.CreateUserRequest{Username: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Dev, err = sdk.New(w.URL, u.Token); err != nil {
		t.Fatal(err)
	}
	return w
}

// StartProvisioner starts one more in-process provisioner daemon running the real terraform.
func (w *TF) StartProvisioner() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithCancel(w.Ctx)
	d := &provisioner.Daemon{Coord: w.Builder, Runner: &terraform.Runner{TerraformPath: w.tfPath, WorkRoot: w.T.TempDir(), GracePeriod: time.Minute},
		WorkerID: fmt.Sprintf("%stest/%d", tfbackend.InProcessWorkerPrefix, w.started), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	w.started++
	w.stops = append(w.stops, func() { cancel(); <-done })
}

// StopProvisioners stops every provisioner daemon (and waits for them): builds queued afterwards
// stay pending.
func (w *TF) StopProvisioners() {
	w.mu.Lock()
	stops := w.stops
	w.stops = nil
	w.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// PushModule pushes files (name → content) as a new version of the terraform template name.
func (w *TF) PushModule(name string, files map[string]string) sdk.Template {
	w.T.Helper()
	dir := w.T.TempDir()
	for n, text := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o644); err != nil {
			w.T.Fatal(err)
		}
	}
	archive, err := tfmodule.Pack(dir)
	if err != nil {
		w.T.Fatal(err)
	}
	t, err := w.Admin.PushTemplateVersion(w.Ctx, name, sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive})
	if err != nil {
		w.T.Fatal(err)
	}
	return t
}

// WaitBuilds waits for n builds to end (terraform runs for real: this waits on its completion, it
// does not sleep), and returns them.
func (w *TF) WaitBuilds(n int) []build.Build {
	w.T.Helper()
	var out []build.Build
	for len(out) < n {
		select {
		case b := <-w.Ended:
			out = append(out, b)
		case <-time.After(3 * time.Minute):
			w.T.Fatalf("waited 3 minutes for %d builds to end; %d did", n, len(out))
		}
	}
	return out
}
