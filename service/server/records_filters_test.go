package server_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestContactEmailFilterOfOnlySpaces: an email filter that trims to
// nothing is the caller's 400 naming the filter, over REST and RPC; it
// dereferenced the normalised email, which is nil then, and answered 500.
func TestContactEmailFilterOfOnlySpaces(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Blank Filter Co")
	for _, q := range []string{"email=%20", "email=%20%09%20", "email=%20&sort=updatedAt"} {
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/contacts?"+q, tn.Token, "", "")
		p := decode(t, b)
		errs, _ := p["errors"].([]any)
		if status != 400 || hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "malformed_request" ||
			len(errs) != 1 || errs[0].(map[string]any)["field"] != "email" {
			t.Errorf("GET /api/v1/contacts?%s: %d %s, want 400 malformed_request naming email", q, status, b)
		}
	}
	cc := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.Token)))
	_, err := cc.ListContacts(context.Background(), connect.NewRequest(&contactv1.ListContactsRequest{Email: "  "}))
	assertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
}

// TestDuplicateNamesTheEmailHolderFirst: a contact whose email is taken
// by one contact and externalId by another is a 409 naming the email's
// holder (as ContactConflict promises), on a single create, a batch item
// and a PATCH alike, whether or not the externalId's holder has an email.
// A holder without an email sorted first (NULL = x is NULL, and NULLs lead
// a descending order), so the answer depended on the other contact's data.
func TestDuplicateNamesTheEmailHolderFirst(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Holder Co")
	create := func(body string) string {
		t.Helper()
		status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		if status != 201 {
			t.Fatalf("create %s: %d %s", body, status, b)
		}
		return decode(t, b)["id"].(string)
	}
	emailHolder := create(`{"email":"held@x.co"}`)
	create(`{"phone":"+14155550100","externalId":"ext-phone"}`) // a holder without an email
	create(`{"email":"other@x.co","externalId":"ext-mail"}`)    // one with another email
	patched := create(`{"email":"free@x.co"}`)
	for _, ext := range []string{"ext-phone", "ext-mail"} {
		body := `{"email":" HELD@x.co ","externalId":"` + ext + `"}`
		status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		if p := decode(t, b); status != 409 || p["existingId"] != emailHolder {
			t.Errorf("create %s: %d %s, want 409 naming %s", body, status, b, emailHolder)
		}
		status, _, b = h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+body+`]}`)
		var res batchResults
		mustUnmarshal(t, b, &res)
		if status != 200 || len(res.Results) != 1 || res.Results[0].Error["existingId"] != emailHolder {
			t.Errorf("batch %s: %d %s, want its item's 409 naming %s", body, status, b, emailHolder)
		}
		status, _, b = h.Do(http.MethodPatch, "/api/v1/contacts/"+patched, tn.Token, "application/merge-patch+json", body)
		if p := decode(t, b); status != 409 || p["existingId"] != emailHolder {
			t.Errorf("patch %s: %d %s, want 409 naming %s", body, status, b, emailHolder)
		}
	}
}

// TestClearingADefaultTitleAgainIsNotAChange: a lead whose title already
// is its default (its contact's name) is unchanged by a PATCH that clears
// the title, over REST and RPC: its ETag and updatedAt stay, as for any
// other patch to the values a record already has. Clearing a title that
// differs from the default is a change.
func TestClearingADefaultTitleAgainIsNotAChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Default Title Co")
	status, hdr, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"d@x.co","firstName":"Dee"},"title":"Deal"}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, b)
	}
	lead := decode(t, b)
	path := "/api/v1/leads/" + lead["id"].(string)
	tag := hdr.Get("ETag")
	status, hdr, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"title":null}`)
	cleared := decode(t, b)
	if status != 200 || cleared["title"] != "Dee" || hdr.Get("ETag") == tag || cleared["updatedAt"] == lead["updatedAt"] {
		t.Fatalf("clearing title Deal: %d %v %s, want the default Dee with a new ETag and updatedAt", status, hdr.Get("ETag"), b)
	}
	tag = hdr.Get("ETag")
	for _, body := range []string{`{"title":null}`, `{"title":""}`, `{"title":"  ","status":"new"}`} {
		status, hdr, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body)
		if p := decode(t, b); status != 200 || p["title"] != "Dee" || hdr.Get("ETag") != tag || p["updatedAt"] != cleared["updatedAt"] {
			t.Errorf("PATCH %s on a default title: %d %s %s, want ETag %s and updatedAt %v unchanged", body, status, hdr.Get("ETag"), b, tag, cleared["updatedAt"])
		}
	}
	lc := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.Token)))
	res, err := lc.UpdateLead(context.Background(), connect.NewRequest(&leadv1.UpdateLeadRequest{
		Id: lead["id"].(string), Lead: &leadv1.Lead{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}}))
	if err != nil || res.Header().Get("ETag") != tag || res.Msg.GetLead().GetTitle() != "Dee" {
		t.Errorf("UpdateLead clearing a default title: %v %v, want ETag %s unchanged", res, err, tag)
	}
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
	c := decode(t, b)
	if c["externalId"] != "crm-7" {
		t.Fatalf("create: %s", b)
	}
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+c["id"].(string)+`","externalId":"hub-7"}`)
	l := decode(t, b)
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
		mustUnmarshal(t, b, &page)
		got := append(page.Contacts, page.Leads...)
		if status != 200 || len(got) != 1 || got[0].ID != tc.want {
			t.Errorf("GET /api/v1/%s?%s: %d %s, want the one record %s", tc.resource, tc.q, status, b, tc.want)
		}
	}
	for _, resource := range []string{"contacts", "leads"} {
		status, _, b := h.Do(http.MethodGet, "/api/v1/"+resource+"?externalId=%20%20", tn.Token, "", "")
		p := decode(t, b)
		errs, _ := p["errors"].([]any)
		if status != 400 || p["code"] != "malformed_request" || len(errs) != 1 || errs[0].(map[string]any)["field"] != "externalId" {
			t.Errorf("GET /api/v1/%s?externalId=%%20%%20: %d %s, want 400 naming externalId", resource, status, b)
		}
	}
}
