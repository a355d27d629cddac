// Package fault is durachat's one error type for an answer with an error
// code: what is wrong with a request (a field that does not decode, an
// image that is not one, a receipt used for other messages) and why the
// server could not answer it. Domain packages return an *Error, or wrap
// one with %w; the HTTP layer (package api) maps each code to its status,
// once. Nothing here knows HTTP, so any package may import it.
package fault

// The codes an answer carries, stable on the wire (docs/api.md lists when
// each is answered).
const (
	BadRequest       = "bad_request"
	Unauthorized     = "unauthorized"
	Forbidden        = "forbidden"
	NotFound         = "not_found"
	MethodNotAllowed = "method_not_allowed"
	Conflict         = "conflict"
	Deleting         = "deleting"
	Expired          = "expired"
	TooLarge         = "too_large"
	Internal         = "internal"
	Unavailable      = "unavailable"
)

// Error is an error with a code. Message is what the caller is told; by
// convention it names Field, the JSON path of the field at fault (or ""),
// so it reads on its own. Err is the cause, which errors.Is and errors.As
// see: a refused request (a 4xx) tells it the caller after Message, since
// it is about the caller's own input; a server's failure (a 5xx) only
// logs it.
type Error struct {
	Code    string
	Field   string
	Message string
	Err     error
}

// Error is Message and, after a colon, the cause.
func (e *Error) Error() string {
	switch {
	case e.Err == nil:
		return e.Message
	case e.Message == "":
		return e.Err.Error()
	}
	return e.Message + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Within is e, an error of a part of a larger input, named by the part's
// path in the whole: an error whose Message begins with its Field ("role
// is required") found in messages[0] is one of messages[0].role.
func (e *Error) Within(path string) *Error {
	return &Error{Code: e.Code, Field: path + "." + e.Field, Message: path + "." + e.Message, Err: e.Err}
}
