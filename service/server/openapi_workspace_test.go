package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/gen/openapi"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// defineField creates a custom field of workspace ws (opaque id) for a
// test, with SQL through the server's database (the definitions API is
// not what these tests are about), and drops the process's cached
// definitions, as the API does on a change. description "" is none.
func defineField(t *testing.T, h *servertest.Harness, ws, object, key, typ, label, description string, required bool, options ...string) uuid.UUID {
	t.Helper()
	w, ok := opaqueid.Parse(opaqueid.Workspace, ws)
	if !ok {
		t.Fatalf("workspace id %q", ws)
	}
	arg := dbsqlc.CustomFieldCreateParams{WorkspaceID: w, ID: uuid.New(), Object: object, Key: key, Label: label, Type: typ, Required: required}
	if description != "" {
		arg.Description = &description
	}
	if len(options) > 0 {
		opts := make([]customfield.Option, 0, len(options))
		for _, o := range options {
			opts = append(opts, customfield.Option{Value: o, Label: strings.ToUpper(o)})
		}
		arg.Options, _ = json.Marshal(opts)
	}
	if _, err := db.Q.CustomFieldCreate(context.Background(), h.DB.Conn(), arg); err != nil {
		t.Fatal(err)
	}
	customfield.Forget(w)
	return arg.ID
}

// customFieldsOf is the customFields member of a component schema of doc.
func customFieldsOf(t *testing.T, doc map[string]any, schema string) map[string]any {
	t.Helper()
	return obj(t, doc, "components", "schemas", schema, "properties", "customFields")
}

// mustJSON is v as JSON, for comparing schemas.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWorkspaceOpenAPIDocumentTypesCustomFields: GET /openapi.json with a
// bearer token answers the workspace's own document, where customFields
// of Contact, Lead, their create inputs, the lead's inline contact and
// the merge patches list each live definition with its JSON Schema type,
// format, enum, bounds and (on creates only) required; the lists name
// each key's filters. Privately cacheable with an ETag over the
// definitions; another workspace's document does not show them; a
// deleted definition leaves it; without a token the public document is
// served byte for byte as before.
func TestWorkspaceOpenAPIDocumentTypesCustomFields(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	a := h.NewTenant("Typed Doc Co")
	b := h.NewTenant("Other Doc Co")
	defineField(t, h, a.WorkspaceID, "contact", "note", "text", "Note", "", false)
	defineField(t, h, a.WorkspaceID, "contact", "score", "number", "Score", "Lead scoring, 0-100.", false)
	defineField(t, h, a.WorkspaceID, "contact", "vip", "boolean", "VIP", "", true)
	defineField(t, h, a.WorkspaceID, "contact", "born", "date", "Born", "", false)
	defineField(t, h, a.WorkspaceID, "contact", "call_at", "datetime", "Call at", "", false)
	defineField(t, h, a.WorkspaceID, "contact", "site", "url", "Site", "", false)
	defineField(t, h, a.WorkspaceID, "contact", "alt_email", "email", "Other email", "", false)
	defineField(t, h, a.WorkspaceID, "lead", "budget", "number", "Budget", "", true)
	defineField(t, h, a.WorkspaceID, "lead", "interest", "select", "Interest", "", false, "crm", "erp")
	tags := defineField(t, h, a.WorkspaceID, "lead", "topics", "multiselect", "Topics", "", false, "price", "demo", "trial")

	// Without a token: the public document, unchanged, cacheable by anyone.
	s, hdr, pub := h.Do(http.MethodGet, "/openapi.json", "", "", "")
	if s != 200 || !bytes.Equal(pub, openapi.JSON) || hdr.Get("Cache-Control") != "public, max-age=300" ||
		hdr.Get("Vary") != "Authorization" || hdr.Get("ETag") != "" {
		t.Fatalf("GET /openapi.json without a token: %d %v (the public document: %t)", s, hdr, bytes.Equal(pub, openapi.JSON))
	}

	s, hdr, body := h.Do(http.MethodGet, "/openapi.json", a.Token, "", "")
	if s != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "private, no-cache" ||
		hdr.Get("Vary") != "Authorization" || hdr.Get("ETag") == "" {
		t.Fatalf("GET /openapi.json with a token: %d %v", s, hdr)
	}
	tagA := hdr.Get("ETag")
	var doc map[string]any
	mustUnmarshal(t, body, &doc)

	// Each key, typed, in an answer: never null, none required.
	wantContact := map[string]string{
		"note":      `{"maxLength":1000,"title":"Note","type":"string"}`,
		"score":     `{"description":"Lead scoring, 0-100.","title":"Score","type":"number"}`,
		"vip":       `{"title":"VIP","type":"boolean"}`,
		"born":      `{"format":"date","title":"Born","type":"string"}`,
		"call_at":   `{"format":"date-time","title":"Call at","type":"string"}`,
		"site":      `{"format":"uri","maxLength":2048,"title":"Site","type":"string"}`,
		"alt_email": `{"format":"email","maxLength":254,"title":"Other email","type":"string"}`,
	}
	wantLead := map[string]string{
		"budget":   `{"title":"Budget","type":"number"}`,
		"interest": `{"enum":["crm","erp"],"title":"Interest","type":"string"}`,
		"topics":   `{"items":{"enum":["price","demo","trial"],"type":"string"},"maxItems":50,"minItems":1,"title":"Topics","type":"array","uniqueItems":true}`,
	}
	for schema, want := range map[string]map[string]string{"partner.contact.v1.Contact": wantContact, "partner.lead.v1.Lead": wantLead} {
		cf := customFieldsOf(t, doc, schema)
		if cf["additionalProperties"] != false || cf["required"] != nil || cf["type"] != "object" {
			t.Errorf("%s.customFields: %s", schema, mustJSON(t, cf))
		}
		props := cf["properties"].(map[string]any)
		if len(props) != len(want) {
			t.Errorf("%s.customFields lists %v, want %d keys", schema, keys(props), len(want))
		}
		for k, w := range want {
			if got := mustJSON(t, props[k]); got != w {
				t.Errorf("%s.customFields.%s = %s, want %s", schema, k, got, w)
			}
		}
	}
	// Creates: the required keys required (and with them the object), the
	// others nullable (null is "no value" in a create).
	for schema, req := range map[string]string{"partner.contact.v1.ContactInput": "vip", "partner.lead.v1.LeadContact": "vip", "partner.lead.v1.LeadInput": "budget"} {
		cf := customFieldsOf(t, doc, schema)
		if mustJSON(t, cf["required"]) != `["`+req+`"]` || cf["type"] != "object" || cf["additionalProperties"] != false {
			t.Errorf("%s.customFields: %s", schema, mustJSON(t, cf))
		}
		if r := obj(t, doc, "components", "schemas", schema)["required"]; !slices.Contains(r.([]any), any("customFields")) {
			t.Errorf("%s requires %v, not customFields", schema, r)
		}
		if got := mustJSON(t, cf["properties"].(map[string]any)[req].(map[string]any)["type"]); got != `"`+map[string]string{"vip": "boolean", "budget": "number"}[req]+`"` {
			t.Errorf("%s.customFields.%s (required) type %s: not null", schema, req, got)
		}
	}
	if got := mustJSON(t, customFieldsOf(t, doc, "partner.lead.v1.LeadInput")["properties"].(map[string]any)["interest"]); got != `{"enum":["crm","erp",null],"title":"Interest","type":["string","null"]}` {
		t.Errorf("LeadInput.customFields.interest = %s", got)
	}
	// Merge patches: nothing required, every key nullable (null clears).
	for _, schema := range []string{"partner.contact.v1.ContactPatch", "partner.lead.v1.LeadPatch"} {
		cf := customFieldsOf(t, doc, schema)
		if cf["required"] != nil || mustJSON(t, cf["type"]) != `["object","null"]` {
			t.Errorf("%s.customFields: %s", schema, mustJSON(t, cf))
		}
		for k, p := range cf["properties"].(map[string]any) {
			if typ, _ := p.(map[string]any)["type"].([]any); len(typ) != 2 || typ[1] != "null" {
				t.Errorf("%s.customFields.%s is not nullable: %s", schema, k, mustJSON(t, p))
			}
		}
	}
	if got := mustJSON(t, customFieldsOf(t, doc, "partner.lead.v1.LeadPatch")["properties"].(map[string]any)["topics"]); got != `{"items":{"enum":["price","demo","trial"],"type":"string"},"maxItems":50,"minItems":1,"title":"Topics","type":["array","null"],"uniqueItems":true}` {
		t.Errorf("LeadPatch.customFields.topics = %s", got)
	}
	// The lists' filters, per key: equality, and bounds of ordered types.
	params := map[string]string{}
	for _, p := range obj(t, doc, "paths", "/api/v1/leads", "get")["parameters"].([]any) {
		if pm := p.(map[string]any); strings.HasPrefix(mustJSON(t, pm["name"]), `"customFields.`) {
			params[pm["name"].(string)] = mustJSON(t, pm["schema"])
		}
	}
	wantParams := map[string]string{
		"customFields.budget": `{"type":"number"}`, "customFields.budget.gte": `{"type":"number"}`, "customFields.budget.lte": `{"type":"number"}`,
		"customFields.interest": `{"enum":["crm","erp"],"type":"string"}`, "customFields.topics": `{"enum":["price","demo","trial"],"type":"string"}`,
	}
	if mustJSON(t, params) != mustJSON(t, wantParams) {
		t.Errorf("GET /api/v1/leads custom field parameters: %v, want %v", params, wantParams)
	}
	// No component is left unused (Redocly's no-unused-components): the
	// untyped value schemas are gone.
	if u := unusedComponents(doc); len(u) != 0 {
		t.Errorf("unused components: %v", u)
	}
	// Everything else is the public document's.
	var public map[string]any
	mustUnmarshal(t, pub, &public)
	for _, name := range []string{"google.protobuf.Value", "google.protobuf.ValueInput"} {
		if obj(t, doc, "components", "schemas")[name] != nil {
			t.Errorf("the workspace document keeps %s", name)
		}
		delete(obj(t, public, "components", "schemas"), name)
	}
	for _, schema := range []string{"partner.contact.v1.Contact", "partner.lead.v1.Lead", "partner.contact.v1.ContactInput", "partner.lead.v1.LeadInput", "partner.lead.v1.LeadContact", "partner.contact.v1.ContactPatch", "partner.lead.v1.LeadPatch"} {
		for _, d := range []map[string]any{doc, public} {
			props := obj(t, d, "components", "schemas", schema, "properties")
			delete(props, "customFields")
			s := obj(t, d, "components", "schemas", schema)
			if r, ok := s["required"].([]any); ok {
				s["required"] = slices.DeleteFunc(slices.Clone(r), func(x any) bool { return x == "customFields" })
				if len(s["required"].([]any)) == 0 {
					delete(s, "required")
				}
			}
		}
	}
	for _, p := range []string{"/api/v1/contacts", "/api/v1/leads"} {
		op := obj(t, doc, "paths", p, "get")
		op["parameters"] = slices.DeleteFunc(op["parameters"].([]any), func(x any) bool {
			return strings.HasPrefix(mustJSON(t, x.(map[string]any)["name"]), `"customFields.`)
		})
	}
	if mustJSON(t, doc) != mustJSON(t, public) {
		t.Error("the workspace document differs from the public one beyond customFields and their filters")
	}

	// Revalidation: the same ETag is a 304 with no body; a malformed
	// If-None-Match is a 400 naming it.
	s, hdr, body = h.Do(http.MethodGet, "/openapi.json", a.Token, "", "", "If-None-Match", tagA)
	if s != http.StatusNotModified || len(body) != 0 || hdr.Get("ETag") != tagA || hdr.Get("Cache-Control") != "private, no-cache" || hdr.Get("Vary") != "Authorization" {
		t.Errorf("If-None-Match: the ETag: %d %v %s", s, hdr, body)
	}
	if s, _, body := h.Do(http.MethodGet, "/openapi.json", a.Token, "", "", "If-None-Match", "bare"); s != 400 || !strings.Contains(string(body), "If-None-Match") {
		t.Errorf("If-None-Match: bare: %d %s", s, body)
	}

	// Another workspace's document shows none of them.
	s, hdr, body = h.Do(http.MethodGet, "/openapi.json", b.Token, "", "")
	if s != 200 || hdr.Get("ETag") == tagA {
		t.Fatalf("GET /openapi.json as another workspace: %d %v", s, hdr)
	}
	var other map[string]any
	mustUnmarshal(t, body, &other)
	for _, schema := range []string{"partner.contact.v1.Contact", "partner.lead.v1.LeadInput", "partner.lead.v1.LeadPatch"} {
		cf := customFieldsOf(t, other, schema)
		if len(cf["properties"].(map[string]any)) != 0 || cf["additionalProperties"] != false || cf["required"] != nil {
			t.Errorf("%s.customFields of a workspace without fields: %s", schema, mustJSON(t, cf))
		}
	}
	if strings.Contains(string(body), "budget") || strings.Contains(string(body), "Other email") {
		t.Error("another workspace's document names this workspace's fields")
	}

	// A deleted definition leaves the document at once, and the ETag
	// changes.
	if _, err := h.DB.Conn().Exec(context.Background(), `UPDATE custom_fields SET deleted_at = now() WHERE id = $1`, tags); err != nil {
		t.Fatal(err)
	}
	w, _ := opaqueid.Parse(opaqueid.Workspace, a.WorkspaceID)
	customfield.Forget(w)
	s, hdr, body = h.Do(http.MethodGet, "/openapi.json", a.Token, "", "", "If-None-Match", tagA)
	if s != 200 || hdr.Get("ETag") == tagA {
		t.Fatalf("after a deletion, If-None-Match: the old ETag: %d %v", s, hdr)
	}
	mustUnmarshal(t, body, &doc)
	for _, schema := range []string{"partner.lead.v1.Lead", "partner.lead.v1.LeadInput", "partner.lead.v1.LeadPatch"} {
		if props := customFieldsOf(t, doc, schema)["properties"].(map[string]any); props["topics"] != nil || props["budget"] == nil {
			t.Errorf("%s.customFields after topics was deleted: %v", schema, keys(props))
		}
	}
	if strings.Contains(string(body), "customFields.topics") {
		t.Error("the deleted field's filter is still listed")
	}

	// A token that is sent but refused is a 401 as on the API, not the
	// public document; so is a second Authorization header.
	s, hdr, body = h.Do(http.MethodGet, "/openapi.json", "svat_not-a-token", "", "")
	if s != 401 || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) ||
		hdr.Get("Content-Type") != "application/problem+json" || hdr.Get("Vary") != "Authorization" {
		t.Errorf("GET /openapi.json with a bad token: %d %v %s", s, hdr, body)
	}
	if s, _, body := h.Do(http.MethodGet, "/openapi.json", "", "", "", "Authorization", "Basic eDp5"); s != 401 {
		t.Errorf("GET /openapi.json with Basic credentials: %d %s", s, body)
	}
	req, _ := http.NewRequest(http.MethodGet, h.Public.URL+"/openapi.json", nil)
	req.Header.Add("Authorization", "Bearer "+a.Token)
	req.Header.Add("Authorization", "Bearer "+b.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("GET /openapi.json with two Authorization headers: %d %s", res.StatusCode, body)
	}
}

// TestWorkspaceOpenAPIDocumentConforms: the workspace document is a valid
// OpenAPI 3.1 document, and the answers and accepted requests of records
// with custom values (create, batch, inline contact, GET, lists with
// filters, PATCH) validate against it, while values the server refuses
// as the wrong type, unknown keys, and answers it never gives do not.
func TestWorkspaceOpenAPIDocumentConforms(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Conforming Fields Co")
	defineField(t, h, tn.WorkspaceID, "contact", "tier", "select", "Tier", "", false, "gold", "silver")
	defineField(t, h, tn.WorkspaceID, "contact", "born", "date", "Born", "", false)
	defineField(t, h, tn.WorkspaceID, "contact", "vip", "boolean", "VIP", "", false)
	defineField(t, h, tn.WorkspaceID, "lead", "budget", "number", "Budget", "", true)
	defineField(t, h, tn.WorkspaceID, "lead", "interest", "select", "Interest", "", false, "crm", "erp")
	defineField(t, h, tn.WorkspaceID, "lead", "topics", "multiselect", "Topics", "", false, "price", "demo")
	defineField(t, h, tn.WorkspaceID, "lead", "call_at", "datetime", "Call at", "", false)
	defineField(t, h, tn.WorkspaceID, "lead", "site", "url", "Site", "", false)
	defineField(t, h, tn.WorkspaceID, "lead", "note", "text", "Note", "", false)
	c := loadContractAs(t, h, tn.Token)
	c.valid()

	do := func(method, route, target, contentType, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.Public.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
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
	const js = "application/json"

	_, b := do("POST", "/api/v1/contacts", "/api/v1/contacts", js, `{"email":"typed@example.com","customFields":{"tier":"gold","born":"1990-04-01","vip":true}}`)
	con := servertest.ID(t, b)
	expect(t, 201)(do("POST", "/api/v1/contacts", "/api/v1/contacts", js, `{"email":"plain@example.com","customFields":{"tier":null}}`))
	_, b = do("POST", "/api/v1/leads", "/api/v1/leads", js,
		`{"contactId":"`+con+`","customFields":{"budget":25000,"interest":"crm","topics":["demo","price"],"call_at":"2026-05-01T09:30:00+02:00","site":"https://example.com/a","note":"Call after lunch"}}`)
	lea := servertest.ID(t, b)
	if !strings.Contains(string(b), `"topics":["price","demo"]`) || !strings.Contains(string(b), `"call_at":"2026-05-01T07:30:00Z"`) {
		t.Errorf("the lead's values as answered: %s", b)
	}
	expect(t, 201)(do("POST", "/api/v1/leads", "/api/v1/leads", js,
		`{"contact":{"email":"inline@example.com","customFields":{"tier":"silver"}},"customFields":{"budget":1.5}}`))
	expect(t, 200)(do("POST", "/api/v1/leads/batch", "/api/v1/leads/batch", js,
		`{"leads":[{"contactId":"`+con+`","customFields":{"budget":10,"interest":"erp"}},{"contactId":"`+con+`","customFields":{"budget":"ten"}},{"contactId":"`+con+`"}]}`))
	expect(t, 200)(do("POST", "/api/v1/contacts/batch", "/api/v1/contacts/batch", js,
		`{"contacts":[{"email":"b1@example.com","customFields":{"vip":false}},{"email":"b2@example.com","customFields":{"vip":"no"}}]}`))

	expect(t, 200)(do("GET", "/api/v1/contacts/{id}", "/api/v1/contacts/"+con, "", ""))
	_, leadBody := do("GET", "/api/v1/leads/{id}", "/api/v1/leads/"+lea, "", "")
	q := url.Values{"customFields.budget.gte": {"100"}, "customFields.interest": {"crm"}, "customFields.topics": {"demo"}}
	_, b = do("GET", "/api/v1/leads", "/api/v1/leads?"+q.Encode(), "", "")
	if !servertest.ContainsID(t, b, lea) {
		t.Errorf("the filtered list lacks the lead: %s", b)
	}
	expect(t, 200)(do("GET", "/api/v1/contacts", "/api/v1/contacts?customFields.tier=gold&customFields.born.lte=2000-01-01", "", ""))
	expect(t, 200)(do("PATCH", "/api/v1/leads/{id}", "/api/v1/leads/"+lea, "application/merge-patch+json", `{"customFields":{"interest":null,"topics":["price"]}}`))
	expect(t, 200)(do("PATCH", "/api/v1/contacts/{id}", "/api/v1/contacts/"+con, "application/merge-patch+json", `{"customFields":null}`))

	// What the server refuses as malformed (400), the document refuses.
	for _, r := range []struct{ method, route, target, contentType, body string }{
		{"POST", "/api/v1/leads", "/api/v1/leads", js, `{"contactId":"` + con + `","customFields":{"budget":"25000"}}`},
		{"POST", "/api/v1/leads", "/api/v1/leads", js, `{"contactId":"` + con + `","customFields":{"budget":1,"colour":"red"}}`},
		{"POST", "/api/v1/leads", "/api/v1/leads", js, `{"contactId":"` + con + `","customFields":{"budget":1,"topics":"demo"}}`},
		{"POST", "/api/v1/contacts", "/api/v1/contacts", js, `{"email":"x@example.com","customFields":{"vip":"yes"}}`},
		{"PATCH", "/api/v1/leads/{id}", "/api/v1/leads/" + lea, "application/merge-patch+json", `{"customFields":{"budget":true}}`},
	} {
		if s, b := do(r.method, r.route, r.target, r.contentType, r.body); s != 400 {
			t.Errorf("%s %s: %d, want 400: %s", r.method, r.body, s, b)
		}
		c.rejectsRequest(r.method, r.route, r.contentType, r.body)
	}
	// A create without a required field (422): refused by the document too.
	if s, b := do("POST", "/api/v1/leads", "/api/v1/leads", js, `{"contactId":"`+con+`"}`); s != 422 {
		t.Errorf("a lead without its required budget: %d %s", s, b)
	}
	c.rejectsRequest("POST", "/api/v1/leads", js, `{"contactId":"`+con+`"}`)
	c.rejectsRequest("POST", "/api/v1/leads", js, `{"contactId":"`+con+`","customFields":{"budget":1,"interest":"other"}}`)
	// Answers the server never gives: an undefined key, a wrong type.
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, with(t, leadBody, "customFields.colour", "red"))
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, with(t, leadBody, "customFields.budget", "25000"))
	c.rejectsAnswer("GET", "/api/v1/leads/{id}", 200, with(t, leadBody, "customFields.budget", nil))
	// And a filter value outside the field's schema is one the server
	// refuses.
	for _, r := range []struct{ name, value string }{{"customFields.interest", "other"}, {"customFields.budget.gte", "lots"}} {
		if s, _ := do("GET", "/api/v1/leads", "/api/v1/leads?"+url.Values{r.name: {r.value}}.Encode(), "", ""); s != 400 {
			t.Errorf("GET /api/v1/leads?%s=%s: %d, want 400", r.name, r.value, s)
		}
		if c.validateParam("GET", "/api/v1/leads", r.name, r.value) == nil {
			t.Errorf("the document accepts %s=%s, which the server refuses", r.name, r.value)
		}
	}
	for _, want := range []string{"POST /api/v1/leads 201", "POST /api/v1/leads/batch 200", "GET /api/v1/leads 200",
		"PATCH /api/v1/leads/{id} 200", "GET /api/v1/contacts/{id} 200", "POST /api/v1/leads 400"} {
		if !c.checked[want] {
			t.Errorf("no response %s was checked", want)
		}
	}
}
