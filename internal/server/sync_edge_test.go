package server_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/servertest"
)

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
		var p page
		mustUnmarshal(t, b, &p)
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
	lead := decode(t, b)["id"].(string)
	if _, _, b := h.Do(http.MethodGet, "/api/v1/leads?sort=createdAt", tn.Token, "", ""); !containsID(t, b, lead) {
		t.Fatalf("the committed lead is not listed by createdAt: %s", b)
	}
	for range 3 {
		if ids, next := syncPage(cursor); len(ids) != 0 || next != cursor {
			t.Fatalf("while transaction %s is open elsewhere, the sync walk served %v (cursor %s -> %s)", xid, ids, cursor, next)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ids, _ := syncPage(cursor)
		if len(ids) == 1 && ids[0] == lead {
			break
		}
		if len(ids) != 0 || time.Now().After(deadline) {
			t.Fatalf("after the transaction ended, the sync walk served %v, want [%s]", ids, lead)
		}
	}
}

// containsID reports whether a list page holds the record id.
func containsID(t *testing.T, body []byte, id string) bool {
	t.Helper()
	var p page
	mustUnmarshal(t, body, &p)
	for _, l := range p.Leads {
		if l.ID == id {
			return true
		}
	}
	for _, c := range p.Contacts {
		if c.ID == id {
			return true
		}
	}
	return false
}
