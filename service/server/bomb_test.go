package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// gzipBomb is a gzip body just under 1 MiB that inflates to 960 MiB:
// 60 concatenated members of 16 MiB of zeros each (gzip readers read
// concatenated members as one stream).
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 16 {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	bomb := bytes.Repeat(member.Bytes(), 60)
	if len(bomb) > 1<<20 {
		t.Fatalf("bomb is %d bytes, over the wire limit", len(bomb))
	}
	return bomb
}

// rssKiB reads a field of /proc/self/status.
func rssKiB(t *testing.T, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// peakGrowth runs fn and returns how far the process's resident memory
// rose above where it started, in MiB: the peak (VmHWM, reset first
// through /proc/self/clear_refs) minus the resident size before.
func peakGrowth(t *testing.T, fn func()) int {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	before := rssKiB(t, "VmRSS")
	fn()
	return (rssKiB(t, "VmHWM") - before) / 1024
}

// envelope frames one gRPC message, compressed flag set.
func envelope(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = 1
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

type bombCase struct {
	name    string
	admin   bool
	method  string // POST unless set
	path    string
	headers []string
	body    []byte
	http2   bool
	check   func(t *testing.T, res *http.Response, body []byte)
}

// TestGzipBombIsRefusedOnEverySurface sends a 1 MiB gzip body that
// inflates to 960 MiB to every surface that takes a body, authorised so
// that it gets past the cheap checks, and checks each is answered 413
// (or ResourceExhausted with payload_too_large over gRPC) while the
// process's memory grows by less than 50 MiB. It is not parallel, so the
// memory it measures is its own.
func TestGzipBombIsRefusedOnEverySurface(t *testing.T) {
	h := servertest.New(t, servertest.Options{AdminToken: "bomb-admin-token"})
	tn := h.NewFastTenant("Bomb Co")
	bomb := gzipBomb(t)
	bearer := "Bearer " + tn.Token
	problem413 := func(t *testing.T, res *http.Response, body []byte) {
		if res.StatusCode != 413 || res.Header.Get("Content-Type") != "application/problem+json" ||
			decode(t, body)["code"] != "payload_too_large" {
			t.Fatalf("%d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
	connect413 := func(t *testing.T, res *http.Response, body []byte) {
		b := decode(t, body)
		if res.StatusCode != 413 || b["code"] != "resource_exhausted" || !strings.HasPrefix(b["message"].(string), "payload_too_large: ") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
	}
	grpcExhausted := func(t *testing.T, res *http.Response, body []byte) {
		status := res.Trailer.Get("Grpc-Status") + res.Header.Get("Grpc-Status")
		msg := res.Trailer.Get("Grpc-Message") + res.Header.Get("Grpc-Message")
		if strings.Contains(res.Header.Get("Content-Type"), "grpc-web") && status == "" {
			// gRPC-Web trailers travel in the body.
			status = between(string(body), "grpc-status:", "\r\n")
			msg = between(string(body), "grpc-message:", "\r\n")
		}
		if status != "8" || !strings.Contains(msg, "payload_too_large") {
			t.Fatalf("grpc-status %q, grpc-message %q, body %q", status, msg, body)
		}
	}
	cases := []bombCase{
		{name: "REST create contact", path: "/api/v1/contacts", body: bomb,
			headers: []string{"Authorization", bearer, "Content-Type", "application/json", "Content-Encoding", "gzip"}, check: problem413},
		{name: "REST create lead", path: "/api/v1/leads", body: bomb,
			headers: []string{"Authorization", bearer, "Content-Type", "application/json", "Content-Encoding", "gzip"}, check: problem413},
		{name: "token endpoint", path: "/api/oauth/token", body: bomb,
			headers: []string{"Authorization", basicHeader(tn.ClientID, tn.ClientSecret), "Content-Type", "application/x-www-form-urlencoded", "Content-Encoding", "gzip"},
			check: func(t *testing.T, res *http.Response, body []byte) {
				b := decode(t, body)
				if res.StatusCode != 413 || b["error"] != "invalid_request" || len(b) != 2 {
					t.Fatalf("%d %s", res.StatusCode, body)
				}
			}},
		{name: "Connect", path: "/partner.contact.v1.ContactService/CreateContact", body: bomb,
			headers: []string{"Authorization", bearer, "Content-Type", "application/json", "Connect-Protocol-Version", "1", "Content-Encoding", "gzip"},
			check:   connect413},
		{name: "gRPC", path: "/partner.contact.v1.ContactService/CreateContact", body: envelope(bomb[:len(bomb)-64]), http2: true,
			headers: []string{"Authorization", bearer, "Content-Type", "application/grpc", "Grpc-Encoding", "gzip", "Te", "trailers"},
			check:   grpcExhausted},
		{name: "gRPC-Web", path: "/partner.contact.v1.ContactService/CreateContact", body: envelope(bomb[:len(bomb)-64]),
			headers: []string{"Authorization", bearer, "Content-Type", "application/grpc-web+proto", "Grpc-Encoding", "gzip"},
			check:   grpcExhausted},
		{name: "admin REST", admin: true, path: "/admin/v1/workspaces", body: bomb,
			headers: []string{"Authorization", "Bearer bomb-admin-token", "Content-Type", "application/json", "Content-Encoding", "gzip"}, check: problem413},
		{name: "admin Connect", admin: true, path: "/partner.admin.v1.AdminService/CreateWorkspace", body: bomb,
			headers: []string{"Authorization", "Bearer bomb-admin-token", "Content-Type", "application/json", "Connect-Protocol-Version", "1", "Content-Encoding", "gzip"},
			check:   connect413},
		{name: "admin gRPC", admin: true, path: "/partner.admin.v1.AdminService/CreateWorkspace", body: envelope(bomb[:len(bomb)-64]), http2: true,
			headers: []string{"Authorization", "Bearer bomb-admin-token", "Content-Type", "application/grpc", "Grpc-Encoding", "gzip", "Te", "trailers"},
			check:   grpcExhausted},
		// A Connect GET carries its message, compressed, in the query:
		// bounded the same way and answered the same 413 (connect-go
		// would say ResourceExhausted, which Connect sends as 429).
		{name: "admin Connect GET", admin: true, method: http.MethodGet,
			path:    "/partner.admin.v1.AdminService/ListApiClients?connect=v1&encoding=json&compression=gzip&base64=1&message=" + base64.RawURLEncoding.EncodeToString(bomb[:2*len(bomb)/60]),
			headers: []string{"Authorization", "Bearer bomb-admin-token"},
			check:   connect413},
		// Without credentials the body is never read, let alone inflated.
		{name: "REST without a token", path: "/api/v1/contacts", body: bomb,
			headers: []string{"Content-Type", "application/json", "Content-Encoding", "gzip"},
			check: func(t *testing.T, res *http.Response, body []byte) {
				if res.StatusCode != 401 {
					t.Fatalf("%d %s", res.StatusCode, body)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, client := h.Public.URL, http.DefaultClient
			if tc.admin {
				base = h.Admin.URL
			}
			if tc.http2 {
				client = h.HTTP2Client()
			}
			var res *http.Response
			var body []byte
			growth := peakGrowth(t, func() {
				method, reqBody := http.MethodPost, io.Reader(bytes.NewReader(tc.body))
				if tc.method != "" {
					method, reqBody = tc.method, nil
				}
				req, _ := http.NewRequest(method, base+tc.path, reqBody)
				for i := 0; i+1 < len(tc.headers); i += 2 {
					req.Header.Set(tc.headers[i], tc.headers[i+1])
				}
				var err error
				if res, err = client.Do(req); err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(res.Body)
				res.Body.Close()
			})
			tc.check(t, res, body)
			if growth >= 50 {
				t.Fatalf("resident memory grew by %d MiB for one bomb", growth)
			}
			t.Logf("peak RSS growth %d MiB", growth)
		})
	}
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return strings.TrimSpace(v)
}

// TestBrokenGzipLeaksNothing: a body that claims gzip but is not is a 400
// in our words on every surface, never the decompressor's.
func TestBrokenGzipLeaksNothing(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Broken Gzip Co")
	for _, tc := range []struct {
		name, path string
		headers    []string
		field      string
	}{
		{"token", "/api/oauth/token", []string{"Authorization", basicHeader(tn.ClientID, tn.ClientSecret), "Content-Type", "application/x-www-form-urlencoded"}, "error_description"},
		{"REST", "/api/v1/contacts", []string{"Authorization", "Bearer " + tn.Token, "Content-Type", "application/json"}, "detail"},
		{"Connect", "/partner.contact.v1.ContactService/CreateContact", []string{"Authorization", "Bearer " + tn.Token, "Content-Type", "application/json", "Connect-Protocol-Version", "1"}, "message"},
		{"Connect token", "/partner.token.v1.TokenService/CreateToken", []string{"Authorization", basicHeader(tn.ClientID, tn.ClientSecret), "Content-Type", "application/json", "Connect-Protocol-Version", "1"}, "message"},
	} {
		for _, body := range []string{"grant_type=client_credentials", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03truncated"} {
			t.Run(tc.name, func(t *testing.T) {
				s, _, b := h.Do(http.MethodPost, tc.path, "", "", body, append(tc.headers, "Content-Encoding", "gzip")...)
				if s != 400 {
					t.Fatalf("%d %s", s, b)
				}
				msg, _ := decode(t, b)[tc.field].(string)
				if !strings.Contains(msg, "not valid gzip") || strings.Contains(msg, "decompress") || strings.Contains(msg, "EOF") || strings.Contains(msg, "header") {
					t.Fatalf("message %q", msg)
				}
			})
		}
	}
}
