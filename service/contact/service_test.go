package contact_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	contactv1 "github.com/svat/partnerapi/gen/partner/contact/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/listing"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/records/person"
	"github.com/svat/partnerapi/internal/records/rounds"
	"github.com/svat/partnerapi/internal/security/auth"
	"github.com/svat/partnerapi/service/contact"
	"github.com/svat/partnerapi/service/servertest"
)

// unit is the contact service on a database of its own, without the
// server around it, and a workspace's principal.
type unit struct {
	svc *contact.Service
	d   *db.DB
	ws  uuid.UUID
	ctx context.Context
}

func newUnit(t *testing.T) unit {
	t.Helper()
	d := dbtest.New(t)
	ws := uuid.New()
	if _, err := dbtest.Raw(t, d).Exec(context.Background(), "INSERT INTO workspaces (id, name) VALUES ($1, 'Unit Co')", ws); err != nil {
		t.Fatal(err)
	}
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{WorkspaceID: ws, ClientID: uuid.New()})
	return unit{svc: &contact.Service{DB: d, Cursors: listing.NewCursors([]byte("unit-test-cursor-key-of-32-bytes"))}, d: d, ws: ws, ctx: ctx}
}

func (u unit) create(t *testing.T, c *contactv1.Contact) (*contactv1.Contact, error) {
	t.Helper()
	res, err := u.svc.CreateContact(u.ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: c}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetContact(), nil
}

// TestServiceCreateNormalisesAndAnswersWhereItLives: the handler itself
// (no gateway) stores the normalised contact and answers its Location and
// ETag, which a GetContact of the same version repeats.
func TestServiceCreateNormalisesAndAnswersWhereItLives(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	res, err := u.svc.CreateContact(u.ctx, connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{
		Email: servertest.Ptr("  Ada@Example.COM "), FirstName: servertest.Ptr("Ada"), ExternalId: servertest.Ptr(" crm-1 "),
	}}))
	if err != nil {
		t.Fatal(err)
	}
	c := res.Msg.GetContact()
	id, ok := opaqueid.Parse(opaqueid.Contact, c.GetId())
	if !ok || c.GetEmail() != "ada@example.com" || c.GetExternalId() != "crm-1" || !c.GetCreatedAt().AsTime().Equal(c.GetUpdatedAt().AsTime()) {
		t.Fatalf("created %v", c)
	}
	if loc := res.Header().Get("Location"); loc != contact.URL(id) || loc != contact.Path+"/"+c.GetId() {
		t.Errorf("Location = %q, want %q", loc, contact.URL(id))
	}
	got, err := u.svc.GetContact(u.ctx, connect.NewRequest(&contactv1.GetContactRequest{Id: c.GetId()}))
	if err != nil || got.Msg.GetContact().GetEmail() != c.GetEmail() || got.Header().Get("ETag") == "" || got.Header().Get("ETag") != res.Header().Get("ETag") {
		t.Fatalf("GetContact: %v %v, ETag %q want %q", got, err, got.Header().Get("ETag"), res.Header().Get("ETag"))
	}
}

// TestServiceRefusesWhatItCannotStore: validation, a duplicate naming
// the holder, and another workspace's or kind's id as not found.
func TestServiceRefusesWhatItCannotStore(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	first, err := u.create(t, &contactv1.Contact{Email: servertest.Ptr("taken@x.co")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.create(t, &contactv1.Contact{Email: servertest.Ptr("not-an-email"), Phone: servertest.Ptr("12")})
	if e := servertest.APIError(t, err); e.Code != apierror.CodeValidationFailed || len(e.Fields) != 2 || e.Fields[0].Field != "email" || e.Fields[1].Field != "phone" {
		t.Errorf("invalid contact: %+v", e)
	}
	_, err = u.create(t, &contactv1.Contact{Email: servertest.Ptr("TAKEN@x.co")})
	if e := servertest.APIError(t, err); e.Code != apierror.CodeDuplicate || e.ExistingID != first.GetId() {
		t.Errorf("duplicate: %+v, want it to name %s", e, first.GetId())
	}
	other := auth.WithPrincipal(context.Background(), &auth.Principal{WorkspaceID: uuid.New(), ClientID: uuid.New()})
	for name, c := range map[string]struct {
		ctx context.Context
		id  string
	}{
		"another workspace": {other, first.GetId()},
		"another kind":      {u.ctx, "lea_" + strings.TrimPrefix(first.GetId(), "con_")},
		"malformed":         {u.ctx, "con_x"},
	} {
		_, err := u.svc.GetContact(c.ctx, connect.NewRequest(&contactv1.GetContactRequest{Id: c.id}))
		if e := servertest.APIError(t, err); e.Code != apierror.CodeNotFound {
			t.Errorf("%s: %+v, want not_found", name, e)
		}
	}
}

// TestServiceUpdateMovesTheETagOnlyOnAChange: an update that changes a
// field moves the ETag; one to the same values keeps it.
func TestServiceUpdateMovesTheETagOnlyOnAChange(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	c, err := u.create(t, &contactv1.Contact{Email: servertest.Ptr("e@x.co"), JobTitle: servertest.Ptr("Analyst")})
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		t.Helper()
		res, err := u.svc.GetContact(u.ctx, connect.NewRequest(&contactv1.GetContactRequest{Id: c.GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Header().Get("ETag")
	}
	update := func(job string) string {
		t.Helper()
		res, err := u.svc.UpdateContact(u.ctx, connect.NewRequest(&contactv1.UpdateContactRequest{
			Id: c.GetId(), Contact: &contactv1.Contact{JobTitle: servertest.Ptr(job)}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"job_title"}},
		}))
		if err != nil || res.Msg.GetContact().GetJobTitle() != job {
			t.Fatalf("update to %q: %v %v", job, res, err)
		}
		return res.Header().Get("ETag")
	}
	before := get()
	if same := update("Analyst"); same != before {
		t.Errorf("an update to the same value moved the ETag: %s -> %s", before, same)
	}
	if moved := update("Countess"); moved == before || moved != get() {
		t.Errorf("a change left the ETag at %s (now %s, read %s)", before, moved, get())
	}
}

// TestDuplicateNamesTheHolderOrSaysItIsGone: contact.Duplicate names the
// contact holding a taken email or external id, other than self, and is
// rounds.ErrConflictGone when nobody holds either; IsConflict knows the
// unique violations of both.
func TestDuplicateNamesTheHolderOrSaysItIsGone(t *testing.T) {
	t.Parallel()
	u := newUnit(t)
	holder, err := u.create(t, &contactv1.Contact{Email: servertest.Ptr("h@x.co"), ExternalId: servertest.Ptr("ext-1")})
	if err != nil {
		t.Fatal(err)
	}
	holderID, _ := opaqueid.Parse(opaqueid.Contact, holder.GetId())
	ctx := context.Background()
	for name, f := range map[string]contact.Fields{
		"email":       {Fields: person.Fields{Email: servertest.Ptr("h@x.co")}},
		"external id": {Fields: person.Fields{Email: servertest.Ptr("free@x.co")}, ExternalID: servertest.Ptr("ext-1")},
	} {
		if e := servertest.APIError(t, contact.Duplicate(ctx, u.d, u.ws, f, nil)); e.Code != apierror.CodeDuplicate || e.ExistingID != holder.GetId() {
			t.Errorf("%s taken: %+v, want it to name %s", name, e, holder.GetId())
		}
		if err := contact.Duplicate(ctx, u.d, u.ws, f, &holderID); !errors.Is(err, rounds.ErrConflictGone) {
			t.Errorf("%s held by self: %v, want ErrConflictGone", name, err)
		}
		if err := contact.Duplicate(ctx, u.d, uuid.New(), f, nil); !errors.Is(err, rounds.ErrConflictGone) {
			t.Errorf("%s in another workspace: %v, want ErrConflictGone", name, err)
		}
	}
	// A taken value as the database reports it through the service's
	// pool (db maps the unique violation), whatever statement wrote it.
	for name, args := range map[string][2]any{
		"email":       {"h@x.co", nil},
		"external id": {"other@x.co", "ext-1"},
	} {
		_, err := u.d.Conn().Exec(ctx, `INSERT INTO contacts (workspace_id, id, email, external_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, now(), now())`, u.ws, opaqueid.New(), args[0], args[1])
		if err == nil || !contact.IsConflict(err) {
			t.Errorf("a taken %s: %v, want a conflict", name, err)
		}
	}
	if _, err := u.d.Conn().Exec(ctx, "INSERT INTO workspaces (id, name) VALUES ($1, 'Unit Co')", u.ws); err == nil || contact.IsConflict(err) {
		t.Errorf("another table's unique violation: %v, want no contact conflict", err)
	}
	if contact.IsConflict(errors.New("other")) || contact.IsConflict(nil) {
		t.Error("IsConflict of an error that is no unique violation")
	}
}
