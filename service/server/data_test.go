package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestMe returns the identity of any valid token.
func TestMe(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Identity Co")
	id, sec := h.Client(ws, m, "leads:write", "apps:read")
	for _, scope := range []string{"", "apps:read"} {
		tok := h.Token(id, sec, scope)
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/me", tok, "", "")
		if status != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d %q", status, hdr.Get("Content-Type"))
		}
		var me struct {
			Workspace      map[string]string `json:"workspace"`
			App            map[string]string `json:"app"`
			Scopes         []string          `json:"scopes"`
			TokenExpiresAt string            `json:"tokenExpiresAt"`
		}
		if err := json.Unmarshal(b, &me); err != nil {
			t.Fatal(err)
		}
		wantScopes := "leads:write apps:read"
		if scope != "" {
			wantScopes = scope
		}
		if me.Workspace["id"] != ws || me.Workspace["name"] != "Identity Co" || me.App["clientId"] != id ||
			me.App["name"] != "test client" || strings.Join(me.Scopes, " ") != wantScopes || !strings.HasSuffix(me.TokenExpiresAt, "Z") {
			t.Fatalf("me = %s", b)
		}
	}
}

// TestContactsREST creates and lists contacts over REST.
func TestContactsREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Contacts Co")
	status, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json; charset=utf-8",
		`{"email":"  Ada@Example.COM ","phone":"+14155550123","firstName":"Ada","lastName":"Lovelace","companyName":"Engines","jobTitle":"Analyst","externalId":"crm-1"}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, b)
	}
	if hdr.Get("Request-Id") == "" || hdr.Get("Idempotent-Replayed") != "" {
		t.Errorf("headers = %v", hdr)
	}
	c := decode(t, b)
	id, _ := c["id"].(string)
	if !strings.HasPrefix(id, "con_") || c["email"] != "ada@example.com" || c["phone"] != "+14155550123" ||
		c["firstName"] != "Ada" || c["externalId"] != "crm-1" || c["createdAt"] != c["updatedAt"] {
		t.Fatalf("contact = %s", b)
	}
	status, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"phone":"+442071838750"}`)
	if status != 201 {
		t.Fatalf("phone-only: %d %s", status, b)
	}
	if _, ok := decode(t, b)["email"]; ok {
		t.Errorf("unset email is present: %s", b)
	}

	// Duplicates by email and by externalId, with existingId.
	for _, body := range []string{`{"email":"ADA@example.com"}`, `{"email":"other@example.com","externalId":"crm-1"}`} {
		status, hdr, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		p := decode(t, b)
		if status != 409 || hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "duplicate" || p["existingId"] != id {
			t.Fatalf("duplicate %s: %d %s", body, status, b)
		}
	}

	status, _, b = h.Do(http.MethodGet, "/api/v1/contacts?limit=1", tn.Token, "", "")
	page := decode(t, b)
	items, _ := page["contacts"].([]any)
	pg, _ := page["pagination"].(map[string]any)
	if status != 200 || len(items) != 1 || pg["nextCursor"] == nil {
		t.Fatalf("list: %d %s", status, b)
	}
	status, _, b = h.Do(http.MethodGet, "/api/v1/contacts?limit=1&cursor="+pg["nextCursor"].(string), tn.Token, "", "")
	page = decode(t, b)
	items, _ = page["contacts"].([]any)
	pg, _ = page["pagination"].(map[string]any)
	if status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("second page: %d %s", status, b)
	}
	if _, more := pg["nextCursor"]; more {
		t.Fatalf("last page has nextCursor: %s", b)
	}
	for q, want := range map[string]int{"email=ada%40EXAMPLE.com": 1, "externalId=crm-1": 1, "externalId=nope": 0, "sort=createdAt&limit=100": 2} {
		status, _, b = h.Do(http.MethodGet, "/api/v1/contacts?"+q, tn.Token, "", "")
		items, _ = decode(t, b)["contacts"].([]any)
		if status != 200 || len(items) != want {
			t.Errorf("filter %s: %d, %d items, want %d: %s", q, status, len(items), want, b)
		}
	}
}

// TestContactValidation checks every field rule; all violations are
// reported at once as 422 problem+json.
func TestContactValidation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Validation Co")
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		body, field, code string
	}{
		{`{}`, "email", "required"},
		{`{"firstName":"Only"}`, "email", "required"},
		{`{"email":"not-an-email"}`, "email", "invalid_format"},
		{`{"email":"a@b"}`, "email", "invalid_format"},
		{`{"email":"` + long(250) + `@x.co"}`, "email", "too_long"},
		{`{"phone":"4155550123"}`, "phone", "invalid_format"},
		{`{"phone":"+1234567890123456"}`, "phone", "too_long"},
		{`{"phone":"+1 415 555"}`, "phone", "invalid_format"},
		{`{"email":"a@b.co","firstName":"` + long(101) + `"}`, "firstName", "too_long"},
		{`{"email":"a@b.co","lastName":"` + long(101) + `"}`, "lastName", "too_long"},
		{`{"email":"a@b.co","companyName":"` + long(256) + `"}`, "companyName", "too_long"},
		{`{"email":"a@b.co","jobTitle":"` + long(129) + `"}`, "jobTitle", "too_long"},
		{`{"email":"a@b.co","externalId":"` + long(256) + `"}`, "externalId", "too_long"},
	}
	for _, tc := range cases {
		status, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", tc.body)
		if status != 422 || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", tc.body[:min(40, len(tc.body))], status, b)
			continue
		}
		p := decode(t, b)
		errs, _ := p["errors"].([]any)
		found := false
		for _, e := range errs {
			fe := e.(map[string]any)
			if fe["field"] == tc.field && fe["code"] == tc.code && fe["message"] != "" {
				found = true
			}
		}
		if p["code"] != "validation_failed" || !found {
			t.Errorf("%s: want %s/%s in %s", tc.body[:min(40, len(tc.body))], tc.field, tc.code, b)
		}
	}
	// Several violations at once.
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"x","phone":"y"}`)
	if errs, _ := decode(t, b)["errors"].([]any); len(errs) != 2 {
		t.Errorf("want two violations: %s", b)
	}
	// Malformed input is 400, not 422.
	for name, tc := range map[string][2]string{
		"unknown field":  {"application/json", `{"email":"a@b.co","nickname":"x"}`},
		"bad json":       {"application/json", `{"email":`},
		"wrong type":     {"application/json", `{"email":42}`},
		"duplicate key":  {"application/json", `{"email":"a@b.co","email":"c@d.co"}`},
		"not json":       {"text/plain", `email=a@b.co`},
		"body over 1MiB": {"application/json", `{"email":"a@b.co","firstName":"` + long(1<<20) + `"}`},
		"query on POST":  {"application/json", `{"email":"q@b.co"}`},
	} {
		path := "/api/v1/contacts"
		if name == "query on POST" {
			path += "?email=q@b.co"
		}
		status, hdr, b := h.Do(http.MethodPost, path, tn.Token, tc[0], tc[1])
		want := map[string]int{"not json": 415, "body over 1MiB": 413}[name]
		if want == 0 {
			want = 400
		}
		if status != want || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", name, status, b)
		}
	}
	// List parameters: 400, never a clamp.
	for _, q := range []string{"limit=0", "limit=101", "limit=abc", "limit=-1", "sort=name", "createdSince=yesterday",
		"updatedSince=2026-13-01T00:00:00Z", "cursor=abc", "unknown=1", "limit=1&limit=2", "email=not-an-email"} {
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/contacts?"+q, tn.Token, "", "")
		if status != 400 || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
}

// TestLeadsREST creates leads with contactId and an inline contact, checks
// defaults, duplicates and filters.
func TestLeadsREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Leads Co")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"grace@navy.mil","firstName":"Grace","lastName":"Hopper"}`)
	contactID := decode(t, b)["id"].(string)

	status, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+contactID+`"}`)
	l := decode(t, b)
	if status != 201 || l["contactId"] != contactID || l["title"] != "Grace Hopper" || l["status"] != "new" || !strings.HasPrefix(l["id"].(string), "lea_") {
		t.Fatalf("lead by contactId: %d %s", status, b)
	}
	// Inline contact with an existing email finds the contact.
	status, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contact":{"email":"GRACE@navy.mil"},"title":"Compiler","status":"qualified","source":"web_form","campaign":"Q4","message":"Hi","value":{"amount":250000,"currency":"EUR"},"externalId":"hub-9"}`)
	l = decode(t, b)
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
	l = decode(t, b)
	if status != 201 || l["contactId"] == contactID || l["title"] != "new@x.io" {
		t.Fatalf("lead with new inline contact: %d %s", status, b)
	}
	newContact := l["contactId"].(string)
	_, _, b = h.Do(http.MethodGet, "/api/v1/contacts?email=new%40x.io", tn.Token, "", "")
	if items, _ := decode(t, b)["contacts"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != newContact {
		t.Fatalf("inline contact not created: %s", b)
	}
	// Duplicate externalId.
	status, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+contactID+`","externalId":"hub-9"}`)
	if p := decode(t, b); status != 409 || p["existingId"] != hub9 || p["code"] != "duplicate" {
		t.Fatalf("duplicate externalId: %d %s", status, b)
	}
	// Filters.
	for q, want := range map[string]int{
		"contactId=" + contactID: 2, "status=qualified": 1, "status=new": 2, "source=zapier": 1,
		"externalId=hub-9": 1, "source=web_form&status=new": 0, "sort=updatedAt": 3, "createdSince=2000-01-01T00:00:00Z": 3,
		"updatedSince=2999-01-01T00:00:00Z": 0,
	} {
		var items []any
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, _, b = h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", "")
			items, _ = decode(t, b)["leads"].([]any)
			// sort=updatedAt withholds changes newer than a write
			// transaction still open anywhere in the cluster, such as a
			// parallel test's CREATE DATABASE; they appear when it ends.
			if q != "sort=updatedAt" || len(items) == want || time.Now().After(deadline) {
				break
			}
		}
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
	foreign := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"mine@x.co"}`)
	mine := decode(t, b)["id"].(string)
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
		p := decode(t, b)
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

// TestScopeMatrix: every data endpoint under every single-scope token.
func TestScopeMatrix(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Scope Co")
	endpoints := []struct{ method, path, scope, body string }{
		{"GET", "/api/v1/contacts", "contacts:read", ""},
		{"POST", "/api/v1/contacts", "contacts:write", `{"email":"s%d@x.co"}`},
		{"GET", "/api/v1/leads", "leads:read", ""},
		{"POST", "/api/v1/leads", "leads:write", `{"contact":{"email":"l%d@x.co"}}`},
		{"GET", "/api/v1/me", "", ""},
	}
	n := 0
	for _, granted := range []string{"contacts:read", "contacts:write", "leads:read", "leads:write", "apps:read"} {
		id, sec := h.Client(ws, m, granted)
		tok := h.Token(id, sec, "")
		for _, ep := range endpoints {
			n++
			ct, body := "", ""
			if ep.method == "POST" {
				ct, body = "application/json", fmt.Sprintf(ep.body, n)
			}
			status, hdr, b := h.Do(ep.method, ep.path, tok, ct, body)
			allowed := ep.scope == "" || ep.scope == granted
			switch {
			case allowed && status >= 300:
				t.Errorf("%s %s with %s: %d %s", ep.method, ep.path, granted, status, b)
			case !allowed && (status != 403 || hdr.Get("WWW-Authenticate") != `Bearer realm="partner-api", error="insufficient_scope", scope="`+ep.scope+`"`):
				t.Errorf("%s %s with %s: %d %q", ep.method, ep.path, granted, status, hdr.Get("WWW-Authenticate"))
			}
		}
	}
}

// TestDataOverRPC: the same handlers over Connect, gRPC and gRPC-Web.
func TestDataOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Data Co")
	for name, opts := range map[string][]connect.ClientOption{"connect": nil, "grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()}} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hc := h.HTTP2Client()
			auth := connect.WithInterceptors(bearerInterceptor(tn.Token))
			cc := contactv1connect.NewContactServiceClient(hc, h.Public.URL, append(opts, auth)...)
			lc := leadv1connect.NewLeadServiceClient(hc, h.Public.URL, append(opts, auth)...)
			email := name + "@rpc.test"
			c, err := cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr(strings.ToUpper(email))}}))
			if err != nil || c.Msg.GetContact().GetEmail() != email {
				t.Fatalf("CreateContact: %v %v", c, err)
			}
			_, err = cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr(email)}}))
			ce := assertConnectError(t, err, connect.CodeAlreadyExists, "duplicate")
			if info := errorInfo(ce); info.GetMetadata()["existingId"] != c.Msg.GetContact().GetId() {
				t.Errorf("existingId = %v", info.GetMetadata())
			}
			_, err = cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr("bad"), Phone: ptr("1")}}))
			ce = assertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
			if br := badRequest(ce); len(br.GetFieldViolations()) != 2 || br.GetFieldViolations()[0].GetField() != "email" {
				t.Errorf("BadRequest = %v", br)
			}
			l, err := lc.CreateLead(ctx, connect.NewRequest(&leadv1.CreateLeadRequest{Lead: &leadv1.Lead{ContactId: c.Msg.GetContact().GetId(), Source: ptr("api")}}))
			if err != nil || l.Msg.GetLead().GetContactId() != c.Msg.GetContact().GetId() || l.Msg.GetLead().GetStatus() != "new" {
				t.Fatalf("CreateLead: %v %v", l, err)
			}
			list, err := lc.ListLeads(ctx, connect.NewRequest(&leadv1.ListLeadsRequest{ContactId: c.Msg.GetContact().GetId()}))
			if err != nil || len(list.Msg.GetLeads()) != 1 || list.Msg.GetPagination().NextCursor != nil {
				t.Fatalf("ListLeads: %v %v", list, err)
			}
			_, err = lc.ListLeads(ctx, connect.NewRequest(&leadv1.ListLeadsRequest{Limit: ptr[int32](101)}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			cl, err := cc.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Email: email}))
			if err != nil || len(cl.Msg.GetContacts()) != 1 {
				t.Fatalf("ListContacts: %v %v", cl, err)
			}
		})
	}
}

func bearerInterceptor(tok string) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+tok)
			return next(ctx, req)
		}
	})
}

func errorInfo(ce *connect.Error) *errdetails.ErrorInfo {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				return info
			}
		}
	}
	return nil
}

func badRequest(ce *connect.Error) *errdetails.BadRequest {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if br, ok := v.(*errdetails.BadRequest); ok {
				return br
			}
		}
	}
	return nil
}

// TestEmptyListShape: an empty page still carries its list and pagination.
func TestEmptyListShape(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Empty Co")
	for path, want := range map[string]string{"/api/v1/leads": `{"leads":[],"pagination":{}}`, "/api/v1/contacts": `{"contacts":[],"pagination":{}}`} {
		status, _, b := h.Do(http.MethodGet, path, tn.Token, "", "")
		if status != 200 || strings.ReplaceAll(string(b), " ", "") != want {
			t.Errorf("%s: %d %s, want %s", path, status, b, want)
		}
	}
}
