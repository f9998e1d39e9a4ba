package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/svat/partnerapi/internal/servertest"
)

// TestRESTAnswersHaveOneSpelling: a created record is written by the same
// encoder whether it comes back from its create (a response_body route the
// transcoder re-encodes) or inside a list page, and every answer is
// compact JSON (protojson varies its spacing between builds).
func TestRESTAnswersHaveOneSpelling(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Encoding Co")
	for _, c := range []struct{ path, body, list string }{
		{"/api/v1/contacts", `{"email":"enc@example.com","firstName":"Ada","jobTitle":"Analyst"}`, "contacts"},
		{"/api/v1/leads", `{"contact":{"email":"lead@example.com"},"source":"web_form","value":{"amount":5,"currency":"EUR"}}`, "leads"},
	} {
		status, _, created := h.Do(http.MethodPost, c.path, tn.Token, "application/json", c.body)
		if status != 201 {
			t.Fatalf("POST %s: %d %s", c.path, status, created)
		}
		status, _, page := h.Do(http.MethodGet, c.path+"?limit=1", tn.Token, "", "")
		if status != 200 {
			t.Fatalf("GET %s: %d %s", c.path, status, page)
		}
		var list map[string]json.RawMessage
		var items []json.RawMessage
		if err := json.Unmarshal(page, &list); err != nil || json.Unmarshal(list[c.list], &items) != nil || len(items) != 1 {
			t.Fatalf("GET %s: %s (%v)", c.path, page, err)
		}
		if !bytes.Equal(created, items[0]) {
			t.Errorf("%s: the create answered\n%s\nbut the list spells the same record\n%s", c.path, created, items[0])
		}
		var rec struct{ ID string }
		if err := json.Unmarshal(created, &rec); err != nil {
			t.Fatal(err)
		}
		status, _, one := h.Do(http.MethodGet, c.path+"/"+rec.ID, tn.Token, "", "")
		if status != 200 || !bytes.Equal(one, created) {
			t.Errorf("GET %s/{id}: %d\n%s\nwant the create's bytes\n%s", c.path, status, one, created)
		}
		for _, b := range [][]byte{created, page, one} {
			var compact bytes.Buffer
			if err := json.Compact(&compact, b); err != nil || !bytes.Equal(compact.Bytes(), b) {
				t.Errorf("%s: answer is not compact JSON: %s", c.path, b)
			}
		}
	}
}
