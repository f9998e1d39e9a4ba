package lead_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestIdempotencyConcurrent: 20 simultaneous POSTs with one key create
// exactly one lead; every other answer replays it or is a 409.
func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Idem Co")
	body := `{"contact":{"email":"burst@x.co","firstName":"Bea"},"source":"web_form","externalId":"burst-1"}`
	type result struct {
		status   int
		replayed string
		id, code string
	}
	results := make([]result, 20)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, hdr, b, err := h.Send(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", body, "Idempotency-Key", "burst-key")
			var m struct{ ID, Code string }
			if err == nil {
				err = json.Unmarshal(b, &m)
			}
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = result{s, hdr.Get("Idempotent-Replayed"), m.ID, m.Code}
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	created, replays, inFlight := 0, 0, 0
	leadID := ""
	for _, r := range results {
		switch {
		case r.status == 201 && r.replayed == "":
			created++
			leadID = r.id
		case r.status == 201 && r.replayed == "true":
			replays++
		case r.status == 409 && r.code == "idempotency_key_in_use":
			inFlight++
		default:
			t.Fatalf("unexpected answer %+v", r)
		}
	}
	if created != 1 {
		t.Fatalf("%d first creations, want exactly 1 (%+v)", created, results)
	}
	for _, r := range results {
		if r.status == 201 && r.id != leadID {
			t.Fatalf("replay answered lead %s, want %s", r.id, leadID)
		}
	}
	_, _, b := h.Do(http.MethodGet, "/api/v1/leads?externalId=burst-1", tn.Token, "", "")
	var p servertest.Page
	servertest.MustUnmarshal(t, b, &p)
	if len(p.Leads) != 1 || p.Leads[0].ID != leadID {
		t.Fatalf("stored leads = %s", b)
	}
	t.Logf("created %d, replayed %d, in flight %d", created, replays, inFlight)

	// A retry after the burst replays with the first status and body.
	s, hdr, b2 := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", body, "Idempotency-Key", "burst-key")
	if s != 201 || hdr.Get("Idempotent-Replayed") != "true" || servertest.Decode(t, b2)["id"] != leadID {
		t.Fatalf("later replay: %d %q %s", s, hdr.Get("Idempotent-Replayed"), b2)
	}
}

// TestInlineContactRace: simultaneous leads whose inline contact is new
// and the same all succeed, about one contact: the requests that lose the
// race to create it find it.
func TestInlineContactRace(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Race Co")
	type result struct {
		status    int
		contactID string
	}
	results := make([]result, 16)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, _, b, err := h.Send(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"race@x.co","firstName":"Rae"}}`)
			if err != nil {
				return // a zero result fails the check below
			}
			var l struct {
				ContactID string `json:"contactId"`
			}
			_ = json.Unmarshal(b, &l)
			results[i] = result{s, l.ContactID}
		}()
	}
	close(start)
	wg.Wait()
	for _, r := range results {
		if r.status != 201 || r.contactID == "" || r.contactID != results[0].contactID {
			t.Fatalf("results = %+v, want sixteen 201s about one contact", results)
		}
	}
	_, _, b := h.Do(http.MethodGet, "/api/v1/contacts?email=race%40x.co", tn.Token, "", "")
	var p servertest.Page
	servertest.MustUnmarshal(t, b, &p)
	if len(p.Contacts) != 1 || p.Contacts[0].ID != results[0].contactID {
		t.Fatalf("contacts with the email: %s", b)
	}
}

// TestIdempotencyFailuresNotStored: a lead refused for a missing contact
// or a duplicate externalId leaves its key free for a corrected retry.
func TestIdempotencyFailuresNotStored(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Idem Failures")
	post := func(body string) (int, string, map[string]any) {
		s, hdr, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", body, "Idempotency-Key", "retry-me")
		return s, hdr.Get("Idempotent-Replayed"), servertest.Decode(t, b)
	}
	if s, _, p := post(`{"contactId":"con_00000000000000000000000000"}`); s != 422 || p["code"] != "validation_failed" {
		t.Fatalf("missing contact: %d %v", s, p)
	}
	s, _, first := post(`{"contact":{"email":"dup@x.co"},"externalId":"ext-1"}`)
	if s != 201 {
		t.Fatalf("first lead: %d %v", s, first)
	}
	// A duplicate under a second key is not stored either.
	s, hdr, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"dup@x.co"},"externalId":"ext-1"}`, "Idempotency-Key", "second")
	if p := servertest.Decode(t, b); s != 409 || p["existingId"] != first["id"] || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("duplicate: %d %s", s, b)
	}
	s, hdr, b = h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"dup@x.co"},"externalId":"ext-2"}`, "Idempotency-Key", "second")
	if p := servertest.Decode(t, b); s != 201 || p["id"] == first["id"] || hdr.Get("Idempotent-Replayed") != "" {
		t.Fatalf("corrected retry after a duplicate: %d %s", s, b)
	}
	if s, r, p := post(`{"contact":{"email":"dup@x.co"},"externalId":"ext-1"}`); s != 201 || r != "true" || p["id"] != first["id"] {
		t.Fatalf("replay: %d %q %v", s, r, p)
	}
}
