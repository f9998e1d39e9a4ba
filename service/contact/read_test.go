package contact_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

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
		id := servertest.Decode(t, created)["id"].(string)
		if loc := hdr.Get("Location"); loc != tc.path+"/"+id {
			t.Errorf("Location = %q, want %q", loc, tc.path+"/"+id)
		}
		tag := hdr.Get("ETag")
		if !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) || len(tag) < 10 {
			t.Errorf("create ETag = %q, want a strong entity tag", tag)
		}
		status, hdr, got := h.Do(http.MethodGet, hdr.Get("Location"), tn.Token, "", "")
		if status != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("ETag") != tag || !servertest.SameJSON(t, got, created) {
			t.Fatalf("GET %s: %d %v %s, want the created record with ETag %s", tc.path, status, hdr, got, tag)
		}
		for name, c := range map[string]struct{ token, id string }{
			"another workspace's id": {other.Token, id},
			"an unknown id":          {tn.Token, tc.prefix + "00000000000000000000000000"},
			"a malformed id":         {tn.Token, "nope"},
			"another kind's id":      {tn.Token, map[string]string{"con_": "lea_", "lea_": "con_"}[tc.prefix] + id[4:]},
		} {
			status, hdr, b := h.Do(http.MethodGet, tc.path+"/"+c.id, c.token, "", "")
			if p := servertest.Decode(t, b); status != 404 || hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "not_found" || hdr.Get("ETag") != "" {
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
			cc := contactv1connect.NewContactServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(servertest.Bearer(tn.Token)))...)
			lc := leadv1connect.NewLeadServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(servertest.Bearer(tn.Token)))...)
			otherCC := contactv1connect.NewContactServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(servertest.Bearer(other.Token)))...)

			created, err := cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{
				Email: servertest.Ptr(name + "@rpc.test"), Phone: servertest.Ptr("+14155550100"), FirstName: servertest.Ptr("Rae"), JobTitle: servertest.Ptr("CTO")}}))
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
			servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")

			// The mask names phone, which is unset: cleared. firstName is
			// set but not named: kept.
			upd := connect.NewRequest(&contactv1.UpdateContactRequest{Id: id,
				Contact:    &contactv1.Contact{JobTitle: servertest.Ptr("CEO"), FirstName: servertest.Ptr("ignored")},
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
			res, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{LastName: servertest.Ptr("Roe")}}))
			if err != nil || res.Msg.GetContact().GetLastName() != "Roe" || res.Msg.GetContact().GetJobTitle() != "CEO" {
				t.Errorf("UpdateContact without a mask: %v %v", res, err)
			}
			// The stale tag is refused.
			_, err = cc.UpdateContact(ctx, upd)
			servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "precondition_failed")
			_, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"created_at"}}}))
			servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			_, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{Email: servertest.Ptr("bad")},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"email"}}}))
			servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
			_, err = otherCC.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{LastName: servertest.Ptr("X")}}))
			servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")
			rival, err := cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: servertest.Ptr(name + "-rival@rpc.test")}}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cc.UpdateContact(ctx, connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{Email: servertest.Ptr(name + "-rival@rpc.test")}}))
			if ce := servertest.AssertConnectError(t, err, connect.CodeAlreadyExists, "duplicate"); servertest.ErrorInfo(ce).GetMetadata()["existingId"] != rival.Msg.GetContact().GetId() {
				t.Errorf("duplicate on update: existingId %v", servertest.ErrorInfo(ce).GetMetadata())
			}

			l, err := lc.CreateLead(ctx, connect.NewRequest(&leadv1.CreateLeadRequest{Lead: &leadv1.Lead{ContactId: id, ExternalId: servertest.Ptr(name + "-1")}}))
			if err != nil {
				t.Fatal(err)
			}
			lres, err := lc.UpdateLead(ctx, connect.NewRequest(&leadv1.UpdateLeadRequest{Id: l.Msg.GetLead().GetId(),
				Lead: &leadv1.Lead{Status: servertest.Ptr("qualified"), Value: &leadv1.Money{Amount: 9, Currency: "GBP"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"status", "value"}}}))
			if err != nil || lres.Msg.GetLead().GetStatus() != "qualified" || lres.Msg.GetLead().GetValue().GetCurrency() != "GBP" {
				t.Fatalf("UpdateLead: %v %v", lres, err)
			}
			gl, err := lc.GetLead(ctx, connect.NewRequest(&leadv1.GetLeadRequest{Id: l.Msg.GetLead().GetId()}))
			if err != nil || gl.Msg.GetLead().GetStatus() != "qualified" || gl.Header().Get("ETag") != lres.Header().Get("ETag") {
				t.Errorf("GetLead: %v %v", gl, err)
			}
			_, err = lc.UpdateLead(ctx, connect.NewRequest(&leadv1.UpdateLeadRequest{Id: l.Msg.GetLead().GetId(),
				Lead: &leadv1.Lead{Contact: &leadv1.LeadContact{Email: servertest.Ptr("x@y.co")}}}))
			servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			_, err = lc.GetLead(ctx, connect.NewRequest(&leadv1.GetLeadRequest{Id: "lea_nope"}))
			servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")

			// Scopes: a contacts-only token may not touch leads.
			cid, sec := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read", "contacts:write")
			narrow := leadv1connect.NewLeadServiceClient(hc, h.Public.URL, append(opts, connect.WithInterceptors(servertest.Bearer(h.Token(cid, sec, ""))))...)
			_, err = narrow.GetLead(ctx, connect.NewRequest(&leadv1.GetLeadRequest{Id: l.Msg.GetLead().GetId()}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
			_, err = narrow.UpdateLead(ctx, connect.NewRequest(&leadv1.UpdateLeadRequest{Id: l.Msg.GetLead().GetId(), Lead: &leadv1.Lead{Status: servertest.Ptr("new")}}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
			_, err = narrow.BatchCreateLeads(ctx, connect.NewRequest(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{{ContactId: id}}}))
			servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")
		})
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
			auth := connect.WithInterceptors(servertest.Bearer(tn.Token))
			cc := contactv1connect.NewContactServiceClient(hc, h.Public.URL, append(opts, auth)...)
			lc := leadv1connect.NewLeadServiceClient(hc, h.Public.URL, append(opts, auth)...)
			email := name + "@rpc.test"
			c, err := cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: servertest.Ptr(strings.ToUpper(email))}}))
			if err != nil || c.Msg.GetContact().GetEmail() != email {
				t.Fatalf("CreateContact: %v %v", c, err)
			}
			_, err = cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: servertest.Ptr(email)}}))
			ce := servertest.AssertConnectError(t, err, connect.CodeAlreadyExists, "duplicate")
			if info := servertest.ErrorInfo(ce); info.GetMetadata()["existingId"] != c.Msg.GetContact().GetId() {
				t.Errorf("existingId = %v", info.GetMetadata())
			}
			_, err = cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{Email: servertest.Ptr("bad"), Phone: servertest.Ptr("1")}}))
			ce = servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
			if br := servertest.BadRequest(ce); len(br.GetFieldViolations()) != 2 || br.GetFieldViolations()[0].GetField() != "email" {
				t.Errorf("BadRequest = %v", br)
			}
			l, err := lc.CreateLead(ctx, connect.NewRequest(&leadv1.CreateLeadRequest{Lead: &leadv1.Lead{ContactId: c.Msg.GetContact().GetId(), Source: servertest.Ptr("api")}}))
			if err != nil || l.Msg.GetLead().GetContactId() != c.Msg.GetContact().GetId() || l.Msg.GetLead().GetStatus() != "new" {
				t.Fatalf("CreateLead: %v %v", l, err)
			}
			list, err := lc.ListLeads(ctx, connect.NewRequest(&leadv1.ListLeadsRequest{ContactId: c.Msg.GetContact().GetId()}))
			if err != nil || len(list.Msg.GetLeads()) != 1 || list.Msg.GetPagination().NextCursor != nil {
				t.Fatalf("ListLeads: %v %v", list, err)
			}
			_, err = lc.ListLeads(ctx, connect.NewRequest(&leadv1.ListLeadsRequest{Limit: servertest.Ptr[int32](101)}))
			servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
			cl, err := cc.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Email: email}))
			if err != nil || len(cl.Msg.GetContacts()) != 1 {
				t.Fatalf("ListContacts: %v %v", cl, err)
			}
		})
	}
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

// TestContactEmailFilterOfOnlySpaces: an email filter that trims to
// nothing is the caller's 400 naming the filter, over REST and RPC; it
// dereferenced the normalised email, which is nil then, and answered 500.
func TestContactEmailFilterOfOnlySpaces(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Blank Filter Co")
	for _, q := range []string{"email=%20", "email=%20%09%20", "email=%20&sort=updatedAt"} {
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/contacts?"+q, tn.Token, "", "")
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		if status != 400 || hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "malformed_request" ||
			len(errs) != 1 || errs[0].(map[string]any)["field"] != "email" {
			t.Errorf("GET /api/v1/contacts?%s: %d %s, want 400 malformed_request naming email", q, status, b)
		}
	}
	cc := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	_, err := cc.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{Email: "  "}))
	servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
}

// TestExternalIDFilterIsTrimmed: an externalId is stored trimmed, so the
// filter is trimmed too (" crm-7 " finds "crm-7", as the email filter
// does), and a filter of only spaces is a 400 naming it, not a list of
// nothing.
func TestExternalIDFilterIsTrimmed(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Trimmed Filter Co")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"t@x.co","externalId":" crm-7 "}`)
	c := servertest.Decode(t, b)
	if c["externalId"] != "crm-7" {
		t.Fatalf("create: %s", b)
	}
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+c["id"].(string)+`","externalId":"hub-7"}`)
	l := servertest.Decode(t, b)
	for _, tc := range []struct{ resource, q, want string }{
		{"contacts", "externalId=%20crm-7%20", c["id"].(string)},
		{"contacts", "externalId=crm-7%09", c["id"].(string)},
		{"leads", "externalId=%20hub-7", l["id"].(string)},
	} {
		status, _, b := h.Do(http.MethodGet, "/api/v1/"+tc.resource+"?"+tc.q, tn.Token, "", "")
		var page struct {
			Contacts []struct{ ID string } `json:"contacts"`
			Leads    []struct{ ID string } `json:"leads"`
		}
		servertest.MustUnmarshal(t, b, &page)
		got := append(page.Contacts, page.Leads...)
		if status != 200 || len(got) != 1 || got[0].ID != tc.want {
			t.Errorf("GET /api/v1/%s?%s: %d %s, want the one record %s", tc.resource, tc.q, status, b, tc.want)
		}
	}
	for _, resource := range []string{"contacts", "leads"} {
		status, _, b := h.Do(http.MethodGet, "/api/v1/"+resource+"?externalId=%20%20", tn.Token, "", "")
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		if status != 400 || p["code"] != "malformed_request" || len(errs) != 1 || errs[0].(map[string]any)["field"] != "externalId" {
			t.Errorf("GET /api/v1/%s?externalId=%%20%%20: %d %s, want 400 naming externalId", resource, status, b)
		}
	}
}
