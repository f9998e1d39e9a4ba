package server_test

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/svat/partnerapi/internal/servertest"
)

// batchResults is the answer of a batch create.
type batchResults struct {
	Results []struct {
		Contact map[string]any `json:"contact"`
		Lead    map[string]any `json:"lead"`
		Error   map[string]any `json:"error"`
	} `json:"results"`
}

// TestBatchContactsNameTheHolderOfTheirTime: an item refused because an
// existing contact holds its externalId is a 409 naming that contact, as
// its single create would have been, even when a later item of the batch
// then takes the item's (free) email. The later item is created.
func TestBatchContactsNameTheHolderOfTheirTime(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Holder")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"holder@x.co","externalId":"crm-7"}`)
	holder := decode(t, b)["id"].(string)
	status, _, body := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json",
		`{"contacts":[{"email":"free@x.co","externalId":"crm-7"},{"email":"free@x.co","firstName":"Later"}]}`)
	var res batchResults
	mustUnmarshal(t, body, &res)
	if status != 200 || len(res.Results) != 2 {
		t.Fatalf("batch: %d %s", status, body)
	}
	if e := res.Results[0].Error; e["status"] != float64(409) || e["existingId"] != holder {
		t.Errorf("item 0 = %v, want the 409 naming %s, the holder of crm-7 (its single create's answer)", res.Results[0], holder)
	}
	if c := res.Results[1].Contact; c["email"] != "free@x.co" || c["firstName"] != "Later" {
		t.Errorf("item 1 = %v, want the contact created", res.Results[1])
	}
}

// TestBatchLeadsSharedInlineContactOfAFailedItem: two items send the same
// new inline email, and the first fails (its externalId is taken). As one
// by one, the second creates the contact from its own fields, and its
// lead's default title is that contact's name: nothing of the failed item
// is kept.
func TestBatchLeadsSharedInlineContactOfAFailedItem(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Shared Inline")
	_, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"earlier@x.co"},"externalId":"form-1"}`)
	taken := decode(t, b)["id"].(string)
	items := []string{
		`{"contact":{"email":"new@x.co","firstName":"Ann","companyName":"Ann Co"},"externalId":"form-1"}`,
		`{"contact":{"email":"new@x.co","firstName":"Bob","lastName":"Stone"},"source":"web_form"}`,
		`{"contact":{"email":"new@x.co","firstName":"Cy"},"title":"Own title"}`,
		`{"contact":{"email":"NEW@x.co"}}`,
	}
	status, _, body := h.Do(http.MethodPost, "/api/v1/leads/batch", tn.Token, "application/json", `{"leads":[`+strings.Join(items, ",")+`]}`)
	var res batchResults
	mustUnmarshal(t, body, &res)
	if status != 200 || len(res.Results) != len(items) {
		t.Fatalf("batch: %d %s", status, body)
	}
	if e := res.Results[0].Error; e["status"] != float64(409) || e["existingId"] != taken {
		t.Fatalf("item 0 = %v, want the 409 naming %s", res.Results[0], taken)
	}
	for i, title := range map[int]string{1: "Bob Stone", 2: "Own title", 3: "Bob Stone"} {
		if l := res.Results[i].Lead; l == nil || l["title"] != title || l["contactId"] != res.Results[1].Lead["contactId"] {
			t.Errorf("item %d = %v, want a lead titled %q about item 1's contact", i, res.Results[i], title)
		}
	}
	_, _, b = h.Do(http.MethodGet, "/api/v1/contacts?email=new%40x.co", tn.Token, "", "")
	contacts := decode(t, b)["contacts"].([]any)
	if len(contacts) != 1 {
		t.Fatalf("contacts with new@x.co: %s", b)
	}
	c := contacts[0].(map[string]any)
	want := map[string]any{"firstName": "Bob", "lastName": "Stone", "companyName": nil}
	got := map[string]any{"firstName": c["firstName"], "lastName": c["lastName"], "companyName": c["companyName"]}
	if !reflect.DeepEqual(got, want) || c["id"] != res.Results[1].Lead["contactId"] {
		t.Errorf("the shared contact = %v, want item 1's fields %v (item 0 failed)", c, want)
	}
	// Each lead is stored as answered.
	for i := 1; i < len(items); i++ {
		_, _, got := h.Do(http.MethodGet, "/api/v1/leads/"+res.Results[i].Lead["id"].(string), tn.Token, "", "")
		if !reflect.DeepEqual(decode(t, got), res.Results[i].Lead) {
			t.Errorf("stored lead %d = %s, answered %v", i, got, res.Results[i].Lead)
		}
	}
}

// TestIfMatchOnSeveralLines: If-Match sent as several field lines is one
// list (RFC 9110 §5.3): the current tag on the second line matches; only
// stale tags are 412.
func TestIfMatchOnSeveralLines(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("If-Match Lines")
	_, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"lines@x.co"}`)
	path := "/api/v1/contacts/" + decode(t, b)["id"].(string)
	patch := func(body string, ifMatch ...string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPatch, h.Public.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/merge-patch+json")
		for _, v := range ifMatch {
			req.Header.Add("If-Match", v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header, out
	}
	tag := hdr.Get("ETag")
	s, hdr, b := patch(`{"firstName":"Lin"}`, `"stale"`, tag)
	if s != 200 || decode(t, b)["firstName"] != "Lin" {
		t.Fatalf("If-Match lines %q, %s: %d %s, want 200", `"stale"`, tag, s, b)
	}
	if s, _, b := patch(`{"firstName":"Lost"}`, `"stale"`, tag); s != 412 || decode(t, b)["code"] != "precondition_failed" {
		t.Errorf("If-Match lines with only stale tags: %d %s, want 412", s, b)
	}
	if s, _, b := patch(`{"firstName":"Li"}`, `"stale"`, `W/`+hdr.Get("ETag"), hdr.Get("ETag")); s != 200 {
		t.Errorf("If-Match on three lines, the last current: %d %s", s, b)
	}
}
