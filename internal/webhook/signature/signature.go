// Package signature signs and verifies webhook deliveries the Standard
// Webhooks way (https://www.standardwebhooks.com/), so a receiver can use any
// Standard Webhooks library, or a few lines of its own, to check that a
// delivery came from us and was not changed or replayed late.
//
// A signature is "v1," + base64 of HMAC-SHA256, keyed with the base64-decoded
// part of the secret after "whsec_", over "<webhook-id>.<webhook-timestamp>.<body>".
// While a secret rotation overlaps, a delivery carries one signature per
// secret, separated by spaces, and a receiver accepts the delivery when any
// of them verifies.
//
// The scheme is a few lines of the standard library; the official vector of
// the Standard Webhooks libraries is in the tests.
package signature

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a Standard Webhooks delivery. net/http canonicalises them
// on the wire (Webhook-Id); receivers read them case-insensitively.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every webhook signing secret.
const SecretPrefix = "whsec_"

// Secret key sizes. NewSecret draws SecretBytes; ParseSecret accepts what the
// Standard Webhooks spec allows (24 to 64 bytes), so its published vectors
// parse too.
const (
	SecretBytes    = 32
	minSecretBytes = 24
	maxSecretBytes = 64
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, either way, before Verify refuses it (the spec's 5 min).
const DefaultTolerance = 5 * time.Minute

// Errors of ParseSecret and Verify. Verify's errors say what was wrong
// without saying which secret or signature came close.
var (
	ErrInvalidSecret    = errors.New("invalid webhook secret")
	ErrMissingHeader    = errors.New("missing webhook header")
	ErrInvalidTimestamp = errors.New("invalid webhook-timestamp")
	ErrTimestampTooOld  = errors.New("webhook-timestamp too old")
	ErrTimestampTooNew  = errors.New("webhook-timestamp too far in the future")
	ErrNoMatch          = errors.New("no matching webhook signature")
)

// Secret is a parsed signing secret: the HMAC key. Its String and GoString
// are redacted so that a Secret in a log line or a %v does not leak it.
type Secret struct {
	key []byte
}

// NewSecret returns a fresh secret: "whsec_" + standard base64 of 32 bytes
// from crypto/rand (which never fails since Go 1.24).
func NewSecret() string {
	key := make([]byte, SecretBytes)
	_, _ = rand.Read(key)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ParseSecret checks the "whsec_" + base64 form and returns the key.
func ParseSecret(s string) (Secret, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("parse secret: %w: want prefix %q", ErrInvalidSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(rest)
	// The decoder skips newlines; the re-encoding check refuses them too.
	if err != nil || base64.StdEncoding.EncodeToString(key) != rest {
		return Secret{}, fmt.Errorf("parse secret: %w: not standard base64", ErrInvalidSecret)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return Secret{}, fmt.Errorf("parse secret: %w: %d bytes, want %d to %d", ErrInvalidSecret, len(key), minSecretBytes, maxSecretBytes)
	}
	return Secret{key: key}, nil
}

// MustParseSecret is ParseSecret for secrets known to be well formed (tests,
// constants); it panics otherwise.
func MustParseSecret(s string) Secret {
	sec, err := ParseSecret(s)
	if err != nil {
		panic(err)
	}
	return sec
}

// Encoded returns the secret in its "whsec_" form, to store or show once.
func (s Secret) Encoded() string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// String is redacted: use Encoded to get the secret itself.
func (s Secret) String() string { return SecretPrefix + "[redacted]" }

// GoString is redacted like String.
func (s Secret) GoString() string { return s.String() }

// mac computes the raw HMAC of one delivery under this secret.
func (s Secret) mac(id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Sign returns the webhook-signature header value of one delivery: one
// "v1,<base64>" per secret, in the order given, separated by spaces. The
// timestamp is taken in whole Unix seconds, as the webhook-timestamp header
// carries it; body must be the exact bytes sent.
func Sign(secrets []Secret, id string, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	var b strings.Builder
	for i, s := range secrets {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(s.mac(id, t, body)))
	}
	return b.String()
}

// Headers are the three Standard Webhooks headers of one delivery.
type Headers struct {
	ID        string
	Timestamp string
	Signature string
}

// SignedHeaders signs a delivery and returns its three headers.
func SignedHeaders(secrets []Secret, id string, ts time.Time, body []byte) Headers {
	return Headers{
		ID:        id,
		Timestamp: strconv.FormatInt(ts.Unix(), 10),
		Signature: Sign(secrets, id, ts, body),
	}
}

// HeadersFrom reads the three headers of a received request.
func HeadersFrom(h http.Header) Headers {
	return Headers{
		ID:        h.Get(HeaderID),
		Timestamp: h.Get(HeaderTimestamp),
		Signature: h.Get(HeaderSignature),
	}
}

// Set writes the three headers into h (an outgoing request's header).
func (hs Headers) Set(h http.Header) {
	h.Set(HeaderID, hs.ID)
	h.Set(HeaderTimestamp, hs.Timestamp)
	h.Set(HeaderSignature, hs.Signature)
}

// Verify checks a received delivery: all three headers present, the
// timestamp within tolerance of now either way (DefaultTolerance when
// tolerance is 0 or less), and at least one "v1," signature in the
// space-separated list matching one of the secrets. Signatures of other
// versions are ignored, as the spec asks; comparisons are constant-time.
func Verify(secrets []Secret, h Headers, body []byte, now time.Time, tolerance time.Duration) error {
	if h.ID == "" || h.Timestamp == "" || h.Signature == "" {
		return fmt.Errorf("verify webhook: %w", ErrMissingHeader)
	}
	sec, err := strconv.ParseInt(h.Timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("verify webhook: %w", ErrInvalidTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	tol := int64(tolerance / time.Second)
	switch n := now.Unix(); {
	case sec < n-tol:
		return fmt.Errorf("verify webhook: %w", ErrTimestampTooOld)
	case sec > n+tol:
		return fmt.Errorf("verify webhook: %w", ErrTimestampTooNew)
	}
	want := make([][]byte, len(secrets))
	for i, s := range secrets {
		want[i] = s.mac(h.ID, h.Timestamp, body)
	}
	for _, sig := range strings.Fields(h.Signature) {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				return nil
			}
		}
	}
	return fmt.Errorf("verify webhook: %w", ErrNoMatch)
}
