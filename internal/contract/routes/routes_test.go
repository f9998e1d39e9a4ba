package routes_test

import (
	"maps"
	"slices"
	"testing"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	tokenv1 "github.com/svat/partnerapi/gen/partner/token/v1"
	"github.com/svat/partnerapi/internal/contract/routes"
)

// TestRoutesOfTheAnnotations: the table says what the .proto files say:
// method, template, verb, path variables, body, success status, the
// query parameters the rule leaves (both spellings), and which PATCH is a
// merge patch.
func TestRoutesOfTheAnnotations(t *testing.T) {
	t.Parallel()
	table := routes.Of(contactv1.File_partner_contact_v1_contact_proto.Services().Get(0),
		tokenv1.File_partner_token_v1_token_proto.Services().Get(0),
		adminv1.File_partner_admin_v1_admin_proto.Services().Get(0))
	for procedure, want := range map[string]struct {
		method, template, verb, body string
		vars                         []string
		success                      int
		query                        []string
		patch, oauth                 bool
	}{
		"/partner.contact.v1.ContactService/CreateContact": {"POST", "/api/v1/contacts", "", "contact", nil, 201, nil, false, false},
		"/partner.contact.v1.ContactService/GetContact":    {"GET", "/api/v1/contacts/{id}", "", "", []string{"id"}, 200, nil, false, false},
		"/partner.contact.v1.ContactService/UpdateContact": {"PATCH", "/api/v1/contacts/{id}", "", "contact", []string{"id"}, 200, nil, true, false},
		"/partner.token.v1.TokenService/CreateToken":       {"POST", "/api/oauth/token", "", "*", nil, 200, nil, false, true},
		"/partner.admin.v1.AdminService/RevokeApiClient":   {"POST", "/admin/v1/clients/{client_id}:revoke", "revoke", "*", []string{"client_id"}, 200, nil, false, false},
		"/partner.admin.v1.AdminService/ListApiClients": {"GET", "/admin/v1/workspaces/{workspace_id}/clients", "", "", []string{"workspace_id"}, 200,
			[]string{"memberId", "member_id"}, false, false},
	} {
		r, ok := table.Find(procedure)
		if !ok {
			t.Errorf("%s: no route", procedure)
			continue
		}
		query := slices.Sorted(maps.Keys(r.Query()))
		slices.Sort(want.query)
		if r.Method != want.method || r.Template != want.template || r.Verb != want.verb || r.Body != want.body ||
			!slices.Equal(r.Vars, want.vars) || r.Success != want.success || !slices.Equal(query, want.query) ||
			(r.MergePatch() != nil) != want.patch || r.OAuth() != want.oauth {
			t.Errorf("%s: %s %s verb %q body %q vars %v success %d query %v patch %v oauth %v; want %+v", procedure,
				r.Method, r.Template, r.Verb, r.Body, r.Vars, r.Success, query, r.MergePatch() != nil, r.OAuth(), want)
		}
	}
	if _, ok := table.Find("/partner.contact.v1.ContactService/Nope"); ok {
		t.Error("found a route of no RPC")
	}
}

func TestSplitVerb(t *testing.T) {
	t.Parallel()
	for template, want := range map[string][2]string{
		"/v1/x/{id}:cancel": {"/v1/x/{id}", "cancel"},
		"/v1/things:batch":  {"/v1/things", "batch"},
		"/v1/x/{id}":        {"/v1/x/{id}", ""},
		"/v1/a:b/c":         {"/v1/a:b/c", ""},
	} {
		if p, v := routes.SplitVerb(template); p != want[0] || v != want[1] {
			t.Errorf("SplitVerb(%q) = %q %q, want %q", template, p, v, want)
		}
	}
}
