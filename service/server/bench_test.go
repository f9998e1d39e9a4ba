package server_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// The benchmarks below run one request through the whole public handler
// (request id, observation, REST gateway or Connect handler, gate,
// interceptors, cached token check, the database where the request needs
// it) without the network, to count allocations and CPU per request:
// `go test -run '^$' -bench . -benchmem ./service/server`. partnerbench
// prints them after its load scenarios.

// BenchmarkMeREST is GET /api/v1/me.
func BenchmarkMeREST(b *testing.B) {
	h := servertest.New(b)
	tn := h.NewFastTenant("Bench") // the limiter stays on; the client is fast
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		w := httptest.NewRecorder()
		h.Server.Public.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkMeConnect is GetMe over the Connect protocol with JSON.
func BenchmarkMeConnect(b *testing.B) {
	benchMeConnect(b, "application/json", "{}")
}

// BenchmarkMeConnectProto is GetMe over the Connect protocol with binary
// protobuf, as generated clients (and partnerbench) send it.
func BenchmarkMeConnectProto(b *testing.B) {
	benchMeConnect(b, "application/proto", "")
}

func benchMeConnect(b *testing.B, ctype, body string) {
	h := servertest.New(b)
	tn := h.NewFastTenant("Bench")
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/partner.identity.v1.IdentityService/GetMe", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", ctype)
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

// BenchmarkListContacts is GET /api/v1/contacts?limit=100 over a
// workspace of 150 contacts: the query, the rows, the page's JSON.
func BenchmarkListContacts(b *testing.B) {
	h := servertest.New(b)
	tn := h.NewFastTenant("Bench")
	for i := range 150 {
		body := fmt.Sprintf(`{"email":"c%d@bench.test","firstName":"Ada","lastName":"Lovelace","companyName":"Analytical Engines Ltd"}`, i)
		if s, _, out := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body); s != http.StatusCreated {
			b.Fatal(s, string(out))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/contacts?limit=100", nil)
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		w := httptest.NewRecorder()
		h.Server.Public.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkCreateLead is POST /api/v1/leads with an inline contact (a
// known email after the first thousand) and an Idempotency-Key: one
// statement and one commit each.
func BenchmarkCreateLead(b *testing.B) {
	h := servertest.New(b)
	tn := h.NewFastTenant("Bench")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body := `{"contact":{"email":"lead-` + strconv.Itoa(i%1000) + `@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"}}`
		req := httptest.NewRequest(http.MethodPost, "/api/v1/leads", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i))
		w := httptest.NewRecorder()
		h.Server.Public.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkIssueToken is POST /api/oauth/token with HTTP Basic: the
// secret check and one token row (alone: no concurrent issuance shares
// its commit here).
func BenchmarkIssueToken(b *testing.B) {
	h := servertest.New(b)
	ws, m := h.Workspace("Bench")
	id, secret := h.FastClient(ws, m, "contacts:read", "leads:read")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/api/oauth/token", strings.NewReader("grant_type=client_credentials"))
		req.Header.Set("Authorization", basic)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.Server.Public.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
