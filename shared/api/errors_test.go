package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/durachat/durachat/shared/fault"
)

// answered writes err as a route's error answer.
func answered(t *testing.T, err error) (*httptest.ResponseRecorder, map[string]string) {
	t.Helper()
	rec := httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest(http.MethodGet, "/", nil), err)
	return rec, errorBody(t, rec)
}

// TestEachCodeIsAnsweredWithItsStatus pins the one mapping from a code to
// an HTTP status and Retry-After (docs/api.md's error table).
func TestEachCodeIsAnsweredWithItsStatus(t *testing.T) {
	tests := []struct {
		code       string
		status     int
		retryAfter string
	}{
		{fault.BadRequest, http.StatusBadRequest, ""},
		{fault.Unauthorized, http.StatusUnauthorized, ""},
		{fault.Forbidden, http.StatusForbidden, ""},
		{fault.NotFound, http.StatusNotFound, ""},
		{fault.MethodNotAllowed, http.StatusMethodNotAllowed, ""},
		{fault.Conflict, http.StatusConflict, ""},
		{fault.Deleting, http.StatusConflict, "5"},
		{fault.Expired, http.StatusGone, ""},
		{fault.TooLarge, http.StatusRequestEntityTooLarge, ""},
		{fault.Internal, http.StatusInternalServerError, ""},
		{fault.Unavailable, http.StatusServiceUnavailable, "10"},
		{"no_such_code", http.StatusInternalServerError, ""},
	}
	for _, tt := range tests {
		rec, body := answered(t, fmt.Errorf("wrapped: %w", &fault.Error{Code: tt.code, Message: "m"}))
		if rec.Code != tt.status || rec.Header().Get("Retry-After") != tt.retryAfter || body["code"] != tt.code {
			t.Errorf("code %s: answered %d, Retry-After %q, code %q; want %d, %q", tt.code, rec.Code, rec.Header().Get("Retry-After"), body["code"], tt.status, tt.retryAfter)
		}
	}
}

// TestARefusalTellsItsCauseAFailureDoesNot: a 4xx's message is the
// error's whole text, a 5xx's its Message alone.
func TestARefusalTellsItsCauseAFailureDoesNot(t *testing.T) {
	cause := errors.New("the cause")
	tests := []struct {
		err     error
		message string
	}{
		{&fault.Error{Code: fault.BadRequest, Field: "f", Message: "f: is wrong", Err: cause}, "f: is wrong: the cause"},
		{&fault.Error{Code: fault.BadRequest, Field: "f", Message: "f is wrong"}, "f is wrong"},
		{&fault.Error{Code: fault.Unavailable, Message: "retry later", Err: cause}, "retry later"},
		{cause, "internal error"},
	}
	for _, tt := range tests {
		_, body := answered(t, tt.err)
		if body["message"] != tt.message {
			t.Errorf("%v: message %q, want %q", tt.err, body["message"], tt.message)
		}
	}
}
