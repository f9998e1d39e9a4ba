package server_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// Credentials a fuzzed request may carry, chosen by the low bits of its
// auth byte; bit 3 sends it as HTTP/2 (gRPC needs it).
const (
	fuzzNoAuth = iota
	fuzzBearer
	fuzzBasic
	fuzzBadBearer
	fuzzHTTP2 = 4
)

// internalMarkers are texts that only Go, a framework or the database
// would write: none may reach a client.
var internalMarkers = []string{"decompress", "proto:", "strconv.", "unexpected EOF", "pgx", "SQLSTATE", "goroutine",
	"runtime error", "invalid syntax", "nil pointer", "unmarshal into"}

// FuzzRequest drives whole requests (method, path, query, headers, body,
// credentials) through the real public handler on a real database and
// asserts that no input gets a 5xx, an RPC Internal/Unknown/DataLoss, or
// an answer quoting internals. Its seeds (below and in
// testdata/fuzz/FuzzRequest) run in every `go test`; `make fuzz` runs it
// for FUZZTIME.
func FuzzRequest(f *testing.F) {
	h := servertest.New(f, servertest.Options{Config: func(c *server.Config) {
		// The budgets are not what is fuzzed: failed authentications would
		// soon lock the fuzzer's source out of the token endpoint.
		limits := ratelimit.DefaultConfig()
		limits.AuthFailures = 0
		c.Limits = &limits
	}})
	tn := h.NewFastTenant("Fuzz Co")
	bearer := "Bearer " + tn.Token
	basic := basicHeader(tn.ClientID, tn.ClientSecret)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"email":"gz@example.com"}`))
	_ = zw.Close()
	json := "Content-Type: application/json"
	connectJSON := json + "\nConnect-Protocol-Version: 1"
	form := "Content-Type: application/x-www-form-urlencoded"
	for _, s := range []struct {
		method, path, query, headers, body string
		auth                               uint8
	}{
		{"GET", "/api/v1/me", "", "", "", fuzzBearer},
		{"GET", "/api/v1/contacts", "limit=2&sort=createdAt&email=a%40b.co", "", "", fuzzBearer},
		{"GET", "/api/v1/contacts", "externalId=%00&cursor=abc", "", "", fuzzBearer},
		{"GET", "/api/v1/leads", "status=new&source=web_form&contactId=con_x&updatedSince=2026-01-01T00:00:00Z", "", "", fuzzBearer},
		{"GET", "/api/v1/leads", "limit=%ff", "", "", fuzzBadBearer},
		{"POST", "/api/v1/contacts", "", json, `{"email":"Ada@Example.com","firstName":"Ada","externalId":"x1"}`, fuzzBearer},
		{"POST", "/api/v1/contacts", "", json + "\nIdempotency-Key: k1", `{"phone":"+14155550123"}`, fuzzBearer},
		{"POST", "/api/v1/contacts", "", json + "\nContent-Encoding: gzip", gz.String(), fuzzBearer},
		{"POST", "/api/v1/leads", "", json, `{"contact":{"email":"l@example.com"},"source":"web_form","value":{"amount":1,"currency":"usd"}}`, fuzzBearer},
		{"POST", "/api/v1/leads", "", json, `{"contactId":"con_00000000000000000000000000","title":"\u0000"}`, fuzzBearer},
		{"POST", "/api/oauth/token", "", form, "grant_type=client_credentials&scope=contacts:read", fuzzBasic},
		{"POST", "/api/oauth/token", "", json, `{"grant_type":"client_credentials","client_id":"cli_x","client_secret":"s"}`, fuzzNoAuth},
		{"POST", "/api/oauth/revoke", "", form, "token=svat_x&token_type_hint=access_token", fuzzBasic},
		{"GET", "/.well-known/oauth-authorization-server", "", "Host: evil.example", "", fuzzNoAuth},
		{"POST", "/partner.identity.v1.IdentityService/GetMe", "", connectJSON, "{}", fuzzBearer},
		{"POST", "/partner.contact.v1.ContactService/ListContacts", "", connectJSON, `{"limit":5,"externalId":"a"}`, fuzzBearer},
		{"POST", "/partner.lead.v1.LeadService/CreateLead", "", connectJSON, `{"lead":{"contact":{"email":"c@example.com"}}}`, fuzzBearer},
		{"POST", "/partner.token.v1.TokenService/CreateToken", "", connectJSON, `{"grantType":"client_credentials"}`, fuzzBasic},
		{"POST", "/partner.contact.v1.ContactService/ListContacts", "", "Content-Type: application/grpc\nTe: trailers", "\x00\x00\x00\x00\x02\x08\x05", fuzzBearer | fuzzHTTP2},
		{"POST", "/partner.contact.v1.ContactService/ListContacts", "", "Content-Type: application/grpc-web+proto", "\x00\x00\x00\x00\x00", fuzzBearer},
		{"GET", "/partner.identity.v1.IdentityService/GetMe", "encoding=json&message=%7B%7D&connect=v1", "", "", fuzzBearer},
		{"POST", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "", "Content-Type: application/grpc", "", fuzzHTTP2},
		{"GET", "/readyz", "", "", "", fuzzNoAuth},
		{"DELETE", "/api/v1/contacts", "", "", "", fuzzBearer},
		// The single-record and batch routes (added after the first run).
		{"GET", "/api/v1/contacts/con_00000000000000000000000000", "", "", "", fuzzBearer},
		{"GET", "/api/v1/leads/%FF", "", "", "", fuzzBearer},
		{"PATCH", "/api/v1/contacts/%C3", "", "Content-Type: application/merge-patch+json\nIf-Match: \"x\"", `{"firstName":null}`, fuzzBearer},
		{"PATCH", "/api/v1/leads/lea_00000000000000000000000000", "", json, `{"status":"won","value":{"amount":1}}`, fuzzBearer},
		{"POST", "/api/v1/contacts/batch", "", json + "\nIdempotency-Key: b1", `{"contacts":[{"email":"b@example.com"},{"phone":"x"}]}`, fuzzBearer},
		{"POST", "/api/v1/leads/batch", "", json, `{"leads":[{"contactId":"con_x"},{"contact":{"email":"\u0000"}}]}`, fuzzBearer},
		{"POST", "/partner.lead.v1.LeadService/UpdateLead", "", connectJSON, `{"id":"lea_x","lead":{"status":"new"},"updateMask":"status"}`, fuzzBearer},
	} {
		f.Add(s.method, s.path, s.query, s.headers, []byte(s.body), s.auth)
	}

	f.Fuzz(func(t *testing.T, method, path, query, headers string, body []byte, auth uint8) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		target := "http://fuzz.test" + path
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequest(method, target, bytes.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/") {
			return // net/http would not hand such a request to a handler
		}
		req.RemoteAddr = "192.0.2.1:1234"
		for _, line := range strings.Split(headers, "\n") {
			name, value, ok := strings.Cut(line, ":")
			value = strings.TrimSpace(value)
			if !ok || !validHeader(name, value) {
				continue
			}
			switch http.CanonicalHeaderKey(name) {
			case "Host":
				req.Host = value
			case "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			default:
				req.Header.Add(name, value)
			}
		}
		switch auth & 3 {
		case fuzzBearer:
			req.Header.Add("Authorization", bearer)
		case fuzzBasic:
			req.Header.Add("Authorization", basic)
		case fuzzBadBearer:
			req.Header.Add("Authorization", "Bearer svat_"+strconv.Itoa(int(auth)))
		}
		if auth&fuzzHTTP2 != 0 {
			req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
		}
		rec := httptest.NewRecorder()
		start := time.Now()
		h.Server.Public.ServeHTTP(rec, req)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s %s took %v", method, target, d)
		}
		res := rec.Result()
		out := rec.Body.String()
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s: %d %s", method, target, res.StatusCode, out)
		}
		for _, k := range []string{"Grpc-Status"} {
			for _, v := range append(res.Header.Values(k), res.Trailer.Values(k)...) {
				switch v {
				case "2", "13", "15": // Unknown, Internal, DataLoss
					t.Fatalf("%s %s: grpc-status %s %q", method, target, v, res.Header.Get("Grpc-Message")+res.Trailer.Get("Grpc-Message"))
				}
			}
		}
		if res.StatusCode < 400 && res.Header.Get("Grpc-Status")+res.Trailer.Get("Grpc-Status") == "" {
			return
		}
		// An error may quote the request (an unknown parameter's name),
		// so a marker counts only when the request did not carry it.
		low := strings.ToLower(opaqueIDs.ReplaceAllString(out+res.Header.Get("Grpc-Message")+res.Trailer.Get("Grpc-Message"), "id"))
		sent := strings.ToLower(method + path + query + headers + string(body))
		for _, m := range internalMarkers {
			if m = strings.ToLower(m); strings.Contains(low, m) && !strings.Contains(sent, m) {
				t.Fatalf("%s %s: answer quotes %q: %s", method, target, m, out)
			}
		}
	})
}

// opaqueIDs match request and record ids, whose random letters may spell
// anything.
var opaqueIDs = regexp.MustCompile(`\b(req|con|lea|cli|wks|mem|svat)_[0-9A-Za-z]+`)

// validHeader reports whether net/http's server would accept the header.
func validHeader(name, value string) bool {
	if name == "" || strings.ContainsAny(name, " \t\r\n:") {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
