package model

import (
	"errors"
	"net/http"
)

// RetryableStatus reports whether an HTTP status from a provider means the
// same request may succeed later: timeouts, conflicts, throttling (429),
// Anthropic's overload (529) and every server error.
func RetryableStatus(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status == 529:
		return true
	case status >= 500:
		return true
	}
	return false
}

// StatusError classifies a failed call that got an HTTP answer. A 4xx other
// than the throttling and timeout ones (invalid request, image rejected,
// auth) is not retryable: sending the same request again would fail again.
func StatusError(status int, err error) *Error {
	return &Error{Retryable: RetryableStatus(status), Status: status, Err: err}
}

// TransportError classifies a failed call that got no HTTP answer: a
// dropped connection, a timeout, a cancelled context. It is retryable; the
// caller decides whether to retry now or later.
func TransportError(err error) *Error {
	return &Error{Retryable: true, Err: err}
}

// RefusedError is a model's answer that declined the content.
func RefusedError(err error) *Error {
	return &Error{Refused: true, Err: err}
}

// ErrRefused is the cause of a refusal reported by a stop reason rather
// than by an error message.
var ErrRefused = errors.New("the model declined to answer")

// Classify returns err as a *Error, keeping an existing classification and
// treating anything else (a context deadline, a network failure) as a
// transport error. It returns nil for nil.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return err
	}
	return TransportError(err)
}
