// Package otlptest is an OTLP/HTTP trace receiver on loopback for tests: it decodes the protobuf
// export requests that OpenTelemetry exporters POST to /v1/traces and keeps the spans.
package otlptest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex.
type Span struct {
	Service            string // the resource's service.name
	Name               string
	TraceID, SpanID    string
	ParentSpanID       string // "" for a root span
	Kind               string // SPAN_KIND_SERVER, ...
	Links              []string
	Attributes         map[string]string
	StatusError        bool
	StartNano, EndNano uint64
}

// Receiver is a running receiver; URL is its base URL (an exporter's endpoint).
type Receiver struct {
	URL string
	mu  sync.Mutex
	got []Span
}

// Start starts a receiver, stopped when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	rc := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, fmt.Sprintf("decode: %v", err), http.StatusBadRequest)
		return
	}
	var spans []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Kind: s.GetKind().String(), Attributes: map[string]string{},
					StatusError: s.GetStatus().GetCode() == 2, StartNano: s.GetStartTimeUnixNano(), EndNano: s.GetEndTimeUnixNano()}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentSpanID = hex.EncodeToString(p)
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetSpanId()))
				}
				for _, kv := range s.GetAttributes() {
					v := kv.GetValue()
					switch {
					case v.GetStringValue() != "":
						sp.Attributes[kv.GetKey()] = v.GetStringValue()
					default:
						sp.Attributes[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
					}
				}
				spans = append(spans, sp)
			}
		}
	}
	rc.mu.Lock()
	rc.got = append(rc.got, spans...)
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// Spans returns the spans received so far.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Span(nil), rc.got...)
}
