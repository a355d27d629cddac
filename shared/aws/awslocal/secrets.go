package awslocal

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Secrets is a local server for the two JSON protocols (awsJson1_1) the
// functions' bearer tokens are read with: Secrets Manager's CreateSecret,
// PutSecretValue and GetSecretValue, and SSM Parameter Store's
// PutParameter and GetParameter, in memory. A secret or parameter is named
// by its name or its ARN, as AWS accepts; errors are AWS's types
// (ResourceNotFoundException, ParameterNotFound, ...). A request must be
// signed with SigV4 for the service its target belongs to; the signature
// itself is not verified.
type Secrets struct {
	region, account string

	mu      sync.Mutex
	secrets map[string]*storedSecret // by name
	params  map[string]*storedParam  // by name
}

type storedSecret struct {
	arn, name, value, version string
	created                   time.Time
}

type storedParam struct {
	arn, name, typ, value string
	version               int64
	modified              time.Time
}

// NewSecrets returns an empty server whose ARNs name region and account.
func NewSecrets(region, account string) *Secrets {
	return &Secrets{region: region, account: account, secrets: map[string]*storedSecret{}, params: map[string]*storedParam{}}
}

// The services by the prefix of their X-Amz-Target, and the name each is
// signed for.
var secretTargets = map[string]string{"secretsmanager.": "secretsmanager", "AmazonSSM.": "ssm"}

func (s *Secrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	var service, op string
	for prefix, svc := range secretTargets {
		if name, ok := strings.CutPrefix(target, prefix); ok {
			service, op = svc, name
		}
	}
	switch {
	case r.Method != http.MethodPost || service == "":
		jsonAnswer(w, http.StatusBadRequest, map[string]string{"__type": "UnknownOperationException", "message": "unknown target " + target})
		return
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.1"):
		jsonAnswer(w, http.StatusBadRequest, map[string]string{"__type": "SerializationException", "message": "the content type must be application/x-amz-json-1.1"})
		return
	case !signedFor(r, service):
		jsonAnswer(w, http.StatusForbidden, map[string]string{"__type": "IncompleteSignatureException", "message": "the request is not signed for " + service})
		return
	}
	var in map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		jsonAnswer(w, http.StatusBadRequest, map[string]string{"__type": "SerializationException", "message": err.Error()})
		return
	}
	str := func(k string) string { v, _ := in[k].(string); return v }
	s.mu.Lock()
	defer s.mu.Unlock()
	var out any
	var status int
	switch service + "." + op {
	case "secretsmanager.CreateSecret":
		out, status = s.createSecret(str("Name"), str("SecretString"))
	case "secretsmanager.PutSecretValue":
		out, status = s.putSecretValue(str("SecretId"), str("SecretString"))
	case "secretsmanager.GetSecretValue":
		out, status = s.getSecretValue(str("SecretId"))
	case "ssm.PutParameter":
		overwrite, _ := in["Overwrite"].(bool)
		out, status = s.putParameter(str("Name"), str("Value"), str("Type"), overwrite)
	case "ssm.GetParameter":
		decrypt, _ := in["WithDecryption"].(bool)
		out, status = s.getParameter(str("Name"), decrypt)
	default:
		out, status = map[string]string{"__type": "UnknownOperationException", "message": "not served locally: " + target}, http.StatusBadRequest
	}
	jsonAnswer(w, status, out)
}

// signedFor reports whether r carries a SigV4 Authorization header whose
// credential scope names service.
func signedFor(r *http.Request, service string) bool {
	auth := r.Header.Get("Authorization")
	return strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") && strings.Contains(auth, "/"+service+"/aws4_request")
}

func jsonAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func awsError(typ, message string) (any, int) {
	return map[string]string{"__type": typ, "message": message}, http.StatusBadRequest
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.NewReplacer("-", "a", "_", "b").Replace(base64.RawURLEncoding.EncodeToString(b))[:n]
}

func (s *Secrets) secret(id string) *storedSecret {
	if sec, ok := s.secrets[id]; ok {
		return sec
	}
	for _, sec := range s.secrets {
		if sec.arn == id {
			return sec
		}
	}
	return nil
}

func (s *Secrets) createSecret(name, value string) (any, int) {
	if name == "" {
		return awsError("InvalidParameterException", "Name is required")
	}
	if _, ok := s.secrets[name]; ok {
		return awsError("ResourceExistsException", "the secret "+name+" already exists")
	}
	sec := &storedSecret{name: name, value: value, version: randomID(32), created: time.Now(),
		arn: fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", s.region, s.account, name, randomID(6))}
	s.secrets[name] = sec
	return map[string]string{"ARN": sec.arn, "Name": sec.name, "VersionId": sec.version}, http.StatusOK
}

func (s *Secrets) putSecretValue(id, value string) (any, int) {
	sec := s.secret(id)
	if sec == nil {
		return awsError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	sec.value, sec.version = value, randomID(32)
	return map[string]any{"ARN": sec.arn, "Name": sec.name, "VersionId": sec.version, "VersionStages": []string{"AWSCURRENT"}}, http.StatusOK
}

func (s *Secrets) getSecretValue(id string) (any, int) {
	sec := s.secret(id)
	if sec == nil {
		return awsError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	return map[string]any{"ARN": sec.arn, "Name": sec.name, "SecretString": sec.value, "VersionId": sec.version,
		"VersionStages": []string{"AWSCURRENT"}, "CreatedDate": float64(sec.created.UnixMilli()) / 1000}, http.StatusOK
}

func (s *Secrets) param(name string) *storedParam {
	if p, ok := s.params[name]; ok {
		return p
	}
	for _, p := range s.params {
		if p.arn == name {
			return p
		}
	}
	return nil
}

func (s *Secrets) putParameter(name, value, typ string, overwrite bool) (any, int) {
	switch {
	case name == "" || value == "":
		return awsError("ValidationException", "Name and Value are required")
	case typ != "String" && typ != "StringList" && typ != "SecureString":
		return awsError("ValidationException", "Type must be String, StringList or SecureString")
	}
	p := s.param(name)
	if p != nil && !overwrite {
		return awsError("ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
	}
	if p == nil {
		p = &storedParam{name: name, arn: fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", s.region, s.account, strings.TrimPrefix(name, "/"))}
		s.params[name] = p
	}
	p.typ, p.value, p.modified = typ, value, time.Now()
	p.version++
	return map[string]any{"Version": p.version, "Tier": "Standard"}, http.StatusOK
}

func (s *Secrets) getParameter(name string, decrypt bool) (any, int) {
	p := s.param(name)
	if p == nil {
		return awsError("ParameterNotFound", "")
	}
	value := p.value
	if p.typ == "SecureString" && !decrypt {
		// SSM answers the ciphertext; any opaque text stands for it.
		value = base64.StdEncoding.EncodeToString([]byte("encrypted:" + randomID(16)))
	}
	return map[string]any{"Parameter": map[string]any{"Name": p.name, "Type": p.typ, "Value": value, "Version": p.version,
		"ARN": p.arn, "DataType": "text", "LastModifiedDate": float64(p.modified.UnixMilli()) / 1000}}, http.StatusOK
}
