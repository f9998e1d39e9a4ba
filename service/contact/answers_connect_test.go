package contact_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestConnectAnswersSayWhatIsWrong is TestAnswersSayWhatIsWrong's Connect
// JSON side, as a caller with curl reads it (issue 24, item 5): the 401
// reads "Bearer <token>" in the raw body, not "Bearer \u003ctoken\u003e";
// a duplicate email and a read-only member in an update name the member;
// an unquoted If-Match names the header. Before, the Connect 401 was
// HTML-escaped.
func TestConnectAnswersSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Connect Answers Co")
	rpc := "/" + contactv1connect.ContactServiceName + "/"
	connectJSON := func(method, token, body string, headers ...string) (int, map[string]any, []byte) {
		t.Helper()
		s, hdr, b := h.Do(http.MethodPost, rpc+method, token, "application/json", body, append([]string{"Connect-Protocol-Version", "1"}, headers...)...)
		if s != 200 && hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %v %s", method, s, hdr, b)
		}
		return s, servertest.Decode(t, b), b
	}
	// violation is the first field violation of a Connect error's
	// google.rpc.BadRequest, as the JSON error's debug member shows it.
	violation := func(e map[string]any) string {
		details, _ := e["details"].([]any)
		for _, d := range details {
			d := d.(map[string]any)
			if d["type"] != "google.rpc.BadRequest" {
				continue
			}
			fv, _ := d["debug"].(map[string]any)["fieldViolations"].([]any)
			if len(fv) == 1 {
				return fv[0].(map[string]any)["field"].(string)
			}
		}
		return ""
	}

	s, e, raw := connectJSON("ListContacts", "", `{}`)
	if s != 401 || e["code"] != "unauthenticated" || !bytes.Contains(raw, []byte("Bearer <token>")) || bytes.Contains(raw, []byte(`\u003c`)) {
		t.Errorf("Connect 401: %d %s; want the raw body to read Bearer <token>", s, raw)
	}

	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"ada@x.co","externalId":"crm-1"}`)
	id := servertest.ID(t, b)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	s, e, raw = connectJSON("CreateContact", tn.Token, `{"contact":{"email":"ADA@x.co"}}`)
	if s != 409 || e["code"] != "already_exists" || violation(e) != "email" || !strings.Contains(e["message"].(string), "email") {
		t.Errorf("Connect duplicate email: %d %s; want already_exists naming email", s, raw)
	}
	s, e, raw = connectJSON("UpdateContact", tn.Token, `{"id":"`+id+`","contact":{"createdAt":"2020-01-01T00:00:00Z"},"updateMask":"createdAt"}`)
	if s != 400 || e["code"] != "invalid_argument" || violation(e) != "createdAt" {
		t.Errorf("Connect update of createdAt: %d %s; want invalid_argument naming createdAt", s, raw)
	}
	_, hdr, _ := h.Do(http.MethodGet, "/api/v1/contacts/"+id, tn.Token, "", "")
	s, e, raw = connectJSON("UpdateContact", tn.Token, `{"id":"`+id+`","contact":{"firstName":"B"}}`, "If-Match", strings.Trim(hdr.Get("ETag"), `"`))
	if s != 400 || e["code"] != "invalid_argument" || violation(e) != "If-Match" {
		t.Errorf("Connect unquoted If-Match: %d %s; want invalid_argument naming If-Match", s, raw)
	}
	s, e, raw = connectJSON("CreateContact", tn.Token, `{"contact":{"email":"grace@x.co","first_name":"G"}}`)
	if s != 400 || e["code"] != "invalid_argument" || !strings.Contains(e["message"].(string), "contact.first_name") {
		t.Errorf("Connect unknown member: %d %s; want invalid_argument naming contact.first_name", s, raw)
	}

	// REST names the read-only member as sent, whichever it is.
	for member, value := range map[string]string{"id": `"con_x"`, "updatedAt": `"2020-01-01T00:00:00Z"`} {
		s, _, b := h.Do(http.MethodPatch, "/api/v1/contacts/"+id, tn.Token, "application/merge-patch+json", `{"`+member+`":`+value+`}`)
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		if s != 400 || len(errs) != 1 || errs[0].(map[string]any)["field"] != member {
			t.Errorf("PATCH %s: %d %s; want 400 naming %s", member, s, b, member)
		}
	}
}
