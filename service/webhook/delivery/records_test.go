package delivery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// TestAttemptRecordsCarryNullForNone: the delivery log says "none" with
// NULL, never with a stand-in: a successful attempt's error is NULL (and
// its status the receiver's), a failed connection's response status is
// NULL (and its error says why); the failed one is due again on the
// schedule, the successful one is gone from the deliveries.
func TestAttemptRecordsCarryNullForNone(t *testing.T) {
	t.Parallel()
	h := harness(t, time.Hour)
	tn := h.NewFastTenant("Hooks Nulls")
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	rc := newReceiver(t)
	ok, secret := endpoint(t, h, tn, rc.URL, "contact.created")
	rc.trust(t, secret)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more: the connection is refused
	refused, _ := endpoint(t, h, tn, closed.URL, "contact.created")
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"nulls@x.co"}`)

	type logged struct {
		status         string
		responseStatus *int32
		err            *string
	}
	attempts := func(ep uuid.UUID) []logged {
		rows, err := raw.Query(ctx, `SELECT status, response_status, error FROM webhook_attempts WHERE endpoint_id = $1`, ep)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []logged
		for rows.Next() {
			var l logged
			if err := rows.Scan(&l.status, &l.responseStatus, &l.err); err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	waitFor(t, "an attempt of each endpoint", func() bool { return len(attempts(ok)) > 0 && len(attempts(refused)) > 0 })

	if got := attempts(ok); len(got) != 1 || got[0].status != "succeeded" || got[0].responseStatus == nil ||
		*got[0].responseStatus != http.StatusNoContent || got[0].err != nil {
		t.Errorf("the successful attempt is logged as %+v, want succeeded, 204 and a NULL error", got)
	}
	if got := attempts(refused); len(got) != 1 || got[0].status != "pending" || got[0].responseStatus != nil ||
		got[0].err == nil || *got[0].err == "" {
		t.Errorf("the refused connection's attempt is logged as %+v, want pending, a NULL status and an error", got)
	} else {
		t.Logf("refused connection: error %q", *got[0].err)
	}
	var pending int
	var due time.Time
	if err := raw.QueryRow(ctx, `SELECT count(*), max(next_attempt_at) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending' AND lease_until IS NULL`,
		refused).Scan(&pending, &due); err != nil || pending != 1 || time.Until(due) < 30*time.Minute {
		t.Errorf("the refused delivery: %d pending, due %s (%v), want one due in about an hour", pending, due, err)
	}
	var left int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ok).Scan(&left); err != nil || left != 0 {
		t.Errorf("the delivered event left %d deliveries (%v)", left, err)
	}
}

// TestTheClaimDropsATypeTheTableDoesNotMap: the scope that reads an event
// type comes from the Go table of types (eventtype.All) alone: a delivery
// of a type it does not list (here contact.merged, which the database's
// old rule, "contact.%" is contacts:read, would have sent) is dropped at
// the claim, never sent or logged, while the same endpoint's known types
// are delivered.
func TestTheClaimDropsATypeTheTableDoesNotMap(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Unknown Type")
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	rc := newReceiver(t)
	ep, secret := endpoint(t, h, tn, rc.URL, "contact.created")
	rc.trust(t, secret)
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	if _, err := raw.Exec(ctx, `INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
		VALUES ($1, $2, 1, 1, gen_random_uuid(), 'contact.merged', gen_random_uuid())`, ws, ep); err != nil {
		t.Fatal(err)
	}
	id := create(t, h, tn.Token, "/api/v1/contacts", `{"email":"known@x.co"}`)
	h.Server.Webhooks.Changed()
	waitFor(t, "the known type delivered", func() bool { return len(rc.accepted()) == 1 })
	waitFor(t, "no delivery left", func() bool {
		var n int
		_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ep).Scan(&n)
		return n == 0
	})
	if got := rc.accepted(); len(got) != 1 || got[0].Type != "contact.created" || got[0].Object != id {
		t.Errorf("sent %+v, want the contact.created of %s only", got, id)
	}
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1 AND event_type = 'contact.merged'`, ep).Scan(&n); err != nil || n != 0 {
		t.Errorf("contact.merged attempts: %d %v, want none", n, err)
	}
}

// TestANewEndpointGetsEveryEventAfterItsCreation: a new endpoint's place
// in the feed (delivery.Start) is a real position, the workspace's last
// event below the watermark, and it gets exactly the events committed
// after it was made: none of the writes before, the write of a
// transaction in flight while it was made (committed after), and the
// writes after. An endpoint of a workspace with no event yet starts at
// (0, 0) and gets the workspace's first. (Exactly, when no transaction
// older than the writes before runs: see WebhookStart.)
func TestANewEndpointGetsEveryEventAfterItsCreation(t *testing.T) {
	t.Parallel()
	h := harness(t)
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	place := func(ep uuid.UUID) (xid, seq int64) {
		if err := raw.QueryRow(ctx, `SELECT after_xid, after_seq FROM webhook_endpoints WHERE id = $1`, ep).Scan(&xid, &seq); err != nil {
			t.Fatal(err)
		}
		return xid, seq
	}

	empty := h.NewFastTenant("Hooks Start Empty")
	first := newReceiver(t)
	fe, fs := endpoint(t, h, empty, first.URL, "contact.created")
	first.trust(t, fs)
	if x, s := place(fe); x != 0 || s != 0 {
		t.Errorf("an endpoint of a workspace with no event starts at (%d, %d), want (0, 0)", x, s)
	}
	firstID := create(t, h, empty.Token, "/api/v1/contacts", `{"email":"first@x.co"}`)
	waitFor(t, "the empty workspace's first event", func() bool { return len(first.accepted()) == 1 })
	if got := first.accepted(); got[0].Object != firstID {
		t.Errorf("the first endpoint got %+v, want %s", got, firstID)
	}

	tn := h.NewFastTenant("Hooks Start")
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	for i := range 3 {
		create(t, h, tn.Token, "/api/v1/contacts", `{"email":"before`+string(rune('a'+i))+`@x.co"}`)
	}
	inFlight, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inFlight.Rollback(ctx) }()
	during := uuid.New()
	if _, err := inFlight.Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, created_at, updated_at)
		VALUES ($1, $2, 'during@x.co', now(), now())`, ws, during); err != nil {
		t.Fatal(err)
	}
	// The watermark is the cluster's oldest transaction: another test's,
	// begun before the writes above and not yet ended, holds it below
	// them, and the endpoint would start before them (and get them: the
	// feed cannot tell them from later writes). Once no transaction older
	// than inFlight runs, none can again.
	var inFlightXID int64
	if err := inFlight.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&inFlightXID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watermark at the in-flight transaction", func() bool {
		var horizon int64
		return raw.QueryRow(ctx, `SELECT partner_sync_horizon()`).Scan(&horizon) == nil && horizon == inFlightXID
	})
	rc := newReceiver(t)
	ep, secret := endpoint(t, h, tn, rc.URL, "contact.created")
	rc.trust(t, secret)
	var lastXID, lastSeq int64
	if err := raw.QueryRow(ctx, `SELECT change_xid, seq FROM events WHERE workspace_id = $1 ORDER BY change_xid DESC, seq DESC LIMIT 1`,
		ws).Scan(&lastXID, &lastSeq); err != nil {
		t.Fatal(err)
	}
	if x, s := place(ep); x != lastXID || s != lastSeq {
		t.Errorf("the endpoint starts at (%d, %d), want the last committed event's (%d, %d)", x, s, lastXID, lastSeq)
	}
	if err := inFlight.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{opaqueid.Format(opaqueid.Contact, during)}
	for i := range 2 {
		want = append(want, create(t, h, tn.Token, "/api/v1/contacts", `{"email":"after`+string(rune('a'+i))+`@x.co"}`))
	}
	waitFor(t, "the events after the endpoint", func() bool { return len(rc.accepted()) >= len(want) })
	// The fan-out moves an endpoint's place forward in feed order: with
	// the later events delivered and nothing left, any earlier event it
	// took would be delivered or logged by now.
	waitFor(t, "no delivery left", func() bool {
		var n int
		_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ep).Scan(&n)
		return n == 0
	})
	var logged int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1`, ep).Scan(&logged); err != nil || logged != len(want) {
		t.Errorf("the new endpoint's attempts: %d (%v), want %d", logged, err, len(want))
	}
	var got []string
	for _, r := range rc.accepted() {
		got = append(got, r.Object)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the new endpoint got %v, want the in-flight write's and the later ones %v", got, want)
	}
}
