package stack

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Issuer is a local OpenID issuer: an RSA key made at start, its JWKS and
// discovery document served over HTTP, and RS256 tokens signed with it.
// The discovery document names an authorization endpoint (code flow with
// PKCE, S256) and a token endpoint, as an MCP client's sign-in needs to
// find them, but the issuer serves neither: a client's discovery goes as
// far as sending the user to sign in, and Token mints what a sign-in
// would give.
type Issuer struct {
	URL string // the issuer, "http://127.0.0.1:port/"
	key *rsa.PrivateKey
	kid string
	srv *http.Server
}

// StartIssuer makes a key and serves the issuer's documents on a free
// loopback port.
func StartIssuer() (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("issuer key: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	is := &Issuer{URL: "http://" + ln.Addr().String() + "/", key: key, kid: randomID(8)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"issuer": is.URL, "jwks_uri": is.URL + ".well-known/jwks.json",
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"authorization_endpoint":                is.URL + "oauth2/authorize",
			"token_endpoint":                        is.URL + "oauth2/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"code_challenge_methods_supported":      []string{"S256"}})
	})
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": is.kid,
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go is.srv.Serve(ln)
	return is, nil
}

// Close stops serving the issuer's documents.
func (is *Issuer) Close() error { return is.srv.Close() }

// Token signs claims, adding iss and, when absent, iat and exp (in ttl).
func (is *Issuer) Token(claims map[string]any, ttl time.Duration) (string, error) {
	c := map[string]any{"iss": is.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(ttl).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	return SignRS256(is.key, is.kid, c)
}

// SignRS256 makes a compact JWS of claims signed with key.
func SignRS256(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	head, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("claims: %w", err)
	}
	signing := b64(head) + "." + b64(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return signing + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Verifier checks tokens as an HTTP API JWT authorizer does: the key from
// the issuer's JWKS (found through its discovery document), an RS256
// signature, iss equal to the configured issuer, aud (or client_id) among
// the configured audiences, exp in the future and nbf, when present, in
// the past.
type Verifier struct {
	Issuer   string
	Audience []string
	client   *http.Client

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time
}

// NewVerifier checks tokens of issuer for audience.
func NewVerifier(a Authorizer) *Verifier {
	return &Verifier{Issuer: a.Issuer, Audience: a.Audience, client: &http.Client{Timeout: 5 * time.Second}}
}

// errUnauthorized is every reason a token is refused; API Gateway answers
// each with the same 401.
var errUnauthorized = errors.New("unauthorized")

// Verify checks token and returns its claims.
func (v *Verifier) Verify(ctx context.Context, token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not a compact JWS", errUnauthorized)
	}
	var head struct{ Alg, Kid string }
	if err := decodeSegment(parts[0], &head); err != nil {
		return nil, fmt.Errorf("%w: header: %v", errUnauthorized, err)
	}
	if head.Alg != "RS256" {
		return nil, fmt.Errorf("%w: algorithm %q", errUnauthorized, head.Alg)
	}
	key, err := v.key(ctx, head.Kid)
	if err != nil {
		return nil, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %v", errUnauthorized, err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return nil, fmt.Errorf("%w: signature does not verify", errUnauthorized)
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", errUnauthorized, err)
	}
	if iss, _ := claims["iss"].(string); iss != v.Issuer {
		return nil, fmt.Errorf("%w: issuer %q", errUnauthorized, iss)
	}
	if !v.audienceOK(claims) {
		return nil, fmt.Errorf("%w: audience %v", errUnauthorized, claims["aud"])
	}
	now := float64(time.Now().Unix())
	exp, ok := claims["exp"].(float64)
	if !ok || exp <= now {
		return nil, fmt.Errorf("%w: expired or no exp", errUnauthorized)
	}
	if nbf, ok := claims["nbf"].(float64); ok && nbf > now {
		return nil, fmt.Errorf("%w: not valid yet", errUnauthorized)
	}
	return claims, nil
}

func (v *Verifier) audienceOK(claims map[string]any) bool {
	var got []string
	switch a := claims["aud"].(type) {
	case string:
		got = append(got, a)
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok {
				got = append(got, s)
			}
		}
	}
	if cid, ok := claims["client_id"].(string); ok {
		got = append(got, cid)
	}
	for _, g := range got {
		for _, want := range v.Audience {
			if g == want {
				return true
			}
		}
	}
	return false
}

// key returns the issuer's key kid, fetching the JWKS when it is not
// known (at most once a second).
func (v *Verifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if time.Since(v.fetched) < time.Second {
		return nil, fmt.Errorf("%w: unknown key %q", errUnauthorized, kid)
	}
	v.fetched = time.Now()
	keys, err := v.fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: fetching the issuer's keys: %v", errUnauthorized, err)
	}
	v.keys = keys
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: unknown key %q", errUnauthorized, kid)
}

func (v *Verifier) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	var disc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, strings.TrimSuffix(v.Issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, err
	}
	var set struct {
		Keys []struct{ Kty, Kid, N, E string }
	}
	if err := v.getJSON(ctx, disc.JWKSURI, &set); err != nil {
		return nil, err
	}
	out := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil {
			continue
		}
		out[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return out, nil
}

func (v *Verifier) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(out)
}

func decodeSegment(seg string, out any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// claimStrings renders claims as API Gateway passes them to a payload 2.0
// function: every value a string, arrays as "[a b]".
func claimStrings(claims map[string]any) map[string]string {
	out := make(map[string]string, len(claims))
	for k, v := range claims {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = fmt.Sprint(e)
			}
			out[k] = "[" + strings.Join(parts, " ") + "]"
		default:
			b, _ := json.Marshal(x)
			out[k] = string(b)
		}
	}
	return out
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return b64(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
