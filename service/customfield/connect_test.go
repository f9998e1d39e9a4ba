package customfield_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	customfieldv1 "github.com/svat/partnerapi/gen/partner/customfield/v1"
	"github.com/svat/partnerapi/gen/partner/customfield/v1/customfieldv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/service/servertest"
)

// TestCustomFieldServiceOverConnectAndGRPC: the same rules over Connect
// and gRPC: create, get, list, an update by update_mask (key read-only:
// InvalidArgument; an option in use: FailedPrecondition option_in_use with
// recordCount), key_in_use, limit and scope refusals, delete.
func TestCustomFieldServiceOverConnectAndGRPC(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ctx := context.Background()
	for _, proto := range []string{"connect", "grpc"} {
		c := newClient(h, "Fields "+proto, allScopes...)
		httpc, opts := h.Public.Client(), []connect.ClientOption{connect.WithInterceptors(servertest.Bearer(c.token))}
		if proto == "grpc" {
			httpc, opts = h.HTTP2Client(), append(opts, connect.WithGRPC())
		}
		fc := customfieldv1connect.NewCustomFieldServiceClient(httpc, h.Public.URL, opts...)

		created, err := fc.CreateCustomField(ctx, connect.NewRequest(&customfieldv1.CreateCustomFieldRequest{CustomField: &customfieldv1.CustomField{
			Object: "contact", Key: "tier", Label: " Tier ", Type: "select",
			Options: []*customfieldv1.CustomFieldOption{{Value: "gold", Label: "Gold"}, {Value: "silver", Label: "Silver"}},
		}}))
		if err != nil {
			t.Fatalf("%s: create: %v", proto, err)
		}
		f := created.Msg.GetCustomField()
		if f.GetLabel() != "Tier" || f.GetRequired() || len(f.GetOptions()) != 2 || created.Header().Get("Location") != path+"/"+f.GetId() {
			t.Errorf("%s: created %v, Location %q", proto, f, created.Header().Get("Location"))
		}
		_, err = fc.CreateCustomField(ctx, connect.NewRequest(&customfieldv1.CreateCustomFieldRequest{CustomField: &customfieldv1.CustomField{
			Object: "contact", Key: "tier", Label: "Again", Type: "text"}}))
		servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "key_in_use")
		_, err = fc.CreateCustomField(ctx, connect.NewRequest(&customfieldv1.CreateCustomFieldRequest{CustomField: &customfieldv1.CustomField{
			Object: "contact", Key: "Bad", Label: "Bad", Type: "text"}}))
		ce := servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "validation_failed")
		servertest.AssertField(t, proto+" bad key", ce, "key")

		got, err := fc.GetCustomField(ctx, connect.NewRequest(&customfieldv1.GetCustomFieldRequest{Id: f.GetId()}))
		if err != nil || got.Msg.GetCustomField().GetKey() != "tier" {
			t.Fatalf("%s: get: %v %v", proto, got, err)
		}
		list, err := fc.ListCustomFields(ctx, connect.NewRequest(&customfieldv1.ListCustomFieldsRequest{Object: servertest.Ptr("contact")}))
		if err != nil || len(list.Msg.GetCustomFields()) != 1 {
			t.Fatalf("%s: list: %v %v", proto, list, err)
		}

		// update_mask names what changes; label is left as it is.
		up, err := fc.UpdateCustomField(ctx, connect.NewRequest(&customfieldv1.UpdateCustomFieldRequest{
			Id: f.GetId(), CustomField: &customfieldv1.CustomField{Label: "ignored", Required: servertest.Ptr(true)},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"required"}},
		}))
		if err != nil || up.Msg.GetCustomField().GetLabel() != "Tier" || !up.Msg.GetCustomField().GetRequired() {
			t.Fatalf("%s: update: %v %v", proto, up, err)
		}
		_, err = fc.UpdateCustomField(ctx, connect.NewRequest(&customfieldv1.UpdateCustomFieldRequest{
			Id: f.GetId(), CustomField: &customfieldv1.CustomField{Key: "rank"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"key"}},
		}))
		servertest.AssertConnectError(t, err, connect.CodeInvalidArgument, "malformed_request")

		ws := uid(t, opaqueid.Workspace, c.ws)
		// tier is required now: the contact is made with its value.
		status, _, b := h.Do(http.MethodPost, "/api/v1/contacts", c.token, jsonCT, `{"email":"`+proto+`@example.com","customFields":{"tier":"silver"}}`)
		if status != http.StatusCreated {
			t.Fatalf("%s: create contact: status %d: %s", proto, status, b)
		}
		con := uid(t, opaqueid.Contact, servertest.ID(t, b))
		exec(t, h, `UPDATE contacts SET custom_fields = '{"tier":"silver"}' WHERE workspace_id = $1 AND id = $2`, ws, con)
		_, err = fc.UpdateCustomField(ctx, connect.NewRequest(&customfieldv1.UpdateCustomFieldRequest{
			Id: f.GetId(), CustomField: &customfieldv1.CustomField{Options: []*customfieldv1.CustomFieldOption{{Value: "gold", Label: "Gold"}}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"options"}},
		}))
		ce = servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "option_in_use")
		if n := servertest.ErrorInfo(ce).GetMetadata()["recordCount"]; n != "1" {
			t.Errorf("%s: recordCount %q, want 1", proto, n)
		}

		// A token that may read neither object.
		none := addClient(h, c.ws, c.member, "webhooks:read")
		nc := customfieldv1connect.NewCustomFieldServiceClient(httpc, h.Public.URL, append(opts, connect.WithInterceptors(servertest.Bearer(none.token)))...)
		_, err = nc.ListCustomFields(ctx, connect.NewRequest(&customfieldv1.ListCustomFieldsRequest{}))
		servertest.AssertConnectError(t, err, connect.CodePermissionDenied, "insufficient_scope")

		// The 101st field of an object.
		exec(t, h, `INSERT INTO custom_fields (workspace_id, id, object, key, label, type)
			SELECT $1, gen_random_uuid(), 'lead', 'k' || i, 'K', 'text' FROM generate_series(1, 100) i`, ws)
		_, err = fc.CreateCustomField(ctx, connect.NewRequest(&customfieldv1.CreateCustomFieldRequest{CustomField: &customfieldv1.CustomField{
			Object: "lead", Key: "one_more", Label: "K", Type: "text"}}))
		servertest.AssertConnectError(t, err, connect.CodeFailedPrecondition, "limit_exceeded")

		if _, err := fc.DeleteCustomField(ctx, connect.NewRequest(&customfieldv1.DeleteCustomFieldRequest{Id: f.GetId()})); err != nil {
			t.Fatalf("%s: delete: %v", proto, err)
		}
		_, err = fc.GetCustomField(ctx, connect.NewRequest(&customfieldv1.GetCustomFieldRequest{Id: f.GetId()}))
		servertest.AssertConnectError(t, err, connect.CodeNotFound, "not_found")
	}
}
