package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/protocol"
)

type fakeSender struct {
	fail bool
	got  []protocol.ProxyActivityRequest
}

func (f *fakeSender) Activity(_ context.Context, req protocol.ProxyActivityRequest) error {
	if f.fail {
		return errors.New("server down")
	}
	f.got = append(f.got, req)
	return nil
}

func TestActivityBatchesLatestPerWorkspace(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC))
	s := &fakeSender{}
	a := &Activity{Sender: s, Clock: clk}
	a.Record("ws-1", protocol.ActivityHTTP)
	clk.Advance(time.Second)
	a.Record("ws-1", protocol.ActivitySSH) // the latest wins
	a.Record("ws-2", protocol.ActivityHTTP)
	a.Record("", protocol.ActivityHTTP) // a route without a workspace label: nothing
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 1 || len(s.got[0].Activity) != 2 {
		t.Fatalf("sent %+v, want one report of 2 workspaces", s.got)
	}
	for _, p := range s.got[0].Activity {
		if p.WorkspaceID == "ws-1" && (p.Kind != protocol.ActivitySSH || !p.At.Equal(clk.Now())) {
			t.Errorf("ws-1: %+v, want the later SSH use", p)
		}
	}
	// Nothing new: nothing sent.
	if err := a.Flush(context.Background()); err != nil || len(s.got) != 1 {
		t.Errorf("empty flush sent %d reports (%v)", len(s.got), err)
	}
	// A failed report keeps its entries; newer use meanwhile replaces them.
	a.Record("ws-3", protocol.ActivityHTTP)
	s.fail = true
	if err := a.Flush(context.Background()); err == nil {
		t.Fatal("flush to a down server succeeded")
	}
	clk.Advance(time.Minute)
	a.Record("ws-3", protocol.ActivitySSH)
	s.fail = false
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := s.got[len(s.got)-1].Activity
	if len(last) != 1 || last[0].WorkspaceID != "ws-3" || last[0].Kind != protocol.ActivitySSH || !last[0].At.Equal(clk.Now()) {
		t.Errorf("after the failure: %+v, want ws-3's latest use", last)
	}
	// More workspaces than one request takes are split.
	for i := range protocol.MaxActivityItems + 5 {
		a.Record("ws-many-"+time.Duration(i).String(), protocol.ActivityHTTP)
	}
	before := len(s.got)
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(s.got) - before; n != 2 || len(s.got[before].Activity)+len(s.got[before+1].Activity) != protocol.MaxActivityItems+5 {
		t.Errorf("%d requests for %d workspaces", n, protocol.MaxActivityItems+5)
	}
}
