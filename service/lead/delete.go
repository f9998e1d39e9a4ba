package lead

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
)

// DeleteLead erases a lead in one transaction (product.md, "Deleting
// records"): the row, every stored idempotent answer that holds it, and
// the objects of its earlier events (the events triggers of migration
// 00100 erase those and write lead.deleted). The row is locked first, so
// that If-Match is checked against the version that is deleted.
func (s *Service) DeleteLead(ctx context.Context, req *connect.Request[leadv1.DeleteLeadRequest]) (*connect.Response[leadv1.DeleteLeadResponse], error) {
	ws := auth.FromContext(ctx).WorkspaceID
	ifMatch := req.Header().Values(etag.IfMatch)
	err := s.DB.WithTx(ctx, func(tx db.DBTX) error {
		cur, err := s.getOn(ctx, tx, true, ws, req.Msg.GetId())
		if err != nil {
			return err
		}
		if err := etag.Check(ifMatch, ETag(cur)); err != nil {
			return err
		}
		if err := db.Q.LeadDelete(ctx, tx, dbsqlc.LeadDeleteParams{WorkspaceID: ws, ID: cur.ID}); err != nil {
			return fmt.Errorf("delete lead: %w", err)
		}
		return idempotency.Erase(ctx, tx, ws, []uuid.UUID{cur.ID}, []string{opaqueid.Format(opaqueid.Lead, cur.ID)})
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&leadv1.DeleteLeadResponse{}), nil
}
