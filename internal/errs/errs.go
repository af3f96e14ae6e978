// Package errs is Hangar's error vocabulary: a small set of codes that say what kind of refusal an
// error is (not found, invalid, conflict, ...), whatever package raised it. The domain's errors
// carry a code (Coded); the server maps each code to an HTTP status in one table and sends it as
// the `code` of every error answer, so that clients match codes, never message texts.
//
// It imports nothing of Hangar, so that every package (the domain's, the store, the backends) can
// give its errors a code without an import cycle.
package errs

import "errors"

// Code is the kind of a refusal. Its value is the `code` of the API's error answers.
type Code string

// The codes. Each has one HTTP status (internal/server, statusOf).
const (
	// Invalid is input that breaks a rule of its own: a malformed name, a bad field, a body that is
	// not a Terraform state.
	Invalid Code = "invalid"
	// Unauthorized is a missing or unknown credential.
	Unauthorized Code = "unauthorized"
	// Forbidden is a known caller asking for what only another may do (an admin).
	Forbidden Code = "forbidden"
	// NotFound is something that does not exist, or that the caller may not see.
	NotFound Code = "not_found"
	// Conflict is a request the current state refuses: a name taken, an illegal state change, a
	// build while another runs, a quota.
	Conflict Code = "conflict"
	// NotOwner is a provisioner reporting on a job it does not own, or that has ended.
	NotOwner Code = "not_owner"
	// TooLarge is a request body over its limit.
	TooLarge Code = "too_large"
	// UnsupportedMediaType is a body of another content type than the endpoint reads.
	UnsupportedMediaType Code = "unsupported_media_type"
	// LimitReached is a limit on open connections reached; trying again later may succeed.
	LimitReached Code = "limit_reached"
	// UnknownEndpoint is a path and method the server does not serve (an older server, a typo).
	UnknownEndpoint Code = "unknown_endpoint"
	// Unavailable is something the request needs that is not there right now (a helper not yet
	// connected to this replica); trying again later may succeed.
	Unavailable Code = "unavailable"
	// Unreachable is another server replica that the request had to go through and could not reach.
	Unreachable Code = "unreachable"
	// Internal is a failure of the server itself; the server log has the details.
	Internal Code = "internal"
)

// All lists every code, for the tests that check each has a status and a name in the SDK.
var All = []Code{Invalid, Unauthorized, Forbidden, NotFound, Conflict, NotOwner, TooLarge,
	UnsupportedMediaType, LimitReached, UnknownEndpoint, Unavailable, Unreachable, Internal}

// Coded is an error that says its code.
type Coded interface {
	error
	Code() Code
}

// CodeOf is the code of the first error in err's chain that has one, or "" (an unexpected
// failure: Internal to a caller).
func CodeOf(err error) Code {
	var c Coded
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}

// Is reports whether err's code is code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }

// New returns a sentinel error with a code and a text; callers compare with errors.Is and wrap it
// with fmt.Errorf("...: %w", err) to say more.
func New(code Code, text string) error { return &sentinel{code: code, text: text} }

type sentinel struct {
	code Code
	text string
}

func (e *sentinel) Error() string { return e.text }
func (e *sentinel) Code() Code    { return e.code }
