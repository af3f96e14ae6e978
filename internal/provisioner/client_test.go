package provisioner

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hangar-dev/hangar/internal/build"
)

// TestFinishToAnOlderServer: a server older than nothing_ran refuses it as an unknown field (its
// strict decoder, 400 naming it); the client then sends the outcome without it, so that the build
// is failed with its error rather than its report retried for ever. A server that knows the field
// gets it.
func TestFinishToAnOlderServer(t *testing.T) {
	type oldFinish struct { // FinishRequest before nothing_ran
		WorkerID string `json:"worker_id"`
		Canceled bool   `json:"canceled,omitempty"`
		Error    string `json:"error,omitempty"`
		State    []byte `json:"state,omitempty"`
	}
	for _, old := range []bool{true, false} {
		var got []map[string]any
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var raw map[string]any
			body := json.NewDecoder(r.Body)
			if err := body.Decode(&raw); err != nil {
				t.Errorf("decode: %v", err)
			}
			got = append(got, raw)
			b, _ := json.Marshal(raw)
			var o oldFinish
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&o); old && err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"code":"invalid","message":"invalid request","validations":[{"field":"nothing_ran","detail":"unknown field"}]}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"recorded":true}`))
		}))
		c := &Client{URL: srv.URL, Token: "t", HTTP: srv.Client()}
		err := c.Finish(context.Background(), "j1", "w1", build.Outcome{Error: "stopped before terraform applied anything", NothingRan: true})
		srv.Close()
		if err != nil {
			t.Fatalf("old server %v: %v", old, err)
		}
		want := 1
		if old {
			want = 2
		}
		if len(got) != want || got[0]["nothing_ran"] != true || got[len(got)-1]["error"] != "stopped before terraform applied anything" {
			t.Fatalf("old server %v: requests %v", old, got)
		}
		if _, sent := got[len(got)-1]["nothing_ran"]; old && sent {
			t.Errorf("the retry to an older server still sends nothing_ran: %v", got[1])
		}
	}
}
