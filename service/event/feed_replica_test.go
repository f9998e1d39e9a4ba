package event_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// withStandby starts a primary and its streaming standby, and a service
// whose reads may go to the standby (PARTNER_READ_DATABASE_URL), waiting
// up to wait for it to replay.
func withStandby(t *testing.T, wait time.Duration) (*dbtest.Cluster, *dbtest.Standby, *servertest.Harness) {
	t.Helper()
	primary := dbtest.NewCluster(t)
	standby := dbtest.NewStandby(t, primary)
	d, err := db.OpenConfig(context.Background(), db.Config{URL: primary.URL, ReadURL: standby.URL, ReadWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return primary, standby, servertest.New(t, servertest.Options{DB: d})
}

// get GETs path and returns its body, failing unless 200.
func get(t *testing.T, h *servertest.Harness, token, path string) []byte {
	t.Helper()
	s, _, b := h.Do(http.MethodGet, path, token, "", "")
	if s != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, s, b)
	}
	return b
}

// TestAClientReadsItsOwnWritesThroughALaggingStandby: with the standby's
// replay paused, a client creates a contact and a lead, and at once reads
// each (GET), finds each in the lists, in the sync walk and in the events
// feed: the reads went to the primary, since the standby had not
// replayed the writes (which it lacks, as the test checks). Once replay
// resumes, the same reads are served by the standby, with the same
// answers.
func TestAClientReadsItsOwnWritesThroughALaggingStandby(t *testing.T) {
	t.Parallel()
	primary, standby, h := withStandby(t, 20*time.Millisecond)
	tn := h.NewFastTenant("Reads Own Writes")
	standby.CatchUp(t, primary)
	ctx := context.Background()
	super := standby.Super(t)
	if _, err := super.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	onStandby0, onPrimary0 := h.DB.ReadStat()

	contact := create(t, h, tn.Token, "/api/v1/contacts", `{"email":"mine@x.co"}`)
	lead := create(t, h, tn.Token, "/api/v1/leads", `{"contactId":"`+contact+`","title":"Mine"}`)
	reads := func() {
		t.Helper()
		if b := get(t, h, tn.Token, "/api/v1/contacts/"+contact); !strings.Contains(string(b), "mine@x.co") {
			t.Errorf("GET contact: %s", b)
		}
		if b := get(t, h, tn.Token, "/api/v1/leads/"+lead); !strings.Contains(string(b), `"Mine"`) {
			t.Errorf("GET lead: %s", b)
		}
		if b := get(t, h, tn.Token, "/api/v1/contacts"); !servertest.ContainsID(t, b, contact) {
			t.Errorf("the contact list lacks %s: %s", contact, b)
		}
		if b := get(t, h, tn.Token, "/api/v1/leads?contactId="+contact); !servertest.ContainsID(t, b, lead) {
			t.Errorf("the lead list lacks %s: %s", lead, b)
		}
		if ids, _ := syncWalk(t, h, tn.Token, "/api/v1/contacts"); !slices.Contains(ids, contact) {
			t.Errorf("the contacts sync walk lacks %s: %v", contact, ids)
		}
		if ids, _ := syncWalk(t, h, tn.Token, "/api/v1/leads"); !slices.Contains(ids, lead) {
			t.Errorf("the leads sync walk lacks %s: %v", lead, ids)
		}
		evs, _, err := feed(h, tn.Token, "", "contact.created,lead.created", 50)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventIDs(evs); !containsAll(got, []string{contact, lead}) {
			t.Errorf("the events feed holds %v; want %s and %s", got, contact, lead)
		}
	}
	reads()

	cid, _ := opaqueid.Parse(opaqueid.Contact, contact)
	var onStandbyRows int
	if err := super.QueryRow(ctx, `SELECT count(*) FROM contacts WHERE id = $1`, cid).Scan(&onStandbyRows); err != nil {
		t.Fatal(err)
	}
	if onStandbyRows != 0 {
		t.Fatal("the paused standby has the contact: the test shows nothing")
	}
	onStandby1, onPrimary1 := h.DB.ReadStat()
	if onStandby1 != onStandby0 || onPrimary1 == onPrimary0 {
		t.Errorf("reads on the paused standby: %d (want none), on the primary: %d (want some)",
			onStandby1-onStandby0, onPrimary1-onPrimary0)
	}

	if _, err := super.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	standby.CatchUp(t, primary)
	dbtest.Eventually(t, time.Minute, "a read served by the resumed standby", func() bool {
		s0, _ := h.DB.ReadStat()
		get(t, h, tn.Token, "/api/v1/contacts/"+contact)
		s1, _ := h.DB.ReadStat()
		return s1 > s0
	})
	reads()

	// Where the reads went is on /metrics.
	res, err := h.Admin.Client().Get(h.Admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	onStandby2, onPrimary2 := h.DB.ReadStat()
	for _, want := range []string{
		fmt.Sprintf(`partner_db_reads_total{server="standby"} %d`, onStandby2),
		fmt.Sprintf(`partner_db_reads_total{server="primary"} %d`, onPrimary2),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestSyncAndEventsOnAStandbyMissNothing is the sync and events gap test
// (TestFeedReaderNeverMissesALateCommit, TestSyncNeverMissesAChange) with
// the reads on a standby: a transaction on the primary writes a contact
// early and commits late while writers create many after it, and a
// reader follows the events feed, another the contacts sync walk, each
// on its sync cursor. Both get every contact exactly once: the standby's
// snapshot holds back what it has not seen end, as the primary's does.
// Most pages were served by the standby (the test counts them, so it
// fails if the reads silently stayed on the primary).
func TestSyncAndEventsOnAStandbyMissNothing(t *testing.T) {
	t.Parallel()
	// A generous wait: the pages should be the standby's.
	primary, _, h := withStandby(t, 10*time.Second)
	tn := h.NewFastTenant("Standby Feeds")
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	late := uuid.New()
	if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
		VALUES ($1, $2, 'late@x.co', now() - interval '1 minute', now() - interval '1 minute')`, ws, late); err != nil {
		t.Fatal(err)
	}
	onStandby0, onPrimary0 := h.DB.ReadStat()

	var mu sync.Mutex
	var created []string
	seenEvents, seenSync := map[string]int{}, map[string]int{}
	total := func() int { mu.Lock(); defer mu.Unlock(); return len(created) + 1 }
	stop := make(chan struct{})
	type pass func(cursor string) (ids []string, next string, err error)
	events := func(cursor string) ([]string, string, error) {
		evs, next, err := feed(h, tn.Token, cursor, "contact.created", 5)
		return eventIDs(evs), next, err
	}
	syncContacts := func(cursor string) ([]string, string, error) {
		return syncPass(h, tn.Token, "/api/v1/contacts", cursor)
	}
	done := make(chan error, 2)
	for _, r := range []struct {
		pass pass
		seen map[string]int
	}{{events, seenEvents}, {syncContacts, seenSync}} {
		go func() {
			cursor := ""
			read := func() error {
				ids, next, err := r.pass(cursor)
				if err != nil {
					return err
				}
				cursor = next
				mu.Lock()
				for _, id := range ids {
					r.seen[id]++
				}
				mu.Unlock()
				return nil
			}
			for {
				if err := read(); err != nil {
					done <- err
					return
				}
				select {
				case <-stop:
					// Until it caught up: a transaction open anywhere in
					// the cluster holds the last changes back a while.
					var err error
					dbtest.Until(time.Minute, func() bool {
						err = read()
						mu.Lock()
						n := len(r.seen)
						mu.Unlock()
						return err != nil || n >= total()
					})
					done <- err
					return
				default:
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 15 {
				s, _, b, err := h.Send(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json",
					fmt.Sprintf(`{"email":"c%d-%d@x.co"}`, w, i))
				if err != nil || s != http.StatusCreated {
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
		})
	}
	wg.Wait()
	close(stop)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	created = append(created, opaqueid.Format(opaqueid.Contact, late))
	for name, seen := range map[string]map[string]int{"events feed": seenEvents, "sync walk": seenSync} {
		for _, id := range created {
			if seen[id] != 1 {
				t.Errorf("%s: %s seen %d times, want once", name, id, seen[id])
			}
		}
		if len(seen) != len(created) {
			t.Errorf("%s: saw %d contacts, %d were created", name, len(seen), len(created))
		}
	}
	onStandby, onPrimary := h.DB.ReadStat()
	onStandby, onPrimary = onStandby-onStandby0, onPrimary-onPrimary0
	t.Logf("pages served by the standby: %d, by the primary: %d", onStandby, onPrimary)
	if onStandby == 0 || onPrimary > onStandby/10 {
		t.Errorf("pages served by the standby: %d, by the primary: %d; want nearly all by the standby", onStandby, onPrimary)
	}
}

// syncPass walks sort=updatedAt from cursor (the start when empty) to its
// last page, and returns the ids read and the sync cursor.
func syncPass(h *servertest.Harness, token, path, cursor string) ([]string, string, error) {
	var ids []string
	for {
		q := url.Values{"sort": {"updatedAt"}, "limit": {"5"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		status, b, err := servertest.Call(http.MethodGet, h.Public.URL+path+"?"+q.Encode(), token, "")
		if err != nil || status != http.StatusOK {
			return ids, cursor, fmt.Errorf("sync page: %d %s %v", status, b, err)
		}
		var p servertest.Page
		if err := json.Unmarshal(b, &p); err != nil {
			return ids, cursor, err
		}
		for _, c := range p.Contacts {
			ids = append(ids, c.ID)
		}
		switch {
		case p.Pagination.NextCursor != nil && p.Pagination.SyncCursor == nil:
			cursor = *p.Pagination.NextCursor
		case p.Pagination.SyncCursor != nil && p.Pagination.NextCursor == nil:
			return ids, *p.Pagination.SyncCursor, nil
		default:
			return ids, cursor, fmt.Errorf("page with nextCursor %v and syncCursor %v", p.Pagination.NextCursor, p.Pagination.SyncCursor)
		}
	}
}
