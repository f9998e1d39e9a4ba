package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/servertest"
)

// auditLog reads a workspace's whole audit log, newest first, as member.
func auditLog(t *testing.T, h *servertest.Harness, ws, member string) []*adminv1.AuditEvent {
	t.Helper()
	var out []*adminv1.AuditEvent
	token := ""
	for {
		res, err := h.AdminClient.ListAuditEvents(context.Background(), connect.NewRequest(&adminv1.ListAuditEventsRequest{
			WorkspaceId: ws, MemberId: member, Limit: 500, PageToken: token}))
		if err != nil {
			t.Fatalf("list audit events: %v", err)
		}
		out = append(out, res.Msg.GetEvents()...)
		if token = res.Msg.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// TestRefusedManagementAttemptsAreAudited: every management call of a
// pending member, of a member without settings access and of another
// workspace's member is refused, and each refusal is in the workspace's
// audit log with its actor, action, client, outcome "refused" and the
// reason, although the call's transaction rolled back. So is a change
// that a revoked client refuses, and an id that names no member (stored
// as the id alone). Before, the log showed none of them.
func TestRefusedManagementAttemptsAreAudited(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, admin := h.Workspace("Refusals Audited Co")
	_, otherAdmin := h.Workspace("Refusals Other Co")
	addMember := func(email string, settings, pending bool) string {
		res, err := h.AdminClient.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{
			WorkspaceId: ws, Email: email, SettingsAccess: settings, Pending: pending}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.GetId()
	}
	pending := addMember("new@refusals.test", true, true)
	noSettings := addMember("viewer@refusals.test", false, false)
	nobody := opaqueid.Format(opaqueid.Member, opaqueid.New())
	clientID, _ := h.Client(ws, admin, "contacts:read")

	actors := []struct{ name, id, reason string }{
		{"pending member", pending, "not_approved"},
		{"member without settings access", noSettings, "no_settings_access"},
		{"member of another workspace", otherAdmin, "not_a_member"},
		{"id that names no member", nobody, "not_a_member"},
	}
	// Every management call, and whether it names the client.
	one := int32(1)
	calls := []struct {
		action string
		refers bool
		call   func(member string) error
	}{
		{"api_client.create", false, func(m string) error {
			_, err := h.AdminClient.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{
				WorkspaceId: ws, MemberId: m, Name: "x", Scopes: []string{"contacts:read"}}))
			return err
		}},
		{"api_client.list", false, func(m string) error {
			_, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: m}))
			return err
		}},
		{"api_client.rotate_secret", true, func(m string) error {
			_, err := h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: clientID, MemberId: m}))
			return err
		}},
		{"api_client.deactivate", true, func(m string) error {
			_, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: clientID, MemberId: m, RevokeTokens: true}))
			return err
		}},
		{"api_client.activate", true, func(m string) error {
			_, err := h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: clientID, MemberId: m}))
			return err
		}},
		{"api_client.revoke", true, func(m string) error {
			_, err := h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: clientID, MemberId: m}))
			return err
		}},
		{"api_client.set_rates", true, func(m string) error {
			_, err := h.AdminClient.SetApiClientRates(ctx, connect.NewRequest(&adminv1.SetApiClientRatesRequest{ClientId: clientID, MemberId: m, ReadRate: &one}))
			return err
		}},
		{"audit_event.list", false, func(m string) error {
			_, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: m}))
			return err
		}},
	}
	for _, a := range actors {
		for _, c := range calls {
			servertest.AssertConnectError(t, c.call(a.id), connect.CodePermissionDenied, "permission_denied")
		}
	}
	// An attempt on a workspace that does not exist is refused and has no
	// log to go to.
	_, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{
		WorkspaceId: opaqueid.Format(opaqueid.Workspace, opaqueid.New()), MemberId: admin}))
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")

	// A change of a revoked client is refused, and audited as such.
	revoked, _ := h.Client(ws, admin, "contacts:read")
	if _, err := h.AdminClient.RevokeApiClient(ctx, connect.NewRequest(&adminv1.RevokeApiClientRequest{ClientId: revoked, MemberId: admin})); err != nil {
		t.Fatal(err)
	}
	_, err = h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: revoked, MemberId: admin}))
	servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "failed_precondition")

	events := auditLog(t, h, ws, admin)
	for _, a := range actors {
		got := map[string]*adminv1.AuditEvent{}
		for _, e := range events {
			if e.GetActorMemberId() != a.id {
				continue
			}
			if got[e.GetAction()] != nil {
				t.Errorf("%s: %s audited twice", a.name, e.GetAction())
			}
			got[e.GetAction()] = e
		}
		for _, c := range calls {
			e := got[c.action]
			if e == nil {
				t.Errorf("%s: the refused %s is not in the audit log", a.name, c.action)
				continue
			}
			wantClient := ""
			if c.refers {
				wantClient = clientID
			}
			if e.GetOutcome() != "refused" || e.GetReason() != a.reason || e.GetClientId() != wantClient ||
				e.GetWorkspaceId() != ws || e.GetMemberId() != "" || e.GetCreatedAt() == nil {
				t.Errorf("%s: %s audited as %v; want outcome refused, reason %s, client %q", a.name, c.action, e, a.reason, wantClient)
			}
		}
		if len(got) != len(calls) {
			t.Errorf("%s: %d audited actions, want %d: %v", a.name, len(got), len(calls), got)
		}
	}
	var revokedRefusal *adminv1.AuditEvent
	for _, e := range events {
		if e.GetActorMemberId() == admin && e.GetClientId() == revoked && e.GetAction() == "api_client.activate" {
			revokedRefusal = e
		}
		if e.GetActorMemberId() == admin && e.GetOutcome() == "succeeded" && e.GetReason() != "" {
			t.Errorf("a done action with a reason: %v", e)
		}
	}
	if revokedRefusal.GetOutcome() != "refused" || revokedRefusal.GetReason() != "client_revoked" {
		t.Errorf("activation of a revoked client audited as %v", revokedRefusal)
	}

	// The refusals changed nothing: their transactions rolled back.
	list, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: admin}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Msg.GetClients() {
		if c.GetClientId() == clientID && (c.GetStatus() != "active" || c.GetSecretRotatedAt() != nil || c.ReadRate != nil) {
			t.Fatalf("client after refused calls: %v", c)
		}
		if c.GetClientId() == revoked && c.GetStatus() != "revoked" {
			t.Fatalf("revoked client after a refused activation: %v", c)
		}
	}
	if n := len(list.Msg.GetClients()); n != 2 {
		t.Fatalf("%d clients after refused creates, want 2", n)
	}
}

// TestReadingTheAuditLogIsAudited: ListAuditEvents records who read the
// log (audit_event.list, outcome succeeded), after the page it answers:
// the reader's own page shows the log as it was, the next read shows the
// read. Before, reading the log left no trace.
func TestReadingTheAuditLogIsAudited(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, admin := h.Workspace("Readers Co")
	res, err := h.AdminClient.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws, Email: "auditor@readers.test", SettingsAccess: true}))
	if err != nil {
		t.Fatal(err)
	}
	auditor := res.Msg.GetId()

	first := auditLog(t, h, ws, auditor)
	for _, e := range first {
		if e.GetAction() == "audit_event.list" {
			t.Fatalf("the first read already shows a read: %v", first)
		}
	}
	latest := func(reader string) *adminv1.AuditEvent {
		t.Helper()
		res, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: reader, Limit: 1}))
		if err != nil || len(res.Msg.GetEvents()) != 1 {
			t.Fatalf("list: %v %v", res, err)
		}
		return res.Msg.GetEvents()[0]
	}
	if e := latest(admin); e.GetAction() != "audit_event.list" || e.GetActorMemberId() != auditor || e.GetOutcome() != "succeeded" ||
		e.GetReason() != "" || e.GetClientId() != "" || e.GetWorkspaceId() != ws {
		t.Fatalf("newest event after the auditor's read = %v; want audit_event.list by %s", e, auditor)
	}
	if e := latest(auditor); e.GetAction() != "audit_event.list" || e.GetActorMemberId() != admin {
		t.Fatalf("newest event after the admin's read = %v; want audit_event.list by %s", e, admin)
	}
}

// TestWrongAdminTokenIsLoggedWithRouteAndSource: a call to the admin
// listener with a wrong, missing or repeated PARTNER_ADMIN_TOKEN is logged
// at WARN as "admin token refused" with the route, the source address (the
// X-Forwarded-For hop of a trusted proxy, else the peer), the peer, the
// reason and the request id, and never with the token sent or the real
// one. Before, only the access line said 401, with no address.
func TestWrongAdminTokenIsLoggedWithRouteAndSource(t *testing.T) {
	t.Parallel()
	const adminToken = "the-real-admin-token"
	const guess = "a-guessed-admin-token"
	var logs servertest.LogBuffer
	h := servertest.New(t, servertest.Options{AdminToken: adminToken, Config: func(c *server.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}})
	send := func(method, path string, headers ...string) string {
		t.Helper()
		req, _ := http.NewRequest(method, h.Admin.URL+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s %s: %d, want 401", method, path, res.StatusCode)
		}
		return res.Header.Get("Request-Id")
	}
	type want struct{ route, source, reason string }
	cases := map[string]want{
		send(http.MethodPost, "/partner.admin.v1.AdminService/CreateWorkspace", "Authorization", "Bearer "+guess): {
			"/partner.admin.v1.AdminService/CreateWorkspace", "127.0.0.1", "wrong_token"},
		send(http.MethodGet, "/metrics", "Authorization", "Bearer "+guess, "X-Forwarded-For", "203.0.113.9"): {
			"/metrics", "203.0.113.9", "wrong_token"},
		send(http.MethodPost, "/partner.admin.v1.AdminService/ListAuditEvents"): {
			"/partner.admin.v1.AdminService/ListAuditEvents", "127.0.0.1", "missing_token"},
		send(http.MethodPost, "/admin/v1/workspaces", "Authorization", "Bearer "+adminToken, "Authorization", "Bearer "+guess): {
			"unmatched", "127.0.0.1", "duplicate_authorization"},
	}
	// The right token is not logged as refused.
	if _, err := h.AdminClient.CreateWorkspace(context.Background(), connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Right"})); err != nil {
		t.Fatal(err)
	}

	got := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		if l["msg"] == "admin token refused" {
			got[l["request_id"].(string)] = l
		}
	}
	if len(got) != len(cases) {
		t.Errorf("%d refusals logged, want %d:\n%s", len(got), len(cases), logs.String())
	}
	for id, w := range cases {
		l := got[id]
		if l == nil {
			t.Errorf("request %s (%s) is not logged as refused", id, w.route)
			continue
		}
		peer, _ := l["peer"].(string)
		if l["level"] != "WARN" || l["route"] != w.route || l["source"] != w.source || l["reason"] != w.reason ||
			!strings.HasPrefix(peer, "127.0.0.1:") {
			t.Errorf("refusal of %s logged as %v; want route %s, source %s, reason %s", id, l, w.route, w.source, w.reason)
		}
	}
	for _, secret := range []string{adminToken, guess} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a token (%s)", secret)
		}
	}
}

// TestAuditEventsPaginate: the audit log is read page by page, newest
// first, each event once, and the last page says there is no more. Before,
// only the newest 500 events could ever be read, though they are kept 400
// days.
func TestAuditEventsPaginate(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, admin := h.Workspace("Pages Co")
	_, adminB := h.Workspace("Pages B")
	id, _ := h.Client(ws, admin, "contacts:read")
	for range 4 {
		if _, err := h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: admin})); err != nil {
			t.Fatal(err)
		}
	}
	// workspace.create, member.add, api_client.create, 4 deactivations.
	const total = 7
	var got []string
	token := ""
	for page := 0; ; page++ {
		if page > total {
			t.Fatalf("no end after %d pages: %v", page, got)
		}
		res, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: admin, Limit: 3, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.Msg.GetEvents()); n == 0 || n > 3 {
			t.Fatalf("page %d has %d events", page, n)
		}
		for _, e := range res.Msg.GetEvents() {
			got = append(got, e.GetId()+" "+e.GetAction())
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(got) != total || !strings.HasSuffix(got[0], " api_client.deactivate") || !strings.HasSuffix(got[total-1], " workspace.create") {
		t.Fatalf("pages = %v", got)
	}
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g] {
			t.Fatalf("event %s listed twice: %v", g, got)
		}
		seen[g] = true
	}
	// A page token of another form is the caller's 400; one from another
	// workspace shows nothing of it.
	for _, bad := range []string{"x", "evt_", "evt_-1", "evt_0", "evt_1e3", "evt_99999999999999999999", "cli_1"} {
		_, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: admin, PageToken: bad}))
		servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
	}
	_, err := h.AdminClient.ListAuditEvents(ctx, connect.NewRequest(&adminv1.ListAuditEventsRequest{WorkspaceId: ws, MemberId: adminB, PageToken: "evt_1000000"}))
	servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "permission_denied")
}
