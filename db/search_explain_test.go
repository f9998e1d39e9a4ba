package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// TestSearchAndCustomFiltersUseIndexes runs the contact and lead lists
// with an equality custom field filter and with a selective q, in every
// sort, on a workspace of 20,000 contacts and leads with custom values
// (beside another of the same size), and checks that PostgreSQL reads
// the GIN indexes of migrations 00200 and 00211 and never scans the table
// (product.md, "Lists": no sequential scan of the workspace's rows). The
// plans are logged (go test -v -run TestSearchAndCustomFiltersUseIndexes
// ./db).
func TestSearchAndCustomFiltersUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := &capture{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d := db.New(pool)

	workspaces := []uuid.UUID{uuid.New(), uuid.New()}
	for _, ws := range workspaces {
		if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: ws, Name: "w"}); err != nil {
			t.Fatal(err)
		}
		// Names and companies from hashes: every word of them rare.
		_, err := pool.Exec(ctx, `
			INSERT INTO contacts (workspace_id, id, email, first_name, last_name, company_name, external_id, custom_fields, created_at, updated_at)
			SELECT $1, gen_random_uuid(), 'c' || i || '@x.co', 'Fn' || left(md5('f' || i), 8), 'Ln' || left(md5('l' || i), 8),
			       'Co ' || left(md5('c' || i), 6), 'ext-' || i,
			       jsonb_build_object('code', 'k' || i, 'tier', 't' || (i % 50), 'score', i % 1000, 'vip', i % 2 = 0,
			                          'tags', jsonb_build_array('a' || (i % 7), 'b' || (i % 11))),
			       now() - i * interval '1 second', now() - i * interval '1 second'
			FROM generate_series(1, 20000) i`, ws)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pool.Exec(ctx, `
			INSERT INTO leads (workspace_id, id, contact_id, title, status, source, campaign, external_id, custom_fields, created_at, updated_at)
			SELECT workspace_id, gen_random_uuid(), id, 'Quote ' || last_name, 'new', 'web_form', 'Cmp ' || left(md5(email), 8),
			       'lx-' || external_id, custom_fields, created_at, updated_at
			FROM contacts WHERE workspace_id = $1`, ws)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE contacts, leads"); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1").Scan(&seededXID); err != nil {
		t.Fatal(err)
	}
	ws := workspaces[0]
	var word string // a selective q: most of a last name
	if err := pool.QueryRow(ctx, "SELECT lower(substr(last_name, 2, 7)) FROM contacts WHERE workspace_id = $1 AND email = 'c77@x.co'", ws).Scan(&word); err != nil {
		t.Fatal(err)
	}
	s := func(v string) *string { return &v }
	none := []string{}
	type filter struct {
		eq    []byte
		q1    *string
		index string // the index a page of it must read
	}
	filters := map[string]filter{
		"custom equality (one record)":    {eq: []byte(`{"code": "k77"}`), index: "_custom_fields_values"},
		"custom equality (multiselect)":   {eq: []byte(`{"tags": ["b3"], "tier": "t9"}`)},
		"custom equality (one in fifty)":  {eq: []byte(`{"tier": "t7"}`)},
		"selective q":                     {q1: s(word), index: "_search_folded"},
		"selective q and custom equality": {q1: s(word), eq: []byte(`{"vip": false}`), index: "_search_folded"},
	}
	cases := map[string]struct {
		run   func() error
		index string
	}{}
	for name, f := range filters {
		c := dbsqlc.ContactListCreatedDescParams{WorkspaceID: ws, CustomEq: f.eq, Q1: f.q1, QRest: none,
			RangeKeys: none, RangeTypes: none, RangeGte: none, RangeLte: none, MaxRows: 51}
		l := dbsqlc.LeadListCreatedDescParams{WorkspaceID: ws, CustomEq: f.eq, Q1: f.q1, QRest: none,
			RangeKeys: none, RangeTypes: none, RangeGte: none, RangeLte: none, MaxRows: 51}
		add := func(label string, index string, run func() error) {
			cases[label+" "+name] = struct {
				run   func() error
				index string
			}{run, index}
		}
		idx := func(table string) string {
			if f.index == "" {
				return ""
			}
			return table + f.index
		}
		add("contacts -createdAt", idx("contacts"), func() error { _, err := db.Q.ContactListCreatedDesc(ctx, d.Planned(), c); return err })
		add("contacts createdAt", idx("contacts"), func() error {
			_, err := db.Q.ContactListCreatedAsc(ctx, d.Planned(), dbsqlc.ContactListCreatedAscParams(c))
			return err
		})
		add("contacts -updatedAt", idx("contacts"), func() error {
			_, err := db.Q.ContactListUpdatedDesc(ctx, d.Planned(), dbsqlc.ContactListUpdatedDescParams(c))
			return err
		})
		add("contacts updatedAt (sync)", idx("contacts"), func() error {
			_, err := db.Q.ContactListChanges(ctx, d.Planned(), dbsqlc.ContactListChangesParams{
				WorkspaceID: ws, CustomEq: f.eq, Q1: f.q1, QRest: none,
				RangeKeys: none, RangeTypes: none, RangeGte: none, RangeLte: none, MaxRows: 51,
			})
			return err
		})
		add("leads -createdAt", idx("leads"), func() error { _, err := db.Q.LeadListCreatedDesc(ctx, d.Planned(), l); return err })
		add("leads createdAt", idx("leads"), func() error {
			_, err := db.Q.LeadListCreatedAsc(ctx, d.Planned(), dbsqlc.LeadListCreatedAscParams(l))
			return err
		})
		add("leads updatedAt (sync)", idx("leads"), func() error {
			_, err := db.Q.LeadListChanges(ctx, d.Planned(), dbsqlc.LeadListChangesParams{
				WorkspaceID: ws, CustomEq: f.eq, Q1: f.q1, QRest: none,
				RangeKeys: none, RangeTypes: none, RangeGte: none, RangeLte: none, MaxRows: 51,
			})
			return err
		})
	}
	for name, c := range cases {
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tr.mu.Lock()
		sql, args := tr.sql, tr.args
		tr.mu.Unlock()
		rows, err := pool.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("%s: explain: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		t.Logf("%s:\n%s", name, text)
		if strings.Contains(text, "Seq Scan") || !strings.Contains(text, "Index") {
			t.Errorf("%s: not an index scan:\n%s", name, text)
		}
		if c.index != "" && !strings.Contains(text, " "+c.index+" ") && !strings.Contains(text, " "+c.index+"\n") && !strings.HasSuffix(text, " "+c.index) {
			t.Errorf("%s: does not read %s:\n%s", name, c.index, text)
		}
	}
}
