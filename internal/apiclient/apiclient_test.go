package apiclient

import (
	"context"
	"encoding/json"
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

// TestErrorCode: a non-2xx answer's code is read from the server's error body, and only from it.
func TestErrorCode(t *testing.T) {
	for body, want := range map[string]string{
		`{"code":"not_owner","message":"the job is not claimed by this provisioner, or has ended"}`: "not_owner",
		`{"message":"not found"}`:                      "",
		`<html><body>Not Found</body></html>`:          "",
		`404 page not found`:                           "",
		`{"code":7}`:                                   "",
		`{"message":"x","detail":"\"code\":\"evil\""}`: "",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, body, http.StatusConflict)
		}))
		err := Do(context.Background(), srv.Client(), srv.URL, "tok", http.MethodPost, "/x", nil, nil, 0)
		srv.Close()
		var se *StatusError
		if !errors.As(err, &se) || se.ErrorCode != want || HasCode(err, "not_owner") != (want == "not_owner") {
			t.Errorf("body %s: %#v, want code %q", body, err, want)
		}
	}
}

// FuzzErrorCode: any body gives a code only if it is a JSON object whose code is that string.
func FuzzErrorCode(f *testing.F) {
	for _, s := range []string{`{"code":"not_found","message":"x"}`, `{"message":"x"}`, `[]`, `null`, `{"code":null}`, "\xff", `{"code":"a","code":"b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		code := errorCode(body)
		if code == "" {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			t.Fatalf("code %q from a body that is not a JSON object: %q", code, body)
		}
		var got string
		if json.Unmarshal(m["code"], &got) != nil || got != code {
			t.Fatalf("code %q, but the body's code is %s", code, m["code"])
		}
	})
}
