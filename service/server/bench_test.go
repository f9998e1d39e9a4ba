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
	benchCreateLead(b, h, h.NewFastTenant("Bench").Token, "")
}

// benchCreateLead creates leads as BenchmarkCreateLead does, each with
// extra members (",\"customFields\":…", or none).
func benchCreateLead(b *testing.B, h *servertest.Harness, token, extra string) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body := `{"contact":{"email":"lead-` + strconv.Itoa(i%1000) + `@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"}` + extra + `}`
		benchPost(b, h, "/api/v1/leads", token, "bench-"+strconv.Itoa(i), body, http.StatusCreated)
	}
}

// benchPost sends one keyed JSON POST through the public handler and
// fails the benchmark on any other status than want.
func benchPost(b *testing.B, h *servertest.Harness, path, token, key, body string, want int) {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.Server.Public.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatal(w.Code, w.Body.String())
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

// benchValues are ten custom values, one of each type and a second text,
// as partnerbench's (e10) and (f10) send them; benchFieldDefs defines
// them.
const benchValues = `{"budget":25000,"interest":"crm","channels":["phone","email"],"newsletter":true,"start_date":"2027-01-15",` +
	`"call_at":"2026-12-01T09:30:00Z","website":"https://example.com/pricing","billing_email":"billing@example.com",` +
	`"notes":"Wants a demo next week, prefers mornings","team_size":"11-50"}`

var benchFieldDefs = []string{
	`{"object":"lead","key":"budget","label":"Budget","type":"number"}`,
	`{"object":"lead","key":"interest","label":"Interest","type":"select","options":[{"value":"crm","label":"CRM"},{"value":"erp","label":"ERP"}]}`,
	`{"object":"lead","key":"channels","label":"Channels","type":"multiselect","options":[{"value":"email","label":"Email"},{"value":"phone","label":"Phone"},{"value":"sms","label":"SMS"}]}`,
	`{"object":"lead","key":"newsletter","label":"Newsletter","type":"boolean"}`,
	`{"object":"lead","key":"start_date","label":"Start","type":"date"}`,
	`{"object":"lead","key":"call_at","label":"Call at","type":"datetime"}`,
	`{"object":"lead","key":"website","label":"Website","type":"url"}`,
	`{"object":"lead","key":"billing_email","label":"Billing email","type":"email"}`,
	`{"object":"lead","key":"notes","label":"Notes","type":"text"}`,
	`{"object":"lead","key":"team_size","label":"Team size","type":"text"}`,
}

// BenchmarkCreateLeadBatch is POST /api/v1/leads/batch of 100 leads, each
// with an inline contact, without custom values; BenchmarkCreateLeadBatchValues
// is the same with ten values each (partnerbench's (f) and (f10)).
func BenchmarkCreateLeadBatch(b *testing.B)       { benchCreateLeadBatch(b, "") }
func BenchmarkCreateLeadBatchValues(b *testing.B) { benchCreateLeadBatch(b, benchValues) }

// BenchmarkCreateLeadValues is BenchmarkCreateLead with ten custom values
// (partnerbench's (e10)).
func BenchmarkCreateLeadValues(b *testing.B) {
	h := servertest.New(b)
	benchCreateLead(b, h, benchFieldTenant(b, h), `,"customFields":`+benchValues)
}

// benchFieldTenant is a fast tenant with benchFieldDefs defined; it
// returns its token.
func benchFieldTenant(b *testing.B, h *servertest.Harness) string {
	ws, m := h.Workspace("Bench")
	id, sec := h.FastClient(ws, m, "contacts:read", "contacts:write", "leads:read", "leads:write", "fields:write")
	token := h.Token(id, sec, "")
	for _, d := range benchFieldDefs {
		if s, _, out := h.Do(http.MethodPost, "/api/v1/custom-fields", token, "application/json", d); s != http.StatusCreated {
			b.Fatal(s, string(out))
		}
	}
	return token
}

func benchCreateLeadBatch(b *testing.B, values string) {
	h := servertest.New(b)
	token := benchFieldTenant(b, h)
	extra := ""
	if values != "" {
		extra = `,"customFields":` + values
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		var sb strings.Builder
		sb.WriteString(`{"leads":[`)
		for j := range 100 {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"contact":{"email":"cbatch-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"},"externalId":"cform-%d-%d"%s}`,
				(n*100+j)%5000, n, j, extra)
		}
		sb.WriteString("]}")
		benchPost(b, h, "/api/v1/leads/batch", token, "bench-batch-"+strconv.Itoa(n), sb.String(), http.StatusOK)
	}
}
