package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestRevocationIsFinalUnderConcurrency: a deactivate, activate, rotate
// or set-rates that starts while a revocation of the same client is
// committing must see the revocation, not overwrite it. The change reads
// the client before its UPDATE; without a row lock it read the status
// from before the revocation, then its UPDATE set "inactive" over
// "revoked", and a later activate brought the revoked client back.
func TestRevocationIsFinalUnderConcurrency(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	ws, admin := h.Workspace("Race Co")
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws)
	raw := dbtest.Raw(t, h.DB)
	for _, action := range []string{"deactivate", "activate", "rotate-secret"} {
		t.Run(action, func(t *testing.T) {
			id, _ := h.Client(ws, admin, "contacts:read")
			cid, _ := opaqueid.Parse(opaqueid.Client, id)
			done := make(chan error, 1)
			// The revocation holds the row while the admin call starts;
			// the call must wait for it and then refuse.
			err := h.DB.WithTx(ctx, func(tx db.DBTX) error {
				if _, err := db.Q.APIClientSetStatus(ctx, tx, dbsqlc.APIClientSetStatusParams{Status: "revoked", WorkspaceID: wsID, ID: cid}); err != nil {
					return err
				}
				go func() {
					var err error
					switch action {
					case "deactivate":
						_, err = h.AdminClient.DeactivateApiClient(ctx, connect.NewRequest(&adminv1.DeactivateApiClientRequest{ClientId: id, MemberId: admin}))
					case "activate":
						_, err = h.AdminClient.ActivateApiClient(ctx, connect.NewRequest(&adminv1.ActivateApiClientRequest{ClientId: id, MemberId: admin}))
					default:
						_, err = h.AdminClient.RotateApiClientSecret(ctx, connect.NewRequest(&adminv1.RotateApiClientSecretRequest{ClientId: id, MemberId: admin}))
					}
					done <- err
				}()
				// The call reaches the row: it waits for the revocation's lock.
				if n, ok, err := dbtest.WaitForLockWaiters(ctx, raw, dbtest.AtLeast(1), 10*time.Second); err != nil || !ok {
					return fmt.Errorf("the %s call never waited for the revoked row (%d waiting, %v)", action, n, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			servertest.AssertConnectError(t, <-done, connect.CodeFailedPrecondition, "failed_precondition")
			list, err := h.AdminClient.ListApiClients(ctx, connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: admin}))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range list.Msg.GetClients() {
				if c.GetClientId() == id && (c.GetStatus() != "revoked" || c.GetRevokedAt() == nil) {
					t.Fatalf("client after revocation and a concurrent %s: status %q, revokedAt %v", action, c.GetStatus(), c.GetRevokedAt())
				}
			}
		})
	}
}

// TestAdminIDsOfTheWrongKind: an id of another kind (a member id where a
// client id belongs, a client id as the member), a malformed one or one
// that names nothing is a clean 4xx on every admin RPC, over Connect and
// over the admin REST routes, and leaves the client untouched.
func TestAdminIDsOfTheWrongKind(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, admin := h.Workspace("Kinds Co")
	id, _ := h.Client(ws, admin, "contacts:read")
	unknownClient := opaqueid.Format(opaqueid.Client, opaqueid.New())
	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string // the field named by the violation, if any
	}{
		{"POST", "/admin/v1/clients/" + admin + ":deactivate", `{"memberId":"` + admin + `"}`, 400, "clientId"},
		{"POST", "/admin/v1/clients/" + ws + ":revoke", `{"memberId":"` + admin + `"}`, 400, "clientId"},
		{"POST", "/admin/v1/clients/" + id + ":rotateSecret", `{"memberId":"` + id + `"}`, 400, "memberId"},
		{"POST", "/admin/v1/clients/" + id + ":activate", `{"memberId":"` + ws + `"}`, 400, "memberId"},
		{"POST", "/admin/v1/clients/" + id + ":setRates", `{"memberId":"MEM_` + admin[4:] + `","readRate":1}`, 400, "memberId"},
		{"POST", "/admin/v1/clients/" + id + ":revoke", `{"memberId":"` + admin + `x"}`, 400, "memberId"},
		{"POST", "/admin/v1/clients/" + id[:len(id)-1] + ":revoke", `{"memberId":"` + admin + `"}`, 400, "clientId"},
		{"POST", "/admin/v1/clients/" + unknownClient + ":revoke", `{"memberId":"` + admin + `"}`, 404, ""},
		{"POST", "/admin/v1/clients/%00:revoke", `{"memberId":"` + admin + `"}`, 400, ""},
		{"GET", "/admin/v1/workspaces/" + admin + "/clients?memberId=" + admin, "", 400, "workspaceId"},
		{"GET", "/admin/v1/workspaces/" + ws + "/clients?memberId=" + ws, "", 400, "memberId"},
		{"GET", "/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + id, "", 400, "memberId"},
		{"GET", "/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + admin + "&limit=501", "", 400, "limit"},
		{"GET", "/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + admin + "&limit=-1", "", 400, "limit"},
		{"GET", "/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + admin + "&limit=2147483648", "", 400, ""},
		{"POST", "/admin/v1/workspaces/" + ws + "/clients", `{"memberId":"` + id + `","name":"x","scopes":["contacts:read"]}`, 400, "memberId"},
		{"POST", "/admin/v1/workspaces/" + id + "/members", `{"email":"a@kinds.test"}`, 400, "workspaceId"},
		{"POST", "/partner.admin.v1.AdminService/RevokeApiClient", `{"memberId":"` + admin + `","clientId":"` + admin + `"}`, 400, "clientId"},
		{"POST", "/partner.admin.v1.AdminService/SetApiClientRates", `{"memberId":"` + admin + `","clientId":"` + id + `","readRate":1000001}`, 400, "readRate"},
		{"POST", "/partner.admin.v1.AdminService/SetApiClientRates", `{"memberId":"` + admin + `","clientId":"` + id + `","writeRate":-1}`, 400, "writeRate"},
		{"POST", "/partner.admin.v1.AdminService/SetApiClientRates", `{"memberId":"` + admin + `","clientId":"` + id + `","readRate":2147483648}`, 400, ""},
	} {
		req, err := http.NewRequest(tc.method, h.Admin.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if strings.HasPrefix(tc.path, "/partner.") {
			req.Header.Set("Connect-Protocol-Version", "1")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || (tc.field != "" && !strings.Contains(string(b), `"field":"`+tc.field+`"`)) {
			t.Errorf("%s %s %s: %d %s; want %d naming %q", tc.method, tc.path, tc.body, res.StatusCode, b, tc.status, tc.field)
		}
	}
	// None of it changed the client.
	list, err := h.AdminClient.ListApiClients(context.Background(), connect.NewRequest(&adminv1.ListApiClientsRequest{WorkspaceId: ws, MemberId: admin}))
	if err != nil || len(list.Msg.GetClients()) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if c := list.Msg.GetClients()[0]; c.GetStatus() != "active" || c.GetSecretRotatedAt() != nil || c.ReadRate != nil || c.WriteRate != nil {
		t.Fatalf("client after refused calls: %v", c)
	}
}

// TestAdminQueryParameters: on the admin REST GET routes, a query
// parameter the request does not take is the caller's 400 naming it (the
// transcoder answered 500), a path variable cannot be overridden from the
// query (/workspaces/A/clients?workspaceId=B acted on B), and a parameter
// given twice is refused rather than one of them picked.
func TestAdminQueryParameters(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, admin := h.Workspace("Query Co")
	wsB, adminB := h.Workspace("Query B")
	h.Client(wsB, adminB, "contacts:read")
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(h.Admin.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, tc := range []struct{ path, param string }{
		{"/admin/v1/workspaces/" + ws + "/clients?memberId=" + admin + "&bogus=1", "bogus"},
		{"/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + admin + "&limt=5", "limt"},
		{"/admin/v1/workspaces/" + ws + "/clients?memberId=" + adminB + "&workspaceId=" + wsB, "workspaceId"},
		{"/admin/v1/workspaces/" + ws + "/clients?memberId=" + adminB + "&workspace_id=" + wsB, "workspace_id"},
		{"/admin/v1/workspaces/" + ws + "/clients?memberId=" + admin + "&memberId=" + adminB, "memberId"},
		{"/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + admin + "&limit=1&limit=500", "limit"},
	} {
		status, body := get(tc.path)
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":"malformed_request"`) || !strings.Contains(body, `\"`+tc.param+`\"`) {
			t.Errorf("GET %s: %d %s; want 400 malformed_request naming %q", tc.path, status, body, tc.param)
		}
	}
	// A route whose body is "*" takes no query parameter.
	id, _ := h.Client(ws, admin, "contacts:read")
	res, err := http.Post(h.Admin.URL+"/admin/v1/clients/"+id+":revoke?memberId="+admin, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `\"memberId\"`) {
		t.Errorf("POST :revoke?memberId=: %d %s; want 400 naming memberId", res.StatusCode, b)
	}
	// The parameters a route takes still work, by JSON or proto name.
	for _, path := range []string{
		"/admin/v1/workspaces/" + ws + "/clients?memberId=" + admin,
		"/admin/v1/workspaces/" + ws + "/clients?member_id=" + admin,
		"/admin/v1/workspaces/" + ws + "/audit-events?memberId=" + admin + "&limit=2",
	} {
		if status, body := get(path); status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
}
