package lead

import (
	"context"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svat/partnerapi/db/dbtest"
	leadv1 "github.com/svat/partnerapi/gen/partner/lead/v1"
)

// TestStatusesAreTheEnum: the service's statuses are partner.lead.v1's
// LeadStatus values by their short names, every one and nothing else, new
// (the default) first.
func TestStatusesAreTheEnum(t *testing.T) {
	values := leadv1.LeadStatus_LEAD_STATUS_UNSPECIFIED.Descriptor().Values()
	if len(Statuses) != values.Len()-1 || Statuses[0] != "new" {
		t.Fatalf("Statuses %q from %d enum values, want all but the zero value, new first", Statuses, values.Len())
	}
	for i, s := range Statuses {
		v := values.ByName(protoreflect.Name("LEAD_STATUS_" + strings.ToUpper(s)))
		if v == nil || int(v.Number()) != i+1 {
			t.Errorf("status %q: enum value %v", s, v)
		}
	}
}

// TestStatusCheckIsTheEnum: the leads table's CHECK on status (migration
// 00001) allows exactly the enum's statuses. The database keeps its own
// guard, for writes that do not come through the service; a status added
// to the enum needs a migration changing the CHECK, and this test fails
// until it has one.
func TestStatusCheckIsTheEnum(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var def string
	if err := dbtest.Raw(t, d).QueryRow(context.Background(), `
		SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'leads'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%status%'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, m := range regexp.MustCompile(`'([^']*)'::text`).FindAllStringSubmatch(def, -1) {
		allowed = append(allowed, m[1])
	}
	got, want := slices.Sorted(slices.Values(allowed)), slices.Sorted(slices.Values(Statuses))
	if !slices.Equal(got, want) {
		t.Fatalf("leads' status CHECK allows %q (%s), the enum %q", got, def, want)
	}
}

// columns lists the attributes of a table or composite type, in order, as
// "name type".
func columns(t *testing.T, ctx context.Context, d *pgxpool.Pool, rel string) []string {
	t.Helper()
	rows, err := d.Query(ctx, `SELECT attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, rel)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOutcomeHasEveryLeadColumn: lead_create_item_outcome (migration
// 00180) is the item's index and error, then every column of leads in
// order, so that a lead is one of its rows (lead_create_item_set's RETURN
// NEXT ROW(..., (ld).*)) and a stored answer under a key is read back by
// name. A column added to leads must be added to it too; this test says
// so. lead_create_outcome stays as release 1.1.0 read it, without the
// custom values: release 1.2.0's function files still return it from
// lead_create_set and lead_create_requests (1.1.0's, dropped by migration
// 00220), and a 1.2.0 replica that starts again creates them anew.
func TestOutcomeHasEveryLeadColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := dbtest.Raw(t, dbtest.New(t))
	leads, outcome := columns(t, ctx, raw, "leads"), columns(t, ctx, raw, "lead_create_item_outcome")
	head := []string{"idx integer", "err_code text", "err_constraint text", "existing_id uuid"}
	if len(outcome) < len(head) || !slices.Equal(outcome[:len(head)], head) || !slices.Equal(outcome[len(head):], leads) {
		t.Fatalf("lead_create_item_outcome is\n  %q\nwant\n  %q\nthen the columns of leads:\n  %q", outcome, head, leads)
	}
	old := columns(t, ctx, raw, "lead_create_outcome")
	want := append(slices.Clone(head), slices.DeleteFunc(slices.Clone(leads), func(c string) bool { return c == "custom_fields jsonb" })...)
	if !slices.Equal(old, want) {
		t.Fatalf("lead_create_outcome is\n  %q\nwant, as release 1.1.0 reads it,\n  %q", old, want)
	}
}

// TestRequestIsLeadCreateRequest: the JSON the server sends (requestJSON's
// tags: request's, then the custom values') names the attributes of
// lead_create_item, in order.
// jsonb_populate_recordset ignores a key it does not know, so a tag that
// differs from its attribute would drop the field without an error.
func TestRequestIsLeadCreateRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := dbtest.Raw(t, dbtest.New(t))
	var attrs []string
	for _, c := range columns(t, ctx, raw, "lead_create_item") {
		attrs = append(attrs, strings.Fields(c)[0])
	}
	var tags []string
	for _, rt := range []reflect.Type{reflect.TypeFor[request](), reflect.TypeFor[requestJSON]()} {
		for i := range rt.NumField() {
			if tag := strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]; tag != "-" && tag != "" {
				tags = append(tags, tag)
			}
		}
	}
	if !slices.Equal(attrs, tags) {
		t.Fatalf("lead_create_item has\n  %q\nthe server sends\n  %q", attrs, tags)
	}
}
