package db_test

import (
	"context"
	"testing"

	"github.com/svat/partnerapi/db/dbtest"
)

// TestIndexExpressionsCallNoSQLFunction: no index expression calls a
// LANGUAGE sql function. PostgreSQL inlines such a function only when its
// body is as immutable as it claims; otherwise every statement that
// writes a row plans the body again, once per index. The search indexes
// on search.contact_text and search.lead_text (00191) did, and cost every
// lead create 100 µs of PostgreSQL's CPU (make bench, (e) against 1.1.0);
// they are on PL/pgSQL functions now (00210, 00211).
func TestIndexExpressionsCallNoSQLFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Raw(t, dbtest.New(t))
	rows, err := pool.Query(ctx, `
		SELECT i.relname::text, p.oid::regprocedure::text
		FROM pg_depend d
		JOIN pg_class i ON d.classid = 'pg_class'::regclass AND d.objid = i.oid AND i.relkind = 'i'
		JOIN pg_proc p ON d.refclassid = 'pg_proc'::regclass AND d.refobjid = p.oid
		JOIN pg_language l ON l.oid = p.prolang
		WHERE l.lanname = 'sql'
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var index, fn string
		if err := rows.Scan(&index, &fn); err != nil {
			t.Fatal(err)
		}
		t.Errorf("index %s calls the SQL function %s", index, fn)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname IN ('contacts_search_folded', 'leads_search_folded')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("the search indexes: %d of 2, %v", n, err)
	}
}

// TestSearchTextFoldsAsBefore: the PL/pgSQL search texts (00210) equal
// search.fold of the fields joined by newlines, as the SQL functions the
// indexes were on made them, and as search.like_pattern folds the words
// of q.
func TestSearchTextFoldsAsBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Raw(t, dbtest.New(t))
	for _, f := range [][6]*string{
		{p("Élodie.Dürr@Exämple.COM"), p("Élodie"), p("Dürr"), p("Ça Va SARL"), p("+33 1 23"), p("EXT-Ø1")},
		{nil, p("Ådne"), nil, nil, p("+47"), nil},
		{p("a@b.co"), nil, nil, nil, nil, nil},
		{nil, nil, nil, nil, nil, nil},
	} {
		var contact, contactWant, lead, leadWant *string
		err := pool.QueryRow(ctx, `SELECT search.contact_folded($1, $2, $3, $4, $5, $6),
			search.fold(concat_ws(E'\n', $1::text, $2::text, $3::text, $4::text, $5::text, $6::text)),
			search.lead_folded($1, $2, $3, $4), search.fold(concat_ws(E'\n', $1::text, $2::text, $3::text, $4::text))`,
			f[0], f[1], f[2], f[3], f[4], f[5]).Scan(&contact, &contactWant, &lead, &leadWant)
		if err != nil {
			t.Fatal(err)
		}
		if str(contact) != str(contactWant) || str(lead) != str(leadWant) {
			t.Fatalf("folded %q / %q, want %q / %q", str(contact), str(lead), str(contactWant), str(leadWant))
		}
	}
}

func p(s string) *string { return &s }

func str(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
