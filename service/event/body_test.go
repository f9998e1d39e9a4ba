package event

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/edge/jsoncodec"
	"github.com/svat/partnerapi/internal/records/listing"
)

// TestBodyIsTheFeedsEvent: the body a webhook delivery sends, built in
// one pass around the record's JSON, is the event the feed answers (the
// Event message through the answers' encoder, its data a Struct), member
// for member and value for value, for every kind of event: created,
// updated (with the members it changed, none included), deleted, erased,
// and values that JSON encoders spell differently (<, >, &, U+2028, quotes,
// non-ASCII, amounts); its top-level members come in the Event's order.
func TestBodyIsTheFeedsEvent(t *testing.T) {
	t.Parallel()
	cursors := listing.NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	ws := uuid.New()
	s := Service{Cursors: cursors}
	binding := listing.Binding{Workspace: ws, Resource: resource, Key: "xid"}
	str := func(v string) *string { return &v }
	amount := int64(1250000)
	at := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
	contactRow, err := json.Marshal(dbsqlc.Contact{
		WorkspaceID: ws, ID: uuid.New(), Email: str("a&b<c>@x.co"), FirstName: str("Zoë \"Z\" \u2028 Ünal"),
		LastName: str("</script>"), CompanyName: str("Ācme & Sons"), JobTitle: str("\t\\ tab"),
		CreatedAt: at, UpdatedAt: at.Add(time.Second), ChangeXID: 77,
	})
	if err != nil {
		t.Fatal(err)
	}
	leadRow, err := json.Marshal(dbsqlc.Lead{
		WorkspaceID: ws, ID: uuid.New(), ContactID: uuid.New(), Title: "Big & <bold>", Status: "qualified",
		Source: str("web"), Message: str("line\nbreak 😀"), ValueAmount: &amount, ValueCurrency: str("EUR"),
		CreatedAt: at, UpdatedAt: at, ChangeXID: 78,
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := []dbsqlc.EventListRow{
		{ChangeXID: 77, Seq: 1, ID: uuid.New(), Type: "contact.created", RecordID: uuid.New(), Object: contactRow, CreatedAt: at},
		{ChangeXID: 78, Seq: 2, ID: uuid.New(), Type: "contact.updated", RecordID: uuid.New(), Object: contactRow,
			Changed: []string{"first_name", "company_name"}, CreatedAt: at.Add(123 * time.Microsecond)},
		{ChangeXID: 79, Seq: 3, ID: uuid.New(), Type: "lead.updated", RecordID: uuid.New(), Object: leadRow,
			Changed: []string{"value_amount", "value_currency", "status"}, CreatedAt: at.Add(time.Nanosecond)},
		{ChangeXID: 80, Seq: 4, ID: uuid.New(), Type: "lead.updated", RecordID: uuid.New(), Object: leadRow, CreatedAt: at.Truncate(time.Second)},
		{ChangeXID: 81, Seq: 5, ID: uuid.New(), Type: "lead.created", RecordID: uuid.New(), Object: leadRow, CreatedAt: at},
		{ChangeXID: 82, Seq: 6, ID: uuid.New(), Type: "lead.deleted", RecordID: uuid.New(), CreatedAt: at},
		{ChangeXID: 83, Seq: 7, ID: uuid.New(), Type: "contact.updated", RecordID: uuid.New(), Changed: []string{"email"}, CreatedAt: at}, // erased since
		{ChangeXID: 84, Seq: 8, ID: uuid.New(), Type: "contact.deleted", RecordID: uuid.New(), CreatedAt: at},
	}
	for _, r := range rows {
		t.Run(r.Type, func(t *testing.T) {
			e, err := s.render(context.Background(), binding, r)
			if err != nil {
				t.Fatal(err)
			}
			feed, err := jsoncodec.AppendREST(nil, e)
			if err != nil {
				t.Fatal(err)
			}
			body, err := Body(context.Background(), nil, cursors, ws, r)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(body) {
				t.Fatalf("body is not JSON: %s", body)
			}
			if a, b := decode(t, feed), decode(t, body); !reflect.DeepEqual(a, b) {
				t.Errorf("the body differs from the feed's event:\nfeed %s\nbody %s", feed, body)
			}
			if a, b := topMembers(t, feed), topMembers(t, body); !reflect.DeepEqual(a, b) {
				t.Errorf("top-level members %v, the feed's %v", b, a)
			}
		})
	}
}

// TestTimestampJSONIsTheAnswers: createdAt is spelled as the answers'
// encoder spells a Timestamp, whatever its fraction.
func TestTimestampJSONIsTheAnswers(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("X", 3600))
	for _, ns := range []int{0, 1, 10, 100_000, 120_000, 123_000_000, 100_000_000, 999_999_999, 1_000} {
		ts := base.Add(time.Duration(ns))
		want, err := protojson.Marshal(timestamppb.New(ts))
		if err != nil {
			t.Fatal(err)
		}
		if got := `"` + timestampJSON(ts) + `"`; got != string(want) {
			t.Errorf("%d ns: %s, want %s", ns, got, want)
		}
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// topMembers lists the names of a JSON object's members in order.
func topMembers(t *testing.T, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if _, err := d.Token(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return names
}
