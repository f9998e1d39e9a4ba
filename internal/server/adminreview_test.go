package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/internal/opaqueid"
	"github.com/svat/partnerapi/internal/servertest"
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
				time.Sleep(300 * time.Millisecond) // the call reaches the row
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			assertConnectError(t, <-done, connect.CodeFailedPrecondition, "failed_precondition")
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
