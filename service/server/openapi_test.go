package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi/datamodel"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/routes"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/internal/security/scope"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

const docURL = "https://partner-api.test/openapi.json"

// contract is the OpenAPI document served by the server, with a JSON
// Schema 2020-12 compiler that resolves references into it.
type contract struct {
	t        *testing.T
	doc      map[string]any
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
	checked  map[string]bool // "METHOD route status" seen
}

func loadContract(t *testing.T, h *servertest.Harness) *contract {
	t.Helper()
	return loadContractAs(t, h, "")
}

// loadContractAs loads the document served to token: the workspace's own
// document, or with "" the public one.
func loadContractAs(t *testing.T, h *servertest.Harness, token string) *contract {
	t.Helper()
	status, hdr, body := h.Do(http.MethodGet, "/openapi.json", token, "", "")
	if status != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json (token %t): %d %q %s", token != "", status, hdr.Get("Content-Type"), body)
	}
	var doc map[string]any
	mustUnmarshal(t, body, &doc)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, inst); err != nil {
		t.Fatal(err)
	}
	return &contract{t: t, doc: doc, compiler: c, schemas: map[string]*jsonschema.Schema{}, checked: map[string]bool{}}
}

// TestOpenAPIDocumentIsValid: /openapi.json is a valid OpenAPI 3.1
// document whose schemas are valid JSON Schema 2020-12, and it states the
// contract: the form body and the oauth2 client-credentials scheme with
// every scope, the scope of each operation as the interceptor enforces
// it, only the public services.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)
	c.valid()
	if c.doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v", c.doc["openapi"])
	}

	// The oauth2 client-credentials scheme, with every known scope.
	flow := obj(t, c.doc, "components", "securitySchemes", "oauth2", "flows", "clientCredentials")
	if flow["tokenUrl"] != "/api/oauth/token" {
		t.Errorf("tokenUrl = %v", flow["tokenUrl"])
	}
	var scopes []string
	for s := range flow["scopes"].(map[string]any) {
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	want := scope.Names()
	slices.Sort(want)
	if !slices.Equal(scopes, want) {
		t.Errorf("scopes = %v, want %v", scopes, want)
	}

	// The token endpoints take form and JSON bodies.
	for _, p := range []string{"/api/oauth/token", "/api/oauth/revoke"} {
		content := obj(t, c.doc, "paths", p, "post", "requestBody", "content")
		if content["application/x-www-form-urlencoded"] == nil || content["application/json"] == nil {
			t.Errorf("%s body types: %v", p, keys(content))
		}
	}

	// Each operation's security is what the bearer interceptor enforces,
	// read independently from the same method options.
	reqs, err := auth.Requirements(server.PublicServices...)
	if err != nil {
		t.Fatal(err)
	}
	ops := 0
	for path, item := range obj(t, c.doc, "paths") {
		if strings.HasPrefix(path, "/admin") {
			t.Errorf("admin path %s in the public document", path)
		}
		for method, o := range item.(map[string]any) {
			op := o.(map[string]any)
			ops++
			proc, _ := op["x-rpc-procedure"].(string)
			if strings.Contains(proc, "AdminService") {
				t.Errorf("%s %s is an admin operation", method, path)
			}
			sec, _ := json.Marshal(op["security"])
			need, protected := reqs[proc]
			switch {
			case strings.HasPrefix(path, "/api/oauth/"):
				if string(sec) != `[{"clientSecretBasic":[]},{}]` {
					t.Errorf("%s %s security = %s", method, path, sec)
				}
			case !protected:
				t.Errorf("%s %s (%s) is not protected by a token", method, path, proc)
			case need.AnyOf != 0:
				// Alternatives, one per scope of any_of.
				var alts []map[string][]string
				_ = json.Unmarshal(sec, &alts)
				var got []string
				for _, a := range alts {
					got = append(got, strings.Join(a["oauth2"], " "))
				}
				slices.Sort(got)
				want := need.AnyOf.Names()
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s %s security = %s, want one of %v", method, path, sec, want)
				}
			case need.Name == "":
				if string(sec) != `[{"oauth2":[]}]` {
					t.Errorf("%s %s security = %s, want any token", method, path, sec)
				}
			default:
				if string(sec) != `[{"oauth2":["`+need.Name+`"]}]` {
					t.Errorf("%s %s security = %s, want %s", method, path, sec, need.Name)
				}
			}
			if _, ok := op["responses"].(map[string]any)["default"]; !ok {
				t.Errorf("%s %s has no default response", method, path)
			}
			// The gateway refuses a query string on anything but a GET or
			// a DELETE (a merge patch's mask comes from its body).
			if method != "get" && method != "delete" {
				for _, p := range op["parameters"].([]any) {
					if p := p.(map[string]any); p["in"] == "query" {
						t.Errorf("%s %s documents the query parameter %v, which the gateway refuses", method, path, p["name"])
					}
				}
			}
			if method == "patch" {
				content := obj(t, op, "requestBody", "content")
				if content["application/merge-patch+json"] == nil || content["application/json"] == nil {
					t.Errorf("PATCH %s body types: %v, want merge-patch+json and json", path, keys(content))
				}
			}
			if _, created := op["responses"].(map[string]any)["201"]; created {
				if obj(t, op, "responses", "201", "headers")["Location"] == nil {
					t.Errorf("%s %s 201 does not document Location", method, path)
				}
			}
		}
	}
	if want := countHTTPRules(); ops != want {
		t.Errorf("the document has %d operations, the public services %d REST routes", ops, want)
	}
	// Where the paths are served (Redocly's no-empty-servers).
	if servers, _ := c.doc["servers"].([]any); len(servers) == 0 {
		t.Error("the document names no servers")
	}
	// Every component is used (Redocly's no-unused-components): the RPC
	// request and response messages a REST route does not exchange whole
	// are not in the document.
	for _, name := range unusedComponents(c.doc) {
		t.Errorf("component %s is never used", name)
	}
	// No answer is nullable: the server leaves an unset member out and
	// never sends null, so a typed client must not have to handle one.
	for _, where := range nullableInAnswers(c.doc) {
		t.Errorf("%s accepts null in an answer", where)
	}
	// The creates answer 201, as the gateway does.
	for _, p := range []string{"/api/v1/contacts", "/api/v1/leads"} {
		if obj(t, c.doc, "paths", p, "post", "responses")["201"] == nil {
			t.Errorf("POST %s does not document 201", p)
		}
	}
}

// TestOpenAPIResponsesConform runs conformance-style flows and validates
// every response (status, content type, body and headers) against the
// document's schema for that status and content type.
func TestOpenAPIResponsesConform(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)
	ws, m := h.Workspace("Contract Co")
	id, sec := h.Client(ws, m, "contacts:read", "contacts:write", "leads:read", "leads:write", "webhooks:read", "webhooks:write")
	readOnlyID, readOnlySec := h.Client(ws, m, "contacts:read")

	do := func(method, route, target, token, contentType, body string, basic []string, headers ...string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.Public.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if basic != nil {
			req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		c.check(method, route, res.StatusCode, res.Header, b)
		if res.StatusCode < 300 {
			c.checkRequest(method, route, req, acceptedItems(t, route, body, b))
		}
		return res.StatusCode, b
	}
	form := "application/x-www-form-urlencoded"
	token := func(scope string, basic []string) string {
		t.Helper()
		v := url.Values{"grant_type": {"client_credentials"}}
		if scope != "" {
			v.Set("scope", scope)
		}
		status, b := do("POST", "/api/oauth/token", "/api/oauth/token", "", form, v.Encode(), basic)
		if status != 200 {
			t.Fatalf("token: %d %s", status, b)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		mustUnmarshal(t, b, &tok)
		return tok.AccessToken
	}

	// Token success: form with Basic, JSON with the credentials in the body.
	tok := token("", []string{id, sec})
	readOnly := token("contacts:read", []string{readOnlyID, readOnlySec})
	jsonBody, _ := json.Marshal(map[string]string{"grant_type": "client_credentials", "client_id": id, "client_secret": sec})
	expect(t, 200)(do("POST", "/api/oauth/token", "/api/oauth/token", "", "application/json", string(jsonBody), nil))
	// Unknown parameters are ignored (RFC 6749 §3.2), in a form or JSON.
	expect(t, 200)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials&audience=crm", []string{id, sec}))
	expect(t, 200)(do("POST", "/api/oauth/token", "/api/oauth/token", "", "application/json", `{"grant_type":"client_credentials","resource":"x"}`, []string{id, sec}))
	// Token failures: wrong secret (401), bad grant (400), bad scope (400).
	expect(t, 401)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials", []string{id, "wrong"}))
	expect(t, 400)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=password", []string{id, sec}))
	expect(t, 400)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials&scope=admin", []string{id, sec}))
	// Revocation of an unknown token.
	expect(t, 200)(do("POST", "/api/oauth/revoke", "/api/oauth/revoke", "", form, "token=svat_unknown", []string{id, sec}))
	expect(t, 200)(do("POST", "/api/oauth/revoke", "/api/oauth/revoke", "", form, "token=svat_unknown&token_type_hint=access_token&x=1", []string{id, sec}))

	// /me, with a token, without one, with a bad one.
	expect(t, 200)(do("GET", "/api/v1/me", "/api/v1/me", tok, "", "", nil))
	expect(t, 401)(do("GET", "/api/v1/me", "/api/v1/me", "", "", "", nil))
	expect(t, 401)(do("GET", "/api/v1/me", "/api/v1/me", "svat_not-a-token", "", "", nil))

	// Creates (201), validation (422), duplicate (409), insufficient scope
	// (403), malformed (400), wrong media type (415), with Idempotency-Key.
	expect(t, 201)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json",
		`{"email":"ada@example.com","firstName":"Ada","externalId":"crm-1"}`, nil, "Idempotency-Key", "k1"))
	expect(t, 201)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json",
		`{"email":"ada@example.com","firstName":"Ada","externalId":"crm-1"}`, nil, "Idempotency-Key", "k1"))
	expect(t, 409)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":"ADA@example.com"}`, nil))
	expect(t, 422)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":"not-an-email","phone":"12"}`, nil))
	expect(t, 403)(do("POST", "/api/v1/contacts", "/api/v1/contacts", readOnly, "application/json", `{"email":"b@example.com"}`, nil))
	expect(t, 400)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":`, nil))
	expect(t, 415)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "text/plain", `{}`, nil))
	expect(t, 201)(do("POST", "/api/v1/leads", "/api/v1/leads", tok, "application/json",
		`{"contact":{"email":"grace@example.com","firstName":"Grace"},"source":"web_form","value":{"amount":1000,"currency":"USD"}}`, nil))
	expect(t, 422)(do("POST", "/api/v1/leads", "/api/v1/leads", tok, "application/json", `{"status":"bogus"}`, nil))
	// null is "not sent" in a create (protojson), for every member.
	expect(t, 201)(do("POST", "/api/v1/leads", "/api/v1/leads", tok, "application/json",
		`{"contactId":null,"contact":{"email":"nul@example.com","phone":null},"value":null,"status":null,"createdAt":null}`, nil))

	// Lists, a page and the last page, and a bad limit.
	_, b := do("GET", "/api/v1/contacts", "/api/v1/contacts?limit=1", tok, "", "", nil)
	var page struct {
		Pagination struct {
			NextCursor string `json:"nextCursor"`
		} `json:"pagination"`
	}
	mustUnmarshal(t, b, &page)
	expect(t, 200)(do("GET", "/api/v1/contacts", "/api/v1/contacts?limit=1&cursor="+url.QueryEscape(page.Pagination.NextCursor), tok, "", "", nil))
	expect(t, 200)(do("GET", "/api/v1/leads", "/api/v1/leads?sort=-updatedAt&source=web_form", tok, "", "", nil))
	expect(t, 400)(do("GET", "/api/v1/leads", "/api/v1/leads?limit=101", tok, "", "", nil))
	expect(t, 403)(do("GET", "/api/v1/leads", "/api/v1/leads", readOnly, "", "", nil))

	// One record: GET, and PATCH as a merge patch under both media types,
	// with If-Match, and its failures.
	_, b = do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", `{"email":"rec@example.com","firstName":"Rec"}`, nil)
	conID := servertest.ID(t, b)
	_, b = do("POST", "/api/v1/leads", "/api/v1/leads", tok, "application/json", `{"contactId":"`+conID+`","title":"Rec lead"}`, nil)
	leaID := servertest.ID(t, b)
	for _, r := range []struct{ route, id, other, patch string }{
		{"/api/v1/contacts/{id}", conID, "con_00000000000000000000000000", `{"firstName":"Recorded","phone":null}`},
		{"/api/v1/leads/{id}", leaID, "lea_00000000000000000000000000", `{"status":"contacted","campaign":null,"value":{"amount":5,"currency":"EUR"}}`},
	} {
		target := strings.Replace(r.route, "{id}", r.id, 1)
		expect(t, 200)(do("GET", r.route, target, tok, "", "", nil))
		expect(t, 404)(do("GET", r.route, strings.Replace(r.route, "{id}", r.other, 1), tok, "", "", nil))
		expect(t, 404)(do("PATCH", r.route, strings.Replace(r.route, "{id}", r.other, 1), tok, "application/merge-patch+json", `{}`, nil))
		expect(t, 200)(do("PATCH", r.route, target, tok, "application/merge-patch+json", r.patch, nil))
		expect(t, 200)(do("PATCH", r.route, target, tok, "application/json", `{}`, nil))
		expect(t, 412)(do("PATCH", r.route, target, tok, "application/merge-patch+json", `{}`, nil, "If-Match", `"stale"`))
		expect(t, 400)(do("PATCH", r.route, target, tok, "application/merge-patch+json", `{"id":"x"}`, nil))
		expect(t, 400)(do("PATCH", r.route, target+"?updateMask=firstName", tok, "application/merge-patch+json", `{}`, nil))
		expect(t, 415)(do("PATCH", r.route, target, tok, "text/plain", `{}`, nil))
		expect(t, 422)(do("PATCH", r.route, target, tok, "application/merge-patch+json", `{"externalId":"`+strings.Repeat("x", 256)+`"}`, nil))
	}
	expect(t, 403)(do("GET", "/api/v1/leads/{id}", "/api/v1/leads/"+leaID, readOnly, "", "", nil))
	expect(t, 200)(do("PATCH", "/api/v1/leads/{id}", "/api/v1/leads/"+leaID, tok, "application/merge-patch+json", `{"value":null,"title":null}`, nil))
	expect(t, 409)(do("PATCH", "/api/v1/contacts/{id}", "/api/v1/contacts/"+conID, tok, "application/merge-patch+json", `{"email":"ada@example.com"}`, nil))

	// Batches: per-item results and errors (200), none or too many (400),
	// and a replay under the same Idempotency-Key.
	contactsBatch := `{"contacts":[{"email":"b1@example.com"},{"email":"bad"},{"email":"ada@example.com"}]}`
	expect(t, 200)(do("POST", "/api/v1/contacts/batch", "/api/v1/contacts/batch", tok, "application/json", contactsBatch, nil, "Idempotency-Key", "b1"))
	expect(t, 200)(do("POST", "/api/v1/contacts/batch", "/api/v1/contacts/batch", tok, "application/json", contactsBatch, nil, "Idempotency-Key", "b1"))
	expect(t, 400)(do("POST", "/api/v1/contacts/batch", "/api/v1/contacts/batch", tok, "application/json", `{"contacts":[]}`, nil))
	expect(t, 200)(do("POST", "/api/v1/leads/batch", "/api/v1/leads/batch", tok, "application/json",
		`{"leads":[{"contactId":"`+conID+`"},{"status":"bogus","contactId":"`+conID+`"},{"contactId":"con_00000000000000000000000000"}]}`, nil))
	expect(t, 400)(do("POST", "/api/v1/leads/batch", "/api/v1/leads/batch", tok, "application/json",
		`{"leads":[`+strings.Repeat(`{"contactId":"`+conID+`"},`, 100)+`{"contactId":"`+conID+`"}]}`, nil))

	// A sync walk: the last page of sort=updatedAt carries syncCursor,
	// which is a cursor later; the list parameters' values, as accepted,
	// match their schemas (the sort, time and status values too).
	_, b = do("GET", "/api/v1/leads", "/api/v1/leads?sort=updatedAt&limit=100&status=new", tok, "", "", nil)
	var syncPage struct {
		Pagination struct {
			SyncCursor string `json:"syncCursor"`
		} `json:"pagination"`
	}
	mustUnmarshal(t, b, &syncPage)
	if syncPage.Pagination.SyncCursor == "" {
		t.Errorf("the last page of a sort=updatedAt walk has no syncCursor: %s", b)
	}
	expect(t, 200)(do("GET", "/api/v1/leads", "/api/v1/leads?sort=updatedAt&limit=100&status=new&cursor="+url.QueryEscape(syncPage.Pagination.SyncCursor), tok, "", "", nil))
	expect(t, 200)(do("GET", "/api/v1/contacts", "/api/v1/contacts?sort=-updatedAt&updatedSince=2020-01-01T00:00:00Z&createdSince=2020-01-01T00:00:00%2B02:00", tok, "", "", nil))
	for _, sort := range []string{"createdAt", "-createdAt", "updatedAt", "-updatedAt"} {
		expect(t, 200)(do("GET", "/api/v1/contacts", "/api/v1/contacts?limit=1&sort="+sort, tok, "", "", nil))
	}
	// ... and values the server refuses (400) are outside the schemas.
	for _, r := range []struct{ name, value string }{
		{"status", "won"}, {"sort", "name"}, {"updatedSince", "yesterday"}, {"createdSince", "2026-01-31"},
	} {
		expect(t, 400)(do("GET", "/api/v1/leads", "/api/v1/leads?"+r.name+"="+r.value, tok, "", "", nil))
		if c.validateParam("GET", "/api/v1/leads", r.name, r.value) == nil {
			t.Errorf("the document accepts %s=%s, which the server refuses", r.name, r.value)
		}
	}

	// The document states what every answer carries: an answer missing a
	// member the server always sends, or with a lead status it never
	// sends, does not validate.
	_, conBody := do("GET", "/api/v1/contacts/{id}", "/api/v1/contacts/"+conID, tok, "", "", nil)
	for _, m := range []string{"id", "createdAt", "updatedAt"} {
		c.rejectsAnswer("GET", "/api/v1/contacts/{id}", 200, without(t, conBody, m))
	}
	_, leaBody := do("PATCH", "/api/v1/leads/{id}", "/api/v1/leads/"+leaID, tok, "application/merge-patch+json", `{"value":{"amount":0,"currency":"USD"}}`, nil)
	for _, m := range []string{"id", "contactId", "title", "status", "createdAt", "updatedAt", "value.amount", "value.currency"} {
		c.rejectsAnswer("PATCH", "/api/v1/leads/{id}", 200, without(t, leaBody, m))
	}
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, strings.Replace(string(leaBody), `"status":"`, `"status":"won`, 1))
	// ... nor null, which the server never sends, nor a lead's inline
	// contact, which answers carry as contactId.
	c.rejectsAnswer("GET", "/api/v1/contacts/{id}", 200, with(t, conBody, "firstName", nil))
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, with(t, leaBody, "status", nil))
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, with(t, leaBody, "source", nil))
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, with(t, leaBody, "contact", map[string]any{"email": "x@example.com"}))
	c.rejectsRequest("POST", "/api/v1/leads", "application/json", `{"contactId":"`+conID+`","status":"won"}`)
	c.rejectsRequest("PATCH", "/api/v1/leads/{id}", "application/merge-patch+json", `{"status":"won"}`)
	_, listBody := do("GET", "/api/v1/leads", "/api/v1/leads?limit=1", tok, "", "", nil)
	for _, m := range []string{"leads", "pagination", "leads.0.id"} {
		c.rejectsAnswer("GET", "/api/v1/leads", 200, without(t, listBody, m))
	}
	c.rejectsAnswer("GET", "/api/v1/leads", 200, with(t, listBody, "pagination.nextCursor", nil))
	_, batchBody := do("POST", "/api/v1/contacts/batch", "/api/v1/contacts/batch", tok, "application/json", `{"contacts":[{"email":"b9@example.com"},{"email":"bad"}]}`, nil)
	for _, m := range []string{"results", "results.0.contact.id", "results.1.error.status", "results.1.error.code",
		"results.1.error.requestId", "results.1.error.errors", "results.1.error.errors.0.field"} {
		c.rejectsAnswer("POST", "/api/v1/contacts/batch", 200, without(t, batchBody, m))
	}
	_, meBody := do("GET", "/api/v1/me", "/api/v1/me", tok, "", "", nil)
	for _, m := range []string{"workspace", "app", "scopes", "tokenExpiresAt", "workspace.id", "app.clientId"} {
		c.rejectsAnswer("GET", "/api/v1/me", 200, without(t, meBody, m))
	}
	_, tokBody := do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials", []string{id, sec})
	for _, m := range []string{"access_token", "token_type", "expires_in", "scope"} {
		c.rejectsAnswer("POST", "/api/oauth/token", 200, without(t, tokBody, m))
	}

	// Conditional GETs, the event feed and deletes (their 204 has no body).
	for _, r := range []struct{ route, id string }{{"/api/v1/contacts/{id}", conID}, {"/api/v1/leads/{id}", leaID}} {
		target := strings.Replace(r.route, "{id}", r.id, 1)
		_, hdr, _ := h.Do("GET", target, tok, "", "")
		expect(t, 304)(do("GET", r.route, target, tok, "", "", nil, "If-None-Match", hdr.Get("ETag")))
	}
	expect(t, 200)(do("GET", "/api/v1/events", "/api/v1/events?limit=2", tok, "", "", nil))
	expect(t, 200)(do("GET", "/api/v1/events", "/api/v1/events?types=lead.created,lead.updated", tok, "", "", nil))
	expect(t, 400)(do("GET", "/api/v1/events", "/api/v1/events?types=bogus", tok, "", "", nil))
	expect(t, 403)(do("GET", "/api/v1/events", "/api/v1/events?types=lead.created", readOnly, "", "", nil))
	expect(t, 409)(do("DELETE", "/api/v1/contacts/{id}", "/api/v1/contacts/"+conID, tok, "", "", nil))
	expect(t, 412)(do("DELETE", "/api/v1/leads/{id}", "/api/v1/leads/"+leaID, tok, "", "", nil, "If-Match", `"stale"`))
	expect(t, 403)(do("DELETE", "/api/v1/leads/{id}", "/api/v1/leads/"+leaID, readOnly, "", "", nil))
	expect(t, 204)(do("DELETE", "/api/v1/contacts/{id}", "/api/v1/contacts/"+conID+"?withLeads=true", tok, "", "", nil))
	expect(t, 404)(do("DELETE", "/api/v1/leads/{id}", "/api/v1/leads/"+leaID, tok, "", "", nil))

	// Webhook endpoints: the whole life of one.
	const hooks = "/api/v1/webhook-endpoints"
	expect(t, 422)(do("POST", hooks, hooks, tok, "application/json", `{"url":"https://127.0.0.1/hook","eventTypes":["lead.created"]}`, nil))
	expect(t, 403)(do("POST", hooks, hooks, readOnly, "application/json", `{"url":"https://example.com/hook","eventTypes":["contact.created"]}`, nil))
	status, hookBody := do("POST", hooks, hooks, tok, "application/json", `{"url":"https://example.com/hook","eventTypes":["lead.created","lead.updated"],"description":"CRM sync"}`, nil)
	expect(t, 201)(status, hookBody)
	hookID := servertest.ID(t, hookBody)
	one := hooks + "/{id}"
	expect(t, 200)(do("GET", hooks, hooks, tok, "", "", nil))
	expect(t, 200)(do("GET", one, hooks+"/"+hookID, tok, "", "", nil))
	expect(t, 404)(do("GET", one, hooks+"/whe_nope", tok, "", "", nil))
	expect(t, 200)(do("PATCH", one, hooks+"/"+hookID, tok, "application/merge-patch+json", `{"description":null,"status":"disabled"}`, nil))
	expect(t, 200)(do("POST", one+"/rotate-secret", hooks+"/"+hookID+"/rotate-secret", tok, "application/json", `{"expireCurrentInSeconds":60}`, nil))
	expect(t, 200)(do("POST", one+"/test", hooks+"/"+hookID+"/test", tok, "", "", nil))
	var events struct{ Events []struct{ Cursor string } }
	_, evBody := do("GET", "/api/v1/events", "/api/v1/events?limit=1", tok, "", "", nil)
	servertest.MustUnmarshal(t, evBody, &events)
	if len(events.Events) == 1 {
		expect(t, 202)(do("POST", one+"/replay", hooks+"/"+hookID+"/replay", tok, "application/json", `{"fromCursor":"`+events.Events[0].Cursor+`"}`, nil))
	}
	expect(t, 400)(do("POST", one+"/replay", hooks+"/"+hookID+"/replay", tok, "application/json", `{"fromCursor":"nope"}`, nil))
	expect(t, 200)(do("GET", one+"/deliveries", hooks+"/"+hookID+"/deliveries?limit=10", tok, "", "", nil))
	expect(t, 204)(do("DELETE", one, hooks+"/"+hookID, tok, "", "", nil))

	// A token in the query string (400 with a Bearer challenge), and a
	// body encoding the token endpoint does not take (415).
	expect(t, 400)(do("GET", "/api/v1/me", "/api/v1/me?access_token="+tok, "", "", "", nil))
	expect(t, 415)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials", []string{id, sec}, "Content-Encoding", "br"))

	// 413: a body over 1 MiB, on both kinds of endpoint.
	big := `{"email":"` + strings.Repeat("x", 1<<20) + `@example.com"}`
	expect(t, 413)(do("POST", "/api/v1/contacts", "/api/v1/contacts", tok, "application/json", big, nil))
	expect(t, 413)(do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials&scope="+strings.Repeat("x", 1<<20), []string{id, sec}))

	// 429: a burst past the read bucket, and failed authentications past
	// the client id's budget, answered by the real rate limiter.
	got429 := false
	for range 400 {
		if status, _ := do("GET", "/api/v1/me", "/api/v1/me", tok, "", "", nil); status == 429 {
			got429 = true
			break
		}
	}
	if !got429 {
		t.Error("400 reads in a burst were never answered 429")
	}
	for range 15 {
		if status, _ := do("POST", "/api/oauth/token", "/api/oauth/token", "", form, "grant_type=client_credentials", []string{readOnlyID, "wrong"}); status == 429 {
			break
		}
	}

	for _, want := range []string{"POST /api/oauth/token 200", "POST /api/oauth/token 401", "POST /api/oauth/token 400",
		"GET /api/v1/me 200", "GET /api/v1/me 401", "GET /api/v1/contacts 200", "POST /api/v1/contacts 201",
		"POST /api/v1/contacts 422", "POST /api/v1/contacts 403", "GET /api/v1/me 429", "POST /api/oauth/token 429",
		"GET /api/v1/contacts/{id} 200", "GET /api/v1/leads/{id} 404", "PATCH /api/v1/contacts/{id} 412",
		"PATCH /api/v1/leads/{id} 200", "POST /api/v1/leads/batch 200", "POST /api/v1/contacts/batch 400",
		"POST /api/v1/contacts 413", "POST /api/oauth/token 413", "GET /api/v1/me 400", "POST /api/oauth/token 415"} {
		if !c.checked[want] {
			t.Errorf("no response %s was checked", want)
		}
	}
}

// TestOpenAPIUnavailableConforms: with the database gone, the 503 of each
// surface (RFC 6749 temporarily_unavailable, problem+json unavailable)
// matches the document, Retry-After included.
func TestOpenAPIUnavailableConforms(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewCluster(t)
	h := clusterHarness(t, cl, "")
	c := loadContract(t, h)
	tn := h.NewTenant("Gone Contract Co")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"gone@example.com"}`)
	con := servertest.ID(t, b)
	if err := cl.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}.Encode()
	for _, r := range []struct{ method, route, target, contentType, body string }{
		{"POST", "/api/oauth/token", "/api/oauth/token", "application/x-www-form-urlencoded", form},
		{"POST", "/api/v1/contacts", "/api/v1/contacts", "application/json", `{"email":"more@example.com"}`},
		{"GET", "/api/v1/contacts", "/api/v1/contacts", "", ""},
		{"GET", "/api/v1/contacts/{id}", "/api/v1/contacts/" + con, "", ""},
		{"PATCH", "/api/v1/contacts/{id}", "/api/v1/contacts/" + con, "application/merge-patch+json", `{"firstName":"X"}`},
		{"POST", "/api/v1/leads/batch", "/api/v1/leads/batch", "application/json", `{"leads":[{"contactId":"` + con + `"}]}`},
	} {
		token := tn.Token
		if strings.HasPrefix(r.route, "/api/oauth/") {
			token = ""
		}
		status, hdr, b := h.Do(r.method, r.target, token, r.contentType, r.body)
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Errorf("%s %s: %d (Retry-After %q) %s, want 503", r.method, r.target, status, hdr.Get("Retry-After"), b)
		}
		c.check(r.method, r.route, status, hdr, b)
	}
}

// valid fails the test unless the document is a valid OpenAPI 3.1
// document whose component schemas are valid JSON Schema 2020-12.
func (c *contract) valid() {
	t := c.t
	t.Helper()
	// The document against the OpenAPI 3.1 schema.
	meta := jsonschema.NewCompiler()
	oas, err := jsonschema.UnmarshalJSON(strings.NewReader(datamodel.OpenAPI31SchemaData))
	if err != nil {
		t.Fatal(err)
	}
	const oasURL = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	if err := meta.AddResource(oasURL, oas); err != nil {
		t.Fatal(err)
	}
	sch, err := meta.Compile(oasURL)
	if err != nil {
		t.Fatalf("compile the OpenAPI 3.1 schema: %v", err)
	}
	if err := sch.Validate(toInstance(t, c.doc)); err != nil {
		t.Fatalf("/openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}
	// Every component schema is a valid JSON Schema 2020-12 schema.
	for name := range obj(t, c.doc, "components", "schemas") {
		if _, err := c.compiler.Compile(docURL + "#/components/schemas/" + escape(name)); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
}

func expect(t *testing.T, want int) func(int, []byte) {
	return func(got int, body []byte) {
		t.Helper()
		if got != want {
			t.Errorf("status %d, want %d: %s", got, want, body)
		}
	}
}

// check validates one response against the document: the status (or
// default) must be documented, the content type must be one of its
// media types, the body must match that media type's schema, required
// headers must be present and every documented header must match its
// schema.
func (c *contract) check(method, route string, status int, hdr http.Header, body []byte) {
	t := c.t
	t.Helper()
	c.checked[fmt.Sprintf("%s %s %d", method, route, status)] = true
	opPtr := "/paths/" + escape(route) + "/" + strings.ToLower(method)
	responses := c.at(opPtr + "/responses")
	if responses == nil {
		t.Errorf("%s %s is not in the document", method, route)
		return
	}
	where := fmt.Sprintf("%s %s %d", method, route, status)
	resPtr := opPtr + "/responses/" + strconv.Itoa(status)
	if responses[strconv.Itoa(status)] == nil {
		// default stays for what no flow can reach; a status the server
		// answers is one a client must be able to look up.
		t.Errorf("%s: the status is not documented (only default matches)", where)
		resPtr = opPtr + "/responses/default"
	}
	resPtr = c.deref(resPtr)
	res := c.at(resPtr)
	if status == http.StatusNoContent || status == http.StatusNotModified {
		// No body, so no Content-Type: the document must say so.
		if len(body) != 0 || hdr.Get("Content-Type") != "" || res["content"] != nil {
			t.Errorf("%s: a body (%q, %q) or documented content %v", where, body, hdr.Get("Content-Type"), res["content"])
		}
		return
	}
	mt, _, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s: bad Content-Type %q", where, hdr.Get("Content-Type"))
		return
	}
	content, _ := res["content"].(map[string]any)
	if content[mt] == nil {
		t.Errorf("%s: Content-Type %s is not documented (%v)", where, mt, keys(content))
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: body is not JSON: %s", where, body)
		return
	}
	if err := c.schema(resPtr + "/content/" + escape(mt) + "/schema").Validate(inst); err != nil {
		t.Errorf("%s: body does not match the document: %v\n%s", where, err, body)
	}
	headers, _ := res["headers"].(map[string]any)
	for _, name := range contractHeaders {
		if hdr.Get(name) != "" && headers[name] == nil {
			t.Errorf("%s: the response carries %s, which the document does not list", where, name)
		}
	}
	for name := range headers {
		hPtr := c.deref(resPtr + "/headers/" + escape(name))
		h := c.at(hPtr)
		v := hdr.Get(name)
		if v == "" {
			if h["required"] == true {
				t.Errorf("%s: required header %s is missing", where, name)
			}
			continue
		}
		var hv any = v
		if typ, _ := c.at(hPtr + "/schema")["type"].(string); typ == "integer" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Errorf("%s: header %s = %q, want an integer", where, name, v)
				continue
			}
			hv = n
		}
		if err := c.schema(hPtr + "/schema").Validate(hv); err != nil {
			t.Errorf("%s: header %s = %q: %v", where, name, v, err)
		}
	}
}

// contractHeaders are the response headers the contract names: when a
// response carries one, the document must list it for that response.
var contractHeaders = []string{"Request-Id", "ETag", "Location", "RateLimit", "RateLimit-Policy", "Retry-After",
	"WWW-Authenticate", "Idempotent-Replayed", "Cache-Control", "Pragma", "Vary"}

// checkRequest validates a request the server accepted against the
// document: its query parameters and headers of the contract must be
// documented parameters, and its body must match the request body schema
// of its media type (a form as an object of strings).
func (c *contract) checkRequest(method, route string, req *http.Request, body string) {
	t := c.t
	t.Helper()
	where := fmt.Sprintf("request %s %s", method, route)
	opPtr := "/paths/" + escape(route) + "/" + strings.ToLower(method)
	params := map[string]bool{}
	for _, pm := range c.params(opPtr) {
		params[fmt.Sprint(pm["in"], " ", pm["name"])] = true
	}
	for k, v := range req.URL.Query() {
		if !params["query "+k] {
			t.Errorf("%s: query parameter %s is not documented", where, k)
			continue
		}
		if err := c.validateParam(method, route, k, v[0]); err != nil {
			t.Errorf("%s: accepted query parameter %s=%q does not match the document: %v", where, k, v[0], err)
		}
	}
	for _, h := range []string{"Idempotency-Key", "If-Match", "Request-Id"} {
		if req.Header.Get(h) != "" && !params["header "+h] {
			t.Errorf("%s: header %s is not documented", where, h)
		}
	}
	if body == "" {
		return
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	ptr := opPtr + "/requestBody/content/" + escape(mt)
	if c.at(ptr) == nil {
		t.Errorf("%s: request Content-Type %s is not documented (%v)", where, mt, keys(c.at(opPtr+"/requestBody/content")))
		return
	}
	var inst any
	if mt == "application/x-www-form-urlencoded" {
		v, _ := url.ParseQuery(body)
		m := map[string]any{}
		for k := range v {
			m[k] = v.Get(k)
		}
		inst = m
	} else {
		var err error
		if inst, err = jsonschema.UnmarshalJSON(strings.NewReader(body)); err != nil {
			t.Errorf("%s: body is not JSON", where)
			return
		}
	}
	if err := c.schema(ptr + "/schema").Validate(inst); err != nil {
		t.Errorf("%s: accepted body does not match the document: %v\n%.300s", where, err, body)
	}
}

// params returns the parameters of the operation at opPtr, references
// followed, each with the JSON pointer of its schema under "ptr".
func (c *contract) params(opPtr string) []map[string]any {
	var out []map[string]any
	for i, p := range c.list(opPtr + "/parameters") {
		ptr := opPtr + "/parameters/" + strconv.Itoa(i)
		pm, _ := p.(map[string]any)
		if r, ok := pm["$ref"].(string); ok {
			ptr = strings.TrimPrefix(r, "#")
			pm = c.at(ptr)
		}
		out = append(out, map[string]any{"in": pm["in"], "name": pm["name"], "ptr": ptr + "/schema", "schema": pm["schema"]})
	}
	return out
}

// validateParam validates the value of a query parameter against its
// schema in the document (an integer parameter as a number).
func (c *contract) validateParam(method, route, name, value string) error {
	for _, pm := range c.params("/paths/" + escape(route) + "/" + strings.ToLower(method)) {
		if pm["in"] != "query" || pm["name"] != name {
			continue
		}
		ptr := pm["ptr"].(string)
		var v any = value
		switch schema, _ := pm["schema"].(map[string]any); schema["type"] {
		case "integer":
			n, err := strconv.Atoi(value)
			if err != nil {
				return fmt.Errorf("not an integer")
			}
			v = n
		case "number":
			n, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return fmt.Errorf("not a number")
			}
			v = n
		case "boolean":
			b, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("not a boolean")
			}
			v = b
		}
		return c.schema(ptr).Validate(v)
	}
	return fmt.Errorf("no query parameter %s", name)
}

// rejectsAnswer fails the test when the document's schema of the answer
// (method, route, status, JSON) accepts body: the document must state
// what every answer carries, so an answer the server never gives (a
// member left out, a value outside an enum) must not validate.
func (c *contract) rejectsAnswer(method, route string, status int, body string) {
	c.t.Helper()
	ptr := c.deref("/paths/" + escape(route) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(status))
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.schema(ptr+"/content/application~1json/schema").Validate(inst) == nil {
		c.t.Errorf("%s %s %d: the document accepts an answer the server never gives: %s", method, route, status, body)
	}
}

// rejectsRequest fails the test when the document's request body schema
// of (method, route, media type) accepts body, which the server refuses.
func (c *contract) rejectsRequest(method, route, mediaType, body string) {
	c.t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	ptr := "/paths/" + escape(route) + "/" + strings.ToLower(method) + "/requestBody/content/" + escape(mediaType) + "/schema"
	if c.schema(ptr).Validate(inst) == nil {
		c.t.Errorf("%s %s: the document accepts a %s body the server refuses: %s", method, route, mediaType, body)
	}
}

// without returns the JSON object body without the member at path
// ("pagination", "results.0.error.status"), re-encoded.
func without(t *testing.T, body []byte, path string) string {
	t.Helper()
	var v any
	mustUnmarshal(t, body, &v)
	parts := strings.Split(path, ".")
	cur := v
	for _, p := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i, _ := strconv.Atoi(p)
			cur = c[i]
		}
	}
	m, ok := cur.(map[string]any)
	if !ok || m[parts[len(parts)-1]] == nil {
		t.Fatalf("%s has no %s", body, path)
	}
	delete(m, parts[len(parts)-1])
	b, _ := json.Marshal(v)
	return string(b)
}

// with returns the JSON object body with the member at path
// ("pagination.nextCursor") set to value, re-encoded.
func with(t *testing.T, body []byte, path string, value any) string {
	t.Helper()
	var v map[string]any
	mustUnmarshal(t, body, &v)
	parts := strings.Split(path, ".")
	cur := v
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			t.Fatalf("%s has no object %s", body, p)
		}
		cur = next
	}
	cur[parts[len(parts)-1]] = value
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOpenAPIReadOnlyMembers: the members the document marks readOnly in
// an answer are exactly those a merge patch may not name (400), and the
// patch schema has none of them; a member a create takes that no answer
// carries (a lead's inline contact) is writeOnly, and a patch refuses it
// too.
func TestOpenAPIReadOnlyMembers(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)
	tn := h.NewTenant("Read-only Co")
	defineField(t, h, tn.WorkspaceID, "contact", "tier", "text", "Tier", "", false)
	defineField(t, h, tn.WorkspaceID, "lead", "budget", "number", "Budget", "", false)
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
		`{"email":"ro@example.com","phone":"+15550100","firstName":"Ro","lastName":"Only","companyName":"RO Inc","jobTitle":"Tester","externalId":"ro-1","customFields":{"tier":"gold"}}`)
	con := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contactId":"`+con+`","title":"Ro lead","status":"qualified","source":"web_form","campaign":"spring","message":"Hello","value":{"amount":1,"currency":"USD"},"externalId":"ro-2","customFields":{"budget":100}}`)
	lea := servertest.ID(t, b)
	for _, r := range []struct{ create, route, id string }{
		{"/api/v1/contacts", "/api/v1/contacts/{id}", con},
		{"/api/v1/leads", "/api/v1/leads/{id}", lea},
	} {
		target := strings.Replace(r.route, "{id}", r.id, 1)
		status, _, body := h.Do(http.MethodGet, target, tn.Token, "", "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", target, status, body)
		}
		var record map[string]json.RawMessage
		mustUnmarshal(t, body, &record)
		answer := c.at(c.deref(c.deref("/paths/"+escape(r.route)+"/get/responses/200") + "/content/application~1json/schema"))
		props, _ := answer["properties"].(map[string]any)
		if len(props) == 0 {
			t.Fatalf("GET %s: no answer schema", r.route)
		}
		readOnly := 0
		for name, p := range props {
			value, sent := record[name]
			if !sent {
				t.Errorf("GET %s: every member was set, but the answer lacks %s: %s", target, name, body)
				continue
			}
			patch := `{"` + name + `":` + string(value) + `}`
			status, hdr, body := h.Do(http.MethodPatch, target, tn.Token, "application/merge-patch+json", patch)
			c.check(http.MethodPatch, r.route, status, hdr, body)
			if p.(map[string]any)["readOnly"] == true {
				readOnly++
				if status != http.StatusBadRequest {
					t.Errorf("%s is readOnly, but PATCH %s %s answered %d %s", name, target, patch, status, body)
				}
				c.rejectsRequest(http.MethodPatch, r.route, "application/merge-patch+json", patch)
			} else if status != http.StatusOK {
				t.Errorf("%s is not readOnly, but PATCH %s %s answered %d %s", name, target, patch, status, body)
			}
		}
		if readOnly == 0 {
			t.Errorf("GET %s: no member is readOnly", r.route)
		}
		// What a create takes beyond the answer is create-only.
		input := c.at(c.deref("/paths/" + escape(r.create) + "/post/requestBody/content/application~1json/schema"))
		for name, p := range input["properties"].(map[string]any) {
			if props[name] != nil {
				continue
			}
			if p.(map[string]any)["writeOnly"] != true {
				t.Errorf("POST %s takes %s, which no answer carries, but it is not writeOnly", r.create, name)
			}
			patch := `{"` + name + `":{"email":"ro-new@example.com"}}`
			if status, _, body := h.Do(http.MethodPatch, target, tn.Token, "application/merge-patch+json", patch); status != http.StatusBadRequest {
				t.Errorf("PATCH %s %s answered %d %s, want 400", target, patch, status, body)
			}
			c.rejectsRequest(http.MethodPatch, r.route, "application/merge-patch+json", patch)
		}
	}
}

// unusedComponents lists the components (but security schemes, which
// are named, not referred to) that nothing outside components refers to,
// directly or through other components.
func unusedComponents(doc map[string]any) []string {
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok && !used[r] {
				used[r] = true
				var cur any = doc
				for _, tok := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
				}
				walk(cur)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for k, v := range doc {
		if k != "components" {
			walk(v)
		}
	}
	var out []string
	for kind, cs := range doc["components"].(map[string]any) {
		if kind == "securitySchemes" {
			continue
		}
		for name := range cs.(map[string]any) {
			if !used["#/components/"+kind+"/"+escape(name)] {
				out = append(out, kind+"/"+name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// nullableInAnswers lists the places, in the schemas of every response
// and what they refer to, that accept null (a "null" type or a null in
// an enum).
func nullableInAnswers(doc map[string]any) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok && !seen[r] {
				seen[r] = true
				var cur any = doc
				for _, tok := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
				}
				walk(r, cur)
			}
			switch t := v["type"].(type) {
			case string:
				if t == "null" {
					out = append(out, where)
				}
			case []any:
				if slices.Contains(t, any("null")) {
					out = append(out, where)
				}
			}
			if e, ok := v["enum"].([]any); ok && slices.Contains(e, nil) {
				out = append(out, where)
			}
			for k, x := range v {
				walk(where+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(where+"/"+strconv.Itoa(i), x)
			}
		}
	}
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			if op, ok := o.(map[string]any); ok {
				walk(method+" "+path+" responses", op["responses"])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// acceptedItems returns the part of a request body the server accepted:
// the whole body, except for a batch, whose items fail on their own (an
// item answered with an error was refused, the rest were accepted).
func acceptedItems(t *testing.T, route, body string, answer []byte) string {
	t.Helper()
	if !strings.HasSuffix(route, "/batch") {
		return body
	}
	var req map[string][]json.RawMessage
	var res struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	mustUnmarshal(t, []byte(body), &req)
	mustUnmarshal(t, answer, &res)
	out := map[string][]json.RawMessage{}
	for k, items := range req {
		if len(items) != len(res.Results) {
			t.Fatalf("%s: %d items, %d results", route, len(items), len(res.Results))
		}
		out[k] = []json.RawMessage{}
		for i, item := range items {
			if res.Results[i]["error"] == nil {
				out[k] = append(out[k], item)
			}
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// list returns the array at a JSON pointer of the document, or nil.
func (c *contract) list(ptr string) []any {
	i := strings.LastIndex(ptr, "/")
	v, _ := c.at(ptr[:i])[ptr[i+1:]].([]any)
	return v
}

// deref follows a $ref at ptr (one level, as the document uses them).
func (c *contract) deref(ptr string) string {
	if r, ok := c.at(ptr)["$ref"].(string); ok {
		return strings.TrimPrefix(r, "#")
	}
	return ptr
}

// at returns the object at a JSON pointer of the document, or nil.
func (c *contract) at(ptr string) map[string]any {
	var cur any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

func (c *contract) schema(ptr string) *jsonschema.Schema {
	c.t.Helper()
	if s, ok := c.schemas[ptr]; ok {
		return s
	}
	s, err := c.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		c.t.Fatalf("compile %s: %v", ptr, err)
	}
	c.schemas[ptr] = s
	return s
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func obj(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	cur := m
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			t.Fatalf("document has no %v", path)
		}
		cur = next
	}
	return cur
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func toInstance(t *testing.T, v any) any {
	t.Helper()
	b, _ := json.Marshal(v)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// countHTTPRules counts the REST routes of the public services.
func countHTTPRules() int { return len(routes.Of(server.PublicServices...)) }
