package awslocal

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The server answers as the services do to what the SDK would never send:
// an unsigned request, one signed for the other service, the wrong
// content type, an unknown operation.
func TestTheSecretsServerRefusesWhatTheServicesRefuse(t *testing.T) {
	srv := httptest.NewServer(NewSecrets("us-east-1", "000000000000"))
	defer srv.Close()
	const sigSM = "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=00"
	tests := []struct {
		name, target, contentType, auth string
		status                          int
		errType                         string
	}{
		{"signed", "secretsmanager.GetSecretValue", "application/x-amz-json-1.1", sigSM, http.StatusBadRequest, "ResourceNotFoundException"},
		{"unsigned", "secretsmanager.GetSecretValue", "application/x-amz-json-1.1", "", http.StatusForbidden, "IncompleteSignatureException"},
		{"signed for SSM's target", "AmazonSSM.GetParameter", "application/x-amz-json-1.1", sigSM, http.StatusForbidden, "IncompleteSignatureException"},
		{"JSON 1.0", "secretsmanager.GetSecretValue", "application/x-amz-json-1.0", sigSM, http.StatusBadRequest, "SerializationException"},
		{"unknown operation", "secretsmanager.DeleteSecret", "application/x-amz-json-1.1", sigSM, http.StatusBadRequest, "UnknownOperationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"SecretId":"none"}`))
			req.Header.Set("X-Amz-Target", tt.target)
			req.Header.Set("Content-Type", tt.contentType)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status || !strings.Contains(string(body), `"__type":"`+tt.errType+`"`) {
				t.Errorf("%d %s, want %d %s", res.StatusCode, body, tt.status, tt.errType)
			}
		})
	}
}
