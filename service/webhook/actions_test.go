package webhook_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/svat/partnerapi/db/dbtest"
	webhookv1 "github.com/svat/partnerapi/gen/partner/webhook/v1"
	"github.com/svat/partnerapi/gen/partner/webhook/v1/webhookv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// feedCursor is a cursor of the workspace's event feed: the sync cursor
// of its last page.
func feedCursor(t *testing.T, h *servertest.Harness, c client) string {
	t.Helper()
	b := mustStatus(t, h, http.MethodGet, "/api/v1/events", c.token, "", http.StatusOK)
	var page struct {
		Pagination struct{ SyncCursor string } `json:"pagination"`
	}
	servertest.MustUnmarshal(t, b, &page)
	if page.Pagination.SyncCursor == "" {
		t.Fatalf("no sync cursor in %s", b)
	}
	return page.Pagination.SyncCursor
}

// TestReplay: 202 with an events cursor of the workspace; 400 naming
// fromCursor without one, with garbage or with another workspace's; 410
// cursor_expired once the cursor is older than the events kept.
func TestReplay(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Replay", allScopes...)
	other := newClient(h, "Hooks Replay Other", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["contact.created"]}`)
	replay := path + "/" + id + "/replay"
	cursor := feedCursor(t, h, c)
	if b := mustStatus(t, h, http.MethodPost, replay, c.token, `{"fromCursor":"`+cursor+`"}`, http.StatusAccepted); string(b) != "{}" {
		t.Errorf("replay answer = %s", b)
	}
	for _, body := range []string{`{}`, `{"fromCursor":""}`, `{"fromCursor":"garbage"}`, `{"fromCursor":"` + feedCursor(t, h, other) + `"}`} {
		status, _, b := h.Do(http.MethodPost, replay, c.token, jsonCT, body)
		wantProblem(t, body, status, b, http.StatusBadRequest, "malformed_request", "fromCursor")
	}
	h.Clock.Advance(31 * 24 * time.Hour)
	fresh := addClient(h, c.ws, c.member, allScopes...)
	// The endpoint is c's: fresh's is 404, c's (with a new token of the
	// same client) is 410.
	id2, _ := create(t, h, fresh.token, `{"url":"`+hookURL+`","eventTypes":["contact.created"]}`)
	status, _, b := h.Do(http.MethodPost, path+"/"+id2+"/replay", fresh.token, jsonCT, `{"fromCursor":"`+cursor+`"}`)
	wantProblem(t, "expired cursor", status, b, http.StatusGone, "cursor_expired", "")
}

// TestRotateSecret: the answer carries a new secret; the old one keeps
// signing until expireCurrentInSeconds have passed, so a test delivery
// verifies under either; with 0 it retires at once. Out-of-range values
// are 422.
func TestRotateSecret(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	h := servertest.New(t, servertest.Options{Config: rcv.config})
	c := newClient(h, "Hooks Rotate", allScopes...)
	id, created := create(t, h, c.token, `{"url":"`+rcv.srv.URL+`/in","eventTypes":["lead.created"]}`)
	old := created["secret"].(string)
	rotate := path + "/" + id + "/rotate-secret"
	e := servertest.Decode(t, mustStatus(t, h, http.MethodPost, rotate, c.token, `{"expireCurrentInSeconds":3600}`, http.StatusOK))
	fresh, _ := e["secret"].(string)
	if !strings.HasPrefix(fresh, "whsec_") || fresh == old || e["id"] != id {
		t.Fatalf("rotate answer: %v (old %q)", e, old)
	}
	var until time.Time
	if err := dbtest.Raw(t, h.DB).QueryRow(context.Background(),
		`SELECT previous_expires_at FROM webhook_endpoints WHERE id = $1`, uid(t, opaqueid.Webhook, id)).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if prev := open(t, servertest.SecretKeys, c.ws, id, readAtRest(t, h, id).sealedPrevious); prev != old || until.Sub(time.Now().Add(time.Hour)).Abs() > time.Minute {
		t.Errorf("previous secret kept until %v (want about an hour from now); same as the old one: %v", until, prev == old)
	}
	// A test delivery is signed with both.
	test := path + "/" + id + "/test"
	mustStatus(t, h, http.MethodPost, test, c.token, `{}`, http.StatusOK)
	got := rcv.last(t)
	for _, s := range []string{old, fresh} {
		if err := signature.Verify([]signature.Secret{signature.MustParseSecret(s)}, got.headers, got.body, time.Now(), time.Minute); err != nil {
			t.Errorf("delivery does not verify under one of the secrets: %v", err)
		}
	}
	// expireCurrentInSeconds 0: only the newest signs.
	newest := servertest.Decode(t, mustStatus(t, h, http.MethodPost, rotate, c.token, `{"expireCurrentInSeconds":0}`, http.StatusOK))["secret"].(string)
	mustStatus(t, h, http.MethodPost, test, c.token, `{}`, http.StatusOK)
	got = rcv.last(t)
	if err := signature.Verify([]signature.Secret{signature.MustParseSecret(newest)}, got.headers, got.body, time.Now(), time.Minute); err != nil {
		t.Errorf("delivery does not verify under the newest secret: %v", err)
	}
	if err := signature.Verify([]signature.Secret{signature.MustParseSecret(fresh)}, got.headers, got.body, time.Now(), time.Minute); err == nil {
		t.Errorf("a secret retired at once still signs")
	}
	for _, body := range []string{`{"expireCurrentInSeconds":-1}`, `{"expireCurrentInSeconds":604801}`} {
		status, _, b := h.Do(http.MethodPost, rotate, c.token, jsonCT, body)
		wantProblem(t, body, status, b, http.StatusUnprocessableEntity, "validation_failed", "expireCurrentInSeconds")
	}
	mustStatus(t, h, http.MethodPost, rotate, c.token, `{"expireCurrentInSeconds":604800}`, http.StatusOK)
}

// TestTestDelivery: POST …/test answers 200 with what the receiver
// answered, its status and the attempt's duration, a 500 included.
func TestTestDelivery(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	h := servertest.New(t, servertest.Options{Config: rcv.config})
	c := newClient(h, "Hooks Test", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+rcv.srv.URL+`/in","eventTypes":["lead.created"]}`)
	e := servertest.Decode(t, mustStatus(t, h, http.MethodPost, path+"/"+id+"/test", c.token, `{}`, http.StatusOK))
	if e["responseStatus"] != float64(http.StatusNoContent) || e["error"] != nil {
		t.Errorf("test answer = %v", e)
	}
	if _, ok := e["durationMs"]; !ok {
		t.Errorf("test answer without durationMs: %v", e)
	}
	got := rcv.last(t)
	var body struct{ Type string }
	if err := json.Unmarshal(got.body, &body); err != nil || body.Type != "webhook.test" {
		t.Errorf("test delivery body = %s", got.body)
	}
	rcv.answer(http.StatusInternalServerError)
	e = servertest.Decode(t, mustStatus(t, h, http.MethodPost, path+"/"+id+"/test", c.token, `{}`, http.StatusOK))
	if e["responseStatus"] != float64(http.StatusInternalServerError) {
		t.Errorf("test answer when the receiver fails = %v", e)
	}
}

// TestDeliveriesLog: attempts are listed newest first in keyset pages;
// limit and cursor are checked (400), and a cursor of another endpoint is
// refused.
func TestDeliveriesLog(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Log", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	id2, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	log := path + "/" + id + "/deliveries"
	if b := mustStatus(t, h, http.MethodGet, log, c.token, "", http.StatusOK); string(b) != `{"deliveries":[],"pagination":{}}` {
		t.Errorf("empty log = %s", b)
	}
	ws, ep := uid(t, opaqueid.Workspace, c.ws), uid(t, opaqueid.Webhook, id)
	for i, st := range []string{"failed", "pending", "succeeded"} {
		if _, err := dbtest.Raw(t, h.DB).Exec(context.Background(), `INSERT INTO webhook_attempts
			(workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status, duration_ms, error)
			VALUES ($1, $2, gen_random_uuid(), 'lead.created', $3, $4, CASE WHEN $4 = 'succeeded' THEN 200 END, 12, CASE WHEN $4 <> 'succeeded' THEN 'timeout' END)`,
			ws, ep, i+1, st); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Deliveries []struct {
			EventID, EventType, Status, Error   string
			Attempt, DurationMs, ResponseStatus int
			At                                  string
		}
		Pagination struct{ NextCursor string }
	}
	var p page
	servertest.MustUnmarshal(t, mustStatus(t, h, http.MethodGet, log+"?limit=2", c.token, "", http.StatusOK), &p)
	if len(p.Deliveries) != 2 || p.Deliveries[0].Status != "succeeded" || p.Deliveries[0].ResponseStatus != 200 ||
		p.Deliveries[1].Status != "pending" || p.Deliveries[1].Error != "timeout" || p.Deliveries[0].Attempt != 3 ||
		!strings.HasPrefix(p.Deliveries[0].EventID, "evt_") || p.Deliveries[0].DurationMs != 12 || p.Deliveries[0].At == "" ||
		p.Pagination.NextCursor == "" {
		t.Fatalf("first page = %+v", p)
	}
	next := p.Pagination.NextCursor
	p = page{}
	servertest.MustUnmarshal(t, mustStatus(t, h, http.MethodGet, log+"?limit=2&cursor="+url.QueryEscape(next), c.token, "", http.StatusOK), &p)
	if len(p.Deliveries) != 1 || p.Deliveries[0].Status != "failed" || p.Pagination.NextCursor != "" {
		t.Errorf("second page = %+v", p)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=abc", "cursor=garbage"} {
		status, _, b := h.Do(http.MethodGet, log+"?"+q, c.token, "", "")
		wantProblem(t, q, status, b, http.StatusBadRequest, "malformed_request", strings.Split(q, "=")[0])
	}
	status, _, b := h.Do(http.MethodGet, path+"/"+id2+"/deliveries?cursor="+url.QueryEscape(next), c.token, "", "")
	wantProblem(t, "another endpoint's cursor", status, b, http.StatusBadRequest, "malformed_request", "cursor")
}

// TestParityOverRPC: the same handler answers over Connect and gRPC: an
// endpoint created over Connect reads the same over gRPC and REST, and a
// refused URL is InvalidArgument validation_failed naming url.
func TestParityOverRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks RPC", allScopes...)
	ctx := context.Background()
	viaConnect := webhookv1connect.NewWebhookServiceClient(h.Public.Client(), h.Public.URL, connect.WithInterceptors(servertest.Bearer(c.token)))
	viaGRPC := webhookv1connect.NewWebhookServiceClient(h.HTTP2Client(), h.Public.URL, connect.WithGRPC(), connect.WithInterceptors(servertest.Bearer(c.token)))
	res, err := viaConnect.CreateWebhookEndpoint(ctx, connect.NewRequest(&webhookv1.CreateWebhookEndpointRequest{
		Endpoint: &webhookv1.WebhookEndpoint{Url: hookURL, EventTypes: []string{"lead.created"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Msg.GetEndpoint().GetSecret(), "whsec_") {
		t.Errorf("Connect create without secret: %v", res.Msg)
	}
	id := res.Msg.GetEndpoint().GetId()
	got, err := viaGRPC.GetWebhookEndpoint(ctx, connect.NewRequest(&webhookv1.GetWebhookEndpointRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	rest := mustStatus(t, h, http.MethodGet, path+"/"+id, c.token, "", http.StatusOK)
	asJSON, err := protojson.Marshal(got.Msg.GetEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	if !servertest.SameJSON(t, asJSON, rest) {
		t.Errorf("gRPC %s, REST %s", asJSON, rest)
	}
	_, err = viaGRPC.CreateWebhookEndpoint(ctx, connect.NewRequest(&webhookv1.CreateWebhookEndpointRequest{
		Endpoint: &webhookv1.WebhookEndpoint{Url: "https://127.0.0.1/x", EventTypes: []string{"lead.created"}},
	}))
	ce := servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
	servertest.AssertField(t, "gRPC create", ce, "url")
	_, err = viaConnect.GetWebhookEndpoint(ctx, connect.NewRequest(&webhookv1.GetWebhookEndpointRequest{Id: "whe_nope"}))
	servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")
}

// receiver is an https receiver on loopback that the server may reach
// (allowed network, trusted certificate), keeping the last delivery.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	got    []delivered
}

type delivered struct {
	headers signature.Headers
	body    []byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: http.StatusNoContent}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivered{signature.HeadersFrom(req.Header), b})
		st := r.status
		r.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) config(cfg *server.Config) {
	nets, err := outbound.ParseNetworks("127.0.0.0/8")
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(r.srv.Certificate())
	cfg.WebhookAllowedNetworks, cfg.WebhookRootCAs = nets, pool
}

func (r *receiver) answer(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// last is the latest delivery (a test delivery is synchronous: it has
// arrived when the test call answers).
func (r *receiver) last(t *testing.T) delivered {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		t.Fatal("no delivery arrived")
	}
	return r.got[len(r.got)-1]
}

// TestTestDeliveryTimesOutAtTheDeliveryTimeout: POST …/test to a receiver
// that never answers waits for the delivery timeout
// (PARTNER_WEBHOOK_TIMEOUT), not the request's database budget, and
// answers error "timeout", as a delivery attempt would record (it answered
// "connection_failed" when the budget ran out first).
func TestTestDeliveryTimesOutAtTheDeliveryTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	rcv := &receiver{srv: hang}
	const deliveryTimeout = 1500 * time.Millisecond
	h := servertest.New(t, servertest.Options{Config: func(cfg *server.Config) {
		rcv.config(cfg)
		cfg.RequestTimeout = 500 * time.Millisecond
		cfg.WebhookTimeout = deliveryTimeout
	}})
	c := newClient(h, "Hooks Hang", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hang.URL+`/in","eventTypes":["lead.created"]}`)
	e := servertest.Decode(t, mustStatus(t, h, http.MethodPost, path+"/"+id+"/test", c.token, `{}`, http.StatusOK))
	if e["error"] != "timeout" || e["responseStatus"] != nil {
		t.Errorf("test answer = %v, want error timeout", e)
	}
	if ms, _ := e["durationMs"].(float64); ms < float64((deliveryTimeout - 100*time.Millisecond).Milliseconds()) {
		t.Errorf("the test delivery gave up after %v ms, before the delivery timeout (%v)", e["durationMs"], deliveryTimeout)
	}
}
