package server_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/internal/servertest"
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
