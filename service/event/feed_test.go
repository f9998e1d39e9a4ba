package event_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// event is an event as the feed answers it.
type event struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"createdAt"`
	Cursor    string `json:"cursor"`
	Data      struct {
		Object        map[string]any `json:"object"`
		ChangedFields []string       `json:"changedFields"`
	} `json:"data"`
}

type page struct {
	Events     []event `json:"events"`
	Pagination struct {
		NextCursor *string `json:"nextCursor"`
		SyncCursor *string `json:"syncCursor"`
	} `json:"pagination"`
}

// feed reads the events after cursor to the end of the feed (following
// nextCursor) and returns them with the sync cursor of the last page.
func feed(h *servertest.Harness, token, cursor, types string, limit int) ([]event, string, error) {
	var out []event
	for {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if types != "" {
			q.Set("types", types)
		}
		status, b, err := servertest.Call(http.MethodGet, h.Public.URL+"/api/v1/events?"+q.Encode(), token, "")
		if err != nil || status != 200 {
			return out, cursor, fmt.Errorf("events page: %d %s %v", status, b, err)
		}
		var p page
		if err := json.Unmarshal(b, &p); err != nil {
			return out, cursor, err
		}
		out = append(out, p.Events...)
		switch {
		case p.Pagination.NextCursor != nil && p.Pagination.SyncCursor == nil:
			cursor = *p.Pagination.NextCursor
		case p.Pagination.SyncCursor != nil && p.Pagination.NextCursor == nil:
			return out, *p.Pagination.SyncCursor, nil
		default:
			return out, cursor, fmt.Errorf("page with nextCursor %v and syncCursor %v", p.Pagination.NextCursor, p.Pagination.SyncCursor)
		}
	}
}

// write is an acknowledged write and what the feed must hold for it.
type write struct {
	typ    string
	object map[string]any // the answer's record; nil for a delete
	id     string
}

// TestEveryCommittedWriteHasItsEvent: 8 writers create contacts and leads
// (single, inline contact, batch), PATCH them (some PATCHes change
// nothing), and delete some, while a reader follows the feed on its sync
// cursor. Every 2xx write has exactly its event, with the record as the
// write answered it (updates with the members they changed); a no-op
// PATCH, a refused create and a transaction that rolled back have none;
// the reader, which read while the writes ran, saw the same events in the
// same order as one read at the end: none missed, none twice.
func TestEveryCommittedWriteHasItsEvent(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Feed Writers")
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)

	var mu sync.Mutex
	var writes []write
	var errs []error
	record := func(w write) { mu.Lock(); writes = append(writes, w); mu.Unlock() }
	fail := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	decode := func(b []byte) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}

	stop := make(chan struct{})
	readerDone := make(chan []event)
	go func() {
		var seen []event
		cursor := ""
		for {
			evs, next, err := feed(h, tn.Token, cursor, "", 7)
			if err != nil {
				fail(err)
				break
			}
			seen, cursor = append(seen, evs...), next
			select {
			case <-stop:
				// After the writers ended, until the feed has caught up:
				// a transaction open anywhere in the cluster (another
				// test's) holds the watermark, and with it the last events,
				// back for a while.
				dbtest.Until(time.Minute, func() bool {
					evs, next, err := feed(h, tn.Token, cursor, "", 7)
					if err != nil {
						fail(err)
						return true
					}
					seen, cursor = append(seen, evs...), next
					mu.Lock()
					defer mu.Unlock()
					return len(seen) >= len(writes)
				})
				readerDone <- seen
				return
			default:
			}
		}
		readerDone <- seen
	}()

	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 12 {
				tag := fmt.Sprintf("w%d-%d", w, i)
				s, _, b, err := h.Send(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"`+tag+`@x.co"}`)
				if err != nil || s != 201 {
					fail(fmt.Errorf("create contact: %d %s %v", s, b, err))
					return
				}
				c := decode(b)
				record(write{"contact.created", c, c["id"].(string)})
				// A lead with a new inline contact: two created events.
				s, _, b, err = h.Send(http.MethodPost, "/api/v1/leads", tn.Token, "application/json",
					`{"contact":{"email":"lead-`+tag+`@x.co"},"title":"Deal `+tag+`"}`)
				if err != nil || s != 201 {
					fail(fmt.Errorf("create lead: %d %s %v", s, b, err))
					return
				}
				l := decode(b)
				record(write{"lead.created", l, l["id"].(string)})
				cid := l["contactId"].(string)
				if s, _, b, err := h.Send(http.MethodGet, "/api/v1/contacts/"+cid, tn.Token, "", ""); err == nil && s == 200 {
					record(write{"contact.created", decode(b), cid})
				} else {
					fail(fmt.Errorf("get inline contact: %d %v", s, err))
				}
				// A refused create writes nothing.
				if s, _, _, _ := h.Send(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"`+tag+`@x.co"}`); s != 409 {
					fail(fmt.Errorf("duplicate create: %d", s))
				}
				switch rng.IntN(3) {
				case 0: // a PATCH that changes something, then one that changes nothing
					s, _, b, err := h.Send(http.MethodPatch, "/api/v1/leads/"+l["id"].(string), tn.Token, "application/merge-patch+json", `{"status":"contacted","title":"Won `+tag+`"}`)
					if err != nil || s != 200 {
						fail(fmt.Errorf("patch: %d %s %v", s, b, err))
						return
					}
					record(write{"lead.updated", decode(b), l["id"].(string)})
					if s, _, _, _ := h.Send(http.MethodPatch, "/api/v1/leads/"+l["id"].(string), tn.Token, "application/merge-patch+json", `{"status":"contacted"}`); s != 200 {
						fail(fmt.Errorf("no-op patch: %d", s))
					}
				case 1: // delete the contact made on its own
					if s, _, b, _ := h.Send(http.MethodDelete, "/api/v1/contacts/"+c["id"].(string), tn.Token, "", ""); s != 204 {
						fail(fmt.Errorf("delete: %d %s", s, b))
						return
					}
					record(write{"contact.deleted", nil, c["id"].(string)})
				case 2: // a batch of two contacts
					s, _, b, err := h.Send(http.MethodPost, "/api/v1/contacts/batch", tn.Token, "application/json",
						`{"contacts":[{"email":"b1-`+tag+`@x.co"},{"email":"b2-`+tag+`@x.co"}]}`)
					if err != nil || s != 200 {
						fail(fmt.Errorf("batch: %d %s %v", s, b, err))
						return
					}
					var res struct {
						Results []struct {
							Contact map[string]any `json:"contact"`
						} `json:"results"`
					}
					_ = json.Unmarshal(b, &res)
					for _, r := range res.Results {
						record(write{"contact.created", r.Contact, r.Contact["id"].(string)})
					}
				}
			}
		}()
	}
	// A transaction that rolls back leaves no event.
	ctx := context.Background()
	rolledBack := uuid.New()
	conn, err := dbtest.Raw(t, h.DB).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at) VALUES ($1, $2, 'rolled@x.co', now(), now())`, ws, rolledBack); err != nil {
		t.Fatal(err)
	}
	// It holds the feed back while it is open (the watermark), so it ends
	// while the writers still write, and the reader reads during writes.
	dbtest.Eventually(t, time.Minute, "a third of the writes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(writes) >= 100
	})
	if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	wg.Wait()
	close(stop)
	seen := <-readerDone
	for _, err := range errs {
		t.Error(err)
	}
	var all []event
	dbtest.Until(time.Minute, func() bool {
		all, _, err = feed(h, tn.Token, "", "", 100)
		return err != nil || len(all) >= len(writes)
	})
	if err != nil {
		t.Fatal(err)
	}

	// Every acknowledged write has exactly its event, with its record.
	byRecord := map[string][]event{}
	for _, e := range all {
		byRecord[e.Data.Object["id"].(string)] = append(byRecord[e.Data.Object["id"].(string)], e)
	}
	want := map[string][]write{}
	for _, w := range writes {
		want[w.id] = append(want[w.id], w)
	}
	for id, ws := range want {
		got := byRecord[id]
		if len(got) != len(ws) {
			t.Errorf("%s: %d events for %d writes: %v", id, len(got), len(ws), got)
			continue
		}
		for i, w := range ws {
			e := got[i]
			if e.Type != w.typ || !strings.HasPrefix(e.ID, "evt_") || e.Cursor == "" || e.CreatedAt == "" {
				t.Errorf("%s: event %d is %s %s, want %s", id, i, e.Type, e.ID, w.typ)
				continue
			}
			// Deleted records keep the id only, in every one of their events.
			deleted := ws[len(ws)-1].typ == "contact.deleted"
			switch {
			case deleted && !reflect.DeepEqual(e.Data.Object, map[string]any{"id": id}):
				t.Errorf("%s: an event of a deleted record still holds %v", id, e.Data.Object)
			case !deleted && !reflect.DeepEqual(e.Data.Object, w.object):
				t.Errorf("%s: %s object %v, the write answered %v", id, e.Type, e.Data.Object, w.object)
			}
			if w.typ == "lead.updated" && !reflect.DeepEqual(e.Data.ChangedFields, []string{"status", "title", "updatedAt"}) {
				t.Errorf("%s: changedFields %v", id, e.Data.ChangedFields)
			}
		}
	}
	for id, evs := range byRecord {
		if _, ok := want[id]; !ok {
			t.Errorf("an event for no acknowledged write: %s %v", id, evs)
		}
	}
	if len(all) != len(writes) {
		t.Errorf("%d events for %d acknowledged writes", len(all), len(writes))
	}
	// The reader during the writes saw exactly the same feed.
	if len(seen) != len(all) {
		t.Errorf("the reader saw %d events, the feed holds %d", len(seen), len(all))
	}
	for i := range min(len(seen), len(all)) {
		if seen[i].ID != all[i].ID {
			t.Errorf("event %d: the reader saw %s, the feed holds %s", i, seen[i].ID, all[i].ID)
			break
		}
	}
	t.Logf("%d writes, %d events, the reader saw %d", len(writes), len(all), len(seen))
}
