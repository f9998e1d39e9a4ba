package contact_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// seedContacts inserts n contacts directly, with only a few distinct
// timestamps so that many records tie on the sort key and the id must
// break the tie.
func seedContacts(t *testing.T, h *servertest.Harness, workspaceID string, n int, tag string) map[string]bool {
	t.Helper()
	ws, ok := opaqueid.Parse(opaqueid.Workspace, workspaceID)
	if !ok {
		t.Fatalf("bad workspace id %q", workspaceID)
	}
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	ids := map[string]bool{}
	rows := make([][]any, 0, n)
	for i := range n {
		id := opaqueid.New()
		ts := base.Add(time.Duration(i/20) * time.Millisecond)
		email := fmt.Sprintf("%s-%d@seed.test", tag, i)
		rows = append(rows, []any{ws, id, email, ts, ts})
		ids[opaqueid.Format(opaqueid.Contact, id)] = true
	}
	_, err := dbtest.Raw(h.T, h.DB).CopyFrom(context.Background(), pgx.Identifier{"contacts"},
		[]string{"workspace_id", "id", "email", "created_at", "updated_at"}, pgx.CopyFromRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestWalkWhileInserting: a walk of 1,000 records at limit 7 and at limit
// 100, in every sort, while another goroutine inserts, returns every
// pre-existing record exactly once.
func TestWalkWhileInserting(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Walk Co") // a walk of many pages, racing inserts: not a rate limit test
	existing := seedContacts(t, h, tn.WorkspaceID, 1000, "walk")

	ctx, cancel := context.WithCancel(context.Background())
	var inserted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			status, _, _, err := h.Send(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", fmt.Sprintf(`{"email":"live-%d@walk.test"}`, i))
			if err == nil && status == 201 {
				inserted.Add(1)
			}
		}
	}()
	for _, limit := range []string{"7", "100"} {
		for _, sort := range []string{"-createdAt", "createdAt", "-updatedAt", "updatedAt"} {
			got := servertest.WalkUntil(t, h, tn.Token, "/api/v1/contacts", url.Values{"limit": {limit}, "sort": {sort}}, func(ids []string) bool {
				n := 0
				for _, id := range ids {
					if existing[id] {
						n++
					}
				}
				return n >= len(existing)
			})
			seen := map[string]int{}
			for _, id := range got {
				seen[id]++
				if seen[id] > 1 {
					t.Fatalf("limit %s sort %s: %s returned twice", limit, sort, id)
				}
			}
			for id := range existing {
				if seen[id] != 1 {
					t.Fatalf("limit %s sort %s: pre-existing %s returned %d times", limit, sort, id, seen[id])
				}
			}
		}
	}
	cancel()
	wg.Wait()
	if inserted.Load() == 0 {
		t.Fatal("the inserter inserted nothing during the walks")
	}
}

// TestCursorTampering: a changed cursor, a cursor of another sort or filter,
// and a cursor of another workspace are all 400.
func TestCursorTampering(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	a := h.NewTenant("Cursor A")
	b := h.NewTenant("Cursor B")
	seedContacts(t, h, a.WorkspaceID, 30, "a")
	seedContacts(t, h, b.WorkspaceID, 30, "b")
	_, _, body := h.Do(http.MethodGet, "/api/v1/contacts?limit=5", a.Token, "", "")
	var p servertest.Page
	servertest.MustUnmarshal(t, body, &p)
	cur := *p.Pagination.NextCursor
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/contacts?limit=5&cursor="+cur, a.Token, "", ""); s != 200 {
		t.Fatalf("valid cursor: %d", s)
	}
	flip := []byte(cur)
	flip[len(flip)/2] ^= 1
	for name, q := range map[string]string{
		"tampered":        "cursor=" + string(flip),
		"truncated":       "cursor=" + cur[:len(cur)-2],
		"other sort":      "sort=createdAt&cursor=" + cur,
		"other filter":    "createdSince=2000-01-01T00:00:00Z&cursor=" + cur,
		"other resource":  "",
		"other workspace": "",
	} {
		token, path := a.Token, "/api/v1/contacts?"+q
		switch name {
		case "other resource":
			path = "/api/v1/leads?cursor=" + cur
		case "other workspace":
			token, path = b.Token, "/api/v1/contacts?limit=5&cursor="+cur
		}
		status, hdr, body := h.Do(http.MethodGet, path, token, "", "")
		if status != 400 || hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
}

// TestTenantIsolationProperty: random records in two workspaces, with
// overlapping emails, external ids, sources and statuses; neither token
// ever sees the other's records through any list, filter or cursor.
func TestTenantIsolationProperty(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	tenants := []servertest.Tenant{h.NewTenant("Iso A"), h.NewTenant("Iso B")}
	owned := []map[string]bool{{}, {}}
	var contactIDs [2][]string
	emails := []string{"shared@x.co", "one@x.co", "two@x.co", "three@x.co"}
	sources := []string{"web_form", "zapier", "facebook_ads"}
	statuses := []string{"new", "contacted", "qualified"}
	for i := range 60 {
		w := rng.IntN(2)
		tok := tenants[w].Token
		if rng.IntN(3) == 0 {
			status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tok, "application/json",
				fmt.Sprintf(`{"email":"c%d-%s","externalId":"ext-%d"}`, i, emails[rng.IntN(len(emails))], rng.IntN(5)))
			if status == 201 {
				id := servertest.ID(t, b)
				owned[w][id] = true
				contactIDs[w] = append(contactIDs[w], id)
			}
			continue
		}
		status, _, b := h.Do(http.MethodPost, "/api/v1/leads", tok, "application/json",
			fmt.Sprintf(`{"contact":{"email":"%s"},"source":"%s","status":"%s","externalId":"lead-%d"}`,
				emails[rng.IntN(len(emails))], sources[rng.IntN(len(sources))], statuses[rng.IntN(len(statuses))], rng.IntN(8)))
		if status == 201 {
			l := servertest.Decode(t, b)
			owned[w][l["id"].(string)] = true
			owned[w][l["contactId"].(string)] = true
			contactIDs[w] = append(contactIDs[w], l["contactId"].(string))
		}
	}
	pick := func(list []string) string {
		if len(list) == 0 {
			return "con_00000000000000000000000000"
		}
		return list[rng.IntN(len(list))]
	}
	for range 80 {
		w := rng.IntN(2)
		q := url.Values{"limit": {fmt.Sprint(1 + rng.IntN(10))}}
		path := "/api/v1/contacts"
		if rng.IntN(2) == 0 {
			path = "/api/v1/leads"
			switch rng.IntN(5) {
			case 0:
				q.Set("contactId", pick(contactIDs[rng.IntN(2)]))
			case 1:
				q.Set("source", sources[rng.IntN(len(sources))])
			case 2:
				q.Set("status", statuses[rng.IntN(len(statuses))])
			case 3:
				q.Set("externalId", fmt.Sprintf("lead-%d", rng.IntN(8)))
			}
		} else {
			switch rng.IntN(3) {
			case 0:
				q.Set("externalId", fmt.Sprintf("ext-%d", rng.IntN(5)))
			case 1:
				q.Set("email", emails[rng.IntN(len(emails))])
			}
		}
		q.Set("sort", []string{"createdAt", "-createdAt", "updatedAt", "-updatedAt"}[rng.IntN(4)])
		for _, id := range servertest.Walk(t, h, tenants[w].Token, path, q) {
			if !owned[w][id] || owned[1-w][id] {
				t.Fatalf("workspace %d saw %s via %s?%s", w, id, path, q.Encode())
			}
		}
	}
	if len(owned[0]) == 0 || len(owned[1]) == 0 {
		t.Fatal("the property test created no records in a workspace")
	}
}
