package delivery_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/service/servertest"
	"github.com/svat/partnerapi/service/webhook/delivery"
)

func ids(rs []received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// feedIDs are the event ids of the workspace's feed of types, in order.
func feedIDs(t *testing.T, h *servertest.Harness, tok, types string) ([]string, []string) {
	t.Helper()
	var evs struct {
		Events []struct{ ID, Cursor string }
	}
	_, _, b := h.Do(http.MethodGet, "/api/v1/events?limit=100&types="+types, tok, "", "")
	servertest.MustUnmarshal(t, b, &evs)
	var out, cursors []string
	for _, e := range evs.Events {
		out = append(out, e.ID)
		cursors = append(cursors, e.Cursor)
	}
	return out, cursors
}

// TestADownReceiverGetsEverythingAndReplayResends: a receiver that answers
// 503 for a while gets every event once it is back, in the feed's order
// per record; a replay from an event's cursor sends exactly the later
// events again.
func TestADownReceiverGetsEverythingAndReplayResends(t *testing.T) {
	t.Parallel()
	h := harness(t, 20*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond, time.Second, 2*time.Second)
	tn := h.NewFastTenant("Hooks Down")
	rc := newReceiver(t)
	ep, secret := endpoint(t, h, tn, rc.URL, "contact.created")
	rc.trust(t, secret)
	var down atomic.Bool
	down.Store(true)
	rc.answer = func(int, received) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	for i := range 6 {
		create(t, h, tn.Token, "/api/v1/contacts", `{"email":"down`+string(rune('a'+i))+`@x.co"}`)
	}
	waitFor(t, "attempts while down", func() bool {
		var n int
		_ = dbtest.Raw(t, h.DB).QueryRow(context.Background(), `SELECT count(*) FROM webhook_attempts WHERE response_status = 503`).Scan(&n)
		return n >= 6
	})
	down.Store(false)
	feed, cursors := feedIDs(t, h, tn.Token, "contact.created")
	waitFor(t, "every event after the receiver is back", func() bool { return len(rc.accepted()) == len(feed) })
	got := ids(rc.accepted())
	slices.Sort(got)
	want := slices.Clone(feed)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("received %v, the feed has %v", got, want)
	}

	// Replay from the third event's cursor: the last three again.
	ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
	xid, seq, err := eventPosition(h, tn, cursors[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := h.DB.WithTx(context.Background(), func(tx db.DBTX) error {
		_, err := delivery.Replay(context.Background(), tx, ws, ep, xid, seq)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.Server.Webhooks.Wake()
	waitFor(t, "the replay", func() bool { return len(rc.accepted()) == len(feed)+3 })
	again := ids(rc.accepted()[len(feed):])
	slices.Sort(again)
	later := slices.Clone(feed[3:])
	slices.Sort(later)
	if !slices.Equal(again, later) {
		t.Errorf("the replay sent %v, want the events after the cursor %v", again, later)
	}
}

// eventPosition reads the feed position of the event with cursor c from
// the table (the cursor is opaque to the test).
func eventPosition(h *servertest.Harness, tn servertest.Tenant, c string) (xid, seq int64, err error) {
	var evs struct {
		Events []struct{ ID string }
	}
	_, _, b := h.Do(http.MethodGet, "/api/v1/events?limit=1&cursor="+c, tn.Token, "", "")
	servertest.MustUnmarshal(h.T, b, &evs)
	// The event after c; c's own position is just before it.
	id, _ := opaqueid.Parse(opaqueid.Event, evs.Events[0].ID)
	err = dbtest.Raw(h.T, h.DB).QueryRow(context.Background(), `SELECT change_xid, seq - 1 FROM events WHERE id = $1`, id).Scan(&xid, &seq)
	return xid, seq, err
}

// TestAFailingEndpointIsDisabledAndResumesWithoutAGap: an endpoint that
// fails for its whole (short) schedule is disabled ("failing"), keeps its
// place while events go on, and once enabled again gets every event, the
// given-up ones and those made while it was disabled. A 410 disables an
// endpoint at once ("gone").
func TestAFailingEndpointIsDisabledAndResumesWithoutAGap(t *testing.T) {
	t.Parallel()
	h := harness(t, 10*time.Millisecond, 10*time.Millisecond)
	tn := h.NewFastTenant("Hooks Failing")
	raw := dbtest.Raw(t, h.DB)
	ctx := context.Background()
	rc := newReceiver(t)
	ep, secret := endpoint(t, h, tn, rc.URL, "contact.created")
	rc.trust(t, secret)
	var broken atomic.Bool
	broken.Store(true)
	rc.answer = func(int, received) int {
		if broken.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	gone := newReceiver(t)
	goneEP, goneSecret := endpoint(t, h, tn, gone.URL, "contact.created")
	gone.trust(t, goneSecret)
	gone.answer = func(int, received) int { return http.StatusGone }

	status := func(id uuid.UUID) (s, reason string) {
		var r *string
		if err := raw.QueryRow(ctx, `SELECT status, disabled_reason FROM webhook_endpoints WHERE id = $1`, id).Scan(&s, &r); err != nil {
			t.Fatal(err)
		}
		if r != nil {
			reason = *r
		}
		return s, reason
	}
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"f1@x.co"}`)
	waitFor(t, "the failing endpoint disabled", func() bool { s, _ := status(ep); return s == "disabled" })
	if s, r := status(ep); r != "failing" {
		t.Errorf("failing endpoint: %s %s", s, r)
	}
	var goneAttempts int
	waitFor(t, "the 410 endpoint disabled", func() bool { s, _ := status(goneEP); return s == "disabled" })
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1`, goneEP).Scan(&goneAttempts)
	if s, r := status(goneEP); r != "gone" || goneAttempts != 1 {
		t.Errorf("410 endpoint: %s %s after %d attempts, want disabled at once", s, r, goneAttempts)
	}
	// Events while disabled.
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"f2@x.co"}`)
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"f3@x.co"}`)
	broken.Store(false)
	if err := h.DB.WithTx(ctx, func(tx db.DBTX) error {
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			return err
		}
		ws, _ := opaqueid.Parse(opaqueid.Workspace, tn.WorkspaceID)
		if err := delivery.Resume(ctx, tx, ws, ep); err != nil {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL WHERE id = $1`, ep); err != nil {
		t.Fatal(err)
	}
	h.Server.Webhooks.Wake()
	feed, _ := feedIDs(t, h, tn.Token, "contact.created")
	waitFor(t, "every event after the endpoint is enabled again", func() bool { return len(rc.accepted()) == len(feed) })
	// Different records go in parallel: the set, not the order, is the
	// promise here.
	got := ids(rc.accepted())
	slices.Sort(got)
	slices.Sort(feed)
	if !slices.Equal(got, feed) {
		t.Errorf("received %v, want the whole feed %v", got, feed)
	}
}

// TestOneHangingReceiverDoesNotDelayAnother: an endpoint whose receiver
// never answers (until its timeout) takes its own share of the workers
// only; another endpoint of the same events gets them at once.
func TestOneHangingReceiverDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	h := harness(t, time.Minute)
	tn := h.NewFastTenant("Hooks Hang")
	hanging := newReceiver(t)
	_, hs := endpoint(t, h, tn, hanging.URL, "contact.created")
	hanging.trust(t, hs)
	release := make(chan struct{})
	hanging.hang = release
	t.Cleanup(func() { close(release) })
	fine := newReceiver(t)
	_, fs := endpoint(t, h, tn, fine.URL, "contact.created")
	fine.trust(t, fs)
	start := time.Now()
	for i := range 20 {
		create(t, h, tn.Token, "/api/v1/contacts", `{"email":"hang`+string(rune('a'+i))+`@x.co"}`)
	}
	waitFor(t, "the healthy receiver's 20 events", func() bool { return len(fine.accepted()) == 20 })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the healthy receiver waited %v", d)
	}
}

// TestRefusedAddressesFailAtDelivery: with no network allowed, an endpoint
// whose URL (or whose host name's address) is loopback is never dialled:
// its attempts fail with address_not_allowed.
func TestRefusedAddressesFailAtDelivery(t *testing.T) {
	t.Parallel()
	h := servertest.New(t) // no allowed networks
	tn := h.NewFastTenant("Hooks Refused")
	var dialled atomic.Int32
	rc := newReceiver(t)
	rc.answer = func(int, received) int { dialled.Add(1); return 200 }
	ep1, _ := endpoint(t, h, tn, "https://localhost:"+portOf(rc.URL)+"/hook", "contact.created")
	ep2, _ := endpoint(t, h, tn, "https://127.0.0.1:"+portOf(rc.URL)+"/hook", "contact.created")
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"refused@x.co"}`)
	raw := dbtest.Raw(t, h.DB)
	for _, ep := range []uuid.UUID{ep1, ep2} {
		waitFor(t, "a refused attempt", func() bool {
			var e *string
			_ = raw.QueryRow(context.Background(), `SELECT error FROM webhook_attempts WHERE endpoint_id = $1 LIMIT 1`, ep).Scan(&e)
			return e != nil && *e == "address_not_allowed"
		})
	}
	if dialled.Load() != 0 {
		t.Errorf("the loopback receiver was reached %d times", dialled.Load())
	}
}

func portOf(u string) string { return u[len("http://127.0.0.1:"):] }

// TestRotationSignsWithBothSecrets: while the previous secret has not
// expired, a delivery verifies under either.
func TestRotationSignsWithBothSecrets(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Rotation")
	rc := newReceiver(t)
	ep, old := endpoint(t, h, tn, rc.URL, "contact.created")
	current := signature.NewSecret()
	if _, err := dbtest.Raw(t, h.DB).Exec(context.Background(), `UPDATE webhook_endpoints
		SET previous_secret = secret, secret = $2, previous_expires_at = now() + interval '1 hour' WHERE id = $1`, ep, current); err != nil {
		t.Fatal(err)
	}
	for _, trusted := range []string{old, current} {
		rc.trust(t, trusted)
		n := len(rc.accepted())
		create(t, h, tn.Token, "/api/v1/contacts", `{"email":"rot`+trusted[6:10]+`@x.co"}`)
		waitFor(t, "a delivery verified with one of the secrets", func() bool { return len(rc.accepted()) == n+1 })
	}
}

// TestClientStateGovernsItsEndpoints: an inactive client's endpoints wait
// (nothing is sent, nothing lost), and get everything once it is active
// again; a revoked client's endpoints are disabled for good.
func TestClientStateGovernsItsEndpoints(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Client State")
	ctx := context.Background()
	hookClient, hookSecret := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read")
	hooks := servertest.Tenant{WorkspaceID: tn.WorkspaceID, MemberID: tn.MemberID, ClientID: hookClient, ClientSecret: hookSecret}
	rc := newReceiver(t)
	ep, secret := endpoint(t, h, hooks, rc.URL, "contact.created")
	rc.trust(t, secret)
	if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{MemberId: tn.MemberID, ClientId: hookClient})); err != nil {
		t.Fatal(err)
	}
	create(t, h, tn.Token, "/api/v1/contacts", `{"email":"paused@x.co"}`)
	raw := dbtest.Raw(t, h.DB)
	waitFor(t, "the event fanned out to the paused endpoint", func() bool {
		var n int
		_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ep).Scan(&n)
		return n == 1
	})
	h.Server.Webhooks.Wake()
	var attempts int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1`, ep).Scan(&attempts)
	if attempts != 0 || len(rc.accepted()) != 0 {
		t.Fatalf("an inactive client's endpoint was sent %d attempts", attempts)
	}
	if _, err := h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{MemberId: tn.MemberID, ClientId: hookClient})); err != nil {
		t.Fatal(err)
	}
	h.Server.Webhooks.Wake()
	waitFor(t, "the waiting event after the client is active again", func() bool { return len(rc.accepted()) == 1 })
	if _, err := h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{MemberId: tn.MemberID, ClientId: hookClient})); err != nil {
		t.Fatal(err)
	}
	var status, reason string
	if err := raw.QueryRow(ctx, `SELECT status, disabled_reason FROM webhook_endpoints WHERE id = $1`, ep).Scan(&status, &reason); err != nil || status != "disabled" || reason != "client_revoked" {
		t.Errorf("a revoked client's endpoint: %s %s %v", status, reason, err)
	}
}

// TestAnEventTheClientMayNotReadIsDropped: a delivery whose event type the
// endpoint's client can no longer read (its scopes narrowed since the
// fan-out) is dropped at the claim, never sent, while the same claim
// sends the endpoint's readable ones.
func TestAnEventTheClientMayNotReadIsDropped(t *testing.T) {
	t.Parallel()
	h := harness(t)
	tn := h.NewFastTenant("Hooks Scope Narrowed")
	ctx := context.Background()
	hookClient, hookSecret := h.Client(tn.WorkspaceID, tn.MemberID, "contacts:read", "leads:read")
	hooks := servertest.Tenant{WorkspaceID: tn.WorkspaceID, MemberID: tn.MemberID, ClientID: hookClient, ClientSecret: hookSecret}
	rc := newReceiver(t)
	ep, secret := endpoint(t, h, hooks, rc.URL, "contact.created", "lead.created")
	rc.trust(t, secret)
	if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{MemberId: tn.MemberID, ClientId: hookClient})); err != nil {
		t.Fatal(err)
	}
	lead := create(t, h, tn.Token, "/api/v1/leads", `{"contact":{"email":"narrowed@x.co"},"title":"Narrowed"}`)
	raw := dbtest.Raw(t, h.DB)
	waitFor(t, "both events fanned out to the paused endpoint", func() bool {
		var n int
		_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ep).Scan(&n)
		return n == 2
	})
	clientID, _ := opaqueid.Parse(opaqueid.Client, hookClient)
	if _, err := raw.Exec(ctx, `UPDATE api_clients SET scopes = '{leads:read}', status = 'active' WHERE id = $1`, clientID); err != nil {
		t.Fatal(err)
	}
	h.Server.Webhooks.Wake()
	waitFor(t, "the lead's event", func() bool { return len(rc.accepted()) == 1 })
	waitFor(t, "no delivery left", func() bool {
		var n int
		_ = raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ep).Scan(&n)
		return n == 0
	})
	got := rc.accepted()
	if len(got) != 1 || got[0].Type != "lead.created" || !strings.Contains(string(got[0].Body), lead) {
		t.Fatalf("sent %d deliveries, want the lead.created of %s only: %+v", len(got), lead, got)
	}
	var attempts int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1 AND event_type = 'contact.created'`, ep).Scan(&attempts); err != nil || attempts != 0 {
		t.Errorf("contact.created attempts: %d %v, want none", attempts, err)
	}
}
