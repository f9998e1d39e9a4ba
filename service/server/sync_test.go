package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
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

// call is an HTTP request that reports failure instead of failing the
// test, for use in goroutines.
func call(method, u, token, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
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
		ids = append(ids, decode(t, b)["id"].(string))
	}
	// get answers a page; a page without every expected record is retried
	// for a while, since sort=updatedAt withholds changes newer than a
	// write transaction still open anywhere in the cluster (a parallel
	// test's CREATE DATABASE, say).
	get := func(q string, want int) syncPage {
		t.Helper()
		var p syncPage
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, _, b := h.Do(http.MethodGet, "/api/v1/leads?"+q, tn.Token, "", "")
			if status != 200 {
				t.Fatalf("GET %s: %d %s", q, status, b)
			}
			p = syncPage{}
			mustUnmarshal(t, b, &p)
			if len(p.Leads) >= want || time.Now().After(deadline) {
				return p
			}
		}
	}
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
	fresh := decode(t, b)["id"].(string)
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
		mustUnmarshal(t, b, &p)
		if p.Pagination.SyncCursor != nil || len(p.Leads) != 4 {
			t.Errorf("%s: %s", q, b)
		}
	}
	// Over Connect the same walk ends in a syncCursor.
	lc := leadv1connect.NewLeadServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(bearerInterceptor(tn.Token)))
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
			status, b, err := call(http.MethodGet, base+"?"+q.Encode(), tn.Token, "")
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
			rows, err := db.Q.LeadListUpdatedAsc(context.Background(), h.DB.Planned(), dbsqlc.LeadListUpdatedAscParams{
				WorkspaceID: ws, AfterTime: afterTime, AfterID: afterID, MaxRows: 25,
			})
			if err != nil {
				return n, err
			}
			for _, l := range rows {
				variant.add(opaqueid.Format(opaqueid.Lead, l.ID), l.UpdatedAt)
				at, id := l.UpdatedAt, l.ID
				afterTime, afterID = &at, &id
				n++
			}
			if len(rows) > 0 {
				variant.mu.Lock()
				variant.pos = *afterTime
				variant.mu.Unlock()
			}
			if len(rows) < 25 {
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
					status, b, err := call(http.MethodPatch, base+"/"+id, tn.Token, fmt.Sprintf(`{"message":"change %d"}`, i))
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
				status, b, err := call(http.MethodPost, base, tn.Token, fmt.Sprintf(`{"contact":{"email":"w%d-%d@sync.test"},"source":"web_form"}`, w, i))
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
		for created.Load() < 20 {
			time.Sleep(time.Millisecond)
		}
		l, err := db.Q.LeadCreate(context.Background(), tx, dbsqlc.LeadCreateParams{
			WorkspaceID: ws, ClientID: uuid.New(), Path: "/api/v1/leads", ID: opaqueid.New(),
			ContactNewID: opaqueid.New(), ContactEmail: ptr("late@sync.test"), Status: "new",
		})
		if err != nil {
			return err
		}
		heldID, heldAt = opaqueid.Format(opaqueid.Lead, l.ID), l.UpdatedAt
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			variant.mu.Lock()
			past := variant.pos.After(heldAt)
			variant.mu.Unlock()
			if past {
				return nil
			}
		}
		return errors.New("the timestamp walk never moved past the held transaction's lead")
	})
	if heldErr != nil {
		t.Fatalf("held transaction: %v", heldErr)
	}
	expect.Store(heldID, heldAt)
	time.Sleep(100 * time.Millisecond) // more writes after the late commit
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
	for deadline := time.Now().Add(15 * time.Second); len(missing(real)) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
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
