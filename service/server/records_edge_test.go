package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
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

// TestPatchThatChangesNothingIsNotAChange: a merge patch whose fields,
// once normalised, are what the record already holds writes nothing: the
// ETag and updatedAt stay, and a syncCursor reader does not get the record
// again (it sees a record again only if it changed again). Over REST and
// over Connect with a field mask.
func TestPatchThatChangesNothingIsNotAChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("No-op Patch")
	_, hdr, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"ada@x.co","firstName":"Ada","externalId":"crm-1"}`)
	ada, adaTag := decode(t, b), hdr.Get("ETag")
	_, hdr, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
		`{"contactId":"`+ada["id"].(string)+`","title":"Deal","status":"contacted","value":{"amount":5,"currency":"EUR"},"source":"web_form"}`)
	lead, leadTag := decode(t, b), hdr.Get("ETag")
	_, _, b = h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"marker@x.co"}`)
	marker := decode(t, b)["id"].(string)

	// syncPages walks sort=updatedAt from cursor until a page holds want
	// (changes newer than a write transaction still open anywhere in the
	// cluster are withheld for a moment), and returns the ids it got.
	syncPages := func(resource, cursor, want string) (ids []string, next string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ids = nil
			c := cursor
			for {
				q := "/api/v1/" + resource + "?sort=updatedAt&limit=1"
				if c != "" {
					q += "&cursor=" + url.QueryEscape(c)
				}
				s, _, b := h.Do(http.MethodGet, q, tn.Token, "", "")
				if s != 200 {
					t.Fatalf("GET %s: %d %s", q, s, b)
				}
				var p struct {
					Contacts   []struct{ ID string } `json:"contacts"`
					Leads      []struct{ ID string } `json:"leads"`
					Pagination struct{ NextCursor, SyncCursor string }
				}
				mustUnmarshal(t, b, &p)
				for _, x := range append(p.Contacts, p.Leads...) {
					ids = append(ids, x.ID)
				}
				if p.Pagination.NextCursor == "" {
					next = p.Pagination.SyncCursor
					break
				}
				c = p.Pagination.NextCursor
			}
			if slices.Contains(ids, want) || time.Now().After(deadline) {
				return ids, next
			}
		}
	}
	_, contactCursor := syncPages("contacts", "", marker)
	_, leadCursor := syncPages("leads", "", lead["id"].(string))

	time.Sleep(2 * time.Millisecond) // a write would move updatedAt visibly
	for _, tc := range []struct{ path, body, tag string }{
		{"/api/v1/contacts/" + ada["id"].(string), `{"email":" ADA@X.co ","firstName":"Ada","phone":null}`, adaTag},
		{"/api/v1/leads/" + lead["id"].(string), `{"status":"contacted","value":{"currency":"eur"},"title":" Deal ","campaign":null}`, leadTag},
		{"/api/v1/leads/" + lead["id"].(string), `{"contactId":"` + ada["id"].(string) + `","value":{"amount":5}}`, leadTag},
	} {
		s, hdr, b := h.Do(http.MethodPatch, tc.path, tn.Token, "application/merge-patch+json", tc.body)
		_, _, before := h.Do(http.MethodGet, tc.path, tn.Token, "", "")
		if s != 200 || hdr.Get("ETag") != tc.tag || !sameJSON(t, b, before) {
			t.Errorf("PATCH %s %s: %d ETag %s (was %s) %s", tc.path, tc.body, s, hdr.Get("ETag"), tc.tag, b)
		}
		if got := decode(t, b)["updatedAt"]; got != ada["updatedAt"] && got != lead["updatedAt"] {
			t.Errorf("PATCH %s %s moved updatedAt to %v", tc.path, tc.body, got)
		}
	}
	cc := contactv1connect.NewContactServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.Token)))
	res, err := cc.UpdateContact(context.Background(), connect.NewRequest(&contactv1.UpdateContactRequest{
		Id: ada["id"].(string), Contact: &contactv1.Contact{ExternalId: ptr("crm-1")}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"external_id", "job_title"}},
	}))
	if err != nil || res.Header().Get("ETag") != adaTag {
		t.Errorf("UpdateContact to the same values: %v, ETag %q, want %s", err, res.Header().Get("ETag"), adaTag)
	}

	// A real change after the no-op patches: a sync reader gets it, and
	// only it.
	if s, _, b := h.Do(http.MethodPatch, "/api/v1/contacts/"+marker, tn.Token, "application/merge-patch+json", `{"firstName":"Mark"}`); s != 200 {
		t.Fatalf("patch marker: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+marker+`"}`); s != 201 {
		t.Fatalf("marker lead: %d %s", s, b)
	} else {
		newLead := decode(t, b)["id"].(string)
		if ids, _ := syncPages("leads", leadCursor, newLead); !slices.Equal(ids, []string{newLead}) {
			t.Errorf("leads changed since the sync cursor: %v, want only the new lead %s", ids, newLead)
		}
	}
	if ids, _ := syncPages("contacts", contactCursor, marker); !slices.Equal(ids, []string{marker}) {
		t.Errorf("contacts changed since the sync cursor: %v, want only the marker %s", ids, marker)
	}
}

// TestIdempotencyKeySentTwice: two Idempotency-Key field lines are a 400
// that creates nothing, on a create and on a batch: either key alone would
// be a guess at which earlier request this one retries.
func TestIdempotencyKeySentTwice(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Two Keys")
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/contacts", `{"email":"twice@x.co"}`},
		{"/api/v1/leads", `{"contact":{"email":"twice-lead@x.co"}}`},
		{"/api/v1/contacts/batch", `{"contacts":[{"email":"twice-batch@x.co"}]}`},
	} {
		req, err := http.NewRequest(http.MethodPost, h.Public.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tn.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add("Idempotency-Key", "first")
		req.Header.Add("Idempotency-Key", "second")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if p := decode(t, b); res.StatusCode != 400 || p["code"] != "malformed_request" || !hasViolation(p, "Idempotency-Key") {
			t.Errorf("POST %s with two keys: %d %s, want 400", tc.path, res.StatusCode, b)
		}
	}
	for _, path := range []string{"/api/v1/contacts", "/api/v1/leads"} {
		_, _, b := h.Do(http.MethodGet, path, tn.Token, "", "")
		if strings.Contains(string(b), "twice") {
			t.Errorf("a request with two keys created something: %s", b)
		}
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
	holder := decode(t, b)["id"].(string)
	_, _, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contactId":"`+holder+`","externalId":"form-e"}`)
	lead := decode(t, b)["id"].(string)

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
					s, b, err := call(http.MethodPatch, base+r.path, tn.Token, fmt.Sprintf(`{"externalId":"%s%c"}`, r.prefix, "ef"[i%2]))
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
				s, b, err := call(http.MethodPost, base+path, tn.Token, body)
				record("create "+path, s, b, err)
				if s == 201 {
					// Give the value up again, for the next round.
					var made struct{ ID string }
					_ = json.Unmarshal(b, &made)
					s, b, err := call(http.MethodPatch, base+path+"/"+made.ID, tn.Token, fmt.Sprintf(`{"externalId":"own-%d-%d"}`, g, i))
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
