package db_test

import (
	"context"
	"errors"
	"fmt"

	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// capture records the SQL and arguments of the last query.
type capture struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (c *capture) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	switch strings.ToLower(strings.TrimSpace(d.SQL)) {
	case "begin", "commit", "rollback":
		c.mu.Unlock()
		return ctx
	}
	if !strings.HasPrefix(d.SQL, "EXPLAIN") {
		c.sql, c.args = d.SQL, d.Args
	}
	c.mu.Unlock()
	return ctx
}

func (c *capture) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestListQueriesUseIndexes runs every list query shape against a
// workspace of 20,000 contacts and leads (beside another of the same
// size) and checks that PostgreSQL plans an index scan, never a sequential
// scan. The plans are logged (go test -v -run TestListQueriesUseIndexes ./db).
func TestListQueriesUseIndexes(t *testing.T) {
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
		_, err := pool.Exec(ctx, `
			INSERT INTO contacts (workspace_id, id, email, external_id, created_at, updated_at)
			SELECT $1, gen_random_uuid(), 'c' || i || '@x.co', 'ext-' || i, now() - i * interval '1 second', now() - i * interval '1 second'
			FROM generate_series(1, 20000) i`, ws)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pool.Exec(ctx, `
			INSERT INTO leads (workspace_id, id, contact_id, title, status, source, external_id, created_at, updated_at)
			SELECT workspace_id, gen_random_uuid(), id, 'lead', (ARRAY['new','contacted','qualified','unqualified','converted'])[1 + (row_number() OVER ()) % 5],
			       (ARRAY['web_form','zapier','facebook_ads'])[1 + (row_number() OVER ()) % 3], 'lx-' || external_id, created_at, updated_at
			FROM contacts WHERE workspace_id = $1`, ws)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	// A sync cursor may not pass the database's transaction counter
	// (migration 00108 refuses it, as one from a discarded history).
	if err := pool.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1").Scan(&seededXID); err != nil {
		t.Fatal(err)
	}

	ws := workspaces[0]
	contactID := uuid.Nil
	if err := pool.QueryRow(ctx, "SELECT id FROM contacts WHERE workspace_id = $1 LIMIT 1", ws).Scan(&contactID); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(-time.Hour)
	s := func(v string) *string { return &v }
	base := dbsqlc.ContactListCreatedDescParams{WorkspaceID: ws, MaxRows: 51}
	lbase := dbsqlc.LeadListCreatedDescParams{WorkspaceID: ws, MaxRows: 51}
	cases := map[string]func() error{}
	for name, p := range map[string]dbsqlc.ContactListCreatedDescParams{
		"first page":   base,
		"cursor":       withContactCursor(base, after),
		"email":        func() dbsqlc.ContactListCreatedDescParams { p := base; p.Email = s("c77@x.co"); return p }(),
		"externalId":   func() dbsqlc.ContactListCreatedDescParams { p := base; p.ExternalID = s("ext-77"); return p }(),
		"createdSince": func() dbsqlc.ContactListCreatedDescParams { p := base; p.CreatedSince = &after; return p }(),
	} {
		cases["contacts -createdAt "+name] = func() error { _, err := db.Q.ContactListCreatedDesc(ctx, d.Planned(), p); return err }
		cases["contacts createdAt "+name] = func() error {
			_, err := db.Q.ContactListCreatedAsc(ctx, d.Planned(), dbsqlc.ContactListCreatedAscParams(p))
			return err
		}
		cases["contacts -updatedAt "+name] = func() error {
			_, err := db.Q.ContactListUpdatedDesc(ctx, d.Planned(), dbsqlc.ContactListUpdatedDescParams(p))
			return err
		}
		cases["contacts updatedAt (sync) "+name] = func() error {
			_, err := db.Q.ContactListChanges(ctx, d.Planned(), dbsqlc.ContactListChangesParams{
				WorkspaceID: p.WorkspaceID, AfterXID: xidOf(p.AfterTime), AfterID: p.AfterID, CreatedSince: p.CreatedSince,
				UpdatedSince: p.UpdatedSince, Email: p.Email, ExternalID: p.ExternalID, MaxRows: p.MaxRows,
			})
			return err
		}
	}
	for name, p := range map[string]dbsqlc.LeadListCreatedDescParams{
		"first page": lbase,
		"contactId":  func() dbsqlc.LeadListCreatedDescParams { p := lbase; p.ContactID = &contactID; return p }(),
		"status":     func() dbsqlc.LeadListCreatedDescParams { p := lbase; p.Status = s("qualified"); return p }(),
		"source":     func() dbsqlc.LeadListCreatedDescParams { p := lbase; p.Source = s("zapier"); return p }(),
		"externalId": func() dbsqlc.LeadListCreatedDescParams { p := lbase; p.ExternalID = s("lx-ext-5"); return p }(),
	} {
		cases["leads -createdAt "+name] = func() error { _, err := db.Q.LeadListCreatedDesc(ctx, d.Planned(), p); return err }
		cases["leads createdAt "+name] = func() error {
			_, err := db.Q.LeadListCreatedAsc(ctx, d.Planned(), dbsqlc.LeadListCreatedAscParams(p))
			return err
		}
		cases["leads -updatedAt "+name] = func() error {
			_, err := db.Q.LeadListUpdatedDesc(ctx, d.Planned(), dbsqlc.LeadListUpdatedDescParams(p))
			return err
		}
		cases["leads updatedAt (sync) "+name] = func() error {
			_, err := db.Q.LeadListChanges(ctx, d.Planned(), dbsqlc.LeadListChangesParams{
				WorkspaceID: p.WorkspaceID, AfterXID: xidOf(p.AfterTime), AfterID: p.AfterID, CreatedSince: p.CreatedSince,
				UpdatedSince: p.UpdatedSince, ContactID: p.ContactID, Status: p.Status, Source: p.Source,
				ExternalID: p.ExternalID, MaxRows: p.MaxRows,
			})
			return err
		}
	}
	lcursor := lbase
	lcursor.AfterTime, lcursor.AfterID = withContactCursor(base, after).AfterTime, withContactCursor(base, after).AfterID
	cases["leads updatedAt (sync) cursor"] = func() error {
		_, err := db.Q.LeadListChanges(ctx, d.Planned(), dbsqlc.LeadListChangesParams{
			WorkspaceID: ws, AfterXID: xidOf(lcursor.AfterTime), AfterID: lcursor.AfterID, MaxRows: 51,
		})
		return err
	}

	// Single records, and the statements of updates and batches.
	var leadID uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT id FROM leads WHERE workspace_id = $1 LIMIT 1", ws).Scan(&leadID); err != nil {
		t.Fatal(err)
	}
	cases["contact get"] = func() error {
		_, err := db.Q.ContactGet(ctx, d.Conn(), dbsqlc.ContactGetParams{WorkspaceID: ws, ID: contactID})
		return err
	}
	cases["lead get"] = func() error {
		_, err := db.Q.LeadGet(ctx, d.Conn(), dbsqlc.LeadGetParams{WorkspaceID: ws, ID: leadID})
		return err
	}
	rolledBack := func(fn func(tx db.DBTX) error) func() error {
		return func() error {
			err := d.WithTx(ctx, func(tx db.DBTX) error {
				if err := fn(tx); err != nil {
					return err
				}
				return errRollback
			})
			if errors.Is(err, errRollback) || errors.Is(err, db.ErrNotFound) {
				return nil
			}
			return err
		}
	}
	cases["contact update"] = rolledBack(func(tx db.DBTX) error {
		_, err := db.Q.ContactUpdate(ctx, tx, dbsqlc.ContactUpdateParams{WorkspaceID: ws, ID: contactID, Email: s("new@x.co"), ExpectedXID: 1})
		return err
	})
	cases["lead update"] = rolledBack(func(tx db.DBTX) error {
		_, err := db.Q.LeadUpdate(ctx, tx, dbsqlc.LeadUpdateParams{WorkspaceID: ws, ID: leadID, ContactID: contactID, Status: "new", ExpectedXID: 1})
		return err
	})
	ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	idx := []int32{0, 1, 2}
	emails := []string{"c1@x.co", "c9@x.co", "brand-new@x.co"}
	externalIDs := []string{"lx-ext-9", "ext-9", ""}
	blank := []string{"", "", ""}
	cases["contact batch insert"] = rolledBack(func(tx db.DBTX) error {
		_, err := db.Q.ContactCreateMany(ctx, tx, dbsqlc.ContactCreateManyParams{WorkspaceID: ws, Idx: idx, IDs: ids,
			Emails: emails, Phones: blank, FirstNames: blank, LastNames: blank, CompanyNames: blank, JobTitles: blank,
			ExternalIDs: externalIDs})
		return err
	})
	cases["contact batch conflicts"] = func() error {
		_, err := db.Q.ContactConflictMany(ctx, d.Conn(), dbsqlc.ContactConflictManyParams{WorkspaceID: ws, Idx: idx, Emails: emails, ExternalIDs: externalIDs})
		return err
	}
	// The unfiltered default pages run as cached prepared statements: their
	// generic plan must walk the index too, first page and deep.
	for _, table := range []string{"contacts", "leads"} {
		for _, at := range []time.Time{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), after} {
			err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
				if _, err := c.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
					return err
				}
				defer c.Exec(ctx, "RESET plan_cache_mode")
				sql := "PREPARE newest_" + table + " AS SELECT * FROM " + table + ` WHERE workspace_id = $1
				  AND (created_at, id) < ($2::timestamptz, $3::uuid) ORDER BY created_at DESC, id DESC LIMIT $4`
				if _, err := c.Exec(ctx, sql); err != nil {
					return err
				}
				defer c.Exec(ctx, "DEALLOCATE newest_"+table)
				var plan []string
				rows, err := c.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE newest_%s('%s', '%s', '%s', 101)",
					table, ws, at.Format(time.RFC3339Nano), uuid.Max))
				if err != nil {
					return err
				}
				for rows.Next() {
					var line string
					if err := rows.Scan(&line); err != nil {
						return err
					}
					plan = append(plan, line)
				}
				rows.Close()
				text := strings.Join(plan, "\n")
				t.Logf("%s newest, generic plan:\n%s", table, text)
				if !strings.Contains(text, "Index Scan Backward using "+table+"_created") || !strings.Contains(text, "ROW(created_at, id) <") {
					t.Errorf("%s newest: the generic plan does not walk %s_created from the position:\n%s", table, table, text)
				}
				return rows.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	cases["contacts newest"] = func() error {
		_, err := db.Q.ContactListNewest(ctx, d.Conn(), dbsqlc.ContactListNewestParams{WorkspaceID: ws, AfterTime: after, AfterID: uuid.Max, MaxRows: 51})
		return err
	}
	cases["leads newest"] = func() error {
		_, err := db.Q.LeadListNewest(ctx, d.Conn(), dbsqlc.LeadListNewestParams{WorkspaceID: ws, AfterTime: after, AfterID: uuid.Max, MaxRows: 51})
		return err
	}
	for name, run := range cases {
		if err := run(); err != nil {
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
		if strings.Contains(text, "Seq Scan") || readsTable(text) && !strings.Contains(text, "Index") {
			t.Errorf("%s: not an index scan:\n%s", name, text)
		}
	}

}

var errRollback = errors.New("roll back")

// readsTable reports whether a plan reads contacts or leads (a batch
// insert may read nothing but its items).
func readsTable(plan string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if (strings.Contains(line, " on contacts") || strings.Contains(line, " on leads")) &&
			!strings.Contains(line, "Insert on") && !strings.Contains(line, "Update on") {
			return true
		}
	}
	return false
}

// seededXID is the last transaction id TestListQueriesUseIndexes assigned
// before its queries: above every row's.
var seededXID int64

// xidOf turns a time cursor into a change_xid cursor of the same "somewhere
// in the middle" kind: seededXID is above every row's, and, like every
// cursor a server issued, not past the database's transaction counter.
func xidOf(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	x := seededXID
	return &x
}

func withContactCursor(p dbsqlc.ContactListCreatedDescParams, at time.Time) dbsqlc.ContactListCreatedDescParams {
	id := uuid.Max
	p.AfterTime, p.AfterID = &at, &id
	return p
}
