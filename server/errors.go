package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
)

// statusOf is the one table mapping domain error kinds to HTTP statuses.
var statusOf = map[string]int{
	model.EINVALID:       http.StatusBadRequest,
	model.EUNAUTHORIZED:  http.StatusUnauthorized,
	model.EFORBIDDEN:     http.StatusForbidden,
	model.ENOTFOUND:      http.StatusNotFound,
	model.ECONFLICT:      http.StatusConflict,
	model.EGONE:          http.StatusGone,
	model.ETOOLARGE:      http.StatusRequestEntityTooLarge,
	model.EUNPROCESSABLE: http.StatusUnprocessableEntity,
	model.ERATELIMITED:   http.StatusTooManyRequests,
	model.EINTERNAL:      http.StatusInternalServerError,
	model.EUNAVAILABLE:   http.StatusServiceUnavailable,
	model.EBADGATEWAY:    http.StatusBadGateway,
	"method_not_allowed": http.StatusMethodNotAllowed,
}

// ErrorBody is the error shape of API.md.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// statusClientClosedRequest is nginx's status for a request whose client went away before the answer.
const statusClientClosedRequest = 499

// fail writes err in the error shape. Errors without a domain kind are logged in full and shown as
// "internal error" so that no internal detail leaks; a failure to connect to the database or Redis is 503
// unavailable (with Retry-After): a dependency is down, and the client should retry later.
func fail(c *gin.Context, err error) {
	var de *model.Error
	if !errors.As(err, &de) && unreachable(err) {
		slog.WarnContext(c.Request.Context(), "a backing service is unreachable", "err", err,
			"method", c.Request.Method, "path", c.Request.URL.Path)
		c.Header("Retry-After", "1")
		de = &model.Error{Kind: model.EUNAVAILABLE, Message: "a service Halley depends on (database or Redis) cannot be reached; retry later"}
	}
	if de == nil && errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		// The client went away (closed the connection, its own timeout): nobody reads an answer and nothing is
		// wrong with the server. 499 (nginx's "client closed request") in the access log, no error log line.
		slog.InfoContext(c.Request.Context(), "request cancelled by the client",
			"method", c.Request.Method, "path", c.Request.URL.Path)
		c.AbortWithStatus(statusClientClosedRequest)
		return
	}
	if de == nil {
		slog.ErrorContext(c.Request.Context(), "internal error", "err", err,
			"method", c.Request.Method, "path", c.Request.URL.Path)
		de = &model.Error{Kind: model.EINTERNAL, Code: "internal", Message: "internal error; see the server log (request id " + c.GetString(ctxRequestID) + ")"}
	}
	status, ok := statusOf[de.Kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	code := de.Code
	if code == "" {
		code = de.Kind
	}
	details := de.Details
	if details == nil {
		details = map[string]any{}
	}
	// A 429 or 503 that knows when to come back says so in the header HTTP clients read.
	if ra, ok := details["retry_after"].(int); ok && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		c.Header("Retry-After", strconv.Itoa(max(ra, 1)))
	}
	c.AbortWithStatusJSON(status, ErrorBody{Error: ErrorDetail{Code: code, Message: de.Message, Details: details}})
}

// bindJSON decodes the request body strictly: one JSON value, no unknown fields. Errors are domain errors
// (400 malformed, 413 too large) that say what is wrong.
func bindJSON(c *gin.Context, v any) error {
	if c.Request.Body == nil {
		return model.CodedError(model.EINVALID, "empty_body", "the request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return decodeError(err)
		}
		return model.CodedError(model.EINVALID, "malformed_json", "the body must hold exactly one JSON value")
	}
	return nil
}

// bindOptionalJSON is bindJSON that accepts an empty body (leaving v as it is).
func bindOptionalJSON(c *gin.Context, v any) error {
	if c.Request.Body == nil || c.Request.ContentLength == 0 {
		return nil
	}
	err := bindJSON(c, v)
	if de, ok := err.(*model.Error); ok && de.Code == "empty_body" {
		return nil
	}
	return err
}

func decodeError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return model.CodedError(model.ETOOLARGE, "body_too_large", "the request body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return model.CodedError(model.EINVALID, "empty_body", "the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return model.CodedError(model.EINVALID, "malformed_json", "malformed JSON: unexpected end of input")
	case errors.As(err, &se):
		return model.CodedError(model.EINVALID, "malformed_json", "malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return model.CodedError(model.EINVALID, "malformed_json", "the body must be a JSON %s", jsonKind(ute.Type.String()))
		}
		return model.CodedError(model.EINVALID, "invalid_field", "field %q must be %s, not %s", field, jsonKind(ute.Type.String()), ute.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return model.CodedError(model.EINVALID, "unknown_field", "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return model.CodedError(model.EINVALID, "malformed_json", "malformed JSON: %v", err)
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map[") || strings.Contains(goType, "."):
		return "an object"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint") || strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return fmt.Sprintf("of type %s", goType)
}

// unreachable reports a failed connection attempt to a backing service. A connection lost in the middle of a
// query is not one: whether that query committed is unknown, so it stays a 500.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
