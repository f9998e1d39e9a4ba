package customfield_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestDefinitionLifecycleOverREST: a create answers 201 with the
// definition and its Location (label trimmed, required false by default);
// GET answers it with an ETag; the list answers every definition oldest
// first; a PATCH merges label, description, options and required; a
// DELETE answers 204 and the field is gone from GET and the list.
func TestDefinitionLifecycleOverREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Lifecycle", allScopes...)

	status, hdr, b := h.Do(http.MethodPost, path, c.token, jsonCT,
		`{"object":"lead","key":"budget_band","label":"  Budget band ","type":"select","description":"What they can spend",
		  "options":[{"value":"low","label":"Low"},{"value":"high","label":"High"}]}`)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", status, b)
	}
	f := servertest.Decode(t, b)
	id, _ := f["id"].(string)
	if !strings.HasPrefix(id, "fld_") || hdr.Get("Location") != path+"/"+id {
		t.Errorf("id %q, Location %q", id, hdr.Get("Location"))
	}
	if f["object"] != "lead" || f["key"] != "budget_band" || f["label"] != "Budget band" || f["type"] != "select" ||
		f["required"] != false || f["description"] != "What they can spend" || f["createdAt"] == nil || f["updatedAt"] == nil ||
		fmt.Sprint(f["options"]) != "[map[label:Low value:low] map[label:High value:high]]" {
		t.Errorf("created = %s", b)
	}
	second, _ := create(t, h, c.token, `{"object":"contact","key":"birthday","label":"Birthday","type":"date","required":true}`)

	status, hdr, b = h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	if status != http.StatusOK || servertest.ID(t, b) != id || hdr.Get("ETag") == "" {
		t.Fatalf("get: status %d, ETag %q: %s", status, hdr.Get("ETag"), b)
	}
	status, _, b = h.Do(http.MethodGet, path, c.token, "", "")
	var list struct {
		CustomFields []struct {
			ID, Key  string
			Required bool
			Options  []any
		} `json:"customFields"`
	}
	servertest.MustUnmarshal(t, b, &list)
	if status != http.StatusOK || len(list.CustomFields) != 2 || list.CustomFields[0].ID != id || list.CustomFields[1].ID != second ||
		!list.CustomFields[1].Required || len(list.CustomFields[1].Options) != 0 {
		t.Fatalf("list: status %d: %s", status, b)
	}
	status, _, b = h.Do(http.MethodGet, path+"?object=contact", c.token, "", "")
	servertest.MustUnmarshal(t, b, &list)
	if status != http.StatusOK || len(list.CustomFields) != 1 || list.CustomFields[0].ID != second {
		t.Fatalf("list of contact fields: status %d: %s", status, b)
	}

	status, _, b = h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json",
		`{"label":"Budget","description":null,"required":true,"options":[{"value":"low","label":"Small"},{"value":"high","label":"High"},{"value":"mid","label":"Medium"}]}`)
	if status != http.StatusOK {
		t.Fatalf("patch: status %d: %s", status, b)
	}
	f = servertest.Decode(t, b)
	if f["label"] != "Budget" || f["description"] != nil || f["required"] != true || f["key"] != "budget_band" || f["type"] != "select" ||
		fmt.Sprint(f["options"]) != "[map[label:Small value:low] map[label:High value:high] map[label:Medium value:mid]]" {
		t.Errorf("patched = %s", b)
	}

	status, _, b = h.Do(http.MethodDelete, path+"/"+id, c.token, "", "")
	if status != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("delete: status %d: %s", status, b)
	}
	status, _, b = h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	wantProblem(t, "get deleted", status, b, http.StatusNotFound, "not_found", "")
	status, _, b = h.Do(http.MethodDelete, path+"/"+id, c.token, "", "")
	wantProblem(t, "delete again", status, b, http.StatusNotFound, "not_found", "")
	status, _, b = h.Do(http.MethodGet, path, c.token, "", "")
	servertest.MustUnmarshal(t, b, &list)
	if status != http.StatusOK || len(list.CustomFields) != 1 || list.CustomFields[0].ID != second {
		t.Fatalf("list after delete: status %d: %s", status, b)
	}
}

// TestCreateRules: every rule of a definition, each violation named by
// its member as sent (422 validation_failed).
func TestCreateRules(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Rules", allScopes...)
	opts := func(n int) string {
		var o []string
		for i := range n {
			o = append(o, fmt.Sprintf(`{"value":"v%d","label":"V %d"}`, i, i))
		}
		return "[" + strings.Join(o, ",") + "]"
	}
	for _, tc := range []struct {
		name, body, field, code string
	}{
		{"no object", `{"key":"a","label":"A","type":"text"}`, "object", "required"},
		{"unknown object", `{"object":"deal","key":"a","label":"A","type":"text"}`, "object", "invalid_value"},
		{"no key", `{"object":"lead","label":"A","type":"text"}`, "key", "required"},
		{"key with a capital", `{"object":"lead","key":"Budget","label":"A","type":"text"}`, "key", "invalid_format"},
		{"key starting with a digit", `{"object":"lead","key":"1a","label":"A","type":"text"}`, "key", "invalid_format"},
		{"key of 41 characters", `{"object":"lead","key":"a` + strings.Repeat("b", 40) + `","label":"A","type":"text"}`, "key", "invalid_format"},
		{"key with a dash", `{"object":"lead","key":"a-b","label":"A","type":"text"}`, "key", "invalid_format"},
		{"no label", `{"object":"lead","key":"a","type":"text"}`, "label", "required"},
		{"blank label", `{"object":"lead","key":"a","label":"   ","type":"text"}`, "label", "required"},
		{"label of 101 characters", `{"object":"lead","key":"a","label":"` + servertest.Long(101) + `","type":"text"}`, "label", "too_long"},
		{"label with a bidi control", `{"object":"lead","key":"a","label":"A\u202eB","type":"text"}`, "label", "invalid_format"},
		{"label with an invisible character", `{"object":"lead","key":"a","label":"A\u200bB","type":"text"}`, "label", "invalid_format"},
		{"description of 501 characters", `{"object":"lead","key":"a","label":"A","type":"text","description":"` + servertest.Long(501) + `"}`, "description", "too_long"},
		{"no type", `{"object":"lead","key":"a","label":"A"}`, "type", "required"},
		{"unknown type", `{"object":"lead","key":"a","label":"A","type":"currency"}`, "type", "invalid_value"},
		{"options on a text field", `{"object":"lead","key":"a","label":"A","type":"text","options":[{"value":"x","label":"X"}]}`, "options", "invalid_value"},
		{"select without options", `{"object":"lead","key":"a","label":"A","type":"select"}`, "options", "required"},
		{"201 options", `{"object":"lead","key":"a","label":"A","type":"multiselect","options":` + opts(201) + `}`, "options", "too_long"},
		{"option value with a capital", `{"object":"lead","key":"a","label":"A","type":"select","options":[{"value":"X","label":"X"}]}`, "options[0].value", "invalid_format"},
		{"option value of 65 characters", `{"object":"lead","key":"a","label":"A","type":"select","options":[{"value":"` + servertest.Long(65) + `","label":"X"}]}`, "options[0].value", "invalid_format"},
		{"option value twice", `{"object":"lead","key":"a","label":"A","type":"select","options":[{"value":"x","label":"X"},{"value":"x","label":"Y"}]}`, "options[1].value", "invalid_value"},
		{"option without a label", `{"object":"lead","key":"a","label":"A","type":"select","options":[{"value":"x"}]}`, "options[0].label", "required"},
		{"option label of 101 characters", `{"object":"lead","key":"a","label":"A","type":"select","options":[{"value":"x","label":"` + servertest.Long(101) + `"}]}`, "options[0].label", "too_long"},
	} {
		status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, tc.body)
		p := wantProblem(t, tc.name, status, b, http.StatusUnprocessableEntity, "validation_failed", tc.field)
		if p != nil && !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: want violation code %s: %s", tc.name, tc.code, b)
		}
	}
	// Every type is accepted; 200 options and a 40-character key are the
	// bounds.
	for i, typ := range []string{"text", "number", "boolean", "date", "datetime", "url", "email"} {
		create(t, h, c.token, fmt.Sprintf(`{"object":"contact","key":"f%d","label":"F","type":%q}`, i, typ))
	}
	create(t, h, c.token, `{"object":"lead","key":"a`+strings.Repeat("b", 39)+`","label":"`+servertest.Long(100)+`","type":"multiselect","options":`+opts(200)+`}`)
	status, _, b := h.Do(http.MethodGet, path+"?object=deal", c.token, "", "")
	wantProblem(t, "list of an unknown object", status, b, http.StatusBadRequest, "malformed_request", "object")
}

// TestKeysArePerWorkspaceAndObject: a key in use on the object is 409
// key_in_use, also while a deleted field's values are being erased; the
// same key on the other object, or in another workspace, is free.
func TestKeysArePerWorkspaceAndObject(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Keys", allScopes...)
	other := newClient(h, "Fields Keys Other", allScopes...)
	body := `{"object":"lead","key":"budget","label":"Budget","type":"number"}`
	id, _ := create(t, h, c.token, body)
	status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, body)
	wantProblem(t, "same key", status, b, http.StatusConflict, "key_in_use", "key")
	create(t, h, c.token, `{"object":"contact","key":"budget","label":"Budget","type":"text"}`)
	create(t, h, other.token, body)

	if status, _, b := h.Do(http.MethodDelete, path+"/"+id, c.token, "", ""); status != http.StatusNoContent {
		t.Fatalf("delete: status %d: %s", status, b)
	}
	status, _, b = h.Do(http.MethodPost, path, c.token, jsonCT, body)
	wantProblem(t, "key of a deleted field not yet erased", status, b, http.StatusConflict, "key_in_use", "key")
}

// TestAtMost100FieldsPerObject: the 101st live definition of an object is
// 422 limit_exceeded; the other object, and a deleted field's place, are
// not counted.
func TestAtMost100FieldsPerObject(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Limit", allScopes...)
	ws := uid(t, opaqueid.Workspace, c.ws)
	exec(t, h, `INSERT INTO custom_fields (workspace_id, id, object, key, label, type)
		SELECT $1, gen_random_uuid(), 'contact', 'k' || i, 'K', 'text' FROM generate_series(1, 99) i`, ws)
	last, _ := create(t, h, c.token, `{"object":"contact","key":"k100","label":"K","type":"text"}`)
	status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, `{"object":"contact","key":"k101","label":"K","type":"text"}`)
	wantProblem(t, "101st", status, b, http.StatusUnprocessableEntity, "limit_exceeded", "")
	create(t, h, c.token, `{"object":"lead","key":"k101","label":"K","type":"text"}`)
	if status, _, b := h.Do(http.MethodDelete, path+"/"+last, c.token, "", ""); status != http.StatusNoContent {
		t.Fatalf("delete: status %d: %s", status, b)
	}
	create(t, h, c.token, `{"object":"contact","key":"k101","label":"K","type":"text"}`)
}

// TestKeyAndTypeNeverChange: a PATCH naming key, type or object is 400
// read_only (as every read-only member), and changes nothing; options on
// a field that has none are 422.
func TestKeyAndTypeNeverChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Readonly", allScopes...)
	id, _ := create(t, h, c.token, `{"object":"lead","key":"budget","label":"Budget","type":"number"}`)
	for _, member := range []string{`"key":"money"`, `"type":"text"`, `"object":"contact"`, `"id":"fld_x"`} {
		status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", `{"label":"New",`+member+`}`)
		p := wantProblem(t, member, status, b, http.StatusBadRequest, "malformed_request", "")
		if p != nil && !strings.Contains(string(b), `"code":"read_only"`) {
			t.Errorf("%s: no read_only violation: %s", member, b)
		}
	}
	status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", `{"options":[{"value":"x","label":"X"}]}`)
	wantProblem(t, "options on a number field", status, b, http.StatusUnprocessableEntity, "validation_failed", "options")
	status, _, b = h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", `{"label":"`+servertest.Long(101)+`"}`)
	wantProblem(t, "long label", status, b, http.StatusUnprocessableEntity, "validation_failed", "label")
	_, _, b = h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	if f := servertest.Decode(t, b); f["label"] != "Budget" || f["key"] != "budget" || f["type"] != "number" {
		t.Errorf("after refused patches: %s", b)
	}
}

// TestRemovingAnOptionInUse: a PATCH whose options drop a value some
// record of the workspace holds is 409 option_in_use with recordCount (a
// select's value and a multiselect's array alike); relabelling, adding,
// and dropping an unused value are fine.
func TestRemovingAnOptionInUse(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Options", allScopes...)
	other := newClient(h, "Fields Options Other", allScopes...)
	ws := uid(t, opaqueid.Workspace, c.ws)
	sel, _ := create(t, h, c.token, `{"object":"contact","key":"tier","label":"Tier","type":"select",
		"options":[{"value":"gold","label":"Gold"},{"value":"silver","label":"Silver"},{"value":"bronze","label":"Bronze"}]}`)
	multi, _ := create(t, h, c.token, `{"object":"contact","key":"topics","label":"Topics","type":"multiselect",
		"options":[{"value":"crm","label":"CRM"},{"value":"erp","label":"ERP"}]}`)
	for i, v := range []string{`{"tier":"gold","topics":["crm","erp"]}`, `{"tier":"gold"}`, `{"tier":"silver","topics":["erp"]}`} {
		con := newContact(t, h, c.token, fmt.Sprintf("p%d@example.com", i))
		exec(t, h, `UPDATE contacts SET custom_fields = $3 WHERE workspace_id = $1 AND id = $2`, ws, con, v)
	}
	// Another workspace's records never count.
	otherWS := uid(t, opaqueid.Workspace, other.ws)
	con := newContact(t, h, other.token, "x@example.com")
	exec(t, h, `UPDATE contacts SET custom_fields = '{"tier":"bronze"}' WHERE workspace_id = $1 AND id = $2`, otherWS, con)

	status, _, b := h.Do(http.MethodPatch, path+"/"+sel, c.token, "application/merge-patch+json", `{"options":[{"value":"silver","label":"Silver"}]}`)
	p := wantProblem(t, "drop gold and bronze", status, b, http.StatusConflict, "option_in_use", "")
	if p != nil && p["recordCount"] != float64(2) {
		t.Errorf("recordCount = %v, want 2: %s", p["recordCount"], b)
	}
	status, _, b = h.Do(http.MethodPatch, path+"/"+multi, c.token, "application/merge-patch+json", `{"options":[{"value":"crm","label":"CRM"}]}`)
	p = wantProblem(t, "drop erp", status, b, http.StatusConflict, "option_in_use", "")
	if p != nil && p["recordCount"] != float64(2) {
		t.Errorf("recordCount = %v, want 2: %s", p["recordCount"], b)
	}
	status, _, b = h.Do(http.MethodPatch, path+"/"+sel, c.token, "application/merge-patch+json",
		`{"options":[{"value":"silver","label":"Argent"},{"value":"gold","label":"Or"},{"value":"platinum","label":"Platinum"}]}`)
	if status != http.StatusOK || !strings.Contains(string(b), `{"value":"silver","label":"Argent"},{"value":"gold","label":"Or"},{"value":"platinum","label":"Platinum"}`) {
		t.Errorf("relabel, add, drop the unused bronze: status %d: %s", status, b)
	}
	status, _, b = h.Do(http.MethodPatch, path+"/"+sel, c.token, "application/merge-patch+json", `{"options":[]}`)
	wantProblem(t, "no options", status, b, http.StatusUnprocessableEntity, "validation_failed", "options")
}

// TestReadScopes: reads need apps:read or the object's read or write
// scope, and show only the objects the token may see; a token with none
// of them is 403 insufficient_scope; writes need fields:write.
func TestReadScopes(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	admin := newClient(h, "Fields Scopes", allScopes...)
	leadField, _ := create(t, h, admin.token, `{"object":"lead","key":"budget","label":"Budget","type":"number"}`)
	contactField, _ := create(t, h, admin.token, `{"object":"contact","key":"birthday","label":"Birthday","type":"date"}`)
	keys := func(token, query string) (int, string) {
		status, _, b := h.Do(http.MethodGet, path+query, token, "", "")
		if status != http.StatusOK {
			return status, string(b)
		}
		var list struct{ CustomFields []struct{ Key string } }
		servertest.MustUnmarshal(t, b, &list)
		var out []string
		for _, f := range list.CustomFields {
			out = append(out, f.Key)
		}
		return status, strings.Join(out, ",")
	}
	for _, tc := range []struct {
		scopes []string
		want   string
	}{
		{[]string{"apps:read"}, "budget,birthday"},
		{[]string{"contacts:read"}, "birthday"},
		{[]string{"contacts:write"}, "birthday"},
		{[]string{"leads:read"}, "budget"},
		{[]string{"leads:write", "webhooks:read"}, "budget"},
		{[]string{"contacts:read", "leads:read"}, "budget,birthday"},
	} {
		c := addClient(h, admin.ws, admin.member, tc.scopes...)
		if status, got := keys(c.token, ""); status != http.StatusOK || got != tc.want {
			t.Errorf("%v: list %d %s, want %s", tc.scopes, status, got, tc.want)
		}
	}
	contactsOnly := addClient(h, admin.ws, admin.member, "contacts:read")
	status, _, b := h.Do(http.MethodGet, path+"?object=lead", contactsOnly.token, "", "")
	wantProblem(t, "lead fields with contacts:read", status, b, http.StatusForbidden, "insufficient_scope", "")
	status, _, b = h.Do(http.MethodGet, path+"/"+leadField, contactsOnly.token, "", "")
	wantProblem(t, "a lead field with contacts:read", status, b, http.StatusForbidden, "insufficient_scope", "")
	if status, _, b := h.Do(http.MethodGet, path+"/"+contactField, contactsOnly.token, "", ""); status != http.StatusOK {
		t.Errorf("a contact field with contacts:read: %d %s", status, b)
	}

	none := addClient(h, admin.ws, admin.member, "webhooks:read")
	status, hdr, b := h.Do(http.MethodGet, path, none.token, "", "")
	wantProblem(t, "list with webhooks:read", status, b, http.StatusForbidden, "insufficient_scope", "")
	if !strings.Contains(hdr.Get("WWW-Authenticate"), `scope="apps:read contacts:read contacts:write leads:read leads:write"`) {
		t.Errorf("challenge = %q", hdr.Get("WWW-Authenticate"))
	}
	status, _, b = h.Do(http.MethodGet, path+"/"+contactField, none.token, "", "")
	wantProblem(t, "get with webhooks:read", status, b, http.StatusForbidden, "insufficient_scope", "")

	reader := addClient(h, admin.ws, admin.member, "apps:read", "contacts:write", "leads:write")
	status, _, b = h.Do(http.MethodPost, path, reader.token, jsonCT, `{"object":"lead","key":"x","label":"X","type":"text"}`)
	wantProblem(t, "create without fields:write", status, b, http.StatusForbidden, "insufficient_scope", "")
	status, _, b = h.Do(http.MethodPatch, path+"/"+leadField, reader.token, "application/merge-patch+json", `{"label":"X"}`)
	wantProblem(t, "patch without fields:write", status, b, http.StatusForbidden, "insufficient_scope", "")
	status, _, b = h.Do(http.MethodDelete, path+"/"+leadField, reader.token, "", "")
	wantProblem(t, "delete without fields:write", status, b, http.StatusForbidden, "insufficient_scope", "")
	// fields:write alone writes, and reads nothing.
	writer := addClient(h, admin.ws, admin.member, "fields:write")
	create(t, h, writer.token, `{"object":"lead","key":"x","label":"X","type":"text"}`)
	status, _, b = h.Do(http.MethodGet, path, writer.token, "", "")
	wantProblem(t, "list with fields:write alone", status, b, http.StatusForbidden, "insufficient_scope", "")
}

// TestAnotherWorkspacesFieldIsNotFound: every route answers another
// workspace's field, and a malformed id, as 404.
func TestAnotherWorkspacesFieldIsNotFound(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Tenant", allScopes...)
	other := newClient(h, "Fields Tenant Other", allScopes...)
	id, _ := create(t, h, c.token, `{"object":"lead","key":"budget","label":"Budget","type":"number"}`)
	for _, p := range []string{path + "/" + id, path + "/fld_nonsense", path + "/" + opaqueid.Format(opaqueid.Field, opaqueid.New())} {
		status, _, b := h.Do(http.MethodGet, p, other.token, "", "")
		wantProblem(t, "get "+p, status, b, http.StatusNotFound, "not_found", "")
		status, _, b = h.Do(http.MethodPatch, p, other.token, "application/merge-patch+json", `{"label":"Stolen"}`)
		wantProblem(t, "patch "+p, status, b, http.StatusNotFound, "not_found", "")
		status, _, b = h.Do(http.MethodDelete, p, other.token, "", "")
		wantProblem(t, "delete "+p, status, b, http.StatusNotFound, "not_found", "")
	}
	status, _, b := h.Do(http.MethodGet, path, other.token, "", "")
	if status != http.StatusOK || string(b) != `{"customFields":[]}` {
		t.Errorf("other's list: %d %s", status, b)
	}
	_, _, b = h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	if servertest.Decode(t, b)["label"] != "Budget" {
		t.Errorf("after the other's attempts: %s", b)
	}
}

// TestChangesAreAudited: create, update and delete are audited with the
// client, its token's hash prefix, the source address and the field; an
// update that changes nothing, and reads, are not.
func TestChangesAreAudited(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Fields Audit", allScopes...)
	id, _ := create(t, h, c.token, `{"object":"lead","key":"budget","label":"Budget","type":"number"}`)
	h.Do(http.MethodGet, path+"/"+id, c.token, "", "")
	h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", `{"label":"Budget"}`)
	if status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, "application/merge-patch+json", `{"label":"Money"}`); status != http.StatusOK {
		t.Fatalf("patch: %d %s", status, b)
	}
	if status, _, b := h.Do(http.MethodDelete, path+"/"+id, c.token, "", ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, b)
	}
	rows, err := dbtest.Raw(t, h.DB).Query(context.Background(),
		`SELECT action, target_id, length(token_hash_prefix), host(source_address) FROM audit_events
		 WHERE workspace_id = $1 AND client_id = $2 AND actor_member_id IS NULL ORDER BY id`,
		uid(t, opaqueid.Workspace, c.ws), uid(t, opaqueid.Client, c.id))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var action, target, source string
		var n int
		if err := rows.Scan(&action, &target, &n, &source); err != nil {
			t.Fatal(err)
		}
		if target != id || n != 16 || source != "127.0.0.1" {
			t.Errorf("%s: target %s, token prefix length %d, source %s", action, target, n, source)
		}
		got = append(got, action)
	}
	if want := "custom_field.create custom_field.update custom_field.delete"; strings.Join(got, " ") != want {
		t.Errorf("audit = %v, want %s", got, want)
	}
}
