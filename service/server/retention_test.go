package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/work/retention"
	"github.com/svat/partnerapi/service/servertest"
)

// TestRetentionSweeps: expired tokens go 30 days after expiry and audit
// events after 400 days, and one run deletes no more than its bound.
func TestRetentionSweeps(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, m := h.Workspace("Retention Co")
	id, sec := h.FastClient(ws, m, "contacts:read")
	var tokens []string
	for range 5 {
		tokens = append(tokens, h.Token(id, sec, ""))
	}
	now := time.Now()
	day := 24 * time.Hour
	// Expired 29 days ago: kept.
	if r, err := retention.Sweep(ctx, h.DB, now.Add(365*day+29*day), 0); err != nil || r.Tokens != 0 || r.AuditEvents != 0 {
		t.Fatalf("29 days after expiry: %+v %v", r, err)
	}
	// Expired 31 days ago: deleted, two per batch, one batch per run.
	r, err := retention.SweepBounded(ctx, h.DB, now.Add(365*day+31*day), 0, 2, 1)
	if err != nil || r.Tokens != 2 {
		t.Fatalf("bounded run: %+v %v", r, err)
	}
	if r, err = retention.Sweep(ctx, h.DB, now.Add(365*day+31*day), 0); err != nil || r.Tokens != 3 || r.AuditEvents != 0 {
		t.Fatalf("second run: %+v %v", r, err)
	}
	// The client still works, with a fresh token.
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", h.Token(id, sec, ""), "", ""); s != 200 {
		t.Fatalf("fresh token: %d", s)
	}
	if s, _, _ := h.Do(http.MethodGet, "/api/v1/me", tokens[0], "", ""); s != 401 {
		t.Fatalf("deleted token: %d", s)
	}
	events := func() int {
		res, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: m}))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Msg.GetEvents())
	}
	before := events()
	if before == 0 {
		t.Fatal("no audit events to sweep")
	}
	if r, err := retention.Sweep(ctx, h.DB, now.Add(399*day), 0); err != nil || r.AuditEvents != 0 {
		t.Fatalf("399 days: %+v %v", r, err)
	}
	// The read that counted them is audited too (after its page).
	if r, err := retention.Sweep(ctx, h.DB, now.Add(401*day), 0); err != nil || r.AuditEvents != int64(before)+1 {
		t.Fatalf("401 days: %+v %v, want %d events", r, err, before+1)
	}
	if n := events(); n != 0 {
		t.Fatalf("%d events after the sweep", n)
	}
}

// TestEventRetention: events of the feed go after their retention, a
// bounded number per run, and a cursor from before is then refused (410)
// rather than served with a gap.
func TestEventRetention(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	tn := h.NewTenant("Event Retention Co")
	for _, e := range []string{"a", "b", "c"} {
		if s, _, b := h.Do(http.MethodPost, "/api/v1/contacts", tn.Token, "application/json", `{"email":"`+e+`@x.co"}`); s != 201 {
			t.Fatalf("create: %d %s", s, b)
		}
	}
	var page struct {
		Events []struct{ Cursor string }
	}
	// A transaction open anywhere in the cluster holds the feed back a while.
	dbtest.Eventually(t, time.Minute, "the events to be visible", func() bool {
		_, _, b := h.Do(http.MethodGet, "/api/v1/events?limit=1", tn.Token, "", "")
		servertest.MustUnmarshal(t, b, &page)
		return len(page.Events) == 1
	})
	day := 24 * time.Hour
	now := time.Now()
	if r, err := retention.Sweep(ctx, h.DB, now.Add(29*day), 0); err != nil || r.Events != 0 {
		t.Fatalf("29 days: %+v %v", r, err)
	}
	if r, err := retention.SweepBounded(ctx, h.DB, now.Add(31*day), 0, 2, 1); err != nil || r.Events != 2 {
		t.Fatalf("31 days, bounded: %+v %v", r, err)
	}
	if r, err := retention.Sweep(ctx, h.DB, now.Add(8*day), 7*day); err != nil || r.Events != 1 {
		t.Fatalf("a 7-day retention after 8 days: %+v %v", r, err)
	}
	h.Clock.Advance(31 * day)
	tok := h.Token(tn.ClientID, tn.ClientSecret, "")
	if s, _, b := h.Do(http.MethodGet, "/api/v1/events?cursor="+page.Events[0].Cursor, tok, "", ""); s != http.StatusGone {
		t.Errorf("a cursor older than the retention: %d %s", s, b)
	}
}
