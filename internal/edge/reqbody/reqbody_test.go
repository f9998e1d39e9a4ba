package reqbody

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/internal/contract/apierror"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	_, _ = w.Write(b)
	_ = w.Close()
	return out.Bytes()
}

func request(body []byte, encoding string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if encoding != "" {
		r.Header.Set("Content-Encoding", encoding)
	}
	return r
}

func TestRead(t *testing.T) {
	t.Parallel()
	exact := bytes.Repeat([]byte("a"), MaxBytes)
	for _, tc := range []struct {
		name     string
		body     []byte
		encoding string
		wantLen  int
		wantCode string
	}{
		{"plain", []byte(`{"a":1}`), "", 7, ""},
		{"identity", []byte(`{"a":1}`), "identity", 7, ""},
		{"gzip", gz(t, []byte(`{"a":1}`)), "gzip", 7, ""},
		{"exactly the bound inflated", gz(t, exact), "gzip", MaxBytes, ""},
		{"one byte past the bound inflated", gz(t, append(exact, 'a')), "gzip", 0, apierror.CodePayloadTooLarge},
		{"bomb", gz(t, make([]byte, 4<<20)), "gzip", 0, apierror.CodePayloadTooLarge},
		{"over the bound on the wire", make([]byte, MaxBytes+1), "", 0, apierror.CodePayloadTooLarge},
		{"not gzip", []byte("hello"), "gzip", 0, apierror.CodeMalformedRequest},
		{"truncated gzip", gz(t, []byte("hello world"))[:12], "gzip", 0, apierror.CodeMalformedRequest},
		{"deflate", []byte("x"), "deflate", 0, apierror.CodeUnsupportedMedia},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(tc.body, tc.encoding)
			got, e := Read(r)
			if tc.wantCode != "" {
				if e == nil || e.Code != tc.wantCode {
					t.Fatalf("error %v, want %s", e, tc.wantCode)
				}
				if strings.Contains(e.Message, "EOF") || strings.Contains(e.Message, "gzip:") {
					t.Fatalf("message quotes the gzip reader: %q", e.Message)
				}
				return
			}
			if e != nil || len(got) != tc.wantLen {
				t.Fatalf("%d bytes, %v", len(got), e)
			}
			if r.Header.Get("Content-Encoding") != "" {
				t.Fatal("Content-Encoding left behind")
			}
		})
	}
}

// TestDecompressorStopsAtTheBound reads as connect-go does: through a
// LimitReader one byte past the bound, then draining the rest.
func TestDecompressorStopsAtTheBound(t *testing.T) {
	t.Parallel()
	d := NewGzipDecompressor()
	bomb := gz(t, make([]byte, 4<<20))
	if err := d.Reset(bytes.NewReader(bomb)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(d, MaxBytes+1))
	var ce *connect.Error
	if n != MaxBytes || !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted ||
		!strings.HasPrefix(ce.Message(), apierror.CodePayloadTooLarge) {
		t.Fatalf("read %d, %v", n, err)
	}
	// Draining after the bound costs nothing more.
	if k, err := io.Copy(io.Discard, d); k != 0 || err == nil {
		t.Fatalf("drain read %d, %v", k, err)
	}
	// Reused from a pool: a fresh stream reads fully.
	_ = d.Reset(bytes.NewReader(gz(t, []byte("ok"))))
	if b, err := io.ReadAll(d); err != nil || string(b) != "ok" {
		t.Fatalf("reuse: %q %v", b, err)
	}
	_ = d.Reset(strings.NewReader("junk"))
	if _, err := io.ReadAll(d); !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("junk: %v", err)
	}
}

func TestBound(t *testing.T) {
	t.Parallel()
	var got []byte
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = io.ReadAll(r.Body) })
	var refused *apierror.Error
	h := Bound(next, func(w http.ResponseWriter, r *http.Request, e *apierror.Error) { refused = e })
	h.ServeHTTP(httptest.NewRecorder(), request(gz(t, []byte("inflated")), "gzip"))
	if string(got) != "inflated" || refused != nil {
		t.Fatalf("got %q, refused %v", got, refused)
	}
	r := request(make([]byte, 10), "")
	r.ContentLength = MaxBytes + 1
	h.ServeHTTP(httptest.NewRecorder(), r)
	if refused == nil || refused.Code != apierror.CodePayloadTooLarge {
		t.Fatalf("declared length over the bound: %v", refused)
	}
}

// TestBoundInflatesAConnectGetMessage checks a Connect GET's compressed
// query message reaches the handler inflated, in the encoding it came in,
// and that one inflating past the bound, or not gzip, is refused.
func TestBoundInflatesAConnectGetMessage(t *testing.T) {
	t.Parallel()
	msg := `{"workspaceId":"ws_1"}`
	for _, tc := range []struct {
		name, query, want, wantCode string
	}{
		{"base64", "base64=1&message=" + base64.URLEncoding.EncodeToString(gz(t, []byte(msg))), base64.RawURLEncoding.EncodeToString([]byte(msg)), ""},
		{"raw", "message=" + url.QueryEscape(string(gz(t, []byte(msg)))), msg, ""},
		{"uncompressed untouched", "message=" + url.QueryEscape(msg), msg, ""},
		{"bomb", "base64=1&message=" + base64.RawURLEncoding.EncodeToString(gz(t, make([]byte, 4<<20))), "", apierror.CodePayloadTooLarge},
		{"not gzip", "base64=1&message=aGVsbG8", "", apierror.CodeMalformedRequest},
		{"not base64", "base64=1&message=%25%25", "", apierror.CodeMalformedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q url.Values
			var refused *apierror.Error
			h := Bound(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { q = r.URL.Query() }),
				func(w http.ResponseWriter, r *http.Request, e *apierror.Error) { refused = e })
			compression := "&compression=gzip"
			if tc.name == "uncompressed untouched" {
				compression = ""
			}
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/s/M?connect=v1&encoding=json"+compression+"&"+tc.query, nil))
			if tc.wantCode != "" {
				if refused == nil || refused.Code != tc.wantCode || q != nil {
					t.Fatalf("refused %v, handler saw %v", refused, q)
				}
				return
			}
			if refused != nil || q.Get("message") != tc.want || q.Has("compression") || q.Get("encoding") != "json" {
				t.Fatalf("refused %v, query %v", refused, q)
			}
		})
	}
}

func TestFrames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, encoding string
		ok                   bool
	}{
		{"two messages", "\x00\x00\x00\x00\x02ab\x00\x00\x00\x00\x00", "", true},
		{"empty body", "", "", true},
		{"cut in the prefix", "\x00\x00\x00", "", false},
		{"cut in the payload", "\x00\x00\x00\x00\x05ab", "", false},
		{"compressed without an encoding", "\x01\x00\x00\x00\x01a", "", false},
		{"compressed with gzip", "\x01\x00\x00\x00\x01a", "gzip", true},
		{"unknown flags", "\x80\x00\x00\x00\x00", "gzip", false},
	} {
		r := request([]byte(tc.body), "")
		if tc.encoding != "" {
			r.Header.Set("Grpc-Encoding", tc.encoding)
		}
		_, err := io.ReadAll(Frames(r))
		var ce *connect.Error
		if tc.ok != (err == nil) || (!tc.ok && (!errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
