package server_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/svat/partnerapi/service/servertest"
)

// TestRESTAnswersHaveOneSpelling: a created record is written by the same
// encoder whether it comes back from its create (a response_body route,
// whose field the gateway encodes) or inside a list page, and every answer is
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

// TestLargeAnswersGzipIntact reads pages over 8 KiB, which the service
// gzips for a client that asks (Go's transport asks by itself and
// inflates), many times in a row and from several goroutines: each page
// must inflate to the same JSON. A pooled buffer owned twice once made the
// second and later answers compress their own output.
func TestLargeAnswersGzipIntact(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Gzip Co")
	var items []string
	// Random external ids compress about in half, so a gzip buffer grows
	// large enough to hold a later page's JSON.
	for i := range 60 {
		random := make([]byte, 120)
		_, _ = rand.Read(random)
		items = append(items, fmt.Sprintf(`{"email":"person%02d@example.com","firstName":"Person","externalId":"%x"}`, i, random))
	}
	if status, _, b := h.Do(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json", `{"contacts":[`+strings.Join(items, ",")+`]}`); status != 200 {
		t.Fatalf("batch: %d %s", status, b)
	}
	// Pages of two sizes, alternately: a large page's gzip buffer holds a
	// smaller page's JSON, which is when a doubly owned buffer shows.
	pages := map[string][]byte{}
	for _, limit := range []string{"60", "30"} {
		status, hdr, page := h.Do(http.MethodGet, "/api/v1/contacts?limit="+limit, tn.Token, "", "", "Accept-Encoding", "identity")
		if status != 200 || len(page) < 8<<10 || hdr.Get("Content-Encoding") != "" {
			t.Fatalf("plain page of %s: %d, %d bytes, Content-Encoding %q", limit, status, len(page), hdr.Get("Content-Encoding"))
		}
		pages[limit] = page
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 20 {
				limit := []string{"60", "30"}[i%2]
				req, _ := http.NewRequest(http.MethodGet, h.Public.URL+"/api/v1/contacts?limit="+limit, nil)
				req.Header.Set("Authorization", "Bearer "+tn.Token)
				res, err := http.DefaultClient.Do(req) // asks for gzip and inflates
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 || !res.Uncompressed || !bytes.Equal(b, pages[limit]) {
					t.Errorf("gzip page of %s: %d, uncompressed %v, %v, %d bytes, want the plain page's %d", limit, res.StatusCode, res.Uncompressed, err, len(b), len(pages[limit]))
					return
				}
			}
		})
	}
	wg.Wait()
}
