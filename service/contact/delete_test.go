package contact_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestDeleteContact: 204 and gone (404, a second DELETE 404, its email
// and externalId free again); 409 contact_has_leads with leadCount while
// leads point at it, over REST and Connect, and withLeads=true deletes
// them too; If-Match honoured (400 unquoted, 412 stale); another
// workspace's id is a 404 that deletes nothing; a token without
// contacts:write is 403.
func TestDeleteContact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Delete Co")
	other := h.NewTenant("Delete Elsewhere")
	ctx := context.Background()
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	create := func(tok, body string) (string, string) {
		t.Helper()
		s, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tok, "application/json", body)
		if s != 201 {
			t.Fatalf("create %s: %d %s", body, s, b)
		}
		return servertest.ID(t, b), hdr.Get("ETag")
	}

	id, tag := create(tn.Token, `{"email":"ada@x.co","externalId":"crm-1"}`)
	theirs, _ := create(other.Token, `{"email":"ada@x.co","externalId":"crm-1"}`)
	path := "/api/v1/contacts/" + id

	if s, _, b := h.Do(http.MethodDelete, "/api/v1/contacts/"+theirs, tn.Token, "", ""); s != 404 {
		t.Errorf("DELETE of another workspace's contact: %d %s", s, b)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/contacts/"+theirs, other.Token, "", ""); s != 200 {
		t.Errorf("the other workspace's contact is gone: %d", s)
	}
	readOnly := h.Token(tn.ClientID, tn.ClientSecret, "contacts:read")
	if s, _, b := h.Do(http.MethodDelete, path, readOnly, "", ""); s != 403 || !strings.Contains(string(b), "contacts:write") {
		t.Errorf("DELETE with contacts:read only: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodDelete, path, tn.Token, "", "", "If-Match", strings.Trim(tag, `"`)); s != 400 {
		t.Errorf("DELETE with an unquoted If-Match: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodDelete, path, tn.Token, "", "", "If-Match", `"stale"`); s != 412 {
		t.Errorf("DELETE with a stale If-Match: %d %s", s, b)
	}

	// Leads hold it: 409 with leadCount, REST and Connect.
	for range 2 {
		if s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+id+`"}`); s != 201 {
			t.Fatalf("lead: %d %s", s, b)
		}
	}
	s, _, b := h.Do(http.MethodDelete, path, tn.Token, "", "")
	p := servertest.Decode(t, b)
	if s != 409 || p["code"] != "contact_has_leads" || p["leadCount"] != float64(2) || !strings.Contains(p["detail"].(string), "withLeads=true") {
		t.Errorf("DELETE of a contact with leads: %d %s", s, b)
	}
	_, err := cc.DeleteContact(ctx, connect.NewRequest(&contactv1.DeleteContactRequest{Id: id}))
	ce := servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "contact_has_leads")
	if info := servertest.ErrorInfo(ce); info.GetMetadata()["leadCount"] != "2" {
		t.Errorf("Connect contact_has_leads: %v", info)
	}

	// withLeads deletes them too, with If-Match of the current version.
	if s, hdr, b := h.Do(http.MethodDelete, path+"?withLeads=true", tn.Token, "", "", "If-Match", tag); s != 204 || len(b) != 0 || hdr.Get("Content-Type") != "" {
		t.Fatalf("DELETE withLeads: %d %v %q", s, hdr, b)
	}
	if s, _, _ := h.Do(http.MethodGet, path, tn.Token, "", ""); s != 404 {
		t.Errorf("GET after DELETE: %d", s)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/leads?contactId="+id, tn.Token, "", ""); s != 200 || strings.Contains(string(b), "lea_") {
		t.Errorf("leads of the deleted contact: %d %s", s, b)
	}
	if s, _, _ := h.Do(http.MethodDelete, path, tn.Token, "", ""); s != 404 {
		t.Errorf("second DELETE: %d", s)
	}
	again, _ := create(tn.Token, `{"email":"ada@x.co","externalId":"crm-1"}`)
	if again == id {
		t.Errorf("a new contact reused the deleted id %s", id)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/contacts/"+theirs, other.Token, "", ""); s != 200 {
		t.Errorf("the other workspace's contact is gone: %d", s)
	}

	// Over Connect: deleted, then NotFound.
	if _, err := cc.DeleteContact(ctx, connect.NewRequest(&contactv1.DeleteContactRequest{Id: again})); err != nil {
		t.Fatalf("Connect DeleteContact: %v", err)
	}
	_, err = cc.DeleteContact(ctx, connect.NewRequest(&contactv1.DeleteContactRequest{Id: again}))
	servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")
}
