package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestTypesInEveryExecMode: the uuid codec and the scans of nullable
// columns into pointers (db/types.go) give the values PostgreSQL holds,
// NULL as nil even into a pointer that held a value, in every exec mode
// the service may run in (binary results in the cached modes, text in the
// exec and simple protocol modes behind PgBouncer).
func TestTypesInEveryExecMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.URL(t)
	id, other := uuid.New(), uuid.New()
	at := time.Date(2026, 11, 22, 9, 30, 15, 123456000, time.UTC)
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		d, err := db.Open(ctx, u+sep+"default_query_exec_mode="+mode)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 { // the second and third reuse cached plans and statements
			var (
				gotID, gotFirst uuid.UUID
				ids             []uuid.UUID
				nullID, someID  = &other, (*uuid.UUID)(nil)
				text, nullText  = (*string)(nil), new(string)
				i4, nullI4      = (*int32)(nil), new(int32)
				i8, nullI8      = (*int64)(nil), new(int64)
				ts, nullTS      = (*time.Time)(nil), new(time.Time)
				nullIDs         = []uuid.UUID{other}
			)
			err := d.Conn().QueryRow(ctx, `SELECT $1::uuid, ($2::uuid[])[1], $2::uuid[], NULL::uuid, $1::uuid,
				'x é'::text, NULL::text, 5::int4, NULL::int4, -7::int8, NULL::int8, $3::timestamptz, NULL::timestamptz, NULL::uuid[]`,
				id, []uuid.UUID{other, id}, at).
				Scan(&gotID, &gotFirst, &ids, &nullID, &someID, &text, &nullText, &i4, &nullI4, &i8, &nullI8, &ts, &nullTS, &nullIDs)
			if err != nil {
				t.Fatalf("%s round %d: %v", mode, round, err)
			}
			if gotID != id || gotFirst != other || len(ids) != 2 || ids[0] != other || ids[1] != id || nullID != nil ||
				someID == nil || *someID != id || text == nil || *text != "x é" || nullText != nil || i4 == nil || *i4 != 5 ||
				nullI4 != nil || i8 == nil || *i8 != -7 || nullI8 != nil || ts == nil || !ts.Equal(at) || nullTS != nil || nullIDs != nil {
				t.Fatalf("%s round %d: got %v %v %v %v %v %v %v %v %v %v %v %v %v %v", mode, round, gotID, gotFirst, ids, nullID, someID,
					text, nullText, i4, nullI4, i8, nullI8, ts, nullTS, nullIDs)
			}
			// NULL into a uuid.UUID is an error, never the zero uuid.
			var zero uuid.UUID
			if err := d.Conn().QueryRow(ctx, `SELECT NULL::uuid`).Scan(&zero); err == nil {
				t.Fatalf("%s: NULL scanned into a uuid.UUID as %v", mode, zero)
			}
		}
		d.Close()
	}
}
