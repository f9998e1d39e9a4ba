package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svat/partnerapi/internal/servertest"
)

// BenchmarkMeREST is GET /api/v1/me through the whole public handler
// (request id, REST gateway, transcoder, interceptors, cached token check)
// without the network, to count allocations per request.
func BenchmarkMeREST(b *testing.B) {
	h := servertest.New(b)
	tn := h.NewFastTenant("Bench") // the limiter stays on; the client is fast
	b.ReportAllocs()
	for b.Loop() {
		// A fresh request each time: the transcoder rewrites it in place.
		req := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		w := httptest.NewRecorder()
		h.Server.Public.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkMeConnect is the same call over the Connect protocol.
func BenchmarkMeConnect(b *testing.B) {
	h := servertest.New(b)
	tn := h.NewFastTenant("Bench") // the limiter stays on; the client is fast
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/partner.identity.v1.IdentityService/GetMe", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		w := httptest.NewRecorder()
		h.Server.Public.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkMeBaseline is a bare handler writing the same JSON, for scale.
func BenchmarkMeBaseline(b *testing.B) {
	body := []byte(`{"workspace":{"id":"wks_06h03v5hwxrxq2y8zvaw85bnsc","name":"Acme"},"app":{"clientId":"cli_06h03v5jbnsyf5qa3x05370hcc","name":"Zap"},"scopes":["contacts:read"],"tokenExpiresAt":"2027-11-22T06:23:39.207999Z"}`)
	hf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	req := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		hf.ServeHTTP(w, req)
	}
}
