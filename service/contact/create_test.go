package contact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestContactsREST creates and lists contacts over REST.
func TestContactsREST(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Contacts Co")
	status, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json; charset=utf-8",
		`{"email":"  Ada@Example.COM ","phone":"+14155550123","firstName":"Ada","lastName":"Lovelace","companyName":"Engines","jobTitle":"Analyst","externalId":"crm-1"}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, b)
	}
	if hdr.Get("Request-Id") == "" || hdr.Get("Idempotent-Replayed") != "" {
		t.Errorf("headers = %v", hdr)
	}
	c := servertest.Decode(t, b)
	id, _ := c["id"].(string)
	if !strings.HasPrefix(id, "con_") || c["email"] != "ada@example.com" || c["phone"] != "+14155550123" ||
		c["firstName"] != "Ada" || c["externalId"] != "crm-1" || c["createdAt"] != c["updatedAt"] {
		t.Fatalf("contact = %s", b)
	}
	status, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"phone":"+442071838750"}`)
	if status != 201 {
		t.Fatalf("phone-only: %d %s", status, b)
	}
	if _, ok := servertest.Decode(t, b)["email"]; ok {
		t.Errorf("unset email is present: %s", b)
	}

	// Duplicates by email and by externalId, with existingId.
	for _, body := range []string{`{"email":"ADA@example.com"}`, `{"email":"other@example.com","externalId":"crm-1"}`} {
		status, hdr, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		p := servertest.Decode(t, b)
		if status != 409 || hdr.Get("Content-Type") != "application/problem+json" || p["code"] != "duplicate" || p["existingId"] != id {
			t.Fatalf("duplicate %s: %d %s", body, status, b)
		}
	}

	status, _, b = h.Do(http.MethodGet, "/api/v1/contacts?limit=1", tn.Token, "", "")
	page := servertest.Decode(t, b)
	items, _ := page["contacts"].([]any)
	pg, _ := page["pagination"].(map[string]any)
	if status != 200 || len(items) != 1 || pg["nextCursor"] == nil {
		t.Fatalf("list: %d %s", status, b)
	}
	status, _, b = h.Do(http.MethodGet, "/api/v1/contacts?limit=1&cursor="+pg["nextCursor"].(string), tn.Token, "", "")
	page = servertest.Decode(t, b)
	items, _ = page["contacts"].([]any)
	pg, _ = page["pagination"].(map[string]any)
	if status != 200 || len(items) != 1 || items[0].(map[string]any)["id"] != id {
		t.Fatalf("second page: %d %s", status, b)
	}
	if _, more := pg["nextCursor"]; more {
		t.Fatalf("last page has nextCursor: %s", b)
	}
	for q, want := range map[string]int{"email=ada%40EXAMPLE.com": 1, "externalId=crm-1": 1, "externalId=nope": 0, "sort=createdAt&limit=100": 2} {
		status, _, b = h.Do(http.MethodGet, "/api/v1/contacts?"+q, tn.Token, "", "")
		items, _ = servertest.Decode(t, b)["contacts"].([]any)
		if status != 200 || len(items) != want {
			t.Errorf("filter %s: %d, %d items, want %d: %s", q, status, len(items), want, b)
		}
	}
}

// TestContactValidation checks every field rule; all violations are
// reported at once as 422 problem+json.
func TestContactValidation(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Validation Co")
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		body, field, code string
	}{
		{`{}`, "email", "required"},
		{`{"firstName":"Only"}`, "email", "required"},
		{`{"email":"not-an-email"}`, "email", "invalid_format"},
		{`{"email":"a@b"}`, "email", "invalid_format"},
		{`{"email":"` + long(250) + `@x.co"}`, "email", "too_long"},
		{`{"phone":"4155550123"}`, "phone", "invalid_format"},
		{`{"phone":"+1234567890123456"}`, "phone", "too_long"},
		{`{"phone":"+1 415 555"}`, "phone", "invalid_format"},
		{`{"email":"a@b.co","firstName":"` + long(101) + `"}`, "firstName", "too_long"},
		{`{"email":"a@b.co","lastName":"` + long(101) + `"}`, "lastName", "too_long"},
		{`{"email":"a@b.co","companyName":"` + long(256) + `"}`, "companyName", "too_long"},
		{`{"email":"a@b.co","jobTitle":"` + long(129) + `"}`, "jobTitle", "too_long"},
		{`{"email":"a@b.co","externalId":"` + long(256) + `"}`, "externalId", "too_long"},
	}
	for _, tc := range cases {
		status, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", tc.body)
		if status != 422 || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", tc.body[:min(40, len(tc.body))], status, b)
			continue
		}
		p := servertest.Decode(t, b)
		errs, _ := p["errors"].([]any)
		found := false
		for _, e := range errs {
			fe := e.(map[string]any)
			if fe["field"] == tc.field && fe["code"] == tc.code && fe["message"] != "" {
				found = true
			}
		}
		if p["code"] != "validation_failed" || !found {
			t.Errorf("%s: want %s/%s in %s", tc.body[:min(40, len(tc.body))], tc.field, tc.code, b)
		}
	}
	// Several violations at once.
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"x","phone":"y"}`)
	if errs, _ := servertest.Decode(t, b)["errors"].([]any); len(errs) != 2 {
		t.Errorf("want two violations: %s", b)
	}
	// Malformed input is 400, not 422.
	for name, tc := range map[string][2]string{
		"unknown field":  {"application/json", `{"email":"a@b.co","nickname":"x"}`},
		"bad json":       {"application/json", `{"email":`},
		"wrong type":     {"application/json", `{"email":42}`},
		"duplicate key":  {"application/json", `{"email":"a@b.co","email":"c@d.co"}`},
		"not json":       {"text/plain", `email=a@b.co`},
		"body over 1MiB": {"application/json", `{"email":"a@b.co","firstName":"` + long(1<<20) + `"}`},
		"query on POST":  {"application/json", `{"email":"q@b.co"}`},
	} {
		path := "/api/v1/contacts"
		if name == "query on POST" {
			path += "?email=q@b.co"
		}
		status, hdr, b := h.Do(http.MethodPost, path, tn.Token, tc[0], tc[1])
		want := map[string]int{"not json": 415, "body over 1MiB": 413}[name]
		if want == 0 {
			want = 400
		}
		if status != want || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", name, status, b)
		}
	}
	// List parameters: 400, never a clamp.
	for _, q := range []string{"limit=0", "limit=101", "limit=abc", "limit=-1", "sort=name", "createdSince=yesterday",
		"updatedSince=2026-13-01T00:00:00Z", "cursor=abc", "unknown=1", "limit=1&limit=2", "email=not-an-email"} {
		status, hdr, b := h.Do(http.MethodGet, "/api/v1/contacts?"+q, tn.Token, "", "")
		if status != 400 || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
}

// TestBatchContacts: the contact batch over REST and Connect, with
// duplicates against existing contacts and earlier items.
func TestBatchContacts(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Batch Contacts")
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"old@x.co","externalId":"old"}`)
	old := servertest.ID(t, b)
	items := []string{
		`{"email":"One@x.co","firstName":"One"}`,     // 0
		`{"email":"old@x.co"}`,                       // 1: 409 old
		`{"email":"two@x.co","externalId":"old"}`,    // 2: 409 old (externalId)
		`{"email":"one@x.co"}`,                       // 3: 409 item 0
		`{"phone":"12"}`,                             // 4: 422
		`{"phone":"+15550001111","externalId":"p1"}`, // 5
	}
	status, hdr, body := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+strings.Join(items, ",")+`]}`, "Idempotency-Key", "c-1")
	var res struct {
		Results []struct {
			Contact map[string]any `json:"contact"`
			Error   map[string]any `json:"error"`
		} `json:"results"`
	}
	servertest.MustUnmarshal(t, body, &res)
	if status != 200 || len(res.Results) != len(items) {
		t.Fatalf("batch: %d %v %s", status, hdr, body)
	}
	first := res.Results[0].Contact
	if first["email"] != "one@x.co" || res.Results[5].Contact["externalId"] != "p1" {
		t.Errorf("created: %s", body)
	}
	for i, want := range map[int]any{1: old, 2: old, 3: first["id"]} {
		if e := res.Results[i].Error; e["status"] != float64(409) || e["existingId"] != want {
			t.Errorf("result %d: %v, want 409 naming %v", i, e, want)
		}
	}
	if e := res.Results[4].Error; e["status"] != float64(422) || !servertest.HasViolation(e, "phone") {
		t.Errorf("result 4: %v", e)
	}
	for _, i := range []int{1, 2, 3, 4} {
		s, _, single := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", items[i])
		if float64(s) != res.Results[i].Error["status"] || !reflect.DeepEqual(servertest.WithoutRequestID(t, servertest.Decode(t, single)), servertest.WithoutRequestID(t, res.Results[i].Error)) {
			t.Errorf("item %d: single create answers %d %s, batch result %v", i, s, single, res.Results[i].Error)
		}
	}
	s, hdr, replay := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+strings.Join(items, ",")+`]}`, "Idempotency-Key", "c-1")
	if s != 200 || hdr.Get("Idempotent-Replayed") != "true" || !servertest.SameJSON(t, replay, body) {
		t.Errorf("replay: %d %v %s", s, hdr, replay)
	}

	// Over Connect, with the same shape.
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	out, err := cc.BatchCreateContacts(context.Background(), connect.NewRequest(&contactv1.BatchCreateContactsRequest{Contacts: []*contactv1.Contact{
		{Email: servertest.Ptr("rpc@x.co")}, {Email: servertest.Ptr("old@x.co")},
	}}))
	if err != nil || out.Msg.GetResults()[0].GetContact().GetEmail() != "rpc@x.co" || out.Msg.GetResults()[1].GetError().GetExistingId() != old ||
		out.Msg.GetResults()[1].GetError().GetStatus() != 409 {
		t.Fatalf("BatchCreateContacts: %v %v", out, err)
	}
	_, err = cc.BatchCreateContacts(context.Background(), connect.NewRequest(&contactv1.BatchCreateContactsRequest{}))
	servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")
	s, _, b = h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[]}`)
	if s != 400 {
		t.Errorf("empty contact batch: %d %s", s, b)
	}
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
	holder := servertest.ID(t, b)
	status, _, body := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json",
		`{"contacts":[{"email":"free@x.co","externalId":"crm-7"},{"email":"free@x.co","firstName":"Later"}]}`)
	var res servertest.BatchResults
	servertest.MustUnmarshal(t, body, &res)
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

// TestConflictWhoseHolderLetsGoIsNeverA500: a create or patch that loses a
// unique value (an externalId) to a record that a concurrent patch then
// moves off it has no holder left to name. It is tried again, and answers
// what it then is (created, a 409 naming the new holder, or for a patch
// that keeps losing 409 failed_precondition), never a 500. Two patchers
// flip a contact's and a lead's externalId between two values while
// creators take the value and give it up again; a race, so each side runs
// many times.
func TestConflictWhoseHolderLetsGoIsNeverA500(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Moving Holders")
	base := h.Public.URL + "/api/v1/"
	_, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"holder@x.co","externalId":"crm-e"}`)
	holder := servertest.ID(t, b)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+holder+`","externalId":"form-e"}`)
	lead := servertest.ID(t, b)

	var mu sync.Mutex
	answers := map[string]int{}
	var errs []string
	record := func(what string, status int, body []byte, err error) {
		mu.Lock()
		defer mu.Unlock()
		var p struct{ Code, ExistingID string }
		_ = json.Unmarshal(body, &p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", what, err))
		case status == 200 || status == 201:
		case status == 409 && (p.Code == "duplicate" && p.ExistingID != "" || p.Code == "failed_precondition"),
			status == 503 && p.Code == "unavailable":
		default:
			errs = append(errs, fmt.Sprintf("%s: %d %s", what, status, body))
		}
		answers[fmt.Sprintf("%s %d %s", what, status, p.Code)]++
	}
	stop := make(chan struct{})
	var patchers, creators sync.WaitGroup
	for _, r := range []struct{ path, prefix string }{{"contacts/" + holder, "crm-"}, {"leads/" + lead, "form-"}} {
		for range 2 {
			patchers.Add(1)
			go func() {
				defer patchers.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					s, b, err := servertest.Call(http.MethodPatch, base+r.path, tn.Token, fmt.Sprintf(`{"externalId":"%s%c"}`, r.prefix, "ef"[i%2]))
					record("flip "+r.prefix, s, b, err)
				}
			}()
		}
	}
	for g := range 2 {
		creators.Add(1)
		go func() {
			defer creators.Done()
			for i := range 120 {
				path, body := "contacts", fmt.Sprintf(`{"email":"c%d-%d@x.co","externalId":"crm-e"}`, g, i)
				if i%2 == 1 {
					path, body = "leads", fmt.Sprintf(`{"contactId":%q,"externalId":"form-e"}`, holder)
				}
				s, b, err := servertest.Call(http.MethodPost, base+path, tn.Token, body)
				record("create "+path, s, b, err)
				if s == 201 {
					// Give the value up again, for the next round.
					var made struct{ ID string }
					_ = json.Unmarshal(b, &made)
					s, b, err := servertest.Call(http.MethodPatch, base+path+"/"+made.ID, tn.Token, fmt.Sprintf(`{"externalId":"own-%d-%d"}`, g, i))
					record("release "+path, s, b, err)
				}
			}
		}()
	}
	creators.Wait()
	close(stop)
	patchers.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d answers were not 2xx, 409 or 503 (of %v): %v", len(errs), answers, errs)
	}
	t.Logf("answers: %v", answers)
}

// TestDuplicateNamesTheEmailHolderFirst: a contact whose email is taken
// by one contact and externalId by another is a 409 naming the email's
// holder (as ContactConflict promises), on a single create, a batch item
// and a PATCH alike, whether or not the externalId's holder has an email.
// A holder without an email sorted first (NULL = x is NULL, and NULLs lead
// a descending order), so the answer depended on the other contact's data.
func TestDuplicateNamesTheEmailHolderFirst(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Holder Co")
	create := func(body string) string {
		t.Helper()
		status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		if status != 201 {
			t.Fatalf("create %s: %d %s", body, status, b)
		}
		return servertest.ID(t, b)
	}
	emailHolder := create(`{"email":"held@x.co"}`)
	create(`{"phone":"+14155550100","externalId":"ext-phone"}`) // a holder without an email
	create(`{"email":"other@x.co","externalId":"ext-mail"}`)    // one with another email
	patched := create(`{"email":"free@x.co"}`)
	for _, ext := range []string{"ext-phone", "ext-mail"} {
		body := `{"email":" HELD@x.co ","externalId":"` + ext + `"}`
		status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body)
		if p := servertest.Decode(t, b); status != 409 || p["existingId"] != emailHolder {
			t.Errorf("create %s: %d %s, want 409 naming %s", body, status, b, emailHolder)
		}
		status, _, b = h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+body+`]}`)
		var res servertest.BatchResults
		servertest.MustUnmarshal(t, b, &res)
		if status != 200 || len(res.Results) != 1 || res.Results[0].Error["existingId"] != emailHolder {
			t.Errorf("batch %s: %d %s, want its item's 409 naming %s", body, status, b, emailHolder)
		}
		status, _, b = h.Do(http.MethodPatch, "/api/v1/contacts/"+patched, tn.Token, "application/merge-patch+json", body)
		if p := servertest.Decode(t, b); status != 409 || p["existingId"] != emailHolder {
			t.Errorf("patch %s: %d %s, want 409 naming %s", body, status, b, emailHolder)
		}
	}
}
