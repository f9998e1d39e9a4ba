package server_test

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
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// sameJSON reports whether two JSON documents are equal as values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	mustUnmarshal(t, a, &x)
	mustUnmarshal(t, b, &y)
	return reflect.DeepEqual(x, y)
}

// TestGetRecord: a created contact and lead read back by id, with the
// ETag and Location of the create; unknown, malformed and other
// workspaces' ids are all the same 404; the read scopes apply.
func TestGetRecord(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Get Co")
	other := h.NewTenant("Get Elsewhere")
	for _, tc := range []struct{ path, body, prefix, scope string }{
		{"/api/v1/contacts", `{"email":"get@x.co","firstName":"Gert"}`, "con_", "contacts:read"},
		{"/api/v1/leads", `{"contact":{"email":"lead-get@x.co"},"status":"contacted"}`, "lea_", "leads:read"},
	} {
		status, hdr, created := h.Do(http.MethodPost, tc.path, tn.Token, "application/json", tc.body)
		if status != 201 {
			t.Fatalf("create %s: %d %s", tc.path, status, created)
		}
		id := decode(t, created)["id"].(string)
		if loc := hdr.Get("Location"); loc != tc.path+"/"+id {
			t.Errorf("Location = %q, want %q", loc, tc.path+"/"+id)
		}
		tag := hdr.Get("ETag")
		if !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) || len(tag) < 10 {
			t.Errorf("create ETag = %q, want a strong entity tag", tag)
		}
		status, hdr, got := h.Do(http.MethodGet, hdr.Get("Location"), tn.Token, "", "")
		if status != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("ETag") != tag || !sameJSON(t, got, created) {
			t.Fatalf("GET %s: %d %v %s, want the created record with ETag %s", tc.path, status, hdr, got, tag)
		}
		for name, c := range map[string]struct{ token, id string }{
			"another workspace's id": {other.Token, id},
			"an unknown id":          {tn.Token, tc.prefix + "00000000000000000000000000"},
			"a malformed id":         {tn.Token, "nope"},
			"another kind's id":      {tn.Token, map[string]string{"con_": "lea_", "lea_": "con_"}[tc.prefix] + id[4:]},
		} {
			status, hdr, b := h.Do(http.MethodGet, tc.path+"/"+c.id, c.token, "", "")
			if p := decode(t, b); status != 404 || hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "not_found" || hdr.Get("ETag") != "" {
				t.Errorf("GET %s with %s: %d %s, want 404 not_found", tc.path, name, status, b)
			}
		}
		ws, m := tn.WorkspaceID, tn.MemberID
		for _, granted := range []string{"contacts:read", "contacts:write", "leads:read", "leads:write"} {
			cid, sec := h.Client(ws, m, granted)
			status, hdr, b := h.Do(http.MethodGet, tc.path+"/"+id, h.Token(cid, sec, ""), "", "")
			switch {
			case granted == tc.scope && status != 200:
				t.Errorf("GET %s with %s: %d %s", tc.path, granted, status, b)
			case granted != tc.scope && (status != 403 || !strings.Contains(hdr.Get("WWW-Authenticate"), `scope="`+tc.scope+`"`)):
				t.Errorf("GET %s with %s: %d %q, want 403 for %s", tc.path, granted, status, hdr.Get("WWW-Authenticate"), tc.scope)
			}
		}
	}
}

// TestPatchContact: JSON merge patch semantics (a sent field is set, null
// clears, absent keeps), validation and normalisation of a create,
// read-only fields, duplicates, If-Match and tenant isolation.
func TestPatchContact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Patch Co")
	other := h.NewTenant("Patch Elsewhere")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
		`{"email":"ada@x.co","phone":"+14155550123","firstName":"Ada","lastName":"Lovelace","jobTitle":"Analyst","externalId":"crm-1"}`)
	ada := decode(t, b)
	id := ada["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"grace@x.co","externalId":"crm-2"}`)
	grace := decode(t, b)["id"].(string)
	path := "/api/v1/contacts/" + id
	patch := func(body string, headers ...string) (int, http.Header, map[string]any) {
		t.Helper()
		s, hdr, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body, headers...)
		return s, hdr, decode(t, b)
	}

	time.Sleep(2 * time.Millisecond) // so that updatedAt visibly moves
	status, hdr, c := patch(`{"firstName":"Augusta","phone":null,"email":"  ADA.King@X.co "}`)
	if status != 200 || c["firstName"] != "Augusta" || c["lastName"] != "Lovelace" || c["jobTitle"] != "Analyst" ||
		c["email"] != "ada.king@x.co" || c["externalId"] != "crm-1" || c["createdAt"] != ada["createdAt"] {
		t.Fatalf("merge patch: %d %v", status, c)
	}
	if _, ok := c["phone"]; ok {
		t.Errorf("phone was not cleared by null: %v", c)
	}
	if c["updatedAt"].(string) <= ada["updatedAt"].(string) {
		t.Errorf("updatedAt did not move: %v -> %v", ada["updatedAt"], c["updatedAt"])
	}
	tag := hdr.Get("ETag")
	_, getHdr, got := h.Do(http.MethodGet, path, tn.Token, "", "")
	if getHdr.Get("ETag") != tag || decode(t, got)["firstName"] != "Augusta" {
		t.Fatalf("GET after PATCH: %v %s, want ETag %s", getHdr, got, tag)
	}

	// application/json is a merge patch too; an empty patch changes nothing.
	if s, hdr, b := h.Do(http.MethodPatch, path, tn.Token, "application/json", `{}`); s != 200 || hdr.Get("ETag") != tag || decode(t, b)["updatedAt"] != c["updatedAt"] {
		t.Errorf("empty patch: %d %v %s", s, hdr, b)
	}
	if s, _, b := h.Do(http.MethodPatch, path, tn.Token, "text/plain", `{}`); s != 415 {
		t.Errorf("text/plain patch: %d %s", s, b)
	}

	// Malformed (400) and invalid (422) patches change nothing.
	for body, want := range map[string]struct {
		status      int
		code, field string
	}{
		`{"id":"con_x"}`:                         {400, "malformed_request", ""},
		`{"createdAt":"2020-01-01T00:00:00Z"}`:   {400, "malformed_request", ""},
		`{"updatedAt":null}`:                     {400, "malformed_request", ""},
		`{"nickname":"x"}`:                       {400, "malformed_request", ""},
		`[]`:                                     {400, "malformed_request", ""},
		`{"email":`:                              {400, "malformed_request", ""},
		`{"email":"not-an-email"}`:               {422, "validation_failed", "email"},
		`{"email":null}`:                         {422, "validation_failed", "email"},
		`{"firstName":"` + long(101) + `"}`:      {422, "validation_failed", "firstName"},
		`{"externalId":"` + long(256) + `"}`:     {422, "validation_failed", "externalId"},
		`{"phone":"555"}`:                        {422, "validation_failed", "phone"},
		`{"email":"grace@x.co"}`:                 {409, "duplicate", ""},
		`{"externalId":"crm-2","lastName":"L."}`: {409, "duplicate", ""},
	} {
		s, hdr, p := patch(body)
		if s != want.status || p["code"] != want.code || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("PATCH %.40s: %d %v, want %d %s", body, s, p, want.status, want.code)
			continue
		}
		if want.code == "duplicate" && p["existingId"] != grace {
			t.Errorf("PATCH %s: existingId %v, want %s", body, p["existingId"], grace)
		}
		if want.field != "" && !hasViolation(p, want.field) {
			t.Errorf("PATCH %s: no violation of %s in %v", body, want.field, p)
		}
	}
	if _, hdr, _ := h.Do(http.MethodGet, path, tn.Token, "", ""); hdr.Get("ETag") != tag {
		t.Errorf("a refused patch changed the contact")
	}

	// If-Match: the current tag or * passes; a stale or weak one is 412.
	if s, _, p := patch(`{"jobTitle":"Countess"}`, "If-Match", `"stale", `+tag); s != 200 || p["jobTitle"] != "Countess" {
		t.Fatalf("If-Match with the current tag: %d %v", s, p)
	}
	for _, ifMatch := range []string{tag, "W/" + tag, `"something-else"`} {
		if s, hdr, p := patch(`{"jobTitle":"Lost update"}`, "If-Match", ifMatch); s != 412 || p["code"] != "precondition_failed" || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("If-Match %s: %d %v, want 412", ifMatch, s, p)
		}
	}
	if s, _, p := patch(`{"jobTitle":"Anything"}`, "If-Match", "*"); s != 200 || p["jobTitle"] != "Anything" {
		t.Errorf("If-Match *: %d %v", s, p)
	}

	// Another workspace sees a 404 and cannot change it.
	if s, _, b := h.Do(http.MethodPatch, path, other.Token, "application/merge-patch+json", `{"firstName":"Mallory"}`); s != 404 || decode(t, b)["code"] != "not_found" {
		t.Errorf("PATCH from another workspace: %d %s", s, b)
	}
	if _, _, b := h.Do(http.MethodGet, path, tn.Token, "", ""); decode(t, b)["firstName"] != "Augusta" {
		t.Errorf("another workspace changed the contact: %s", b)
	}
	// Only contacts:write may patch.
	readerID, readerSecret := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read", "leads:write")
	if s, hdr, _ := h.Do(http.MethodPatch, path, h.Token(readerID, readerSecret, ""), "application/merge-patch+json", `{"firstName":"X"}`); s != 403 ||
		!strings.Contains(hdr.Get("WWW-Authenticate"), `scope="contacts:write"`) {
		t.Errorf("PATCH without contacts:write: %d %v", s, hdr)
	}
}

func long(n int) string { return strings.Repeat("z", n) }

func hasViolation(p map[string]any, field string) bool {
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		if e.(map[string]any)["field"] == field {
			return true
		}
	}
	return false
}

// TestPatchLead: status moves, nested merge of value, null clears or
// restores a default, contactId must exist, the inline contact is
// create-only, duplicate externalId.
func TestPatchLead(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Patch Leads")
	other := h.NewTenant("Patch Leads Elsewhere")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"kay@x.co","firstName":"Kay","lastName":"Ross"}`)
	kay := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"theirs@x.co"}`)
	foreign := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contact":{"email":"lee@x.co","firstName":"Lee"},"title":"Big deal","source":"web_form","campaign":"Q1","value":{"amount":1000,"currency":"usd"},"externalId":"form-1"}`)
	lead := decode(t, b)
	path := "/api/v1/leads/" + lead["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+kay+`","externalId":"form-2"}`)
	second := decode(t, b)["id"].(string)
	patch := func(body string) (int, map[string]any) {
		t.Helper()
		s, _, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body)
		return s, decode(t, b)
	}

	if s, l := patch(`{"status":"qualified"}`); s != 200 || l["status"] != "qualified" || l["title"] != "Big deal" || l["source"] != "web_form" {
		t.Fatalf("status: %d %v", s, l)
	}
	if s, l := patch(`{"value":{"amount":2500}}`); s != 200 || !reflect.DeepEqual(l["value"], map[string]any{"amount": float64(2500), "currency": "USD"}) {
		t.Errorf("value.amount merge: %d %v", s, l)
	}
	if s, l := patch(`{"value":{"currency":"eur"},"campaign":null}`); s != 200 || !reflect.DeepEqual(l["value"], map[string]any{"amount": float64(2500), "currency": "EUR"}) || l["campaign"] != nil {
		t.Errorf("value.currency merge and campaign clear: %d %v", s, l)
	}
	// An empty object merges nothing into a value that exists (RFC 7396).
	if s, l := patch(`{"value":{}}`); s != 200 || !reflect.DeepEqual(l["value"], map[string]any{"amount": float64(2500), "currency": "EUR"}) {
		t.Errorf("value {} on a set value: %d %v", s, l)
	}
	if s, l := patch(`{"value":null}`); s != 200 || l["value"] != nil {
		t.Errorf("value null: %d %v", s, l)
	}
	// ...and into no value it adds none (an empty amount would be invalid).
	if s, l := patch(`{"value":{}}`); s != 200 || l["value"] != nil {
		t.Errorf("value {} on no value: %d %v", s, l)
	}
	if s, l := patch(`{"value":{"amount":5}}`); s != 422 || !hasViolation(l, "value.currency") {
		t.Errorf("value.amount without a currency: %d %v", s, l)
	}
	// Moving the lead to another contact; null title is its default again,
	// null status is "new" again.
	if s, l := patch(`{"contactId":"` + kay + `","title":null,"status":null}`); s != 200 || l["contactId"] != kay || l["title"] != "Kay Ross" || l["status"] != "new" {
		t.Errorf("move to another contact: %d %v", s, l)
	}
	for body, want := range map[string]struct {
		status      int
		code, field string
	}{
		`{"contactId":"` + foreign + `"}`:     {422, "validation_failed", "contactId"},
		`{"contactId":"nope"}`:                {422, "validation_failed", "contactId"},
		`{"contactId":null}`:                  {422, "validation_failed", "contactId"},
		`{"status":"won"}`:                    {422, "validation_failed", "status"},
		`{"source":"Web Form"}`:               {422, "validation_failed", "source"},
		`{"contact":{"email":"new@x.co"}}`:    {400, "malformed_request", ""},
		`{"id":"lea_x"}`:                      {400, "malformed_request", ""},
		`{"value":{"amount":1.5}}`:            {400, "malformed_request", ""},
		`{"externalId":"form-2"}`:             {409, "duplicate", ""},
		`{"message":"` + long(5001) + `"}`:    {422, "validation_failed", "message"},
		`{"value":{"amount":-1}}`:             {422, "validation_failed", "value.amount"},
		`{"title":"` + long(256) + `"}`:       {422, "validation_failed", "title"},
		`{"campaign":"` + long(256) + `"}`:    {422, "validation_failed", "campaign"},
		`{"externalId":"` + long(256) + `"}`:  {422, "validation_failed", "externalId"},
		`{"source":"` + long(65) + `"}`:       {422, "validation_failed", "source"},
		`{"value":{"currency":"XYZ"}}`:        {422, "validation_failed", "value.currency"},
		`{"status":"converted","title":"ok"}`: {200, "", ""},
	} {
		s, p := patch(body)
		if s != want.status || want.code != "" && p["code"] != want.code {
			t.Errorf("PATCH %.50s: %d %v, want %d %s", body, s, p, want.status, want.code)
			continue
		}
		if want.code == "duplicate" && p["existingId"] != second {
			t.Errorf("PATCH %s: existingId %v, want %s", body, p["existingId"], second)
		}
		if want.field != "" && !hasViolation(p, want.field) {
			t.Errorf("PATCH %s: no violation of %s in %v", body, want.field, p)
		}
	}
	if s, _, b := h.Do(http.MethodPatch, path, other.Token, "application/merge-patch+json", `{"status":"converted"}`); s != 404 {
		t.Errorf("PATCH from another workspace: %d %s", s, b)
	}
}

// TestRecordsOverRPC: GetContact/UpdateContact and GetLead/UpdateLead over
// Connect, gRPC and gRPC-Web, with AIP-134 field masks, ETag and If-Match
// headers, and the same errors as REST.
func TestRecordsOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("RPC Records")
	other := h.NewTenant("RPC Records Elsewhere")
	for name, opts := range map[string][]connect.ClientOption{"connect": nil, "grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()}} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hc := h.HTTP2Client()
			cc := contactv1connect.NewContactServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			lc := leadv1connect.NewLeadServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(bearerInterceptor(tn.Token)))...)
			otherCC := contactv1connect.NewContactServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(bearerInterceptor(other.Token)))...)

			created, err := cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{
				Email: ptr(name + "@rpc.test"), Phone: ptr("+14155550100"), FirstName: ptr("Rae"), JobTitle: ptr("CTO")}}))
			if err != nil {
				t.Fatal(err)
			}
			id := created.Msg.GetContact().GetId()
			if created.Header().Get("ETag") == "" || created.Header().Get("Location") != "/api/v1/contacts/"+id {
				t.Errorf("create headers: %v", created.Header())
			}
			got, err := cc.GetContact(ctx, connect.NewRequest(&contactv1.GetContactRequest{Id: id}))
			if err != nil || got.Msg.GetContact().GetEmail() != name+"@rpc.test" || got.Header().Get("ETag") != created.Header().Get("ETag") {
				t.Fatalf("GetContact: %v %v", got, err)
			}
			_, err = otherCC.GetContact(ctx, connect.NewRequest(&contactv1.GetContactRequest{Id: id}))
			assertConnectError(t, err, connect.CodeNotFound, "not_found")

			// The mask names phone, which is unset: cleared. firstName is
			// set but not named: kept.
			upd := connect.NewRequest(&contactv1.UpdateContactRequest{Id: id,
				Contact:    &contactv1.Contact{JobTitle: ptr("CEO"), FirstName: ptr("ignored")},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"job_title", "phone"}}})
			upd.Header().Set("If-Match", got.Header().Get("ETag"))
			res, err := cc.UpdateContact(ctx, upd)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Msg.GetContact()
			if c.GetJobTitle() != "CEO" || c.Phone != nil || c.GetFirstName() != "Rae" || res.Header().Get("ETag") == got.Header().Get("ETag") {
				t.Errorf("UpdateContact: %v %v", c, res.Header())
			}
			// No mask: the fields that are set.
			res, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{LastName: ptr("Roe")}}))
			if err != nil || res.Msg.GetContact().GetLastName() != "Roe" || res.Msg.GetContact().GetJobTitle() != "CEO" {
				t.Errorf("UpdateContact without a mask: %v %v", res, err)
			}
			// The stale tag is refused.
			_, err = cc.UpdateContact(ctx, upd)
			assertConnectError(t, err, connect.CodeFailedPrecondition, "precondition_failed")
			_, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"created_at"}}}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			_, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{Email: ptr("bad")},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"email"}}}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
			_, err = otherCC.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{LastName: ptr("X")}}))
			assertConnectError(t, err, connect.CodeNotFound, "not_found")
			rival, err := cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: ptr(name + "-rival@rpc.test")}}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{Email: ptr(name + "-rival@rpc.test")}}))
			if ce := assertConnectError(t, err, connect.CodeAlreadyExists, "duplicate"); errorInfo(ce).GetMetadata()["existingId"] != rival.Msg.GetContact().GetId() {
				t.Errorf("duplicate on update: existingId %v", errorInfo(ce).GetMetadata())
			}

			l, err := lc.CreateLead(ctx, connect.NewRequest(&leadv1.CreateLeadRequest{Lead: &leadv1.Lead{ContactId: id, ExternalId: ptr(name + "-1")}}))
			if err != nil {
				t.Fatal(err)
			}
			lres, err := lc.UpdateLead(ctx, connect.NewRequest(&leadv1.UpdateLeadRequest{Id: l.Msg.GetLead().GetId(),
				Lead: &leadv1.Lead{Status: ptr("qualified"), Value: &leadv1.Money{Amount: 9, Currency: "GBP"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"status", "value"}}}))
			if err != nil || lres.Msg.GetLead().GetStatus() != "qualified" || lres.Msg.GetLead().GetValue().GetCurrency() != "GBP" {
				t.Fatalf("UpdateLead: %v %v", lres, err)
			}
			gl, err := lc.GetLead(ctx, connect.NewRequest(&leadv1.GetLeadRequest{Id: l.Msg.GetLead().GetId()}))
			if err != nil || gl.Msg.GetLead().GetStatus() != "qualified" || gl.Header().Get("ETag") != lres.Header().Get("ETag") {
				t.Errorf("GetLead: %v %v", gl, err)
			}
			_, err = lc.UpdateLead(ctx, connect.NewRequest(&leadv1.UpdateLeadRequest{Id: l.Msg.GetLead().GetId(),
				Lead: &leadv1.Lead{Contact: &leadv1.LeadContact{Email: ptr("x@y.co")}}}))
			assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			_, err = lc.GetLead(ctx, connect.NewRequest(&leadv1.GetLeadRequest{Id: "lea_nope"}))
			assertConnectError(t, err, connect.CodeNotFound, "not_found")

			// Scopes: a contacts-only token may not touch leads.
			cid, sec := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read", "contacts:write")
			narrow := leadv1connect.NewLeadServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(bearerInterceptor(h.Token(cid, sec, ""))))...)
			_, err = narrow.GetLead(ctx, connect.NewRequest(&leadv1.GetLeadRequest{Id: l.Msg.GetLead().GetId()}))
			assertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
			_, err = narrow.UpdateLead(ctx, connect.NewRequest(&leadv1.UpdateLeadRequest{Id: l.Msg.GetLead().GetId(), Lead: &leadv1.Lead{Status: ptr("new")}}))
			assertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
			_, err = narrow.BatchCreateLeads(ctx, connect.NewRequest(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{ContactId: id}}}))
			assertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
		})
	}
}

// problemWithoutRequestID drops the one member that differs between two
// requests that fail the same way.
func problemWithoutRequestID(t *testing.T, p any) map[string]any {
	t.Helper()
	m, ok := p.(map[string]any)
	if !ok {
		t.Fatalf("not a problem object: %v", p)
	}
	out := map[string]any{}
	for k, v := range m {
		if k != "requestId" {
			out[k] = v
		}
	}
	return out
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
	known := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"theirs@x.co"}`)
	foreign := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+known+`","externalId":"taken"}`)
	taken := decode(t, b)["id"].(string)

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
	mustUnmarshal(t, resBody, &res)
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
		if float64(s) != wantStatus[i] || !reflect.DeepEqual(problemWithoutRequestID(t, decode(t, single)), problemWithoutRequestID(t, res.Results[i].Error)) {
			t.Errorf("item %d: single create answers %d %s, batch result %v", i, s, single, res.Results[i].Error)
		}
	}
	// The contact of item 6 was made for a lead that failed: it is gone.
	if _, _, b := h.Do(http.MethodGet, "/api/v1/contacts?email=orphan%40x.co", tn.Token, "", ""); len(decode(t, b)["contacts"].([]any)) != 0 {
		t.Errorf("an inline contact of a failed item was left behind: %s", b)
	}
	// Each created lead is stored as answered.
	for _, i := range []int{0, 1, 5, 7} {
		_, _, got := h.Do(http.MethodGet, "/api/v1/leads/"+l(i)["id"].(string), tn.Token, "", "")
		if !reflect.DeepEqual(decode(t, got), l(i)) {
			t.Errorf("stored lead %d = %s, answered %v", i, got, l(i))
		}
	}

	// The same key and body replay the first answer; another body is 422;
	// nothing is created twice.
	s, hdr2, replay := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", body, "Idempotency-Key", "day-1")
	if s != 200 || hdr2.Get("Idempotent-Replayed") != "true" || !sameJSON(t, replay, resBody) {
		t.Errorf("replay: %d %v %s", s, hdr2, replay)
	}
	s, _, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", `{"leads":[`+items[7]+`]}`, "Idempotency-Key", "day-1")
	if s != 422 || decode(t, b)["code"] != "idempotency_key_reused" {
		t.Errorf("key reused with another batch: %d %s", s, b)
	}
	_, _, b = h.Do(http.MethodGet, "/api/v1/leads?source=web_form", tn.Token, "", "")
	if n := len(decode(t, b)["leads"].([]any)); n != 1 {
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
		if s != 400 || hdr.Get("Content-Type") != "application/problem+json" || decode(t, b)["code"] != "malformed_request" {
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

// TestBatchContacts: the contact batch over REST and Connect, with
// duplicates against existing contacts and earlier items.
func TestBatchContacts(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Contacts")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"old@x.co","externalId":"old"}`)
	old := decode(t, b)["id"].(string)
	items := []string{
		`{"email":"One@x.co","firstName":"One"}`,     // 0
		`{"email":"old@x.co"}`,                       // 1: 409 old
		`{"email":"two@x.co","externalId":"old"}`,    // 2: 409 old (externalId)
		`{"email":"one@x.co"}`,                       // 3: 409 item 0
		`{"phone":"12"}`,                             // 4: 422
		`{"phone":"+15550001111","externalId":"p1"}`, // 5
	}
	status, hdr, body := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+strings.Join(items, ",")+`]}`, "Idempotency-Key", "c-1")
	var res struct {
		Results []struct {
			Contact map[string]any `json:"contact"`
			Error   map[string]any `json:"error"`
		} `json:"results"`
	}
	mustUnmarshal(t, body, &res)
	if status != 200 || len(res.Results) != len(items) {
		t.Fatalf("batch: %d %v %s", status, hdr, body)
	}
	first := res.Results[0].Contact
	if first["email"] != "one@x.co" || res.Results[5].Contact["externalId"] != "p1" {
		t.Errorf("created: %s", body)
	}
	for i, want := range map[int]any{1: old, 2: old, 3: first["id"]} {
		if e := res.Results[i].Error; e["status"] != float64(409) || e["existingId"] != want {
			t.Errorf("result %d: %v, want 409 naming %v", i, e, want)
		}
	}
	if e := res.Results[4].Error; e["status"] != float64(422) || !hasViolation(e, "phone") {
		t.Errorf("result 4: %v", e)
	}
	for _, i := range []int{1, 2, 3, 4} {
		s, _, single := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", items[i])
		if float64(s) != res.Results[i].Error["status"] || !reflect.DeepEqual(problemWithoutRequestID(t, decode(t, single)), problemWithoutRequestID(t, res.Results[i].Error)) {
			t.Errorf("item %d: single create answers %d %s, batch result %v", i, s, single, res.Results[i].Error)
		}
	}
	s, hdr, replay := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+strings.Join(items, ",")+`]}`, "Idempotency-Key", "c-1")
	if s != 200 || hdr.Get("Idempotent-Replayed") != "true" || !sameJSON(t, replay, body) {
		t.Errorf("replay: %d %v %s", s, hdr, replay)
	}

	// Over Connect, with the same shape.
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.Token)))
	out, err := cc.BatchCreateContacts(context.Background(), connect.NewRequest(&contactv1.BatchCreateContactsRequest{Contacts: []*contactv1.Contact{
		{Email: ptr("rpc@x.co")}, {Email: ptr("old@x.co")},
	}}))
	if err != nil || out.Msg.GetResults()[0].GetContact().GetEmail() != "rpc@x.co" || out.Msg.GetResults()[1].GetError().GetExistingId() != old ||
		out.Msg.GetResults()[1].GetError().GetStatus() != 409 {
		t.Fatalf("BatchCreateContacts: %v %v", out, err)
	}
	_, err = cc.BatchCreateContacts(context.Background(), connect.NewRequest(&contactv1.BatchCreateContactsRequest{}))
	assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
	s, _, b = h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[]}`)
	if s != 400 {
		t.Errorf("empty contact batch: %d %s", s, b)
	}
}

// TestBatchLeadsOverRPC: partial failure and idempotent replay of the lead
// batch over gRPC.
func TestBatchLeadsOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch RPC")
	lc := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC(), connect.WithInterceptors(bearerInterceptor(tn.Token)))
	mk := func() *connect.Request[leadv1.BatchCreateLeadsRequest] {
		r := connect.NewRequest(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{
			{Contact: &leadv1.LeadContact{Email: ptr("grpc@x.co")}, ExternalId: ptr("g-1")},
			{Contact: &leadv1.LeadContact{Email: ptr("grpc@x.co")}, ExternalId: ptr("g-1")},
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
	mustUnmarshal(t, body, &raw)
	if n := len(decode(t, body)["leads"].([]any)); n != 1 {
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
		if p["status"] != float64(422) || p["code"] != "validation_failed" || !hasViolation(p, "contactId") {
			t.Errorf("%s: %v, want 422 validation_failed on contactId", what, p)
		}
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["code"] != "not_found" {
			t.Errorf("%s: errors %v, want one not_found", what, p["errors"])
		}
	}
	s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+nilID+`"}`)
	notFound(fmt.Sprintf("single create (%d)", s), decode(t, b))

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
	mustUnmarshal(t, b, &res)
	if len(res.Results) != 2 || res.Results[1].Lead == nil {
		t.Fatalf("batch results: %s", b)
	}
	notFound("batch item", res.Results[0].Error)

	lead := res.Results[1].Lead["id"].(string)
	s, _, b = h.Do(http.MethodPatch, "/api/v1/leads/"+lead, tn.Token, "application/merge-patch+json", `{"contactId":"`+nilID+`"}`)
	notFound(fmt.Sprintf("patch (%d)", s), decode(t, b))
}
