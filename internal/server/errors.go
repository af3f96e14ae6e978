package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// apiError is an error with its code (which says its HTTP status, httpStatus) and the body the
// caller gets. Handlers return errors; fail maps them to status and body in one place (statusOf).
type apiError struct {
	code errs.Code
	body sdk.Error
}

func (e *apiError) Error() string   { return e.body.Message }
func (e *apiError) Code() errs.Code { return e.code }

func errBadRequest(msg string, validations ...sdk.Validation) error {
	return &apiError{code: errs.Invalid, body: sdk.Error{Message: msg, Validations: validations}}
}

func errNotFound(format string, args ...any) error {
	return &apiError{code: errs.NotFound, body: sdk.Error{Message: fmt.Sprintf(format, args...)}}
}

func errForbidden(msg string) error {
	return &apiError{code: errs.Forbidden, body: sdk.Error{Message: msg}}
}

func errUnauthorized(msg string) error {
	return &apiError{code: errs.Unauthorized, body: sdk.Error{Message: msg}}
}

func errConflict(msg, detail string) error {
	return &apiError{code: errs.Conflict, body: sdk.Error{Message: msg, Detail: detail}}
}

// errCode is an answer of any code, for those the helpers above do not name.
func errCode(code errs.Code, msg, detail string) error {
	return &apiError{code: code, body: sdk.Error{Message: msg, Detail: detail}}
}

// httpStatus is the one table from codes to HTTP statuses. Every code of errs.All is in it
// (TestEveryCodeHasAStatus).
var httpStatus = map[errs.Code]int{
	errs.Invalid:              http.StatusBadRequest,
	errs.Unauthorized:         http.StatusUnauthorized,
	errs.Forbidden:            http.StatusForbidden,
	errs.NotFound:             http.StatusNotFound,
	errs.Conflict:             http.StatusConflict,
	errs.NotOwner:             http.StatusConflict,
	errs.TooLarge:             http.StatusRequestEntityTooLarge,
	errs.UnsupportedMediaType: http.StatusUnsupportedMediaType,
	errs.LimitReached:         http.StatusTooManyRequests,
	errs.UnknownEndpoint:      http.StatusNotFound,
	errs.Unavailable:          http.StatusServiceUnavailable,
	errs.Unreachable:          http.StatusBadGateway,
	errs.Internal:             http.StatusInternalServerError,
}

// statusOf maps an error to its HTTP status and user-facing body, whose code is the error's
// (errs.CodeOf). Unknown errors are 500 with a generic message; their detail goes to the log only.
func statusOf(err error) (int, sdk.Error) {
	code, body := answerOf(err)
	status, ok := httpStatus[code]
	if !ok {
		code, body = errs.Internal, internalError
		status = http.StatusInternalServerError
	}
	body.Code = string(code)
	return status, body
}

var internalError = sdk.Error{Message: "internal error", Detail: "the server log has the details"}

// answerOf is the code and the body (without its code) of err: the texts of the errors callers
// meet most, else the code's general text and the error's own.
func answerOf(err error) (errs.Code, sdk.Error) {
	var ae *apiError
	var ve *workspace.ValidationError
	var mbe *http.MaxBytesError
	code := errs.CodeOf(err)
	switch {
	case errors.As(err, &ae):
		return ae.code, ae.body
	case errors.As(err, &mbe):
		return errs.TooLarge, sdk.Error{Message: "request body too large", Detail: fmt.Sprintf("the limit is %d bytes", mbe.Limit)}
	case errors.As(err, &ve):
		body := sdk.Error{Message: "invalid request"}
		for _, p := range ve.Problems {
			body.Validations = append(body.Validations, sdk.Validation{Field: p.Field, Detail: p.Detail})
		}
		return code, body
	case errors.Is(err, workspace.ErrTerminated), errors.Is(err, workspace.ErrIllegalTransition):
		return code, sdk.Error{Message: "illegal state change", Detail: err.Error()}
	case errors.Is(err, tfbackend.ErrStorageFull):
		// The detail without the message it starts with ("storage limit reached: ..."), which
		// clients print before it.
		return code, sdk.Error{Message: tfbackend.ErrStorageFull.Error(), Detail: strings.TrimPrefix(err.Error(), tfbackend.ErrStorageFull.Error()+": ")}
	case errors.Is(err, store.ErrQuota):
		return code, sdk.Error{Message: "workspace quota exceeded", Detail: err.Error()}
	case errors.Is(err, store.ErrConflict):
		return code, sdk.Error{Message: "already exists", Detail: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return code, sdk.Error{Message: "not found", Detail: err.Error()}
	case errors.Is(err, store.ErrNotOwner):
		return code, sdk.Error{Message: store.ErrNotOwner.Error(), Detail: err.Error()}
	case code == "" || code == errs.Internal:
		return errs.Internal, internalError
	}
	msg := generalText[code]
	if msg == "" {
		msg = strings.ReplaceAll(string(code), "_", " ")
	}
	return code, sdk.Error{Message: msg, Detail: err.Error()}
}

// generalText is the message of a coded error that answerOf does not know by name.
var generalText = map[errs.Code]string{
	errs.Invalid:   "invalid request",
	errs.NotFound:  "not found",
	errs.Conflict:  "conflict",
	errs.Forbidden: "forbidden",
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// decodeJSON decodes one JSON value from the request body strictly: a body over limit is 413,
// unknown fields, trailing data and type mismatches are 400 naming the field.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	return decodeBody(w, r, limit, v, true)
}

// decodeBody is decodeJSON with the choice of refusing unknown fields.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, strict bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return errUnsupportedMediaType(ct)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errBadRequest("malformed JSON body", sdk.Validation{Field: "body", Detail: "must hold exactly one JSON value"})
	}
	return nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func jsonError(err error) error {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return errBadRequest("empty request body", sdk.Validation{Field: "body", Detail: "a JSON object is required"})
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return errBadRequest("invalid request", sdk.Validation{Field: field, Detail: fmt.Sprintf("must be %s, got JSON %s", jsonKind(te.Type.Kind().String()), te.Value)})
	case errors.As(err, &se):
		return errBadRequest("malformed JSON body", sdk.Validation{Field: "body", Detail: fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errBadRequest("invalid request", sdk.Validation{Field: name, Detail: "unknown field"})
	}
	return errBadRequest("malformed JSON body", sdk.Validation{Field: "body", Detail: err.Error()})
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	case "ptr":
		return "an object"
	}
	return "a number"
}

func errUnsupportedMediaType(contentType string) error {
	return errCode(errs.UnsupportedMediaType, "unsupported content type", "send application/json, got "+contentType)
}
