package lead

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/person"
)

// TestRequestDefaultTitleIsTheDatabaseRuleOnTheRequest: the default title
// a caller without contacts:read gets, made in Go from its request, is the
// one lead_default_title makes from a contact stored with the same fields
// (what a caller with contacts:read gets for a new inline contact), so the
// two defaults differ only in whose fields they read. A lead sent with a
// contactId alone is "Lead"; a caller with contacts:read, or a request
// with a title, is left to the title it sent or to the database.
func TestRequestDefaultTitleIsTheDatabaseRuleOnTheRequest(t *testing.T) {
	t.Parallel()
	d := groupDB(t)
	ctx := context.Background()
	for _, f := range []person.Fields{
		{Email: ptr("ada@example.com"), FirstName: ptr("Ada"), LastName: ptr("Lovelace")},
		{Email: ptr("first@example.com"), FirstName: ptr("Ada")},
		{Phone: ptr("+14155550123"), LastName: ptr("Lovelace")},
		{Email: ptr("only@example.com"), Phone: ptr("+14155550124")},
		{Phone: ptr("+14155550125")},
		{Email: ptr("spaced@example.com"), FirstName: ptr("Mary Ann"), LastName: ptr("van Dyke")},
	} {
		l := newLead{inline: &f}
		l.defaultTitle(false)
		id := uuid.New()
		if _, err := db.Q.ContactCreate(ctx, d.Conn(), dbsqlc.ContactCreateParams{WorkspaceID: groupWorkspace, ClientID: groupClient,
			Path: "/test", ID: id, Email: f.Email, Phone: f.Phone, FirstName: f.FirstName, LastName: f.LastName}); err != nil {
			t.Fatal(err)
		}
		stored, err := db.Q.LeadDefaultTitle(ctx, d.Conn(), dbsqlc.LeadDefaultTitleParams{WorkspaceID: groupWorkspace, ContactID: id})
		if err != nil {
			t.Fatal(err)
		}
		if l.title == nil || *l.title != stored {
			t.Errorf("%+v: request default %v, lead_default_title %q", f, deref(l.title), stored)
		}
	}

	byID := newLead{contactID: ptr(groupContact)}
	byID.defaultTitle(false)
	if byID.title == nil || *byID.title != neutralTitle {
		t.Errorf("contactId alone: %v, want %q", deref(byID.title), neutralTitle)
	}
	reader := newLead{inline: &person.Fields{Email: ptr("r@example.com")}}
	reader.defaultTitle(true)
	titled := newLead{contactID: ptr(groupContact), title: ptr("Deal")}
	titled.defaultTitle(false)
	if reader.title != nil || *titled.title != "Deal" {
		t.Errorf("with contacts:read %v, with a title %q: want nil and Deal", deref(reader.title), *titled.title)
	}
}
