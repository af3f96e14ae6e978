// Package apiclient is the one JSON call of the daemons that talk to the server with a token of
// their own (the agent, the access proxy and the provisioner): the request, the bearer token, and a non-2xx answer
// as a *StatusError.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// StatusError is a non-2xx answer of the server. Match ErrorCode (HasCode), never Body's text.
type StatusError struct {
	// Code is the HTTP status.
	Code int
	Body string
	// ErrorCode is the `code` of the server's error body (sdk.Code*: "not_found", "not_owner",
	// ...); empty when the answer is not the server's own (a proxy's page, an older server).
	ErrorCode string
}

// HasCode reports whether err is (or wraps) a *StatusError whose body has code.
func HasCode(err error, code string) bool {
	var se *StatusError
	return errors.As(err, &se) && se.ErrorCode == code
}

// errorCode reads the `code` of an error body (sdk.Error), or "". The key is matched exactly (not
// case-insensitively, as encoding/json matches struct fields).
func errorCode(body []byte) string {
	var e map[string]json.RawMessage
	var code string
	if json.Unmarshal(body, &e) != nil || json.Unmarshal(e["code"], &code) != nil {
		return ""
	}
	return code
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Body) }

// Do sends body (if not nil) as JSON to baseURL+path with token, and decodes a 2xx answer into out
// (nil: the answer is read and dropped), reading at most maxBytes of it (0: no limit). hc nil means
// http.DefaultClient.
func Do(ctx context.Context, hc *http.Client, baseURL, token, method, path string, body, out any, maxBytes int64) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(baseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(b)), ErrorCode: errorCode(b)}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // for the connection's reuse
		return nil
	}
	var r io.Reader = resp.Body
	if maxBytes > 0 {
		r = io.LimitReader(resp.Body, maxBytes)
	}
	return json.NewDecoder(r).Decode(out)
}
