package server_test

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/oauth2/clientcredentials"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/service/servertest"
)

// TestGoClientExample runs the Go client example of docs/api.md:
// clientcredentials for the token, the generated Connect client, and the
// error details of a validation error.
func TestGoClientExample(t *testing.T) {
	t.Parallel()
	h := servertest.New(t)
	ws, m := h.Workspace("Go Client Co")
	id, sec := h.Client(ws, m, "contacts:read", "contacts:write")
	ctx := context.Background()

	cfg := clientcredentials.Config{
		ClientID:     id,
		ClientSecret: sec,
		TokenURL:     h.Public.URL + "/api/oauth/token",
		Scopes:       []string{"contacts:read", "contacts:write"},
	}
	contacts := contactv1connect.NewContactServiceClient(cfg.Client(ctx), h.Public.URL)
	page, err := contacts.ListContacts(ctx, connect.NewRequest(&contactv1.ListContactsRequest{Limit: proto.Int32(10)}))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Msg.GetContacts()) != 0 {
		t.Fatalf("contacts = %v", page.Msg.GetContacts())
	}

	_, err = contacts.CreateContact(ctx, connect.NewRequest(&contactv1.CreateContactRequest{
		Contact: &contactv1.Contact{Email: proto.String("not-an-email")},
	}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("err = %v", err)
	}
	var reason, field string
	for _, d := range ce.Details() {
		switch v, _ := d.Value(); v := v.(type) {
		case *errdetails.ErrorInfo:
			reason = v.GetReason()
		case *errdetails.BadRequest:
			field = v.GetFieldViolations()[0].GetField()
		}
	}
	if reason != "validation_failed" || field != "email" {
		t.Fatalf("reason %q field %q", reason, field)
	}
}
