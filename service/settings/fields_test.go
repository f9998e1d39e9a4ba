package settings_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/service/servertest"
)

// TestFieldFormsAreGuardedAndScoped: the custom field forms need the
// session's CSRF token and a same-site request (403 otherwise, nothing
// changed), and another workspace's field is not found by any of them
// (404, nothing changed).
func TestFieldFormsAreGuardedAndScoped(t *testing.T) {
	h := servertest.New(t)
	ws, member := h.Workspace("Fields Guarded")
	otherWS, otherMember := h.Workspace("Fields Elsewhere")
	create := func(ws, member, key string) string {
		t.Helper()
		res, err := h.AdminClient.CreateCustomField(context.Background(), connect.NewRequest(&adminv1.CreateCustomFieldRequest{
			WorkspaceId: ws, MemberId: member, CustomField: &customfieldv1.CustomField{Object: "lead", Key: key, Label: "Budget", Type: "number"}}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetCustomField().GetId()
	}
	mine := create(ws, member, "budget")
	theirs := create(otherWS, otherMember, "budget")
	labels := func(ws string) string {
		res, err := h.AdminClient.ListCustomFields(context.Background(), connect.NewRequest(&adminv1.ListCustomFieldsRequest{WorkspaceId: ws}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range res.Msg.GetCustomFields() {
			out = append(out, f.GetKey()+"="+f.GetLabel())
		}
		return strings.Join(out, ",")
	}

	b := newBrowser(t, h)
	b.do("GET", signInLink(t, h, member, 0), nil)
	_, page := b.do("GET", "/settings/fields", nil)
	token := csrf(t, page)
	forms := map[string]url.Values{
		"/fields":                     {"object": {"lead"}, "key": {"forged"}, "label": {"Forged"}, "type": {"text"}},
		"/fields/" + mine:             {"label": {"Forged"}},
		"/fields/" + mine + "/delete": {},
	}
	for path, form := range forms {
		for _, c := range []struct {
			name    string
			token   string
			headers []string
		}{
			{"no token", "", []string{"Sec-Fetch-Site", "same-origin"}},
			{"wrong token", strings.Repeat("A", len(token)), []string{"Sec-Fetch-Site", "same-origin"}},
			{"another site", token, []string{"Sec-Fetch-Site", "cross-site"}},
		} {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			if c.token != "" {
				f.Set("csrf", c.token)
			}
			if res, _ := b.do("POST", "/settings"+path, f, c.headers...); res.StatusCode != http.StatusForbidden {
				t.Errorf("%s, %s: status %d, want 403", path, c.name, res.StatusCode)
			}
		}
	}
	if got := labels(ws); got != "budget=Budget" {
		t.Fatalf("after refused forms: %s", got)
	}

	for _, get := range []string{"/settings/fields/" + theirs + "/edit", "/settings/fields/" + theirs + "/delete", "/settings/fields/fld_nonsense/edit"} {
		if res, page := b.do("GET", get, nil); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "no such custom field") {
			t.Errorf("GET %s: status %d", get, res.StatusCode)
		}
	}
	for path, form := range map[string]url.Values{"/fields/" + theirs: {"label": {"Stolen"}}, "/fields/" + theirs + "/delete": {}} {
		form.Set("csrf", token)
		if res, _ := b.do("POST", "/settings"+path, form, "Sec-Fetch-Site", "same-origin"); res.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: status %d, want 404", path, res.StatusCode)
		}
	}
	if got := labels(otherWS); got != "budget=Budget" {
		t.Fatalf("the other workspace's field after the attempts: %s", got)
	}

	// The same forms, sent right, work.
	f := url.Values{"csrf": {token}, "label": {"Money"}}
	if res, _ := b.do("POST", "/settings/fields/"+mine, f, "Sec-Fetch-Site", "same-origin"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: status %d", res.StatusCode)
	}
	f = url.Values{"csrf": {token}, "object": {"lead"}, "key": {"budget"}, "label": {"Again"}, "type": {"text"}}
	if res, page := b.do("POST", "/settings/fields", f, "Sec-Fetch-Site", "same-origin"); res.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(page, "The key is in use") {
		t.Fatalf("add of a key in use: status %d\n%s", res.StatusCode, page)
	}
	if got := labels(ws); got != "budget=Money" {
		t.Fatalf("after the edit: %s", got)
	}
}
