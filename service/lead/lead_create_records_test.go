package lead_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/svat/partnerapi/db/dbtest"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestLeadsREST creates leads with contactId and an inline contact, checks
// defaults, duplicates and filters.
func TestLeadsREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Leads Co")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"grace@navy.mil","firstName":"Grace","lastName":"Hopper"}`)
	contactID := servertest.ID(t, b)

	status, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+contactID+`"}`)
	l := servertest.Decode(t, b)
	if status != 201 || l["contactId"] != contactID || l["title"] != "Grace Hopper" || l["status"] != "new" || !strings.HasPrefix(l["id"].(string), "lea_") {
		t.Fatalf("lead by contactId: %d %s", status, b)
	}
	// Inline contact with an existing email finds the contact.
	status, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contact":{"email":"GRACE@navy.mil"},"title":"Compiler","status":"qualified","source":"web_form","campaign":"Q4","message":"Hi","value":{"amount":250000,"currency":"EUR"},"externalId":"hub-9"}`)
	l = servertest.Decode(t, b)
	if status != 201 || l["contactId"] != contactID || l["title"] != "Compiler" || l["status"] != "qualified" ||
		l["source"] != "web_form" || l["campaign"] != "Q4" || l["message"] != "Hi" || l["externalId"] != "hub-9" {
		t.Fatalf("lead with inline contact: %d %s", status, b)
	}
	if v, _ := l["value"].(map[string]any); v["amount"] != float64(250000) || v["currency"] != "EUR" {
		t.Fatalf("value = %v", l["value"])
	}
	if _, ok := l["contact"]; ok {
		t.Fatalf("response carries the whole contact: %s", b)
	}
	hub9 := l["id"]
	// Inline contact with a new email creates it.
	status, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"new@x.io","phone":"+15551234567"},"source":"zapier"}`)
	l = servertest.Decode(t, b)
	if status != 201 || l["contactId"] == contactID || l["title"] != "new@x.io" {
		t.Fatalf("lead with new inline contact: %d %s", status, b)
	}
	newContact := l["contactId"].(string)
	_, _, b = h.Do(http.MethodGet, "/api/v1/contacts?email=new%40x.io", tn.Token, "", "")
	if items, _ := servertest.Decode(t, b)["contacts"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != newContact {
		t.Fatalf("inline contact not created: %s", b)
	}
	// Duplicate externalId.
	status, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+contactID+`","externalId":"hub-9"}`)
	if p := servertest.Decode(t, b); status != 409 || p["existingId"] != hub9 || p["code"] != "duplicate" {
		t.Fatalf("duplicate externalId: %d %s", status, b)
	}
	// Filters.
	for q, want := range map[string]int{
		"contactId=" + contactID: 2, "status=qualified": 1, "status=new": 2, "source=zapier": 1,
		"externalId=hub-9": 1, "source=web_form&status=new": 0, "sort=updatedAt": 3, "createdSince=2000-01-01T00:00:00Z": 3,
		"updatedSince=2999-01-01T00:00:00Z": 0,
	} {
		var items []any
		dbtest.Until(10*time.Second, func() bool {
			status, _, b = h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", "")
			items, _ = servertest.Decode(t, b)["leads"].([]any)
			// sort=updatedAt withholds changes newer than a write
			// transaction still open anywhere in the cluster, such as a
			// parallel test's CREATE DATABASE; they appear when it ends.
			return q != "sort=updatedAt" || len(items) == want
		})
		if status != 200 || len(items) != want {
			t.Errorf("filter %s: %d, %d items, want %d", q, status, len(items), want)
		}
	}
}

// TestLeadValidation checks every lead rule.
func TestLeadValidation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Lead Validation Co")
	other := h.NewTenant("Elsewhere")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"theirs@x.co"}`)
	foreign := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"mine@x.co"}`)
	mine := servertest.ID(t, b)
	long := func(n int) string { return strings.Repeat("y", n) }
	cases := []struct{ body, field, code string }{
		{`{}`, "contactId", "required"},
		{`{"contactId":"` + mine + `","contact":{"email":"a@b.co"}}`, "contactId", "invalid_value"},
		{`{"contactId":"nope"}`, "contactId", "invalid_format"},
		{`{"contactId":"` + foreign + `"}`, "contactId", "not_found"},
		{`{"contact":{}}`, "contact.email", "required"},
		{`{"contact":{"email":"bad"}}`, "contact.email", "invalid_format"},
		{`{"contact":{"phone":"555"}}`, "contact.phone", "invalid_format"},
		{`{"contact":{"email":"a@b.co","firstName":"` + long(101) + `"}}`, "contact.firstName", "too_long"},
		{`{"contactId":"` + mine + `","title":"` + long(256) + `"}`, "title", "too_long"},
		{`{"contactId":"` + mine + `","status":"won"}`, "status", "invalid_value"},
		{`{"contactId":"` + mine + `","source":"Web Form"}`, "source", "invalid_format"},
		{`{"contactId":"` + mine + `","source":"` + long(65) + `"}`, "source", "too_long"},
		{`{"contactId":"` + mine + `","campaign":"` + long(256) + `"}`, "campaign", "too_long"},
		{`{"contactId":"` + mine + `","message":"` + long(5001) + `"}`, "message", "too_long"},
		{`{"contactId":"` + mine + `","externalId":"` + long(256) + `"}`, "externalId", "too_long"},
		{`{"contactId":"` + mine + `","value":{"amount":-1,"currency":"USD"}}`, "value.amount", "invalid_value"},
		{`{"contactId":"` + mine + `","value":{"amount":1,"currency":"XYZ"}}`, "value.currency", "invalid_value"},
		{`{"contactId":"` + mine + `","value":{"amount":1}}`, "value.currency", "invalid_value"},
	}
	for _, tc := range cases {
		status, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", tc.body)
		p := servertest.Decode(t, b)
		found := false
		errs, _ := p["errors"].([]any)
		for _, e := range errs {
			fe := e.(map[string]any)
			found = found || fe["field"] == tc.field && fe["code"] == tc.code
		}
		if status != 422 || !found {
			t.Errorf("%.60s: %d, want %s/%s: %s", tc.body, status, tc.field, tc.code, b)
		}
	}
	for _, q := range []string{"status=won", "contactId=abc", "source=Bad%20Slug", "sort=-title"} {
		if status, _, b := h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", ""); status != 400 {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
	// 1.5 amount is not an integer: malformed (400).
	if status, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+mine+`","value":{"amount":1.5,"currency":"USD"}}`); status != 400 {
		t.Errorf("fractional amount: %d %s", status, b)
	}
}

// TestBatchLeads: items succeed or fail on their own, in input order; a
// failed item carries exactly the problem its single create answers; an
// inline contact made only for failed leads is gone; 0 and 101 items are
// 400; one Idempotency-Key covers the batch.
func TestBatchLeads(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Leads")
	other := h.NewTenant("Batch Elsewhere")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"known@x.co","firstName":"Known","lastName":"Person"}`)
	known := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"theirs@x.co"}`)
	foreign := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+known+`","externalId":"taken"}`)
	taken := servertest.ID(t, b)

	items := []string{
		`{"contact":{"email":"new@x.co","firstName":"Nia"},"source":"web_form","externalId":"b-1"}`, // 0: new contact
		`{"contact":{"email":"KNOWN@x.co"},"value":{"amount":500,"currency":"usd"}}`,                // 1: finds known
		`{"contactId":"` + foreign + `"}`,                        // 2: 422 contactId
		`{"contact":{"email":"bad"}}`,                            // 3: 422 validation
		`{"contactId":"` + known + `","externalId":"taken"}`,     // 4: 409 existing lead
		`{"contact":{"email":"new@x.co"},"externalId":"b-6"}`,    // 5: same new contact as 0
		`{"contact":{"email":"orphan@x.co"},"externalId":"b-1"}`, // 6: 409 on item 0; no contact left
		`{"contact":{"phone":"+442071838750"}}`,                  // 7: phone-only contact
		`{"contactId":"` + known + `","status":"won"}`,           // 8: 422 status
	}
	body := `{"leads":[` + strings.Join(items, ",") + `]}`
	status, hdr, resBody := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", body, "Idempotency-Key", "day-1")
	if status != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("batch: %d %v %s", status, hdr, resBody)
	}
	var res struct {
		Results []struct {
			Lead  map[string]any `json:"lead"`
			Error map[string]any `json:"error"`
		} `json:"results"`
	}
	servertest.MustUnmarshal(t, resBody, &res)
	if len(res.Results) != len(items) {
		t.Fatalf("%d results for %d items: %s", len(res.Results), len(items), resBody)
	}
	okAt := map[int]bool{0: true, 1: true, 5: true, 7: true}
	for i, r := range res.Results {
		if okAt[i] != (r.Lead != nil) || okAt[i] == (r.Error != nil) {
			t.Fatalf("result %d = %+v, want a lead: %v", i, r, okAt[i])
		}
	}
	l := func(i int) map[string]any { return res.Results[i].Lead }
	if l(1)["contactId"] != known || l(1)["title"] != "Known Person" || l(0)["title"] != "Nia" || l(0)["contactId"] != l(5)["contactId"] ||
		l(0)["contactId"] == known || l(7)["title"] != "+442071838750" || l(0)["externalId"] != "b-1" || l(1)["status"] != "new" {
		t.Errorf("created leads: %s", resBody)
	}
	if v, _ := l(1)["value"].(map[string]any); v["currency"] != "USD" {
		t.Errorf("value not normalised: %v", l(1))
	}
	wantStatus := map[int]float64{2: 422, 3: 422, 4: 409, 6: 409, 8: 422}
	for i, st := range wantStatus {
		if e := res.Results[i].Error; e["status"] != st || e["requestId"] != hdr.Get("Request-Id") {
			t.Errorf("result %d: %v, want status %v and the batch's request id", i, e, st)
		}
	}
	if res.Results[4].Error["existingId"] != taken || res.Results[6].Error["existingId"] != l(0)["id"] {
		t.Errorf("existingId of duplicates: %v / %v", res.Results[4].Error, res.Results[6].Error)
	}
	// Every failed item is the problem its single create answers.
	for i := range wantStatus {
		s, _, single := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", items[i])
		if float64(s) != wantStatus[i] || !reflect.DeepEqual(servertest.WithoutRequestID(t, servertest.Decode(t, single)), servertest.WithoutRequestID(t, res.Results[i].Error)) {
			t.Errorf("item %d: single create answers %d %s, batch result %v", i, s, single, res.Results[i].Error)
		}
	}
	// The contact of item 6 was made for a lead that failed: it is gone.
	if _, _, b := h.Do(http.MethodGet, "/api/v1/contacts?email=orphan%40x.co", tn.Token, "", ""); len(servertest.Decode(t, b)["contacts"].([]any)) != 0 {
		t.Errorf("an inline contact of a failed item was left behind: %s", b)
	}
	// Each created lead is stored as answered.
	for _, i := range []int{0, 1, 5, 7} {
		_, _, got := h.Do(http.MethodGet, "/api/v1/leads/"+l(i)["id"].(string), tn.Token, "", "")
		if !reflect.DeepEqual(servertest.Decode(t, got), l(i)) {
			t.Errorf("stored lead %d = %s, answered %v", i, got, l(i))
		}
	}

	// The same key and body replay the first answer; another body is 422;
	// nothing is created twice.
	s, hdr2, replay := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", body, "Idempotency-Key", "day-1")
	if s != 200 || hdr2.Get("Idempotent-Replayed") != "true" || !servertest.SameJSON(t, replay, resBody) {
		t.Errorf("replay: %d %v %s", s, hdr2, replay)
	}
	s, _, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", `{"leads":[`+items[7]+`]}`, "Idempotency-Key", "day-1")
	if s != 422 || servertest.Decode(t, b)["code"] != "idempotency_key_reused" {
		t.Errorf("key reused with another batch: %d %s", s, b)
	}
	_, _, b = h.Do(http.MethodGet, "/api/v1/leads?source=web_form", tn.Token, "", "")
	if n := len(servertest.Decode(t, b)["leads"].([]any)); n != 1 {
		t.Errorf("%d leads from web_form after the replay, want 1", n)
	}

	// Sizes: none, 101 and no list at all are malformed.
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf(`{"contactId":"%s","externalId":"many-%d"}`, known, i)
	}
	for name, body := range map[string]string{"0 items": `{"leads":[]}`, "101 items": `{"leads":[` + strings.Join(many, ",") + `]}`, "no list": `{}`, "not a list": `{"leads":{}}`,
		"an unknown field": `{"leads":[{"contactId":"` + known + `","nickname":"x"}]}`, "an unknown member": `{"leads":[],"more":1}`, "not JSON": `{"leads":[`} {
		s, hdr, b := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", body)
		if s != 400 || hdr.Get("Content-Type") != "application/problem+json" || servertest.Decode(t, b)["code"] != "malformed_request" {
			t.Errorf("%s: %d %s", name, s, b)
		}
	}
	if s, _, b := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", `{"leads":[`+strings.Join(many[:100], ",")+`]}`); s != 200 || strings.Contains(string(b), `"error"`) {
		t.Errorf("100 items: %d %.300s", s, b)
	}
	// Scope and method.
	cid, sec := h.Client(tn.WorkspaceID, tn.MemberID, "leads:read", "contacts:write")
	if s, _, _ := h.Do(http.MethodPost, "/api/v1/leads/batch", h.Token(cid, sec, ""), "application/json", `{"leads":[`+items[7]+`]}`); s != 403 {
		t.Errorf("batch without leads:write: %d", s)
	}
	if s, hdr, _ := h.Do(http.MethodGet, "/api/v1/leads/batch", tn.Token, "", ""); s != 405 || hdr.Get("Allow") != "POST" {
		t.Errorf("GET batch: %d %v", s, hdr)
	}
}

// TestBatchLeadsOverRPC: partial failure and idempotent replay of the lead
// batch over gRPC.
func TestBatchLeadsOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch RPC")
	lc := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC(), connect.WithInterceptors(servertest.Bearer(tn.Token)))
	mk := func() *connect.Request[leadv1.BatchCreateLeadsRequest] {
		r := connect.NewRequest(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{
			{Contact: &leadv1.LeadContact{Email: servertest.Ptr("grpc@x.co")}, ExternalId: servertest.Ptr("g-1")},
			{Contact: &leadv1.LeadContact{Email: servertest.Ptr("grpc@x.co")}, ExternalId: servertest.Ptr("g-1")},
			{},
		}})
		r.Header().Set("Idempotency-Key", "grpc-batch")
		return r
	}
	a, err := lc.BatchCreateLeads(context.Background(), mk())
	if err != nil {
		t.Fatal(err)
	}
	r := a.Msg.GetResults()
	if len(r) != 3 || r[0].GetLead() == nil || r[1].GetError().GetCode() != "duplicate" || r[1].GetError().GetExistingId() != r[0].GetLead().GetId() ||
		r[2].GetError().GetStatus() != 422 || r[2].GetError().GetErrors()[0].GetField() != "contactId" {
		t.Fatalf("BatchCreateLeads: %v", a.Msg)
	}
	b, err := lc.BatchCreateLeads(context.Background(), mk())
	if err != nil || b.Header().Get("Idempotent-Replayed") != "true" || b.Msg.GetResults()[0].GetLead().GetId() != r[0].GetLead().GetId() {
		t.Fatalf("replay: %v %v", b, err)
	}
	var raw json.RawMessage
	_, _, body := h.Do(http.MethodGet, "/api/v1/leads?externalId=g-1", tn.Token, "", "")
	servertest.MustUnmarshal(t, body, &raw)
	if n := len(servertest.Decode(t, body)["leads"].([]any)); n != 1 {
		t.Errorf("%d leads with externalId g-1, want 1", n)
	}
}

// TestLeadWithTheNilContactID: "con_" and 26 zeros is a well-formed id
// that names no contact (no record has the nil UUID). A lead naming it is
// a 422 not_found in a single create, a batch item and a patch alike;
// the batch queries use the nil UUID for "an inline contact", so it must
// never reach them (it was answered 503 after three runs of the batch).
func TestLeadWithTheNilContactID(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Nil Contact Co")
	const nilID = "con_00000000000000000000000000"
	notFound := func(what string, p map[string]any) {
		t.Helper()
		if p["status"] != float64(422) || p["code"] != "validation_failed" || !servertest.HasViolation(p, "contactId") {
			t.Errorf("%s: %v, want 422 validation_failed on contactId", what, p)
		}
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["code"] != "not_found" {
			t.Errorf("%s: errors %v, want one not_found", what, p["errors"])
		}
	}
	s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+nilID+`"}`)
	notFound(fmt.Sprintf("single create (%d)", s), servertest.Decode(t, b))

	s, _, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json",
		`{"leads":[{"contactId":"`+nilID+`"},{"contact":{"email":"real@x.co"}}]}`)
	if s != 200 {
		t.Fatalf("batch: %d %s, want 200 with per-item results", s, b)
	}
	var res struct {
		Results []struct {
			Lead  map[string]any `json:"lead"`
			Error map[string]any `json:"error"`
		} `json:"results"`
	}
	servertest.MustUnmarshal(t, b, &res)
	if len(res.Results) != 2 || res.Results[1].Lead == nil {
		t.Fatalf("batch results: %s", b)
	}
	notFound("batch item", res.Results[0].Error)

	lead := res.Results[1].Lead["id"].(string)
	s, _, b = h.Do(http.MethodPatch, "/api/v1/leads/"+lead, tn.Token, "application/merge-patch+json", `{"contactId":"`+nilID+`"}`)
	notFound(fmt.Sprintf("patch (%d)", s), servertest.Decode(t, b))
}

// TestBatchLeadsSharedInlineContactOfAFailedItem: two items send the same
// new inline email, and the first fails (its externalId is taken). As one
// by one, the second creates the contact from its own fields, and its
// lead's default title is that contact's name: nothing of the failed item
// is kept.
func TestBatchLeadsSharedInlineContactOfAFailedItem(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Shared Inline")
	_, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"earlier@x.co"},"externalId":"form-1"}`)
	taken := servertest.ID(t, b)
	items := []string{
		`{"contact":{"email":"new@x.co","firstName":"Ann","companyName":"Ann Co"},"externalId":"form-1"}`,
		`{"contact":{"email":"new@x.co","firstName":"Bob","lastName":"Stone"},"source":"web_form"}`,
		`{"contact":{"email":"new@x.co","firstName":"Cy"},"title":"Own title"}`,
		`{"contact":{"email":"NEW@x.co"}}`,
	}
	status, _, body := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", `{"leads":[`+strings.Join(items, ",")+`]}`)
	var res servertest.BatchResults
	servertest.MustUnmarshal(t, body, &res)
	if status != 200 || len(res.Results) != len(items) {
		t.Fatalf("batch: %d %s", status, body)
	}
	if e := res.Results[0].Error; e["status"] != float64(409) || e["existingId"] != taken {
		t.Fatalf("item 0 = %v, want the 409 naming %s", res.Results[0], taken)
	}
	for i, title := range map[int]string{1: "Bob Stone", 2: "Own title", 3: "Bob Stone"} {
		if l := res.Results[i].Lead; l == nil || l["title"] != title || l["contactId"] != res.Results[1].Lead["contactId"] {
			t.Errorf("item %d = %v, want a lead titled %q about item 1's contact", i, res.Results[i], title)
		}
	}
	_, _, b = h.Do(http.MethodGet, "/api/v1/contacts?email=new%40x.co", tn.Token, "", "")
	contacts := servertest.Decode(t, b)["contacts"].([]any)
	if len(contacts) != 1 {
		t.Fatalf("contacts with new@x.co: %s", b)
	}
	c := contacts[0].(map[string]any)
	want := map[string]any{"firstName": "Bob", "lastName": "Stone", "companyName": nil}
	got := map[string]any{"firstName": c["firstName"], "lastName": c["lastName"], "companyName": c["companyName"]}
	if !reflect.DeepEqual(got, want) || c["id"] != res.Results[1].Lead["contactId"] {
		t.Errorf("the shared contact = %v, want item 1's fields %v (item 0 failed)", c, want)
	}
	// Each lead is stored as answered.
	for i := 1; i < len(items); i++ {
		_, _, got := h.Do(http.MethodGet, "/api/v1/leads/"+res.Results[i].Lead["id"].(string), tn.Token, "", "")
		if !reflect.DeepEqual(servertest.Decode(t, got), res.Results[i].Lead) {
			t.Errorf("stored lead %d = %s, answered %v", i, got, res.Results[i].Lead)
		}
	}
}
