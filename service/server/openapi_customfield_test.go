package server_test

import (
	"net/http"
	"testing"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/service/servertest"
)

// TestOpenAPICustomFieldAnswersConform: the answers of the custom field
// routes, successes and their own refusals (key_in_use, option_in_use
// with recordCount, limit_exceeded, read_only, insufficient_scope), are
// what the document says; the patch schema offers none of the members a
// patch refuses.
func TestOpenAPICustomFieldAnswersConform(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)
	ws, m := h.Workspace("Fields Contract Co")
	id, sec := h.Client(ws, m, "apps:read", "contacts:write", "fields:write")
	tok := h.Token(id, sec, "")
	const list, one = "/api/v1/custom-fields", "/api/v1/custom-fields/{id}"

	body := `{"object":"contact","key":"tier","label":"Tier","type":"select","options":[{"value":"gold","label":"Gold"},{"value":"silver","label":"Silver"}]}`
	status, hdr, b := h.Do(http.MethodPost, list, tok, "application/json", body)
	c.check(http.MethodPost, list, status, hdr, b)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	field := servertest.ID(t, b)
	status, hdr, b = h.Do(http.MethodPost, list, tok, "application/json", body)
	c.check(http.MethodPost, list, status, hdr, b)
	status, hdr, b = h.Do(http.MethodPost, list, tok, "application/json", `{"object":"contact","key":"Bad","label":"","type":"x"}`)
	c.check(http.MethodPost, list, status, hdr, b)
	status, hdr, b = h.Do(http.MethodGet, list, tok, "", "")
	c.check(http.MethodGet, list, status, hdr, b)
	status, hdr, b = h.Do(http.MethodGet, list+"/"+field, tok, "", "")
	c.check(http.MethodGet, one, status, hdr, b)

	status, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tok, "application/json", `{"email":"tier@example.com"}`)
	if status != http.StatusCreated {
		t.Fatalf("create contact: %d %s", status, b)
	}
	if _, err := dbtest.Raw(t, h.DB).Exec(t.Context(), `UPDATE contacts SET custom_fields = '{"tier":"silver"}'`); err != nil {
		t.Fatal(err)
	}
	status, hdr, b = h.Do(http.MethodPatch, list+"/"+field, tok, "application/merge-patch+json", `{"options":[{"value":"gold","label":"Gold"}]}`)
	c.check(http.MethodPatch, one, status, hdr, b)
	if status != http.StatusConflict {
		t.Fatalf("option in use: %d %s", status, b)
	}
	status, hdr, b = h.Do(http.MethodPatch, list+"/"+field, tok, "application/merge-patch+json", `{"key":"rank"}`)
	c.check(http.MethodPatch, one, status, hdr, b)
	status, hdr, b = h.Do(http.MethodPatch, list+"/"+field, tok, "application/merge-patch+json", `{"label":"Level","required":true}`)
	c.check(http.MethodPatch, one, status, hdr, b)
	if status != http.StatusOK {
		t.Fatalf("patch: %d %s", status, b)
	}

	noneID, noneSec := h.Client(ws, m, "webhooks:read")
	none := h.Token(noneID, noneSec, "")
	status, hdr, b = h.Do(http.MethodGet, list, none, "", "")
	c.check(http.MethodGet, list, status, hdr, b)
	status, hdr, b = h.Do(http.MethodDelete, list+"/"+field, tok, "", "")
	c.check(http.MethodDelete, one, status, hdr, b)
	status, hdr, b = h.Do(http.MethodDelete, list+"/"+field, tok, "", "")
	c.check(http.MethodDelete, one, status, hdr, b)

	patch := c.at(c.deref("/paths/" + escape(one) + "/patch/requestBody/content/application~1merge-patch+json/schema"))
	props, _ := patch["properties"].(map[string]any)
	for _, member := range []string{"id", "object", "key", "type", "createdAt", "updatedAt"} {
		if _, ok := props[member]; ok {
			t.Errorf("the patch schema offers %s, which a patch may not name", member)
		}
	}
	if len(props) != 4 {
		t.Errorf("the patch schema's members: %v", props)
	}
}
