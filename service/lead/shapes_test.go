package lead

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestBothShapesAgree: lead_create_item_set handles one item with one-row
// statements and several with set-based ones (migration 00080). The same
// items, sent as one batch or one at a time, give the same outcomes and
// leave the same contacts: a new contact whose first item failed takes the
// fields of its first created item, with the default titles made from
// them; a contact made only for failed items is removed; an unknown
// contactId has no lead; an external id taken by an existing lead or an
// earlier item names its holder.
func TestBothShapesAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	items, taken := shapeItems, shapeTaken()
	run := func(batch bool) (got []string, contacts []string) {
		d := groupDB(t)
		if _, err := createAlone(ctx, d.Conn(), taken); err != nil {
			t.Fatal(err)
		}
		var outcomes []dbsqlc.LeadCreateItemOutcome
		if batch {
			var err error
			if outcomes, err = createSet(ctx, d.Conn(), groupWorkspace, items()); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, it := range items() {
				o, err := createSet(ctx, d.Conn(), groupWorkspace, []dbsqlc.LeadCreateParams{it})
				if err != nil {
					t.Fatal(err)
				}
				outcomes = append(outcomes, o...)
			}
		}
		raw := dbtest.Raw(t, d)
		names := map[uuid.UUID]string{taken.ID: "the taken lead"}
		for i, it := range items() {
			names[it.ID] = fmt.Sprintf("item %d", i)
		}
		for i, o := range outcomes {
			l, err := answer(o)
			switch {
			case err != nil && o.ExistingID != nil:
				got = append(got, fmt.Sprintf("%d: duplicate of %s", i, names[*o.ExistingID]))
				continue
			case err != nil:
				got = append(got, fmt.Sprintf("%d: %s", i, outcome(l, err)))
				continue
			}
			var email, firstName *string
			if err := raw.QueryRow(ctx, "SELECT email, first_name FROM contacts WHERE id = $1", l.ContactID).Scan(&email, &firstName); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d: %s title %q status %s external %v contact %v %v", i, names[l.ID], l.Title, l.Status,
				deref(l.ExternalID), deref(email), deref(firstName)))
		}
		rows, err := raw.Query(ctx, "SELECT coalesce(email, phone) || ' ' || coalesce(first_name, '-') FROM contacts ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			contacts = append(contacts, c)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got, contacts
	}
	alone, aloneContacts := run(false)
	batch, batchContacts := run(true)
	for i := range alone {
		if i >= len(batch) || batch[i] != alone[i] {
			t.Errorf("one at a time: %s\nas a batch:   %s", alone[i], batch[min(i, len(batch)-1)])
		}
	}
	if !slices.Equal(aloneContacts, batchContacts) {
		t.Errorf("contacts one at a time %q, as a batch %q", aloneContacts, batchContacts)
	}
	t.Logf("%q\n%q", alone, aloneContacts)
}

// shapeItems covers every way a batch item ends: new contacts shared by
// several items (the first of which fails), an unknown contactId, an
// external id taken by an existing lead (shapeTaken) or an earlier item,
// a contact found by email, a phone-only contact.
func shapeItems() []dbsqlc.LeadCreateParams {
	inline := func(n int, email, first string) dbsqlc.LeadCreateParams {
		it := groupItem(n)
		it.ContactEmail, it.ContactFirstName = ptr(email), ptr(first)
		return it
	}
	byID := func(n int, id uuid.UUID, external string) dbsqlc.LeadCreateParams {
		it := groupItem(n)
		it.ContactID, it.ExternalID = ptr(id), ptr(external)
		return it
	}
	first := inline(1, "shared@example.com", "First")
	first.ExternalID = ptr("TAKEN")
	phone := groupItem(7)
	phone.ContactPhone = ptr("+15550100")
	held := inline(8, "held@example.com", "Ignored")
	held.Title = ptr("T")
	orphan := inline(9, "orphan@example.com", "Orphan")
	orphan.ExternalID = ptr("TAKEN")
	return []dbsqlc.LeadCreateParams{
		first,
		inline(2, "shared@example.com", "Second"),
		inline(3, "shared@example.com", "Third"),
		byID(4, uuid.MustParse("6f9f0d4e-0000-4000-8000-00000000ffff"), "E0"),
		byID(5, groupContact, "E1"),
		byID(6, groupContact, "E1"),
		phone, held, orphan,
	}
}

// shapeTaken is the lead that holds the external id TAKEN before
// shapeItems run.
func shapeTaken() dbsqlc.LeadCreateParams {
	taken := groupItem(100)
	taken.ContactID, taken.ExternalID = ptr(groupContact), ptr("TAKEN")
	return taken
}
