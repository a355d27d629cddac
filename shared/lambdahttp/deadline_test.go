package lambdahttp

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestRequestStopsBeforeTheGatewayTimeoutWithAJSON503: a request still
// running Margin before API Gateway's 30 s (counted from when the gateway
// received it) is answered with the documented JSON 503 and Retry-After,
// and its handler's context is cancelled.
func TestRequestStopsBeforeTheGatewayTimeoutWithAJSON503(t *testing.T) {
	tests := []struct {
		name     string
		received time.Duration // before the invocation
		work     time.Duration
		status   int
	}{
		{"quick request", 0, 0, http.StatusOK},
		{"slow request after a long cold start", IntegrationTimeout - Margin - 200*time.Millisecond, time.Minute, http.StatusServiceUnavailable},
		{"gateway time in the future", -time.Hour, 50 * time.Millisecond, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// synctest's clock: the answer comes at the deadline exactly.
			synctest.Test(t, func(t *testing.T) {
				cancelled := make(chan bool, 1)
				a := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-time.After(tt.work):
						w.WriteHeader(http.StatusOK)
						cancelled <- false
					case <-r.Context().Done():
						cancelled <- true
					}
				}))
				ev := event(http.MethodGet, "/v1/chats/c/view", "", nil)
				ev.RequestContext.TimeEpoch = time.Now().Add(-tt.received).UnixMilli()
				start := time.Now()
				resp := invoke(t, a, ev)
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.status, resp.Body)
				}
				if tt.status != http.StatusServiceUnavailable {
					return
				}
				if took := time.Since(start); took != 200*time.Millisecond {
					t.Errorf("answered after %v, want at the deadline (200 ms)", took)
				}
				var body struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || body.Error.Code != "unavailable" {
					t.Errorf("body %q, want the JSON error unavailable", resp.Body)
				}
				if resp.Headers["Retry-After"] == "" || resp.Headers["X-Request-Id"] == "" || resp.Headers["Content-Type"] != "application/json" {
					t.Errorf("headers %v, want Retry-After, X-Request-Id and JSON", resp.Headers)
				}
				if !<-cancelled {
					t.Error("the handler's context was not cancelled")
				}
			})
		})
	}
}
