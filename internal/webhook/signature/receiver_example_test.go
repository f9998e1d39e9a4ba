package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svat/partnerapi/internal/webhook/signature"
)

// The receiver example of the docs verifies with the standard library
// only; its verify function is copied here as written there, and checked
// against this package's signatures.

// verify checks a Standard Webhooks delivery: the timestamp within 5
// minutes of now, and one "v1," signature equal to the HMAC-SHA256 of
// "<webhook-id>.<webhook-timestamp>.<body>", keyed with the base64-decoded
// part of the secret after "whsec_". body must be the bytes received.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return errors.New("WEBHOOK_SECRET is not whsec_<base64>")
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not Unix seconds")
	}
	if d := now.Unix() - sent; d > 300 || d < -300 {
		return errors.New("webhook-timestamp is more than 5 minutes off")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) { // several during a secret rotation
		version, value, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(value)
		if version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

func TestDocsReceiverVerify(t *testing.T) {
	secret := signature.NewSecret()
	other := signature.MustParseSecret(signature.NewSecret())
	s := signature.MustParseSecret(secret)
	now := time.Now()
	body := []byte(`{"id":"evt_1","type":"lead.created"}`)
	for _, tt := range []struct {
		name    string
		secrets []signature.Secret
		ts      time.Time
		body    []byte
		ok      bool
	}{
		{"signed", []signature.Secret{s}, now, body, true},
		{"rotation", []signature.Secret{other, s}, now, body, true},
		{"wrong secret", []signature.Secret{other}, now, body, false},
		{"stale", []signature.Secret{s}, now.Add(-301 * time.Second), body, false},
		{"tampered", []signature.Secret{s}, now, []byte(`{"id":"evt_1","type":"lead.deleted"}`), false},
	} {
		h := http.Header{}
		signature.SignedHeaders(tt.secrets, "evt_1", tt.ts, tt.body).Set(h)
		if err := verify(secret, h, body, now); (err == nil) != tt.ok {
			t.Errorf("%s: verify = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
