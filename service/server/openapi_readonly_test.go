package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestOpenAPIWebhookEndpointReadOnlyMembers: TestOpenAPIReadOnlyMembers
// for webhook endpoints (issue 24, item 4: read-only members marked). The
// members the document marks readOnly in the answer are exactly those a
// merge patch may not name (400), the patch schema has none of them, and
// the create ignores them. Before, no member of WebhookEndpoint was
// readOnly and its patch schema offered id, secret, disabledReason,
// createdAt and updatedAt, which the server refuses.
func TestOpenAPIWebhookEndpointReadOnlyMembers(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := loadContract(t, h)
	ws, m := h.Workspace("Hook Read-only Co")
	id, sec := h.Client(ws, m, "contacts:read", "webhooks:read", "webhooks:write")
	tok := h.Token(id, sec, "")
	const hooks, one = "/api/v1/webhook-endpoints", "/api/v1/webhook-endpoints/{id}"

	create := `{"url":"https://example.com/hook","eventTypes":["contact.created"],"description":"ro",` +
		`"id":"whe_mine","secret":"whsec_mine","disabledReason":"admin","createdAt":"2020-01-01T00:00:00Z","updatedAt":"2020-01-01T00:00:00Z"}`
	status, hdr, b := h.Do(http.MethodPost, hooks, tok, "application/json", create)
	c.check(http.MethodPost, hooks, status, hdr, b)
	if status != http.StatusCreated {
		t.Fatalf("create with read-only members: %d %s; want them ignored", status, b)
	}
	var created map[string]json.RawMessage
	mustUnmarshal(t, b, &created)
	hook := servertest.ID(t, b)
	if hook == "whe_mine" || string(created["secret"]) == `"whsec_mine"` || string(created["createdAt"]) == `"2020-01-01T00:00:00Z"` || created["disabledReason"] != nil {
		t.Errorf("the create took a read-only member: %s", b)
	}
	target := hooks + "/" + hook

	answer := c.at(c.deref(c.deref("/paths/"+escape(one)+"/get/responses/200") + "/content/application~1json/schema"))
	props, _ := answer["properties"].(map[string]any)
	if len(props) == 0 {
		t.Fatalf("GET %s: no answer schema", one)
	}
	// A value of each member, as an answer carries it (the secret and the
	// disabled reason are not in this GET's answer).
	values := map[string]string{"secret": `"whsec_x"`, "disabledReason": `"manual"`}
	for k, v := range created {
		values[k] = string(v)
	}
	var readOnly []string
	for name, p := range props {
		value, ok := values[name]
		if !ok {
			t.Errorf("no value of %s to patch with", name)
			continue
		}
		patch := `{"` + name + `":` + value + `}`
		status, hdr, body := h.Do(http.MethodPatch, target, tok, "application/merge-patch+json", patch)
		c.check(http.MethodPatch, one, status, hdr, body)
		if p.(map[string]any)["readOnly"] == true {
			readOnly = append(readOnly, name)
			p := servertest.Decode(t, body)
			errs, _ := p["errors"].([]any)
			if status != http.StatusBadRequest || len(errs) != 1 || errs[0].(map[string]any)["field"] != name {
				t.Errorf("%s is readOnly, but PATCH %s %s answered %d %s; want 400 naming it", name, target, patch, status, body)
			}
			c.rejectsRequest(http.MethodPatch, one, "application/merge-patch+json", patch)
		} else if status != http.StatusOK {
			t.Errorf("%s is not readOnly, but PATCH %s %s answered %d %s", name, target, patch, status, body)
		}
	}
	sort.Strings(readOnly)
	if want := []string{"createdAt", "disabledReason", "id", "secret", "updatedAt"}; !slices.Equal(readOnly, want) {
		t.Errorf("WebhookEndpoint's readOnly members: %v, want %v", readOnly, want)
	}
	// The request schema marks them too.
	input := c.at(c.deref("/paths/" + escape(hooks) + "/post/requestBody/content/application~1json/schema"))
	for _, name := range readOnly {
		if p, _ := input["properties"].(map[string]any)[name].(map[string]any); p["readOnly"] != true {
			t.Errorf("POST %s: %s is not readOnly in the request schema", hooks, name)
		}
	}
}
