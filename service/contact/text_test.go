package contact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/service/servertest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// refusedEverywhere are characters no text field stores: C0 and C1
// controls (BEL, ESC, CSI…), bidirectional controls, invisible characters,
// and zero width joiners that join nothing (between ASCII letters).
var refusedEverywhere = []rune{0x01, 0x07, 0x08, 0x1b, 0x7f, 0x85, 0x9b, 0x9f,
	0x061c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202d, 0x202e,
	0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff}

// refusedOnOneLine are refused in every field but a lead's message.
var refusedOnOneLine = []rune{'\t', '\n', '\r', 0x2028}

// textField is a text field of a create, a valid value the character is
// put into (after its first byte, so it is not trimmed), and whether a
// PATCH can set it.
type textField struct {
	path      string // "contact.firstName", "value.currency"
	value     string
	patch     bool
	multiLine bool
}

var contactTextFields = []textField{
	{path: "email", value: "ada@example.com", patch: true},
	{path: "phone", value: "+14155550123", patch: true},
	{path: "firstName", value: "Ada", patch: true},
	{path: "lastName", value: "Lovelace", patch: true},
	{path: "companyName", value: "Analytical Engines", patch: true},
	{path: "jobTitle", value: "Analyst", patch: true},
	{path: "externalId", value: "crm-42", patch: true},
}

func leadTextFields(contactID string) []textField {
	return []textField{
		{path: "contactId", value: contactID, patch: true},
		{path: "title", value: "Demo request", patch: true},
		{path: "status", value: "new", patch: true},
		{path: "source", value: "web_form", patch: true},
		{path: "campaign", value: "Spring launch", patch: true},
		{path: "message", value: "Please call me", patch: true, multiLine: true},
		{path: "externalId", value: "form-7", patch: true},
		{path: "value.currency", value: "USD", patch: true},
		{path: "contact.email", value: "grace@example.com"},
		{path: "contact.phone", value: "+14155550124"},
		{path: "contact.firstName", value: "Grace"},
		{path: "contact.lastName", value: "Hopper"},
		{path: "contact.companyName", value: "Navy"},
		{path: "contact.jobTitle", value: "Admiral"},
	}
}

// withChar puts r into v after its first byte.
func withChar(v string, r rune) string { return v[:1] + string(r) + v[1:] }

// body is the JSON object of a create (or, with patch, of a merge patch)
// that sets f to value, and else only what the record needs.
func (f textField) body(value string, lead, patch bool) map[string]any {
	b := map[string]any{}
	if !patch {
		switch {
		case !lead:
			b["email"] = "base@example.com"
		case f.path != "contactId":
			b["contact"] = map[string]any{"email": "base@example.com"}
		}
	}
	parent, name, nested := strings.Cut(f.path, ".")
	if !nested {
		b[parent] = value
		return b
	}
	obj, _ := b[parent].(map[string]any)
	if obj == nil {
		obj = map[string]any{}
		b[parent] = obj
	}
	if parent == "value" {
		obj["amount"] = 100
	}
	obj[name] = value
	return b
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// problemNames reports whether body is a 422 validation_failed problem
// whose first violation names field.
func problemNames(body []byte, field string) bool {
	var p struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
		Errors []struct {
			Field string `json:"field"`
			Code  string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &p) != nil || p.Code != "validation_failed" || len(p.Errors) == 0 {
		return false
	}
	return p.Errors[0].Field == field && (p.Errors[0].Code == "invalid_format" || p.Errors[0].Code == "invalid_value")
}

// TestControlBidiAndInvisibleCharactersAreRefused: a C0 or C1 control
// (BEL, ESC[31m), a bidirectional override (U+202E), an invisible
// character (U+FEFF, U+200B) or a lone zero width joiner in any text field
// of a contact or a lead, inline contact included, is a 422 naming the
// field, on a create, a PATCH and a batch item, over REST and Connect:
// stored, it would drive the terminal, spreadsheet or admin tool that
// shows it. Tabs and line breaks are refused too, but in a lead's
// message.
func TestControlBidiAndInvisibleCharactersAreRefused(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Control Co")
	ctx := context.Background()
	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"held@example.com"}`)
	if s != 201 {
		t.Fatalf("create contact: %d %s", s, b)
	}
	var held struct {
		ID string `json:"id"`
	}
	servertest.MustUnmarshal(t, b, &held)
	s, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+held.ID+`","title":"Held"}`)
	if s != 201 {
		t.Fatalf("create lead: %d %s", s, b)
	}
	var heldLead struct {
		ID string `json:"id"`
	}
	servertest.MustUnmarshal(t, b, &heldLead)

	c := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL)
	l := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL)
	authed := func(r interface{ Header() http.Header }) { r.Header().Set("Authorization", "Bearer "+tn.Token) }
	rpcRefused := func(what, field string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s over Connect: accepted, want InvalidArgument naming %s", what, field)
			return
		}
		servertest.AssertField(t, what, servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed"), field)
	}

	for _, kind := range []struct {
		lead   bool
		path   string
		fields []textField
		id     string
	}{
		{lead: false, path: "/api/v1/contacts", fields: contactTextFields, id: held.ID},
		{lead: true, path: "/api/v1/leads", fields: leadTextFields(held.ID), id: heldLead.ID},
	} {
		for _, f := range kind.fields {
			chars := refusedEverywhere
			if !f.multiLine {
				chars = append(append([]rune(nil), chars...), refusedOnOneLine...)
			}
			for _, r := range chars {
				bad := withChar(f.value, r)
				what := fmt.Sprintf("%s %s with U+%04X", kind.path, f.path, r)
				create := mustJSON(t, f.body(bad, kind.lead, false))

				// REST: create, PATCH and a batch item.
				if s, _, b := h.Do(http.MethodPost, kind.path, tn.Token, "application/json", create); s != 422 || !problemNames(b, f.path) {
					t.Errorf("create %s: %d %s", what, s, b)
				}
				if f.patch {
					patch := mustJSON(t, f.body(bad, kind.lead, true))
					if s, _, b := h.Do(http.MethodPatch, kind.path+"/"+kind.id, tn.Token, "application/merge-patch+json", patch); s != 422 || !problemNames(b, f.path) {
						t.Errorf("PATCH %s: %d %s", what, s, b)
					}
				}
				items := "contacts"
				if kind.lead {
					items = "leads"
				}
				s, _, b := h.Do(http.MethodPost, kind.path+"/batch", tn.Token, "application/json", `{"`+items+`":[`+create+`]}`)
				var batch struct {
					Results []struct {
						Error json.RawMessage `json:"error"`
					} `json:"results"`
				}
				if s != 200 || json.Unmarshal(b, &batch) != nil || len(batch.Results) != 1 || !problemNames(batch.Results[0].Error, f.path) {
					t.Errorf("batch %s: %d %s", what, s, b)
				}

				// Connect: create, update and a batch item.
				if !kind.lead {
					in := new(contactv1.Contact)
					mustProtoJSON(t, create, in)
					req := connect.NewRequest(&contactv1.CreateContactRequest{Contact: in})
					authed(req)
					_, err := c.CreateContact(ctx, req)
					rpcRefused("CreateContact "+what, f.path, err)
					upd := new(contactv1.Contact)
					mustProtoJSON(t, mustJSON(t, f.body(bad, false, true)), upd)
					ureq := connect.NewRequest(&contactv1.UpdateContactRequest{Id: kind.id, Contact: upd})
					authed(ureq)
					_, err = c.UpdateContact(ctx, ureq)
					rpcRefused("UpdateContact "+what, f.path, err)
					breq := connect.NewRequest(&contactv1.BatchCreateContactsRequest{Contacts: []*contactv1.Contact{in}})
					authed(breq)
					res, err := c.BatchCreateContacts(ctx, breq)
					if err != nil || len(res.Msg.GetResults()) != 1 || !problemProtoNames(res.Msg.GetResults()[0].GetError(), f.path) {
						t.Errorf("BatchCreateContacts %s: %v %v", what, res, err)
					}
					continue
				}
				in := new(leadv1.Lead)
				mustProtoJSON(t, create, in)
				req := connect.NewRequest(&leadv1.CreateLeadRequest{Lead: in})
				authed(req)
				_, err := l.CreateLead(ctx, req)
				rpcRefused("CreateLead "+what, f.path, err)
				if f.patch {
					upd := new(leadv1.Lead)
					mustProtoJSON(t, mustJSON(t, f.body(bad, true, true)), upd)
					ureq := connect.NewRequest(&leadv1.UpdateLeadRequest{Id: kind.id, Lead: upd})
					authed(ureq)
					_, err = l.UpdateLead(ctx, ureq)
					rpcRefused("UpdateLead "+what, f.path, err)
				}
				breq := connect.NewRequest(&leadv1.BatchCreateLeadsRequest{Leads: []*leadv1.Lead{in}})
				authed(breq)
				res, err := l.BatchCreateLeads(ctx, breq)
				if err != nil || len(res.Msg.GetResults()) != 1 || !problemProtoNames(res.Msg.GetResults()[0].GetError(), f.path) {
					t.Errorf("BatchCreateLeads %s: %v %v", what, res, err)
				}
			}
		}
	}

	// The held records kept their values: no refused write changed them.
	s, _, b = h.Do(http.MethodGet, "/api/v1/contacts/"+held.ID, tn.Token, "", "")
	if s != 200 || !strings.Contains(string(b), `"email":"held@example.com"`) || strings.Contains(string(b), "firstName") {
		t.Errorf("held contact after refused patches: %d %s", s, b)
	}

	// The API client's name (and a workspace's) on the admin side.
	for _, name := range []string{"Zap\u202eier", "\x1b[31mZapier", "Zapier\u200b", "\ufeffZapier", "Zap\nier"} {
		_, err := h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
			WorkspaceId: tn.WorkspaceID, MemberId: tn.MemberID, Name: name, Scopes: []string{"contacts:read"}}))
		if err == nil {
			t.Errorf("client name %q accepted", name)
			continue
		}
		servertest.AssertField(t, fmt.Sprintf("client name %q", name), servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed"), "name")
		_, err = h.AdminClient.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: name}))
		if err == nil {
			t.Errorf("workspace name %q accepted", name)
			continue
		}
		servertest.AssertField(t, fmt.Sprintf("workspace name %q", name), servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed"), "name")
	}
}

func mustProtoJSON(t *testing.T, s string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(s), m); err != nil {
		t.Fatalf("protojson %s: %v", s, err)
	}
}

// problemProtoNames is problemNames for a batch item's problem over RPC.
func problemProtoNames(p interface {
	GetStatus() int32
	GetCode() string
}, field string) bool {
	b, err := protojson.Marshal(p.(proto.Message))
	return err == nil && p.GetStatus() == 422 && problemNames(b, field)
}

// TestEveryScriptAndEmojiAreStored: refusing controls keeps ordinary
// writing: letters of any script, apostrophes and hyphens, emoji and ZWJ
// emoji sequences (👩‍💻 holds U+200D), the joiners Persian and Sinhala
// are written with, and a multi-line lead message with tabs, are stored
// and answered exactly as sent, over REST (create, PATCH, batch) and
// Connect.
func TestEveryScriptAndEmojiAreStored(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Scripts Co")
	ctx := context.Background()
	contact := map[string]any{
		"email": "zoe@example.com", "firstName": "Zoë", "lastName": "Σωκράτης", "companyName": "李 & محمد",
		"jobTitle": "O'Brien Jean-Luc 🚀", "externalId": "👩\u200d💻-1",
	}
	s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", mustJSON(t, contact))
	if s != 201 {
		t.Fatalf("create contact: %d %s", s, b)
	}
	var got map[string]any
	servertest.MustUnmarshal(t, b, &got)
	for k, v := range contact {
		if got[k] != v {
			t.Errorf("contact %s = %q, want %q", k, got[k], v)
		}
	}
	id, _ := got["id"].(string)
	patch := map[string]any{"firstName": "ශ්\u200dරී", "lastName": "حسین\u200cزاده", "companyName": "🏳\ufe0f\u200d🌈 Pride GmbH", "jobTitle": "Ñandú"}
	s, _, b = h.Do(http.MethodPatch, "/api/v1/contacts/"+id, tn.Token, "application/merge-patch+json", mustJSON(t, patch))
	if s != 200 {
		t.Fatalf("patch contact: %d %s", s, b)
	}
	servertest.MustUnmarshal(t, b, &got)
	for k, v := range patch {
		if got[k] != v {
			t.Errorf("patched contact %s = %q, want %q", k, got[k], v)
		}
	}

	message := "Hello,\r\n\tplease call me 📞.\nΕυχαριστώ — 谢谢 — شكرا\u2028bye"
	lead := map[string]any{
		"contact": map[string]any{"email": "li@example.com", "firstName": "李", "lastName": "محمد"},
		"title":   "Demo 👨\u200d👩\u200d👧\u200d👦", "campaign": "Été 2027 🚀", "message": message, "externalId": "Jean-Luc's form",
		"source": "web_form",
	}
	s, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", mustJSON(t, lead))
	if s != 201 {
		t.Fatalf("create lead: %d %s", s, b)
	}
	servertest.MustUnmarshal(t, b, &got)
	for _, k := range []string{"title", "campaign", "message", "externalId"} {
		if got[k] != lead[k] {
			t.Errorf("lead %s = %q, want %q", k, got[k], lead[k])
		}
	}
	leadID, _ := got["id"].(string)
	s, _, b = h.Do(http.MethodPatch, "/api/v1/leads/"+leadID, tn.Token, "application/merge-patch+json", `{"message":"line 1\nline 2\ttab","title":"O'Brien 🐻\u200d❄\ufe0f"}`)
	if s != 200 || !strings.Contains(string(b), `"message":"line 1\nline 2\ttab"`) {
		t.Errorf("patch lead: %d %s", s, b)
	}
	s, _, b = h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json",
		`{"leads":[{"contact":{"email":"sok@example.com","firstName":"Σωκράτης"},"message":"a\r\nb","title":"🧑🏽\u200d🚀"}]}`)
	if s != 200 || !strings.Contains(string(b), `"lead":`) {
		t.Errorf("batch lead: %d %s", s, b)
	}

	// Connect: the same values as a create.
	in := &contactv1.Contact{Email: servertest.Ptr("dev@example.com"), FirstName: servertest.Ptr("محمد"), LastName: servertest.Ptr("👩\u200d💻"), CompanyName: servertest.Ptr("Zoë's 李")}
	req := connect.NewRequest(&contactv1.CreateContactRequest{Contact: in})
	req.Header().Set("Authorization", "Bearer "+tn.Token)
	res, err := contactv1connect.NewContactServiceClient(h.HTTP2Client(), h.Public.URL).CreateContact(ctx, req)
	if err != nil || res.Msg.GetContact().GetLastName() != "👩\u200d💻" || res.Msg.GetContact().GetFirstName() != "محمد" {
		t.Errorf("CreateContact: %v %v", res, err)
	}
	lreq := connect.NewRequest(&leadv1.CreateLeadRequest{Lead: &leadv1.Lead{ContactId: id, Message: servertest.Ptr(message), Title: servertest.Ptr("Σωκράτης 🚀")}})
	lreq.Header().Set("Authorization", "Bearer "+tn.Token)
	lres, err := leadv1connect.NewLeadServiceClient(h.HTTP2Client(), h.Public.URL).CreateLead(ctx, lreq)
	if err != nil || lres.Msg.GetLead().GetMessage() != message {
		t.Errorf("CreateLead: %v %v", lres, err)
	}

	// An API client's name may be any script too.
	if _, err := h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
		WorkspaceId: tn.WorkspaceID, MemberId: tn.MemberID, Name: "Zapier 🚀 李", Scopes: []string{"contacts:read"}})); err != nil {
		t.Errorf("client name: %v", err)
	}
}
