package lead_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// syncPage is one page of a sort=updatedAt list.
type syncPage struct {
	Leads []struct {
		ID        string    `json:"id"`
		UpdatedAt time.Time `json:"updatedAt"`
		Status    string    `json:"status"`
	} `json:"leads"`
	Pagination struct {
		NextCursor *string `json:"nextCursor"`
		SyncCursor *string `json:"syncCursor"`
	} `json:"pagination"`
}

// TestSyncCursor: the last page of a sort=updatedAt walk carries a
// syncCursor and no nextCursor; passed back, it returns exactly what was
// created or changed since, in the order the changes became visible.
func TestSyncCursor(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewTenant("Sync Cursor")
	var ids []string
	for i := range 3 {
		_, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", fmt.Sprintf(`{"contact":{"email":"s%d@x.co"}}`, i))
		ids = append(ids, servertest.ID(t, b))
	}
	// get answers a page; a page without every expected record is retried
	// for a while, since sort=updatedAt withholds changes newer than a
	// write transaction still open anywhere in the cluster (a parallel
	// test's CREATE DATABASE, say).
	get := func(q string, want int) syncPage {
		t.Helper()
		var p syncPage
		dbtest.Until(10*time.Second, func() bool {
			status, _, b := h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", "")
			if status != 200 {
				t.Fatalf("GET %s: %d %s", q, status, b)
			}
			p = syncPage{}
			servertest.MustUnmarshal(t, b, &p)
			return len(p.Leads) >= want
		})
		return p
	}
	// All three visible first: a page of 2 while the third is held back
	// would end the walk there.
	get("sort=updatedAt&limit=10", 3)
	first := get("sort=updatedAt&limit=2", 2)
	if len(first.Leads) != 2 || first.Leads[0].ID != ids[0] || first.Leads[1].ID != ids[1] || first.Pagination.NextCursor == nil || first.Pagination.SyncCursor != nil {
		t.Fatalf("first page: %+v", first)
	}
	last := get("sort=updatedAt&limit=2&cursor="+url.QueryEscape(*first.Pagination.NextCursor), 1)
	if len(last.Leads) != 1 || last.Leads[0].ID != ids[2] || last.Pagination.NextCursor != nil || last.Pagination.SyncCursor == nil {
		t.Fatalf("last page: %+v", last)
	}
	since := *last.Pagination.SyncCursor
	empty := get("sort=updatedAt&limit=2&cursor="+url.QueryEscape(since), 0)
	if len(empty.Leads) != 0 || empty.Pagination.SyncCursor == nil || empty.Pagination.NextCursor != nil {
		t.Fatalf("nothing changed: %+v", empty)
	}
	// A change of an old lead, then a new lead: both, in that order, and
	// nothing else.
	if s, _, b := h.Do(http.MethodPatch, "/api/v1/leads/"+ids[0], tn.Token, "application/merge-patch+json", `{"status":"contacted"}`); s != 200 {
		t.Fatalf("patch: %d %s", s, b)
	}
	_, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"s9@x.co"}}`)
	fresh := servertest.ID(t, b)
	changed := get("sort=updatedAt&limit=10&cursor="+url.QueryEscape(*empty.Pagination.SyncCursor), 2)
	if len(changed.Leads) != 2 || changed.Leads[0].ID != ids[0] || changed.Leads[0].Status != "contacted" || changed.Leads[1].ID != fresh || changed.Pagination.SyncCursor == nil {
		t.Fatalf("changes since the sync cursor: %+v", changed)
	}
	// The cursor is bound to the list, the sort and the filters.
	for _, q := range []string{"sort=-updatedAt&cursor=" + url.QueryEscape(since), "sort=updatedAt&status=new&cursor=" + url.QueryEscape(since)} {
		if s, _, b := h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", ""); s != 400 {
			t.Errorf("%s: %d %s", q, s, b)
		}
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/contacts?sort=updatedAt&cursor="+url.QueryEscape(since), tn.Token, "", ""); s != 400 {
		t.Errorf("a lead sync cursor on contacts: %d %s", s, b)
	}
	// Other sorts never carry a syncCursor; updatedSince stays a time filter.
	for _, q := range []string{"sort=-updatedAt", "sort=createdAt", "sort=-createdAt", "updatedSince=2000-01-01T00:00:00Z"} {
		_, _, b := h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", "")
		var p syncPage
		servertest.MustUnmarshal(t, b, &p)
		if p.Pagination.SyncCursor != nil || len(p.Leads) != 4 {
			t.Errorf("%s: %s", q, b)
		}
	}
	// Over Connect the same walk ends in a syncCursor.
	lc := leadv1connect.NewLeadServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	res, err := lc.ListLeads(context.Background(), connect.NewRequest(&leadv1.ListLeadsRequest{Sort: "updatedAt", Cursor: *changed.Pagination.SyncCursor}))
	if err != nil || len(res.Msg.GetLeads()) != 0 || res.Msg.GetPagination().SyncCursor == nil || res.Msg.GetPagination().NextCursor != nil {
		t.Fatalf("ListLeads over Connect: %v %v", res, err)
	}
}

// seenSet is what a syncing reader has seen: each lead and the latest
// updatedAt it saw of it.
type seenSet struct {
	mu   sync.Mutex
	last map[string]time.Time
	pos  time.Time // the timestamp walk's position, for the variant
}

func (s *seenSet) add(id string, updated time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last[id].Before(updated) {
		s.last[id] = updated
	}
}

func (s *seenSet) get(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.last[id]
	return t, ok
}

// TestSyncNeverMissesAChange: writers create and update leads while one
// transaction is held open with an earlier updatedAt and commits late. A
// reader that loops on syncCursor sees every committed lead in its final
// version. The same reader over a walk by updatedAt alone (the timestamp
// keyset the API used before) misses the late one: the test fails if it
// does not, so it shows what the watermark prevents.
func TestSyncNeverMissesAChange(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Sync Writers")
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	base := h.Public.URL + "/api/v1/leads"

	var (
		errMu  sync.Mutex
		errs   []error
		expect sync.Map // lead id -> final updatedAt (time.Time)
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	real := &seenSet{last: map[string]time.Time{}}
	variant := &seenSet{last: map[string]time.Time{}}

	// The reader loops on syncCursor, as a partner keeping a copy does.
	var syncCursor string
	realPass := func() (int, error) {
		n := 0
		cursor := syncCursor
		for {
			q := url.Values{"sort": {"updatedAt"}, "limit": {"25"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			status, b, err := servertest.Call(http.MethodGet, base+"?"+q.Encode(), tn.Token, "")
			if err != nil || status != 200 {
				return n, fmt.Errorf("sync page: %d %s %v", status, b, err)
			}
			var p syncPage
			if err := json.Unmarshal(b, &p); err != nil {
				return n, err
			}
			for _, l := range p.Leads {
				real.add(l.ID, l.UpdatedAt)
				n++
			}
			switch {
			case p.Pagination.NextCursor != nil && p.Pagination.SyncCursor == nil:
				cursor = *p.Pagination.NextCursor
			case p.Pagination.SyncCursor != nil && p.Pagination.NextCursor == nil:
				syncCursor = *p.Pagination.SyncCursor
				return n, nil
			default:
				return n, fmt.Errorf("page with nextCursor %v and syncCursor %v", p.Pagination.NextCursor, p.Pagination.SyncCursor)
			}
		}
	}
	// The variant: the same loop over the (updatedAt, id) keyset.
	var afterTime *time.Time
	var afterID *uuid.UUID
	variantPass := func() (int, error) {
		n := 0
		for {
			// The naive timestamp walk a partner might write, in SQL of
			// its own so that it depends on the table, not on the
			// service's queries.
			rows, err := h.DB.Conn().Query(context.Background(), `SELECT id, updated_at FROM leads
				WHERE workspace_id = $1 AND ($2::timestamptz IS NULL OR (updated_at, id) > ($2, $3::uuid))
				ORDER BY updated_at, id LIMIT 25`, ws, afterTime, afterID)
			if err != nil {
				return n, err
			}
			got := 0
			for rows.Next() {
				var id uuid.UUID
				var at time.Time
				if err := rows.Scan(&id, &at); err != nil {
					rows.Close()
					return n, err
				}
				variant.add(opaqueid.Format(opaqueid.Lead, id), at)
				afterTime, afterID = &at, &id
				n++
				got++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return n, err
			}
			if got > 0 {
				variant.mu.Lock()
				variant.pos = *afterTime
				variant.mu.Unlock()
			}
			if got < 25 {
				return n, nil
			}
		}
	}

	stopWriters := make(chan struct{})
	finalPass := make(chan struct{})
	var readers, writers sync.WaitGroup
	for _, pass := range []func() (int, error){realPass, variantPass} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				if _, err := pass(); err != nil {
					fail(err)
					return
				}
				select {
				case <-finalPass:
					return
				case <-time.After(3 * time.Millisecond):
				}
			}
		}()
	}

	var created atomic.Int64
	for w := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			var mine []string
			for i := 0; ; i++ {
				select {
				case <-stopWriters:
					return
				default:
				}
				if len(mine) > 0 && i%3 == 2 {
					id := mine[(i/3)%len(mine)]
					status, b, err := servertest.Call(http.MethodPatch, base+"/"+id, tn.Token, fmt.Sprintf(`{"message":"change %d"}`, i))
					if err == nil && status == 200 {
						var one struct {
							UpdatedAt time.Time `json:"updatedAt"`
						}
						err = json.Unmarshal(b, &one)
						expect.Store(id, one.UpdatedAt)
					}
					if err != nil || status != 200 {
						fail(fmt.Errorf("patch: %d %s %v", status, b, err))
						return
					}
					continue
				}
				status, b, err := servertest.Call(http.MethodPost, base, tn.Token, fmt.Sprintf(`{"contact":{"email":"w%d-%d@sync.test"},"source":"web_form"}`, w, i))
				if err != nil || status != 201 {
					fail(fmt.Errorf("create: %d %s %v", status, b, err))
					return
				}
				var one struct {
					ID        string    `json:"id"`
					UpdatedAt time.Time `json:"updatedAt"`
				}
				if err := json.Unmarshal(b, &one); err != nil {
					fail(err)
					return
				}
				mine = append(mine, one.ID)
				expect.Store(one.ID, one.UpdatedAt)
				created.Add(1)
			}
		}()
	}

	// The late transaction: it creates a lead, stamped with its start, and
	// stays open until the timestamp walk has moved past that stamp on
	// leads the others committed meanwhile.
	var heldID string
	var heldAt time.Time
	heldErr := h.DB.WithTx(context.Background(), func(tx db.DBTX) error {
		if !dbtest.Until(20*time.Second, func() bool { return created.Load() >= 20 }) {
			return errors.New("the writers never created 20 leads")
		}
		// The lead as a create stores it, in SQL of its own: what is under
		// test is the walk, not how leads are made.
		id := opaqueid.New()
		if err := tx.QueryRow(context.Background(), `WITH c AS (
				INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
				VALUES ($1, $2, 'late@sync.test', now(), now()) RETURNING id)
			INSERT INTO leads (workspace_id, id, contact_id, title, status, created_at, updated_at)
			SELECT $1, $3, c.id, 'late@sync.test', 'new', now(), now() FROM c
			RETURNING updated_at`, ws, opaqueid.New(), id).Scan(&heldAt); err != nil {
			return fmt.Errorf("create the late lead: %w", err)
		}
		heldID = opaqueid.Format(opaqueid.Lead, id)
		if dbtest.Until(20*time.Second, func() bool {
			variant.mu.Lock()
			defer variant.mu.Unlock()
			return variant.pos.After(heldAt)
		}) {
			return nil
		}
		return errors.New("the timestamp walk never moved past the held transaction's lead")
	})
	if heldErr != nil {
		t.Fatalf("held transaction: %v", heldErr)
	}
	expect.Store(heldID, heldAt)
	// More writes after the late commit (if the writers fail instead,
	// their errors are reported below).
	after := created.Load()
	dbtest.Until(10*time.Second, func() bool { return created.Load() >= after+5 })
	close(stopWriters)
	writers.Wait()

	// Final passes: the reader until it has everything (changes newer than
	// a write transaction of a parallel test may still be withheld for a
	// moment), then the variant once more.
	missing := func(s *seenSet) []string {
		var out []string
		expect.Range(func(k, v any) bool {
			if at, ok := s.get(k.(string)); !ok || at.Before(v.(time.Time)) {
				out = append(out, k.(string))
			}
			return true
		})
		return out
	}
	dbtest.Until(15*time.Second, func() bool { return len(missing(real)) == 0 })
	close(finalPass)
	readers.Wait()
	if _, err := variantPass(); err != nil {
		t.Fatal(err)
	}
	errMu.Lock()
	defer errMu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("writers or readers failed: %v", errs)
	}
	total := 0
	expect.Range(func(any, any) bool { total++; return true })
	if m := missing(real); len(m) > 0 {
		t.Fatalf("the syncCursor reader missed %d of %d leads (or their last change): %v", len(m), total, m)
	}
	m := missing(variant)
	found := false
	for _, id := range m {
		found = found || id == heldID
	}
	if !found {
		t.Fatalf("the timestamp walk saw the late lead %s: the test cannot tell the watermark from timestamps (missed: %v)", heldID, m)
	}
	t.Logf("%d leads and their changes: the syncCursor reader saw all; the timestamp walk missed %d, the late one among them", total, len(m))
}

// TestSyncWithheldByAnOpenTransactionElsewhere: the documented cost of the
// sync watermark. A transaction that holds a transaction id, here in
// another database of the same PostgreSQL cluster and idle, withholds
// every later change from sort=updatedAt walks, which answer 200 with no
// records and the same syncCursor; the walk by createdAt shows the lead
// at once. When the transaction ends, the next page has the change:
// delayed, never lost.
func TestSyncWithheldByAnOpenTransactionElsewhere(t *testing.T) {
	t.Parallel()
	admin := dbtest.AdminURL(t)
	if admin == "" {
		t.Skip("needs the test cluster's superuser (not available with TEST_DATABASE_URL)")
	}
	h := servertest.New(t)
	tn := h.NewTenant("Sync Withheld")
	ctx := context.Background()
	syncPage := func(cursor string) (ids []string, next string) {
		t.Helper()
		q := "/api/v1/leads?sort=updatedAt"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		s, _, b := h.Do(http.MethodGet, q, tn.Token, "", "")
		var p servertest.Page
		servertest.MustUnmarshal(t, b, &p)
		if s != 200 || p.Pagination.SyncCursor == nil || p.Pagination.NextCursor != nil {
			t.Fatalf("GET %s: %d %s", q, s, b)
		}
		for _, l := range p.Leads {
			ids = append(ids, l.ID)
		}
		return ids, *p.Pagination.SyncCursor
	}
	_, cursor := syncPage("")

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var xid string
	if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&xid); err != nil {
		t.Fatal(err)
	}

	s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"late@x.co"}}`)
	if s != 201 {
		t.Fatalf("create: %d %s", s, b)
	}
	lead := servertest.ID(t, b)
	if _, _, b := h.Do(http.MethodGet, "/api/v1/leads?sort=createdAt", tn.Token, "", ""); !servertest.ContainsID(t, b, lead) {
		t.Fatalf("the committed lead is not listed by createdAt: %s", b)
	}
	// What withholds the lead is the open transaction, not time: the walk
	// serves nothing however often it is asked while the transaction lasts.
	for range 3 {
		if ids, next := syncPage(cursor); len(ids) != 0 || next != cursor {
			t.Fatalf("while transaction %s is open elsewhere, the sync walk served %v (cursor %s -> %s)", xid, ids, cursor, next)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	served := dbtest.Until(10*time.Second, func() bool {
		ids, _ = syncPage(cursor)
		if len(ids) != 0 && !(len(ids) == 1 && ids[0] == lead) {
			t.Fatalf("after the transaction ended, the sync walk served %v, want [%s]", ids, lead)
		}
		return len(ids) == 1
	})
	if !served {
		t.Fatalf("after the transaction ended, the sync walk served %v, want [%s]", ids, lead)
	}
}

// syncCopy is what a partner keeping a copy of one resource holds: each
// record's latest version (its JSON) and every version it was given.
type syncCopy struct {
	resource string
	cursor   string
	latest   map[string]string
	given    map[string]bool // id + JSON
}

// pass walks from the stored syncCursor to the end, with small pages, and
// applies each record. A version given twice is an error: a record comes
// back only when it changed.
func (c *syncCopy) pass(base, token string) error {
	cursor := c.cursor
	for {
		q := url.Values{"sort": {"updatedAt"}, "limit": {"3"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		status, b, err := servertest.Call(http.MethodGet, base+c.resource+"?"+q.Encode(), token, "")
		if err != nil || status != 200 {
			return fmt.Errorf("sync page of %s: %d %s %v", c.resource, status, b, err)
		}
		var p map[string]json.RawMessage
		var records []json.RawMessage
		var pg struct{ NextCursor, SyncCursor *string }
		if err := errors.Join(json.Unmarshal(b, &p), json.Unmarshal(p[c.resource], &records), json.Unmarshal(p["pagination"], &pg)); err != nil {
			return fmt.Errorf("sync page of %s: %w: %s", c.resource, err, b)
		}
		for _, r := range records {
			var one struct{ ID string }
			if err := json.Unmarshal(r, &one); err != nil {
				return err
			}
			if c.given[one.ID+string(r)] {
				return fmt.Errorf("%s: the same version given twice: %s", c.resource, r)
			}
			c.given[one.ID+string(r)] = true
			c.latest[one.ID] = string(r)
		}
		switch {
		case pg.NextCursor != nil && pg.SyncCursor == nil:
			cursor = *pg.NextCursor
		case pg.SyncCursor != nil && pg.NextCursor == nil:
			c.cursor = *pg.SyncCursor
			return nil
		default:
			return fmt.Errorf("%s: a page with nextCursor %v and syncCursor %v", c.resource, pg.NextCursor, pg.SyncCursor)
		}
	}
}

// TestSyncCopyConvergesUnderMixedWrites: while four writers send single
// leads with inline contacts (shared emails, taken externalIds), lead
// batches whose items share new inline contacts and fail in part, and
// patches of leads and contacts (some changing nothing), a reader loops on
// the syncCursor of contacts and of leads with pages of 3. It is never
// given one version twice, and once the writers stop its copies equal the
// database record for record.
func TestSyncCopyConvergesUnderMixedWrites(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Sync Copy")
	base := h.Public.URL + "/api/v1/"
	var (
		errMu sync.Mutex
		errs  []error
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	copies := []*syncCopy{
		{resource: "contacts", latest: map[string]string{}, given: map[string]bool{}},
		{resource: "leads", latest: map[string]string{}, given: map[string]bool{}},
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, c := range copies {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				if err := c.pass(base, tn.Token); err != nil {
					fail(err)
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}

	var leads, contacts sync.Map // ids written so far
	var n atomic.Int64
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			pick := func(m *sync.Map, k int64) (id string) {
				m.Range(func(key, _ any) bool { id = key.(string); return k%3 != 0 })
				return id
			}
			for range 50 {
				k := n.Add(1)
				email := fmt.Sprintf("p%d@sync.test", k%13)
				var status int
				var b []byte
				var err error
				switch (int(k) + w) % 5 {
				case 0:
					status, b, err = servertest.Call(http.MethodPost, base+"leads", tn.Token,
						fmt.Sprintf(`{"contact":{"email":%q,"firstName":"F%d"},"externalId":"e%d"}`, email, k, k%40))
					if err == nil && status != 201 && status != 409 {
						err = fmt.Errorf("lead create: %d %s", status, b)
					}
				case 1:
					status, b, err = servertest.Call(http.MethodPost, base+"leads/batch", tn.Token, fmt.Sprintf(`{"leads":[`+
						`{"contact":{"email":%q,"firstName":"A%d"},"externalId":"e%d"},{"contact":{"email":%q,"firstName":"B%d"}},`+
						`{"contact":{"email":"q%d@sync.test"},"externalId":"e%d"}]}`, email, k, k%40, email, k, k, (k+1)%40))
					if err == nil && status != 200 {
						err = fmt.Errorf("lead batch: %d %s", status, b)
					}
				case 2, 3:
					id := pick(&leads, k)
					if id == "" {
						continue
					}
					body := fmt.Sprintf(`{"message":"m%d"}`, k%4)
					if k%2 == 0 {
						body = `{"status":"contacted"}`
					}
					status, b, err = servertest.Call(http.MethodPatch, base+"leads/"+id, tn.Token, body)
					if err == nil && status != 200 {
						err = fmt.Errorf("lead patch: %d %s", status, b)
					}
				case 4:
					id := pick(&contacts, k)
					if id == "" {
						continue
					}
					status, b, err = servertest.Call(http.MethodPatch, base+"contacts/"+id, tn.Token, fmt.Sprintf(`{"jobTitle":"j%d"}`, k%3))
					if err == nil && status != 200 {
						err = fmt.Errorf("contact patch: %d %s", status, b)
					}
				}
				if err != nil {
					fail(err)
					return
				}
				var out struct {
					ID, ContactID string
					Results       []struct {
						Lead *struct{ ID, ContactID string }
					}
				}
				if err := json.Unmarshal(b, &out); err != nil {
					fail(err)
					return
				}
				for _, r := range out.Results {
					if r.Lead != nil {
						leads.Store(r.Lead.ID, true)
						contacts.Store(r.Lead.ContactID, true)
					}
				}
				if strings.HasPrefix(out.ID, "lea_") {
					leads.Store(out.ID, true)
					contacts.Store(out.ContactID, true)
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if len(errs) > 0 {
		t.Fatalf("writers or readers failed: %v", errs)
	}

	for _, c := range copies {
		// The database as a createdAt walk sees it, and the copy once it
		// caught up (changes newer than a write transaction of a parallel
		// test may be withheld for a moment).
		db := map[string]string{}
		for _, id := range servertest.Walk(t, h, tn.Token, "/api/v1/"+c.resource, url.Values{"sort": {"createdAt"}, "limit": {"100"}}) {
			_, _, b := h.Do(http.MethodGet, "/api/v1/"+c.resource+"/"+id, tn.Token, "", "")
			var v any
			servertest.MustUnmarshal(t, b, &v)
			norm, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			db[id] = string(norm)
		}
		same := func() bool {
			if len(db) != len(c.latest) {
				return false
			}
			for id, v := range db {
				var x any
				if err := json.Unmarshal([]byte(c.latest[id]), &x); err != nil {
					return false
				}
				norm, _ := json.Marshal(x)
				if string(norm) != v {
					return false
				}
			}
			return true
		}
		caughtUp := dbtest.Until(10*time.Second, func() bool {
			if same() {
				return true
			}
			if err := c.pass(base, tn.Token); err != nil {
				t.Fatal(err)
			}
			return same()
		})
		if !caughtUp {
			t.Fatalf("%s: the copy never caught up: %d records in the copy, %d in the database", c.resource, len(c.latest), len(db))
		}
		t.Logf("%s: %d records, %d versions given", c.resource, len(db), len(c.given))
	}
}
