// Package model is Halley's domain core: templates and their definitions, instances, node states, tasks,
// bookmarks, timers, plugins and users, their state transitions and validation, the error codes, and the store
// interfaces the services use. It imports nothing of Halley's and no framework.
package model

import (
	"errors"
	"fmt"
)

// Error codes. The HTTP layer maps each to a status through one table (server/errors.go); any error without
// a code is an internal error: logged in full, shown to the user as "internal error".
const (
	EINVALID       = "invalid"       // malformed input: 400
	EUNAUTHORIZED  = "unauthorized"  // no or bad credentials: 401
	EFORBIDDEN     = "forbidden"     // authenticated but not allowed: 403
	ENOTFOUND      = "not_found"     // 404
	ECONFLICT      = "conflict"      // state conflict, e.g. a task already decided: 409
	EGONE          = "gone"          // it existed and was removed for good, e.g. an archived instance: 410
	ETOOLARGE      = "too_large"     // body too large: 413
	EUNPROCESSABLE = "unprocessable" // well-formed but invalid, e.g. a cyclic template: 422
	ERATELIMITED   = "rate_limited"  // 429
	EINTERNAL      = "internal"      // 500
	EUNAVAILABLE   = "unavailable"   // a service Halley needs (database, Redis) cannot be reached: 503
	EBADGATEWAY    = "bad_gateway"   // a system Halley called refused or failed, e.g. a channel's test message: 502
)

// Error is a domain error: Kind is one of the codes above and decides the HTTP status; Code is the
// snake_case code shown to the client (it defaults to Kind); Message is for humans; Details is optional
// structured data (e.g. validation errors).
type Error struct {
	Kind    string
	Code    string
	Message string
	Details map[string]any
	// Err is a sentinel the error wraps (errors.Is finds it), such as ErrNoInstance, so that callers tell
	// errors of one kind apart without reading their text.
	Err error
}

func (e *Error) Error() string {
	if e.Code != "" && e.Code != e.Kind {
		return fmt.Sprintf("%s (%s): %s", e.Kind, e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

// Errorf returns an *Error of the given kind with a formatted message; the client code is the kind.
func Errorf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: kind, Message: fmt.Sprintf(format, args...)}
}

// CodedError returns an *Error of the given kind with a more specific client code, e.g.
// CodedError(ECONFLICT, "task_already_decided", "task %s is approved", id).
func CodedError(kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unwrap returns the sentinel e wraps, if any.
func (e *Error) Unwrap() error { return e.Err }

// Wrapping returns a copy of e that wraps the sentinel err.
func (e *Error) Wrapping(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

// WithDetails returns a copy of e with details set.
func (e *Error) WithDetails(d map[string]any) *Error {
	c := *e
	c.Details = d
	return &c
}

// ErrorKind returns the kind of err if it wraps an *Error, else EINTERNAL.
func ErrorKind(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return EINTERNAL
}

// IsKind reports whether err wraps an *Error of the given kind.
func IsKind(err error, kind string) bool { return err != nil && ErrorKind(err) == kind }

// ErrNoInstance is wrapped by the ENOTFOUND of a store asked to lock or change an instance that does not exist
// (InstanceStore.UpdateInstance, BatchInstanceStore.UpdateInstances): the engine tells it from a not-found raised
// inside its own step.
var ErrNoInstance = errors.New("no such instance")

// ErrStaleRead says a step acted on something another step took first (e.g. a queued message it consumed): the
// step is run again from fresh reads.
var ErrStaleRead = errors.New("a read of this step went stale")
