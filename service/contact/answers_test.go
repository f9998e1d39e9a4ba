package contact_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestAnswersSayWhatIsWrong: each answer names what the caller got wrong,
// over REST and Connect (issue 24, item 5). An unquoted If-Match is a 400
// naming the header, not a 412 saying the record changed; If-None-Match
// gets a 304; a member the body has not (first_name, bogus, a REST body's
// email sent to the RPC) is a 400 naming it; a PATCH names the member it
// may not change as sent, never "updateMask"; a 401 reads "Bearer
// <token>"; a duplicate says which of email and externalId collides.
func TestAnswersSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Answers Co")
	ctx := context.Background()
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"ada@x.co","externalId":"crm-1"}`)
	id := servertest.ID(t, b)
	tag := hdr.Get("ETag")
	path := "/api/v1/contacts/" + id
	if s != 201 || tag == "" {
		t.Fatalf("create: %d %v %s", s, hdr, b)
	}
	problem := func(what string, status int, b []byte, wantStatus int, field string) map[string]any {
		t.Helper()
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		if status != wantStatus || len(errs) != 1 || errs[0].(map[string]any)["field"] != field {
			t.Errorf("%s: %d %s, want %d naming %q", what, status, b, wantStatus, field)
		}
		return p
	}
	unchanged := func(what string) {
		t.Helper()
		if _, hdr, _ := h.Do(http.MethodGet, path, tn.Token, "", ""); hdr.Get("ETag") != tag {
			t.Errorf("%s changed the contact: ETag %s, was %s", what, hdr.Get("ETag"), tag)
		}
	}

	// If-Match that is not an entity tag.
	unquoted := strings.Trim(tag, `"`)
	s, _, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"firstName":"A"}`, "If-Match", unquoted)
	problem("unquoted If-Match", s, b, 400, "If-Match")
	unchanged("unquoted If-Match")
	req := connect.NewRequest(&contactv1.UpdateContactRequest{Id: id, Contact: &contactv1.Contact{FirstName: servertest.Ptr("A")}})
	req.Header().Set("If-Match", unquoted)
	_, err := cc.UpdateContact(ctx, req)
	ce := servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
	if br := servertest.BadRequest(ce); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "If-Match" {
		t.Errorf("unquoted If-Match over Connect: %v", ce)
	}
	if s, _, b := h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{}`, "If-Match", `"stale"`); s != 412 {
		t.Errorf("a quoted stale tag is still a 412: %d %s", s, b)
	}

	// If-None-Match.
	for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag, "*"} {
		s, hdr, b := h.Do(http.MethodGet, path, tn.Token, "", "", "If-None-Match", inm)
		if s != http.StatusNotModified || len(b) != 0 || hdr.Get("ETag") != tag {
			t.Errorf("If-None-Match %s: %d %v %q, want 304 with the ETag and no body", inm, s, hdr, b)
		}
	}
	if s, _, b := h.Do(http.MethodGet, path, tn.Token, "", "", "If-None-Match", `"other"`); s != 200 || servertest.ID(t, b) != id {
		t.Errorf("If-None-Match of another tag: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodGet, path, tn.Token, "", "", "If-None-Match", unquoted)
	problem("unquoted If-None-Match", s, b, 400, "If-None-Match")

	// Members the body has not, REST and Connect JSON.
	for body, field := range map[string]string{
		`{"email":"grace@x.co","first_name":"Grace"}`: "first_name",
		`{"email":"grace@x.co","bogus":1}`:            "bogus",
	} {
		s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		problem("REST "+body, s, b, 400, field)
		s, _, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", body)
		problem("PATCH "+body, s, b, 400, field)
	}
	unchanged("PATCH with unknown members")
	for body, field := range map[string]string{
		`{"email":"grace@x.co"}`:                              "email",
		`{"contact":{"email":"grace@x.co","first_name":"G"}}`: "contact.first_name",
	} {
		s, _, b := h.Do(http.MethodPost, "/"+contactv1connect.ContactServiceName+"/CreateContact", tn.Token, "application/json", body, "Connect-Protocol-Version", "1")
		if s != 400 || !bytes.Contains(b, []byte("unknown member "+field)) {
			t.Errorf("Connect %s: %d %s, want 400 naming %s", body, s, b, field)
		}
		if field == "email" && !bytes.Contains(b, []byte("inside contact")) {
			t.Errorf("Connect REST-shaped body: %s, want it to say the members go inside contact", b)
		}
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?email=grace@x.co", tn.Token, "", ""); s != 200 || bytes.Contains(b, []byte("grace@x.co")) {
		t.Errorf("a refused body created a contact: %d %s", s, b)
	}

	// A PATCH names the member as sent.
	s, _, b = h.Do(http.MethodPatch, path, tn.Token, "application/merge-patch+json", `{"createdAt":"2020-01-01T00:00:00Z"}`)
	problem("PATCH createdAt", s, b, 400, "createdAt")
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+id+`","title":"Deal"}`)
	lead := servertest.ID(t, b)
	s, _, b = h.Do(http.MethodPatch, "/api/v1/leads/"+lead, tn.Token, "application/merge-patch+json", `{"contact":{"email":"x@y.co"}}`)
	problem("PATCH inline contact", s, b, 400, "contact")

	// The 401 reads as written.
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts", "", "", ""); s != 401 || !bytes.Contains(b, []byte("Bearer <token>")) {
		t.Errorf("401: %d %s, want the detail to read Bearer <token>", s, b)
	}

	// A duplicate says which member collides.
	for body, field := range map[string]string{
		`{"email":"ADA@x.co"}`:                      "email",
		`{"email":"new@x.co","externalId":"crm-1"}`: "externalId",
	} {
		s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		p := problem("duplicate "+body, s, b, 409, field)
		if p["detail"] != "a contact with this "+field+" already exists" || p["existingId"] != id {
			t.Errorf("duplicate %s: %s", body, b)
		}
	}
	_, err = cc.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{
		Email: servertest.Ptr("new@x.co"), ExternalId: servertest.Ptr("crm-1")}}))
	ce = servertest.AssertConnectError(t, err, connect.CodeAlreadyExists, "duplicate")
	if br := servertest.BadRequest(ce); len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "externalId" {
		t.Errorf("duplicate over Connect: %v", ce)
	}
}
