package signature

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The official vector of the Standard Webhooks libraries (TestWebhookSign in
// standard-webhooks/standard-webhooks, libraries/go/webhook_test.go, and
// "sign function works" in libraries/javascript). Its secret is 24 bytes.
const (
	officialSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	officialID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	officialTimestamp = 1614265330
	officialBody      = `{"test": 2432232314}`
	officialSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// A rotation vector made by this package and checked by the TypeScript
// verifier's tests (clients/ts/test/webhook.test.js holds the same numbers):
// two 32-byte secrets, bytes 0..31 and 32..63, and a non-ASCII body.
const (
	rotationOld       = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	rotationNew       = "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	rotationID        = "evt_0123"
	rotationTimestamp = 1764115200
	rotationBody      = `{"id":"evt_0123","type":"lead.created","data":{"object":{"name":"Zoë"}}}`
	rotationSignature = "v1,Faokco/71zazSblomguLCN+68D/vZlbCOnXczlJkw3Y= v1,4YsAuJz+43ivYCvBwXJpyit4yAQNtqX+P2A9E/t7KkM="
)

func TestSignOfficialVector(t *testing.T) {
	got := Sign([]Secret{MustParseSecret(officialSecret)}, officialID, time.Unix(officialTimestamp, 0), []byte(officialBody))
	if got != officialSignature {
		t.Fatalf("Sign = %q, want the official %q", got, officialSignature)
	}
}

func TestVerifyOfficialVector(t *testing.T) {
	h := Headers{ID: officialID, Timestamp: "1614265330", Signature: officialSignature}
	secrets := []Secret{MustParseSecret(officialSecret)}
	if err := Verify(secrets, h, []byte(officialBody), time.Unix(officialTimestamp+60, 0), 0); err != nil {
		t.Fatalf("Verify(official vector) = %v, want nil", err)
	}
}

func TestSignRotationVector(t *testing.T) {
	secrets := []Secret{MustParseSecret(rotationOld), MustParseSecret(rotationNew)}
	got := Sign(secrets, rotationID, time.Unix(rotationTimestamp, 0), []byte(rotationBody))
	if got != rotationSignature {
		t.Fatalf("Sign = %q, want %q", got, rotationSignature)
	}
	// Each secret alone verifies the two-signature header: a receiver that
	// has either secret accepts deliveries during the overlap.
	for _, s := range []string{rotationOld, rotationNew} {
		h := Headers{ID: rotationID, Timestamp: "1764115200", Signature: rotationSignature}
		if err := Verify([]Secret{MustParseSecret(s)}, h, []byte(rotationBody), time.Unix(rotationTimestamp, 0), 0); err != nil {
			t.Errorf("Verify with %s alone = %v, want nil", s[:12], err)
		}
	}
}

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b {
		t.Fatal("two NewSecret calls returned the same secret")
	}
	if !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("NewSecret = %q, want prefix whsec_", a)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if err != nil || len(key) != 32 {
		t.Fatalf("NewSecret = %q: %d bytes, %v; want 32 bytes of standard base64", a, len(key), err)
	}
	s, err := ParseSecret(a)
	if err != nil {
		t.Fatalf("ParseSecret(NewSecret()) = %v", err)
	}
	if s.Encoded() != a {
		t.Fatalf("Encoded = %q, want %q", s.Encoded(), a)
	}
}

func TestSecretIsRedacted(t *testing.T) {
	s := MustParseSecret(rotationOld)
	for _, got := range []string{s.String(), s.GoString()} {
		if strings.Contains(got, "AAECAw") {
			t.Fatalf("printed secret %q shows the key", got)
		}
	}
}

func TestParseSecretRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // no prefix
		"whsk_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", // wrong prefix
		"whsec_", // empty key
		"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",            // missing padding
		"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n",         // trailing newline
		"whsec_AAECAwQF_gcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",           // URL alphabet
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 23)), // too short
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)), // too long
	} {
		if _, err := ParseSecret(s); !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrInvalidSecret", s, err)
		}
	}
}

func TestVerify(t *testing.T) {
	secret := MustParseSecret(NewSecret())
	other := MustParseSecret(NewSecret())
	now := time.Unix(1764115200, 0)
	body := []byte(`{"id":"evt_1","type":"lead.updated"}`)
	good := SignedHeaders([]Secret{secret}, "evt_1", now, body)
	tests := []struct {
		name    string
		secrets []Secret
		h       func(Headers) Headers
		body    []byte
		now     time.Time
		want    error
	}{
		{name: "valid", want: nil},
		{name: "one of several secrets", secrets: []Secret{other, secret}, want: nil},
		{name: "clock 5 min ahead", now: now.Add(5 * time.Minute), want: nil},
		{name: "clock 5 min behind", now: now.Add(-5 * time.Minute), want: nil},
		{name: "wrong secret", secrets: []Secret{other}, want: ErrNoMatch},
		{name: "no secrets", secrets: []Secret{}, want: ErrNoMatch},
		{name: "tampered body", body: []byte(`{"id":"evt_1","type":"lead.deleted"}`), want: ErrNoMatch},
		{name: "body with a trailing newline", body: append(append([]byte{}, body...), '\n'), want: ErrNoMatch},
		{name: "other id", h: func(h Headers) Headers { h.ID = "evt_2"; return h }, want: ErrNoMatch},
		{name: "stale", now: now.Add(5*time.Minute + time.Second), want: ErrTimestampTooOld},
		{name: "future", now: now.Add(-5*time.Minute - time.Second), want: ErrTimestampTooNew},
		{name: "timestamp not a number", h: func(h Headers) Headers { h.Timestamp = "2025-11-26T00:00:00Z"; return h }, want: ErrInvalidTimestamp},
		{name: "missing id", h: func(h Headers) Headers { h.ID = ""; return h }, want: ErrMissingHeader},
		{name: "missing timestamp", h: func(h Headers) Headers { h.Timestamp = ""; return h }, want: ErrMissingHeader},
		{name: "missing signature", h: func(h Headers) Headers { h.Signature = ""; return h }, want: ErrMissingHeader},
		{name: "unknown versions ignored", h: func(h Headers) Headers {
			h.Signature = "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,x " + h.Signature + " garbage"
			return h
		}, want: nil},
		{name: "good value under an unknown version", h: func(h Headers) Headers {
			h.Signature = "v2," + strings.TrimPrefix(h.Signature, "v1,")
			return h
		}, want: ErrNoMatch},
		{name: "truncated signature", h: func(h Headers) Headers { h.Signature = h.Signature[:20]; return h }, want: ErrNoMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets, h, b, n := []Secret{secret}, good, body, now
			if tt.secrets != nil {
				secrets = tt.secrets
			}
			if tt.h != nil {
				h = tt.h(h)
			}
			if tt.body != nil {
				b = tt.body
			}
			if !tt.now.IsZero() {
				n = tt.now
			}
			err := Verify(secrets, h, b, n, 0)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyTolerance(t *testing.T) {
	s := []Secret{MustParseSecret(NewSecret())}
	ts := time.Unix(1764115200, 0)
	h := SignedHeaders(s, "evt_1", ts, nil)
	if err := Verify(s, h, nil, ts.Add(90*time.Second), time.Minute); !errors.Is(err, ErrTimestampTooOld) {
		t.Fatalf("Verify 90 s late with 1 min tolerance = %v, want ErrTimestampTooOld", err)
	}
	if err := Verify(s, h, nil, ts.Add(50*time.Second), time.Minute); err != nil {
		t.Fatalf("Verify 50 s late with 1 min tolerance = %v, want nil", err)
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	s := []Secret{MustParseSecret(NewSecret())}
	ts := time.Unix(1764115200, 0)
	body := []byte(`{}`)
	h := http.Header{}
	SignedHeaders(s, "evt_9", ts, body).Set(h)
	if got := h.Get("Webhook-Timestamp"); got != "1764115200" {
		t.Fatalf("webhook-timestamp = %q, want 1764115200", got)
	}
	if err := Verify(s, HeadersFrom(h), body, ts, 0); err != nil {
		t.Fatalf("Verify(HeadersFrom(set headers)) = %v", err)
	}
}
