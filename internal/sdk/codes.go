package sdk

import "errors"

// The codes of Error.Code: what kind of error an answer is. Clients match these, never the
// message texts, which are for people. (The server's table, internal/server statusOf, gives each
// its HTTP status.)
const (
	CodeInvalid              = "invalid"                // 400: a field or the body breaks a rule; Validations name the fields
	CodeUnauthorized         = "unauthorized"           // 401: the token is missing or unknown
	CodeForbidden            = "forbidden"              // 403: only an admin may do this
	CodeNotFound             = "not_found"              // 404: no such thing, or one the caller may not see
	CodeConflict             = "conflict"               // 409: the current state refuses the request
	CodeNotOwner             = "not_owner"              // 409: a provisioner's job it does not own, or that has ended
	CodeTooLarge             = "too_large"              // 413: the body is over the endpoint's limit
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: the body is not application/json
	CodeLimitReached         = "limit_reached"          // 429: too many connections open; try again later
	CodeUnknownEndpoint      = "unknown_endpoint"       // 404: the server has no such endpoint
	CodeUnavailable          = "unavailable"            // 503: try again later, or another replica
	CodeUnreachable          = "unreachable"            // 502: another server replica could not be reached
	CodeInternal             = "internal"               // 500: the server failed; its log has the details
)

// Codes lists every code.
var Codes = []string{CodeInvalid, CodeUnauthorized, CodeForbidden, CodeNotFound, CodeConflict, CodeNotOwner,
	CodeTooLarge, CodeUnsupportedMediaType, CodeLimitReached, CodeUnknownEndpoint, CodeUnavailable, CodeUnreachable, CodeInternal}

// IsCode reports whether err is (or wraps) an *APIError whose body has code. An answer that is not
// the server's own (a proxy's page, an older server) has no code and matches none.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Body.Code == code
}
