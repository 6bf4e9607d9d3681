// Package apierr is airlock's small set of typed errors. Front-ends turn a
// Code into an HTTP status or a micro error header in exactly one place each.
package apierr

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error kind.
type Code string

const (
	InvalidRequest  Code = "invalid_request"
	NotFound        Code = "not_found"
	NotAuthorized   Code = "not_authorized"
	Unauthenticated Code = "unauthenticated"
	AlreadyDecided  Code = "already_decided"
	Conflict        Code = "conflict"
	PolicyError     Code = "policy_error"
	Unavailable     Code = "unavailable"
	Internal        Code = "internal"
)

// Error carries a Code and a sentence a person can act on.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Err)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap attaches a code and message to err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns the Code of the first *Error in err's chain, Internal otherwise.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MessageOf is the sentence of the first *Error in err's chain (without
// its wrapping), or err's own text.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// Codes lists every code, for checks that each one's status is documented.
func Codes() []Code {
	return []Code{InvalidRequest, NotFound, NotAuthorized, Unauthenticated, AlreadyDecided, Conflict, PolicyError, Unavailable, Internal}
}

// HTTPStatus maps a Code to its HTTP status.
func HTTPStatus(c Code) int {
	switch c {
	case InvalidRequest:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case NotAuthorized:
		return http.StatusForbidden
	case Unauthenticated:
		return http.StatusUnauthorized
	case AlreadyDecided, Conflict:
		return http.StatusConflict
	case Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// FromCode rebuilds an Error from a code and description received over the
// wire (a micro error header), so callers can switch on CodeOf again.
func FromCode(code, description string) *Error {
	return &Error{Code: Code(code), Message: description}
}
