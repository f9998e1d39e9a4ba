package event_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	eventv1 "github.com/svat/partnerapi/gen/partner/event/v1"
	"github.com/svat/partnerapi/gen/partner/event/v1/eventv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// TestFeedReaderNeverMissesALateCommit: a transaction writes a contact
// early and commits late, while writers commit many after it. A reader
// looping on the sync cursor the whole time gets its event all the same
// (the watermark holds later events back until it ends), and nothing
// twice.
func TestFeedReaderNeverMissesALateCommit(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	tn := h.NewFastTenant("Feed Late")
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	ctx := context.Background()
	conn, err := dbtest.Raw(t, h.DB).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	late := uuid.New()
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
		VALUES ($1, $2, 'late@x.co', now() - interval '1 minute', now() - interval '1 minute')`, ws, late); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string]int{}
	var created []string
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		cursor := ""
		for {
			evs, next, err := feed(h, tn.Token, cursor, "contact.created", 5)
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			for _, e := range evs {
				seen[e.Data.Object["id"].(string)]++
			}
			mu.Unlock()
			cursor = next
			select {
			case <-stop:
				// Until it caught up: a transaction open anywhere in the
				// cluster holds the last events back for a while.
				var err error
				dbtest.Until(time.Minute, func() bool {
					var evs []event
					evs, cursor, err = feed(h, tn.Token, cursor, "contact.created", 5)
					mu.Lock()
					defer mu.Unlock()
					for _, e := range evs {
						seen[e.Data.Object["id"].(string)]++
					}
					return err != nil || len(seen) > len(created)
				})
				done <- err
				return
			default:
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				s, _, b, err := h.Send(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
					`{"email":"c`+string(rune('a'+w))+strings.Repeat("x", i)+`@x.co"}`)
				if err != nil || s != 201 {
					t.Errorf("create: %d %s %v", s, b, err)
					return
				}
				mu.Lock()
				created = append(created, servertest.ID(t, b))
				n := len(created)
				mu.Unlock()
				if n == 30 {
					if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	created = append(created, opaqueid.Format(opaqueid.Contact, late))
	for _, id := range created {
		if seen[id] != 1 {
			t.Errorf("%s seen %d times by the reader, want once", id, seen[id])
		}
	}
	if len(seen) != len(created) {
		t.Errorf("the reader saw %d contacts created, %d were", len(seen), len(created))
	}
}

// TestEventScopesTypesAndCursors: a token reads only the types its scopes
// allow (asking for another is 403 naming the scope; an unknown type 400);
// an event's cursor means "every event after this one" whatever types are
// asked for next; a cursor of another workspace is a 400; one older than
// the retention is 410 cursor_expired; Connect answers the same feed.
func TestEventScopesTypesAndCursors(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, servertest.Options{Config: func(c *server.Config) { c.EventRetention = 24 * time.Hour }})
	tn := h.NewTenant("Feed Scopes")
	other := h.NewTenant("Feed Elsewhere")
	for _, body := range []string{`{"email":"a@x.co"}`, `{"email":"b@x.co"}`} {
		if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", body); s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
	}
	if s, _, b := h.Do(http.MethodPost, "/api/v1/leads", tn.Token, "application/json", `{"contact":{"email":"a@x.co"},"title":"T"}`); s != 201 {
		t.Fatalf("lead: %d %s", s, b)
	}
	if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", other.Token, "application/json", `{"email":"a@x.co"}`); s != 201 {
		t.Fatalf("other: %d %s", s, b)
	}

	leadsOnly := h.Token(tn.ClientID, tn.ClientSecret, "leads:read")
	var evs []event
	var err error
	// A transaction open anywhere in the cluster holds the feed back a while.
	dbtest.Until(time.Minute, func() bool {
		evs, _, err = feed(h, leadsOnly, "", "", 10)
		return err != nil || len(evs) > 0
	})
	if err != nil || len(evs) != 1 || evs[0].Type != "lead.created" {
		t.Fatalf("leads:read feed: %v %v", evs, err)
	}
	for q, want := range map[string]int{
		"types=contact.created": 403, "types=lead.created,contact.updated": 403, "types=bogus": 400, "types=lead.created": 200,
	} {
		s, _, b := h.Do(http.MethodGet, "/api/v1/events?"+q, leadsOnly, "", "")
		if s != want || (s == 403 && !strings.Contains(string(b), "contacts:read")) {
			t.Errorf("%s: %d %s, want %d", q, s, b, want)
		}
	}
	writeOnly := h.Token(tn.ClientID, tn.ClientSecret, "contacts:write")
	if s, _, b := h.Do(http.MethodGet, "/api/v1/events", writeOnly, "", ""); s != 403 {
		t.Errorf("a token that reads nothing: %d %s", s, b)
	}

	var all []event
	var sync string
	dbtest.Until(time.Minute, func() bool {
		all, sync, err = feed(h, tn.Token, "", "", 2)
		return err != nil || len(all) >= 3
	})
	// The lead's inline contact a@x.co exists: the lead uses it.
	if err != nil || len(all) != 3 || all[0].Type != "contact.created" || all[1].Type != "contact.created" || all[2].Type != "lead.created" {
		t.Fatalf("feed: %v %v", all, err)
	}
	after, _, err := feed(h, tn.Token, all[0].Cursor, "lead.created", 10)
	if err != nil || len(after) != 1 || after[0].ID != all[2].ID {
		t.Errorf("after event 1, lead.created only: %v %v", after, err)
	}
	if evs, _, err := feed(h, tn.Token, sync, "", 10); err != nil || len(evs) != 0 {
		t.Errorf("after the sync cursor: %v %v", evs, err)
	}
	if s, _, b := h.Do(http.MethodGet, "/api/v1/events?cursor="+url.QueryEscape(all[1].Cursor), other.Token, "", ""); s != 400 {
		t.Errorf("another workspace's cursor: %d %s", s, b)
	}

	ec := eventv1connect.NewEventServiceClient(http.DefaultClient, h.Public.URL, connect.WithInterceptors(servertest.Bearer(tn.Token)))
	res, err := ec.ListEvents(context.Background(), connect.NewRequest(&eventv1.ListEventsRequest{Types: "lead.created"}))
	if err != nil || len(res.Msg.GetEvents()) != 1 || res.Msg.GetEvents()[0].GetId() != all[2].ID ||
		res.Msg.GetEvents()[0].GetData().GetFields()["object"].GetStructValue().GetFields()["title"].GetStringValue() != "T" {
		t.Errorf("Connect ListEvents: %v %v", res, err)
	}

	// Past the retention, a cursor is refused, not served with a gap.
	h.Clock.Advance(25 * time.Hour)
	fresh := h.Token(tn.ClientID, tn.ClientSecret, "")
	s, _, b := h.Do(http.MethodGet, "/api/v1/events?cursor="+url.QueryEscape(all[1].Cursor), fresh, "", "")
	if p := servertest.Decode(t, b); s != 410 || p["code"] != "cursor_expired" {
		t.Errorf("an expired cursor: %d %s", s, b)
	}
	// The sync cursor of a page is as young as the page.
	if s, _, b := h.Do(http.MethodGet, "/api/v1/events?cursor="+url.QueryEscape(sync), fresh, "", ""); s != 410 {
		t.Errorf("a 25-hour-old sync cursor with a 24-hour retention: %d %s", s, b)
	}
}
