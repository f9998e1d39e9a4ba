package contact_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestWrongTypesNameTheMember: a value of the wrong JSON type is a 400
// malformed_request whose errors[] names the member as sent, with the field
// code invalid_format and what the member takes, over REST (a contact's
// email, a lead's nested value, a batch item) and Connect JSON (the
// BadRequest violation), and a merge patch; nothing is written. Before, errors[] was empty
// and only the detail's words hinted at the member, without its path.
func TestWrongTypesNameTheMember(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Wrong Types Co")
	for _, c := range []struct{ path, body, field, message string }{
		{"/api/v1/contacts", `{"email":5}`, "email", "email: must be a string"},
		{"/api/v1/leads", `{"contact":{"email":"a@x.co"},"value":{"amount":"ten","currency":"USD"}}`,
			"value.amount", "value.amount: must be a whole number from -2147483648 to 2147483647"},
		{"/api/v1/contacts/batch", `{"contacts":[{"email":"a@x.co"},{"email":true}]}`, "contacts[1].email", "contacts[1].email: must be a string"},
	} {
		s, hdr, b := h.Do(http.MethodPost, c.path, tn.Token, "application/json", c.body)
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		if s != 400 || p["code"] != "malformed_request" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/problem+json") || len(errs) != 1 {
			t.Errorf("POST %s %s: %d %v %s, want a 400 malformed_request naming %s", c.path, c.body, s, hdr, b, c.field)
			continue
		}
		v := errs[0].(map[string]any)
		if v["field"] != c.field || v["code"] != "invalid_format" || v["message"] != c.message || p["detail"] != c.message {
			t.Errorf("POST %s %s: %s, want %s (%s)", c.path, c.body, b, c.field, c.message)
		}
	}

	// A merge patch, on a contact that exists: the same 400.
	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"ada@x.co"}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodPatch, "/api/v1/contacts/"+servertest.ID(t, b), tn.Token, "application/merge-patch+json", `{"firstName":["Ada"]}`)
	if p := servertest.Decode(t, b); s != 400 || !strings.Contains(string(b), `"errors":[{"field":"firstName","code":"invalid_format","message":"firstName: must be a string"}]`) {
		t.Errorf("PATCH with a list for firstName: %d %v", s, p)
	}

	s, _, b = h.Do(http.MethodPost, "/"+contactv1connect.ContactServiceName+"/CreateContact", tn.Token, "application/json",
		`{"contact":{"email":5}}`, "Connect-Protocol-Version", "1")
	e := servertest.Decode(t, b)
	var violations []any
	if details, _ := e["details"].([]any); len(details) > 0 {
		for _, d := range details {
			if d := d.(map[string]any); d["type"] == "google.rpc.BadRequest" {
				violations, _ = d["debug"].(map[string]any)["fieldViolations"].([]any)
			}
		}
	}
	if s != 400 || e["code"] != "invalid_argument" || e["message"] != "malformed_request: contact.email: must be a string" ||
		len(violations) != 1 || violations[0].(map[string]any)["field"] != "contact.email" || violations[0].(map[string]any)["reason"] != "invalid_format" {
		t.Errorf("Connect CreateContact with a number for the email: %d %s, want invalid_argument naming contact.email", s, b)
	}

	// A member's name with a NUL in it (unknown, so refused) is named
	// whole, not cut at the NUL.
	s, _, b = h.Do(http.MethodPost, "/"+contactv1connect.ContactServiceName+"/CreateContact", tn.Token, "application/json",
		`{"contact":{"email":"nul@x.co","a\u0000b":1}}`, "Connect-Protocol-Version", "1")
	if e := servertest.Decode(t, b); s != 400 || e["code"] != "invalid_argument" || !strings.Contains(e["message"].(string), "contact.a\uFFFDb") ||
		!strings.Contains(string(b), `"reason":"unknown_member"`) {
		t.Errorf("Connect CreateContact with a NUL in a member's name: %d %s", s, b)
	}

	// A NUL byte outside any string: the words protojson quotes it in are
	// whole, and no member is named.
	s, _, b = h.Do(http.MethodPost, "/"+contactv1connect.ContactServiceName+"/CreateContact", tn.Token, "application/json",
		"\x00{}", "Connect-Protocol-Version", "1")
	if e := servertest.Decode(t, b); s != 400 || e["code"] != "invalid_argument" || !strings.Contains(e["message"].(string), "malformed JSON") ||
		strings.Contains(string(b), "fieldViolations") {
		t.Errorf("Connect CreateContact with a NUL before the JSON: %d %s", s, b)
	}

	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts", tn.Token, "", ""); s != 200 || strings.Contains(string(b), `"email":"a@x.co"`) || strings.Contains(string(b), `"firstName"`) || !strings.Contains(string(b), `"email":"ada@x.co"`) {
		t.Errorf("a refused body wrote something: %d %s", s, b)
	}
}
