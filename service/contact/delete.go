package contact

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/etag"
	"github.com/svat/partnerapi/internal/records/idempotency"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/auth"
)

// DeleteContact erases a contact in one transaction (product.md,
// "Deleting records"): the row, with its leads when with_leads asks for
// it, every stored idempotent answer that holds one of them, and the
// objects of their earlier events (the events triggers of migration 00100
// erase those and write the deleted events). The row is locked FOR UPDATE
// first: a lead create racing the delete then waits for it and finds no
// contact, instead of adding a lead to a contact that is going.
func (s *Service) DeleteContact(ctx context.Context, req *connect.Request[contactv1.DeleteContactRequest]) (*connect.Response[contactv1.DeleteContactResponse], error) {
	ws := auth.FromContext(ctx).WorkspaceID
	uid, ok := opaqueid.Parse(opaqueid.Contact, req.Msg.GetId())
	if !ok {
		return nil, notFound()
	}
	ifMatch := req.Header().Values(etag.IfMatch)
	err := s.DB.WithTx(ctx, func(tx db.DBTX) error {
		cur, err := db.Q.ContactGetForDelete(ctx, tx, dbsqlc.ContactGetForDeleteParams{WorkspaceID: ws, ID: uid})
		if errors.Is(err, db.ErrNotFound) {
			return notFound()
		}
		if err != nil {
			return fmt.Errorf("lock contact: %w", err)
		}
		if err := etag.Check(ifMatch, ETag(cur)); err != nil {
			return err
		}
		ids := []uuid.UUID{cur.ID}
		opaque := []string{opaqueid.Format(opaqueid.Contact, cur.ID)}
		if req.Msg.GetWithLeads() {
			leads, err := db.Q.LeadDeleteForContact(ctx, tx, dbsqlc.LeadDeleteForContactParams{WorkspaceID: ws, ContactID: cur.ID})
			if err != nil {
				return fmt.Errorf("delete leads of contact: %w", err)
			}
			for _, id := range leads {
				ids = append(ids, id)
				opaque = append(opaque, opaqueid.Format(opaqueid.Lead, id))
			}
		} else {
			n, err := db.Q.LeadCountForContact(ctx, tx, dbsqlc.LeadCountForContactParams{WorkspaceID: ws, ContactID: cur.ID})
			if err != nil {
				return fmt.Errorf("count leads of contact: %w", err)
			}
			if n > 0 {
				return hasLeads(n)
			}
		}
		title, err := db.Q.ContactDefaultTitle(ctx, tx, dbsqlc.ContactDefaultTitleParams{WorkspaceID: ws, ID: cur.ID})
		if err != nil {
			return fmt.Errorf("read contact's default title: %w", err)
		}
		if err := db.Q.ContactDelete(ctx, tx, dbsqlc.ContactDeleteParams{WorkspaceID: ws, ID: cur.ID}); err != nil {
			return fmt.Errorf("delete contact: %w", err)
		}
		if err := idempotency.Erase(ctx, tx, ws, ids, opaque); err != nil {
			return err
		}
		return eraseCopies(ctx, tx, ws, cur, title)
	})
	var conflict *db.ConflictError
	if errors.As(err, &conflict) && conflict.ForeignKey {
		// A lead was created for the contact between the count and the
		// delete (its create had already checked the contact).
		return nil, hasLeads(1)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&contactv1.DeleteContactResponse{}), nil
}

// hasLeads is the 409 for a contact that leads still point at.
func hasLeads(n int32) error {
	return &apierror.Error{
		Code:      apierror.CodeContactHasLeads,
		Message:   "the contact still has leads (leadCount); delete them first, or send withLeads=true to delete them with it",
		LeadCount: n,
	}
}

// eraseCopies erases what other records keep of a contact being deleted
// (product.md, "Deleting records": no answer, event or stored copy keeps
// an erased contact's name, email or phone): a lead made with it and no
// title took its default title ("First Last", else its email or phone)
// and kept it when it moved to another contact, and that lead's events
// hold the title and the contact's id. Such leads take their own
// contact's default title (a lead.updated), their earlier events that
// hold the contact's id or that title lose their objects as a deleted
// record's do (read by record: the workspace's feed is never scanned),
// and stored answers holding the title go. A contact with no name, email
// or phone gave the title "Lead", which names nobody and is left alone.
// Known limit: a lead titled after the contact and later given a title
// of its own keeps the old title in its earlier events; finding it would
// mean reading the workspace's whole feed in the delete's transaction.
func eraseCopies(ctx context.Context, tx db.DBTX, ws uuid.UUID, c dbsqlc.Contact, title string) error {
	if c.FirstName == nil && c.LastName == nil && c.Email == nil && c.Phone == nil {
		return nil
	}
	leads, err := db.Q.LeadRetitleErased(ctx, tx, dbsqlc.LeadRetitleErasedParams{WorkspaceID: ws, ErasedTitle: title})
	if err != nil {
		return fmt.Errorf("retitle leads titled after the contact: %w", err)
	}
	if _, err := db.Q.IdempotencyEraseText(ctx, tx, dbsqlc.IdempotencyEraseTextParams{WorkspaceID: ws, ErasedTitle: title}); err != nil {
		return fmt.Errorf("erase stored answers titled after the contact: %w", err)
	}
	if len(leads) == 0 {
		return nil
	}
	if _, err := db.Q.EventEraseContactCopies(ctx, tx, dbsqlc.EventEraseContactCopiesParams{
		WorkspaceID: ws, LeadIDs: leads, ContactID: c.ID.String(), ErasedTitle: title,
	}); err != nil {
		return fmt.Errorf("erase lead events that name the contact: %w", err)
	}
	return nil
}
