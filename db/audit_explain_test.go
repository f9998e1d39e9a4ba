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

// TestAuditEventListUsesIndexes runs each filter of the audit log (the
// settings page's "Audit log", ListAuditEvents) on a workspace of 20,000
// events, three reads in four, beside another of the same size, and
// checks the index each reads: a page of a rare action,
// actor or client, or of the changes among the reads, reads what it
// shows, not the workspace's log (migration 00151).
func TestAuditEventListUsesIndexes(t *testing.T) {
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
	members := map[uuid.UUID]uuid.UUID{}
	clients := map[uuid.UUID]uuid.UUID{}
	for _, ws := range workspaces {
		if _, err := db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: ws, Name: "w"}); err != nil {
			t.Fatal(err)
		}
		members[ws], clients[ws] = uuid.New(), uuid.New()
		if _, err := pool.Exec(ctx, `INSERT INTO members (workspace_id, id, email, approved, settings_access)
			SELECT $1, CASE WHEN i = 0 THEN $2 ELSE gen_random_uuid() END, 'm' || i || '@x.co', true, true FROM generate_series(0, 9) i`, ws, members[ws]); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO api_clients (workspace_id, id, name, secret_hash, scopes, created_by)
			SELECT $1, CASE WHEN i = 0 THEN $2 ELSE gen_random_uuid() END, 'c' || i, sha256(i::text::bytea), '{leads:read}', $3
			FROM generate_series(0, 49) i`, ws, clients[ws], members[ws]); err != nil {
			t.Fatal(err)
		}
		// Three reads in four; the one member and the one client of the
		// filters act in one event of 500; the operator in a handful.
		if _, err := pool.Exec(ctx, `
			INSERT INTO audit_events (workspace_id, actor_member_id, action, client_id)
			SELECT $1,
			       CASE WHEN i % 500 = 0 THEN $2::uuid WHEN i % 4000 = 7 OR i % 500 = 1 THEN NULL
			            ELSE (SELECT id FROM members WHERE workspace_id = $1 AND id <> $2 ORDER BY id OFFSET i % 9 LIMIT 1) END,
			       CASE WHEN i % 4000 = 7 THEN 'member.add' WHEN i % 500 = 1 THEN 'webhook_endpoint.create' WHEN i % 997 = 3 THEN 'api_client.revoke'
			            WHEN i % 4 = 0 THEN 'api_client.deactivate' WHEN i % 4 = 1 THEN 'api_client.list'
			            WHEN i % 4 = 2 THEN 'webhook_endpoint.list' ELSE 'audit_event.list' END,
			       CASE WHEN i % 4000 = 7 THEN NULL WHEN i % 500 = 1 THEN $3::uuid
			            ELSE (SELECT id FROM api_clients WHERE workspace_id = $1 AND id <> $3 ORDER BY id OFFSET i % 49 LIMIT 1) END
			FROM generate_series(1, 20000) i`, ws, members[ws], clients[ws]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}

	ws := workspaces[0]
	yes, no := true, false
	action := "api_client.revoke"
	member, client := members[ws], clients[ws]
	var before int64
	if err := pool.QueryRow(ctx, "SELECT id FROM audit_events WHERE workspace_id = $1 ORDER BY id OFFSET 10000 LIMIT 1", ws).Scan(&before); err != nil {
		t.Fatal(err)
	}
	base := dbsqlc.AuditEventListParams{WorkspaceID: ws, MaxRows: 51}
	with := func(f func(p *dbsqlc.AuditEventListParams)) dbsqlc.AuditEventListParams { p := base; f(&p); return p }
	for _, c := range []struct {
		name, index string
		p           dbsqlc.AuditEventListParams
	}{
		{"newest", "audit_events_pkey", base},
		{"page", "audit_events_pkey", with(func(p *dbsqlc.AuditEventListParams) { p.BeforeID = &before })},
		{"changes", "audit_events_changes", with(func(p *dbsqlc.AuditEventListParams) { p.Reads = &no })},
		{"changes, page", "audit_events_changes", with(func(p *dbsqlc.AuditEventListParams) { p.Reads = &no; p.BeforeID = &before })},
		{"reads", "audit_events_pkey", with(func(p *dbsqlc.AuditEventListParams) { p.Reads = &yes })},
		{"action", "audit_events_action", with(func(p *dbsqlc.AuditEventListParams) { p.Action = &action })},
		{"action, changes", "audit_events_action", with(func(p *dbsqlc.AuditEventListParams) { p.Action = &action; p.Reads = &no })},
		{"actor member", "audit_events_actor", with(func(p *dbsqlc.AuditEventListParams) { p.ActorMemberID = &member })},
		{"actor member, changes", "audit_events_actor", with(func(p *dbsqlc.AuditEventListParams) { p.ActorMemberID = &member; p.Reads = &no })},
		{"actor client", "audit_events_client", with(func(p *dbsqlc.AuditEventListParams) { p.ActorClientID = &client })},
		{"actor operator", "audit_events_actor", with(func(p *dbsqlc.AuditEventListParams) { p.OperatorActor = true })},
		{"client", "audit_events_client", with(func(p *dbsqlc.AuditEventListParams) { p.ClientID = &client })},
		{"client, changes, page", "audit_events_client", with(func(p *dbsqlc.AuditEventListParams) {
			p.ClientID = &client
			p.Reads = &no
			p.BeforeID = &before
		})},
	} {
		err := d.WithTx(ctx, func(tx db.DBTX) error {
			_, err := db.Q.AuditEventList(ctx, db.PlannedTx(tx), c.p)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tr.mu.Lock()
		sql, args := tr.sql, tr.args
		tr.mu.Unlock()
		// The planned exec mode plans the statement with its values, as
		// EXPLAIN does here.
		rows, err := pool.Query(ctx, "EXPLAIN "+sql, args[1:]...)
		if err != nil {
			t.Fatalf("%s: explain: %v", c.name, err)
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
		t.Logf("%s:\n%s", c.name, text)
		// The joins read a member or a client by its key per row shown (a
		// sequential scan of this test's ten members is cheaper). Where
		// the index finds a few rows, PostgreSQL may read them forward
		// and sort them after the joins, or through a bitmap.
		if strings.Contains(text, "Seq Scan on audit_events") ||
			!strings.Contains(text, "using "+c.index+" on audit_events") && !strings.Contains(text, "Bitmap Index Scan on "+c.index) {
			t.Errorf("%s: does not read %s:\n%s", c.name, c.index, text)
		}
	}
}
