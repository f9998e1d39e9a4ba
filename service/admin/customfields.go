package admin

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/svat/partnerapi/db"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/customfield"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/validate"
	fields "github.com/svat/partnerapi/service/customfield"
)

// ListCustomFields lists a workspace's custom field definitions, as the
// API answers them (product.md "Custom fields"), for operators
// (partnerapi field list).
func (s *Service) ListCustomFields(ctx context.Context, req *connect.Request[adminv1.ListCustomFieldsRequest]) (*connect.Response[adminv1.ListCustomFieldsResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	objects := fields.Objects
	if o := req.Msg.GetObject(); o != "" {
		obj, ok := fields.ParseObject(o)
		if !ok {
			return nil, apierror.Validation(apierror.FieldViolation{Field: "object", Code: validate.InvalidValue, Message: `must be "contact" or "lead"`})
		}
		objects = []customfield.Object{obj}
	}
	rows, err := fields.List(ctx, s.DB.Conn(), wsID, objects)
	if err != nil {
		return nil, err
	}
	out := &adminv1.ListCustomFieldsResponse{CustomFields: make([]*customfieldv1.CustomField, 0, len(rows))}
	for _, r := range rows {
		f, err := fields.ToProto(r)
		if err != nil {
			return nil, err
		}
		out.CustomFields = append(out.CustomFields, f)
	}
	return connect.NewResponse(out), nil
}

// CreateCustomField defines a custom field in the member's workspace
// under the API's rules, audited (custom_field.create) with the member as
// actor.
func (s *Service) CreateCustomField(ctx context.Context, req *connect.Request[adminv1.CreateCustomFieldRequest]) (*connect.Response[adminv1.CreateCustomFieldResponse], error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, req.Msg.GetWorkspaceId())
	if err != nil {
		return nil, err
	}
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	in, err := fields.CheckCreate(req.Msg.GetCustomField())
	if err != nil {
		return nil, err
	}
	e := event{workspace: wsID, actor: &memberID, action: fields.ActionCreate}
	var out *customfieldv1.CustomField
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		row, err := fields.Create(ctx, tx, wsID, in)
		if err != nil {
			return err
		}
		if out, err = fields.ToProto(row); err != nil {
			return err
		}
		e.target = &out.Id
		return audit(ctx, tx, e)
	})
	customfield.Forget(wsID) // after the commit: see Forget
	if err != nil {
		return nil, s.auditRefusal(ctx, err, e)
	}
	return connect.NewResponse(&adminv1.CreateCustomFieldResponse{CustomField: out}), nil
}

// DeleteCustomField deletes a custom field of the member's workspace as
// the API's DELETE does, audited (custom_field.delete) with the member as
// actor. A field of another workspace is not found.
func (s *Service) DeleteCustomField(ctx context.Context, req *connect.Request[adminv1.DeleteCustomFieldRequest]) (*connect.Response[adminv1.DeleteCustomFieldResponse], error) {
	memberID, err := parseID("memberId", opaqueid.Member, req.Msg.GetMemberId())
	if err != nil {
		return nil, err
	}
	id, err := parseID("fieldId", opaqueid.Field, req.Msg.GetFieldId())
	if err != nil {
		return nil, err
	}
	var wsID uuid.UUID
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		m, err := db.Q.SettingsMemberByID(ctx, tx, memberID)
		if errors.Is(err, db.ErrNotFound) {
			return apierror.New(apierror.CodeNotFound, "member not found")
		}
		if err != nil {
			return fmt.Errorf("get member: %w", err)
		}
		wsID = m.WorkspaceID
		if err := authorize(ctx, tx, wsID, memberID); err != nil {
			return err
		}
		if err := fields.Delete(ctx, tx, wsID, id); err != nil {
			return err
		}
		target := opaqueid.Format(opaqueid.Field, id)
		return audit(ctx, tx, event{workspace: wsID, actor: &memberID, action: fields.ActionDelete, target: &target})
	})
	if wsID != (uuid.UUID{}) {
		customfield.Forget(wsID) // after the commit: see Forget
	}
	if err != nil {
		if wsID == (uuid.UUID{}) {
			return nil, err
		}
		return nil, s.auditRefusal(ctx, err, event{workspace: wsID, actor: &memberID, action: fields.ActionDelete})
	}
	return connect.NewResponse(&adminv1.DeleteCustomFieldResponse{}), nil
}

// UpdateWorkspaceCustomField changes the members paths name (label,
// description, options, required) of a custom field of the workspace, for
// the settings page, under the API's rules (option_in_use included),
// audited (custom_field.update) with the member as actor. An update that
// changes nothing writes nothing.
func (s *Service) UpdateWorkspaceCustomField(ctx context.Context, workspaceID, memberID, fieldID string, in *customfieldv1.CustomField, paths []string) (*customfieldv1.CustomField, error) {
	wsID, err := parseID("workspaceId", opaqueid.Workspace, workspaceID)
	if err != nil {
		return nil, err
	}
	member, err := parseID("memberId", opaqueid.Member, memberID)
	if err != nil {
		return nil, err
	}
	id, err := fields.ParseID(fieldID)
	if err != nil {
		return nil, err
	}
	patch, err := fields.CheckUpdate(&customfieldv1.UpdateCustomFieldRequest{CustomField: in, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
	if err != nil {
		return nil, err
	}
	e := event{workspace: wsID, actor: &member, action: fields.ActionUpdate}
	var out *customfieldv1.CustomField
	err = s.DB.WithTx(ctx, func(tx db.DBTX) error {
		if err := authorize(ctx, tx, wsID, member); err != nil {
			return err
		}
		cur, err := fields.Get(ctx, tx, wsID, id, true)
		if err != nil {
			return err
		}
		row, wrote, err := fields.Update(ctx, tx, cur, patch)
		if err != nil {
			return err
		}
		if out, err = fields.ToProto(row); err != nil {
			return err
		}
		if !wrote {
			return nil
		}
		e.target = &out.Id
		return audit(ctx, tx, e)
	})
	customfield.Forget(wsID) // after the commit: see Forget
	if err != nil {
		return nil, s.auditRefusal(ctx, err, e)
	}
	return out, nil
}
