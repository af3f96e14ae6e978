package apiclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"message":"invalid token"}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"recorded":3}`))
	}))
	defer srv.Close()
	ctx := context.Background()
	var out struct{ Recorded int }
	if err := Do(ctx, srv.Client(), srv.URL, "tok", http.MethodPost, "/x", map[string]int{"a": 1}, &out, 0); err != nil || out.Recorded != 3 {
		t.Errorf("decoded %+v, %v", out, err)
	}
	// A caller that wants no answer gets no error for a good one (the proxy's activity report
	// failed every time before).
	if err := Do(ctx, srv.Client(), srv.URL, "tok", http.MethodPost, "/x", map[string]int{"a": 1}, nil, 0); err != nil {
		t.Errorf("out nil: %v", err)
	}
	var se *StatusError
	if err := Do(ctx, srv.Client(), srv.URL, "bad", http.MethodGet, "/x", nil, &out, 0); !errors.As(err, &se) || se.Code != 401 || se.Body != `{"message":"invalid token"}` {
		t.Errorf("refused: %v", err)
	}
}
