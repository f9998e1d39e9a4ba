package webhook_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	webhookv1 "github.com/svat/partnerapi/gen/partner/webhook/v1"
	"github.com/svat/partnerapi/gen/partner/webhook/v1/webhookv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// receivers lets the server deliver to each of the receivers (loopback
// allowed, their certificates trusted), and believes X-Forwarded-For from
// loopback, as behind a proxy on the same host.
func receivers(rs ...*receiver) func(*server.Config) {
	return func(cfg *server.Config) {
		nets, err := outbound.ParseNetworks("127.0.0.0/8")
		if err != nil {
			panic(err)
		}
		pool := x509.NewCertPool()
		for _, r := range rs {
			pool.AddCert(r.srv.Certificate())
		}
		cfg.WebhookAllowedNetworks, cfg.WebhookRootCAs = nets, pool
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
}

// received tells whether a delivery to r carried s.
func (r *receiver) received(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.got {
		if strings.Contains(string(d.body), s) {
			return true
		}
	}
	return false
}

// hashPrefix is what the audit log records of a token: the first 16 hex
// digits of its SHA-256.
func hashPrefix(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// TestALeakedSecretsEndpointIsCutOff follows product.md's leak: a thief
// with the client's secret makes a webhook endpoint. Its creation is in
// the audit log with the client, the token (its hash prefix, never the
// token) and the source address (X-Forwarded-For past a trusted proxy, as
// the rate limits read it); so are a create over Connect and the thief's
// later changes. A rotation alone leaves the endpoint receiving every new
// contact (the documented behaviour); a rotation with disable_webhooks
// disables it (credentials_revoked) in the rotation's transaction, so the
// next contact reaches the owner's new endpoint and not the thief's; and
// the owner's token cannot enable it again. Before, the audit row had no
// token or source, the flag did not exist, and an enable brought the
// endpoint back.
func TestALeakedSecretsEndpointIsCutOff(t *testing.T) {
	t.Parallel()
	thiefRcv, ownerRcv := newReceiver(t), newReceiver(t)
	h := servertest.New(t, servertest.Options{Config: receivers(thiefRcv, ownerRcv)})
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	ws, m := h.Workspace("Leaked Secret Co")
	clientID, leaked := h.FastClient(ws, m, allScopes...)
	stolen := h.Token(clientID, leaked, "")

	// The thief's endpoint, from 203.0.113.7 behind the trusted proxy.
	status, _, b := h.Do(http.MethodPost, path, stolen, jsonCT, `{"url":"`+thiefRcv.srv.URL+`/collect","eventTypes":["contact.created"]}`,
		"X-Forwarded-For", "203.0.113.7")
	if status != http.StatusCreated {
		t.Fatalf("the thief's create: %d %s", status, b)
	}
	thiefEP := servertest.ID(t, b)

	// Its audit row names the client, the token and the source, and holds
	// nothing of the token itself.
	var client, tokenPrefix, source, row string
	if err := raw.QueryRow(ctx, `SELECT client_id::text, coalesce(token_hash_prefix, ''), coalesce(host(source_address), ''), a::text
		FROM audit_events a WHERE workspace_id = $1 AND action = 'webhook_endpoint.create' AND target_id = $2`,
		uid(t, opaqueid.Workspace, ws), thiefEP).Scan(&client, &tokenPrefix, &source, &row); err != nil {
		t.Fatal(err)
	}
	if client != uid(t, opaqueid.Client, clientID).String() || tokenPrefix != hashPrefix(stolen) || source != "203.0.113.7" {
		t.Errorf("the create's audit row: client %s, token %q, source %q; want %s, %q, 203.0.113.7", client, tokenPrefix, source, clientID, hashPrefix(stolen))
	}
	if strings.Contains(row, stolen) || strings.Contains(row, strings.TrimPrefix(stolen, "svat_")[:16]) {
		t.Errorf("the audit row holds the token: %s", row)
	}
	// A member reading the log sees them too.
	events, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: m}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Msg.GetEvents() {
		if e.GetAction() == "webhook_endpoint.create" && e.GetTargetId() == thiefEP {
			found = e.GetClientId() == clientID && e.GetTokenHashPrefix() == hashPrefix(stolen) && e.GetSourceAddress() == "203.0.113.7"
			if !found {
				t.Errorf("ListAuditEvents shows the create as %v", e)
			}
		}
	}
	if !found {
		t.Error("ListAuditEvents has no webhook_endpoint.create of the thief's endpoint")
	}
	// Over Connect, from the peer itself (no X-Forwarded-For); a change
	// is recorded the same way.
	viaConnect := webhookv1connect.NewWebhookServiceClient(h.Public.Client(), h.Public.URL, connect.WithInterceptors(servertest.Bearer(stolen)))
	res, err := viaConnect.CreateWebhookEndpoint(ctx, connect.NewRequest(&webhookv1.CreateWebhookEndpointRequest{
		Endpoint: &webhookv1.WebhookEndpoint{Url: thiefRcv.srv.URL + "/second", EventTypes: []string{"lead.created"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	second := res.Msg.GetEndpoint().GetId()
	mustStatus(t, h, http.MethodPatch, path+"/"+second, stolen, `{"description":"mine now"}`, http.StatusOK)
	rows, err := raw.Query(ctx, `SELECT action, coalesce(token_hash_prefix, ''), coalesce(host(source_address), '') FROM audit_events
		WHERE workspace_id = $1 AND target_id = $2 ORDER BY id`, uid(t, opaqueid.Workspace, ws), second)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for rows.Next() {
		var a, tok, src string
		if err := rows.Scan(&a, &tok, &src); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, a+" "+tok+" "+src)
	}
	rows.Close()
	want := "webhook_endpoint.create " + hashPrefix(stolen) + " 127.0.0.1\nwebhook_endpoint.update " + hashPrefix(stolen) + " 127.0.0.1"
	if got := strings.Join(seen, "\n"); got != want {
		t.Errorf("the Connect create and the update are audited as\n%s\nwant\n%s", got, want)
	}

	// A rotation alone ends the thief's token, not its endpoint: the
	// owner's next contact reaches it (documented).
	rot, err := h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: clientID, MemberId: m}))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := h.Do(http.MethodGet, "/api/v1/me", stolen, "", ""); status != http.StatusUnauthorized {
		t.Fatalf("the stolen token after the rotation: %d, want 401", status)
	}
	owner := h.Token(clientID, rot.Msg.GetClientSecret(), "")
	mustStatus(t, h, http.MethodPost, "/api/v1/contacts", owner, `{"email":"after-plain-rotation@leak.example"}`, http.StatusCreated)
	dbtest.Eventually(t, 30*time.Second, "the thief's endpoint receiving after a plain rotation", func() bool {
		return thiefRcv.received("after-plain-rotation@leak.example")
	})

	// A rotation with disable_webhooks cuts it off.
	rot, err = h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: clientID, MemberId: m, DisableWebhooks: true}))
	if err != nil {
		t.Fatal(err)
	}
	owner = h.Token(clientID, rot.Msg.GetClientSecret(), "")
	e := servertest.Decode(t, mustStatus(t, h, http.MethodGet, path+"/"+thiefEP, owner, "", http.StatusOK))
	if e["status"] != "disabled" || e["disabledReason"] != "credentials_revoked" {
		t.Fatalf("the thief's endpoint after rotate-secret with disable_webhooks: %v", e)
	}
	ownerEP, _ := create(t, h, owner, `{"url":"`+ownerRcv.srv.URL+`/in","eventTypes":["contact.created"]}`)
	mustStatus(t, h, http.MethodPost, "/api/v1/contacts", owner, `{"email":"after-disabling@leak.example"}`, http.StatusCreated)
	dbtest.Eventually(t, 30*time.Second, "the owner's endpoint receiving the contact", func() bool {
		return ownerRcv.received("after-disabling@leak.example")
	})
	// The fan-out that reached the owner's endpoint passed the thief's:
	// it has no delivery of that event, and received nothing of it.
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries
		WHERE endpoint_id = $1 AND event_id IN (SELECT event_id FROM webhook_deliveries WHERE endpoint_id = $2)`,
		uid(t, opaqueid.Webhook, thiefEP), uid(t, opaqueid.Webhook, ownerEP)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 || thiefRcv.received("after-disabling@leak.example") {
		t.Errorf("the disabled endpoint got the next contact (%d deliveries)", n)
	}

	// The client cannot enable it again, with any token.
	status, _, b = h.Do(http.MethodPatch, path+"/"+thiefEP, owner, jsonCT, `{"status":"enabled"}`)
	wantProblem(t, "enable an endpoint disabled with the credentials", status, b, http.StatusConflict, "failed_precondition", "")
	e = servertest.Decode(t, mustStatus(t, h, http.MethodGet, path+"/"+thiefEP, owner, "", http.StatusOK))
	if e["status"] != "disabled" || e["disabledReason"] != "credentials_revoked" {
		t.Fatalf("after the client's enable: %v", e)
	}
}

// TestTheClientCannotEnableAnEndpointDisabledWithItsCredentials: an
// endpoint disabled when a member ended its client's credentials
// (credentials_revoked) is out of the client's reach, as one of a revoked
// client is: enabling it is 409 failed_precondition over REST and
// FailedPrecondition over Connect, and it stays disabled for that reason;
// disabling it again changes nothing. Before, the client's PATCH enabled
// it and it resumed from the feed.
func TestTheClientCannotEnableAnEndpointDisabledWithItsCredentials(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	c := newClient(h, "Hooks Credentials Revoked", allScopes...)
	id, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	if _, err := dbtest.Raw(t, h.DB).Exec(context.Background(),
		`UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'credentials_revoked' WHERE id = $1`, uid(t, opaqueid.Webhook, id)); err != nil {
		t.Fatal(err)
	}
	status, _, b := h.Do(http.MethodPatch, path+"/"+id, c.token, jsonCT, `{"status":"enabled"}`)
	wantProblem(t, "enable an endpoint disabled with its credentials", status, b, http.StatusConflict, "failed_precondition", "")
	viaConnect := webhookv1connect.NewWebhookServiceClient(h.Public.Client(), h.Public.URL, connect.WithInterceptors(servertest.Bearer(c.token)))
	enabled := "enabled"
	_, err := viaConnect.UpdateWebhookEndpoint(context.Background(), connect.NewRequest(&webhookv1.UpdateWebhookEndpointRequest{
		Id: id, Endpoint: &webhookv1.WebhookEndpoint{Status: &enabled}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"status"}},
	}))
	servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "failed_precondition")
	e := servertest.Decode(t, mustStatus(t, h, http.MethodPatch, path+"/"+id, c.token, `{"status":"disabled"}`, http.StatusOK))
	if e["status"] != "disabled" || e["disabledReason"] != "credentials_revoked" {
		t.Errorf("the endpoint after the client's attempts: %v", e)
	}
}
