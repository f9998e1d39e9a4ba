package db_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/db/dbtest"
)

// frozenHost listens on a port of 127.0.0.1 that accepts connections and
// never answers, as a frozen server does; held counts the connections it
// holds.
func frozenHost(t *testing.T) (port string, held func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})

	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

// TestAFrozenPrimaryIsUnavailableNotATimeout: when no host of a
// multi-host URL gives a connection, one because it is frozen (its connect
// attempt reaches its own timeout), the request is "not now" (503), not
// the caller's deadline (504): make test-ha's freeze answered 504 to token
// and contact requests that the acquire timeout had not failed.
func TestAFrozenPrimaryIsUnavailableNotATimeout(t *testing.T) {
	t.Parallel()
	frozenPort, held := frozenHost(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closedPort, _ := net.SplitHostPort(closed.Addr().String())
	_ = closed.Close() // refuses connections
	u := "postgres://partnerapi@/partnerapi?sslmode=disable&host=127.0.0.1,127.0.0.1&port=" + frozenPort + "," + closedPort
	ctx := context.Background()
	d, err := db.OpenConfig(ctx, db.Config{URL: u}) // production timeouts: acquire 1 s, 500 ms a host
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	_, err = db.Q.WorkspaceList(ctx, d.Conn(), dbsqlc.WorkspaceListParams{MaxRows: 1})
	if held() == 0 {
		t.Fatal("the frozen host was never tried: the test proves nothing")
	}
	if !errors.Is(err, db.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no host gave a connection: err = %v, want ErrUnavailable and not a deadline (a 504)", err)
	}
}

// TestAFrozenFirstHostLeavesTimeForTheNext: a multi-host URL whose first
// host accepts TCP and never answers (a frozen primary) must not spend the
// whole acquire timeout: the next host is tried in time, and the request
// is served (issue 23, item 4). Each host gets a part of the acquire
// timeout; before, each got a statement's 2 s, so every request waited its
// full second and failed.
func TestAFrozenFirstHostLeavesTimeForTheNext(t *testing.T) {
	t.Parallel()
	frozenPort, held := frozenHost(t)

	u, err := url.Parse(dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	host, port := q.Get("host"), q.Get("port")
	if host == "" {
		host, port = u.Hostname(), u.Port()
		u.Host = ""
	}
	if port == "" {
		port = "5432"
	}
	q.Set("host", "127.0.0.1,"+host)
	q.Set("port", frozenPort+","+port)
	u.RawQuery = q.Encode()

	ctx := context.Background()
	d, err := db.OpenConfig(ctx, db.Config{URL: u.String()}) // production timeouts: acquire 1 s
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	start := time.Now()
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("ping through a frozen first host after %v: %v; want the second host to serve it", time.Since(start), err)
	}
	if n := held(); n == 0 {
		t.Fatal("the frozen host was never tried: the test proves nothing")
	}
	t.Logf("served after %v, %d attempt(s) held by the frozen host", time.Since(start), held())
}

// TestAWriteOnAReadOnlyServerIsUnavailable: a write that reaches a server
// in read-only mode (a standby after a switchover, or a stale DSN) is "not
// now" (503), not an internal error, and its connection is not reused, so
// the pool's next one finds the primary (issue 23, item 3).
func TestAWriteOnAReadOnlyServerIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := dbtest.URL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	setReadOnly := func(on bool) {
		t.Helper()
		stmt := "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " RESET default_transaction_read_only"
		if on {
			stmt = "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " SET default_transaction_read_only = on"
		}
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	setReadOnly(true)

	d, err := db.OpenConfig(ctx, db.Config{URL: raw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	create := func() error {
		return d.WithTx(ctx, func(tx db.DBTX) error {
			_, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: uuid.New(), Name: "read only?"})
			return err
		})
	}
	err = create()
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("write on a read-only server: err = %v, want ErrUnavailable", err)
	}
	_, err = db.Q.WorkspaceCreate(ctx, d.Conn(), dbsqlc.WorkspaceCreateParams{ID: uuid.New(), Name: "read only?"})
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("single-statement write on a read-only server: err = %v, want ErrUnavailable", err)
	}
	// pgxpool destroys a released connection in the background.
	dbtest.Eventually(t, 2*time.Second, "connections to the read-only server discarded", func() bool {
		return d.Stat().TotalConns() == 0
	})

	// The server is writable again (the primary is back, or the DSN now
	// reaches it): the same pool writes, with no restart.
	setReadOnly(false)
	if err := create(); err != nil {
		t.Fatalf("write after the server became writable: %v", err)
	}
}

// TestACommitNotConfirmedByTheStandbyIsNeverAcknowledged: with a
// synchronous standby that never answers (synchronous_standby_names names
// one that is not there, as when a partition cuts the primary from its
// standbys), a COMMIT waits. PostgreSQL answers a cancel of that wait with
// a warning and success: the transaction is committed on this server only,
// and a failover discards it. Such a write must never be reported as done
// (a 201): it is ErrUnavailable (503), whose keyed retry resolves it
// (issue 23, item 1). Before, the statement deadline sent a cancel and the
// commit "succeeded". The pools here have no primary lease (PrimaryLease
// -1): with it, a primary that cannot confirm commits serves no statement
// at all (TestAPrimaryCutOffFromItsStandbysServesNothing), and the commit
// path under test is for a partition that begins after the lease's beat.
func TestACommitNotConfirmedByTheStandbyIsNeverAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := dbtest.NewCluster(t)
	super := c.Super(t)
	if _, err := super.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = 'ghost'"); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	// Commits wait once the checkpointer has read the setting too (it
	// publishes whether synchronous standbys are named), which may come
	// after a backend shows it: a probe commit that is still waiting after
	// 200 ms says so.
	dbtest.Eventually(t, 10*time.Second, "commits waiting for the standby named", func() bool {
		conn, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			return false
		}
		defer conn.Close(context.Background())
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = db.Q.WorkspaceCreate(pctx, conn, dbsqlc.WorkspaceCreateParams{ID: uuid.New(), Name: "probe"})
		return err != nil && pctx.Err() != nil
	})
	stored := func(t *testing.T, id uuid.UUID) bool {
		t.Helper()
		var n int
		if err := super.QueryRow(ctx, "SELECT count(*) FROM workspaces WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	create := func(tx db.DBTX, id uuid.UUID) error {
		_, err := db.Q.WorkspaceCreate(ctx, tx, dbsqlc.WorkspaceCreateParams{ID: id, Name: "in doubt"})
		return err
	}

	t.Run("commit past its deadline", func(t *testing.T) {
		d, err := db.OpenConfig(ctx, db.Config{URL: c.URL, StatementTimeout: 300 * time.Millisecond, TenantShare: -1, PrimaryLease: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		id := uuid.New()
		err = d.WithTx(ctx, func(tx db.DBTX) error { return create(tx, id) })
		if !errors.Is(err, db.ErrUnavailable) {
			t.Fatalf("commit waiting for a standby past its deadline: err = %v, want ErrUnavailable (a 201 here is a write a failover loses)", err)
		}
		if db.NotApplied(err) {
			t.Fatal("NotApplied holds for a commit whose outcome is unknown")
		}
		// The commit is in doubt, not refused: it may be stored here.
		t.Logf("stored on the old primary: %v", stored(t, id))
	})

	t.Run("single statement past its deadline", func(t *testing.T) {
		d, err := db.OpenConfig(ctx, db.Config{URL: c.URL, StatementTimeout: 300 * time.Millisecond, TenantShare: -1, PrimaryLease: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		id := uuid.New()
		err = create(d.Conn(), id)
		if !errors.Is(err, db.ErrUnavailable) {
			t.Fatalf("autocommit write waiting for a standby past its deadline: err = %v, want ErrUnavailable", err)
		}
		if db.NotApplied(err) {
			t.Fatal("NotApplied holds for a write that committed locally")
		}
		if !stored(t, id) {
			t.Fatal("the cancelled wait left no row: the test did not reach the synchronous wait")
		}
	})

	t.Run("replay of an answer stored here only", func(t *testing.T) {
		// The stored answer of a create whose wait for the standby was
		// cancelled: committed locally (synchronous_commit = local stands
		// for the cancelled wait).
		ws, client := uuid.New(), uuid.New()
		tx, err := super.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = local`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (workspace_id, client_id, path, key, request_hash, response)
			VALUES ($1, $2, '/c', 'k', '\x01', '\x0a00')`, ws, client); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := db.OpenConfig(ctx, db.Config{URL: c.URL, StatementTimeout: 300 * time.Millisecond, TenantShare: -1, PrimaryLease: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		err = d.WithTx(ctx, func(tx db.DBTX) error {
			got, err := db.Q.IdempotencyClaim(ctx, tx, dbsqlc.IdempotencyClaimParams{WorkspaceID: ws, ClientID: client,
				Path: "/c", Key: "k", RequestHash: []byte{1}, LockKey: 42, FreshSince: time.Now().Add(-time.Hour)})
			if err == nil && len(got) == 0 {
				t.Error("no stored answer found: the test did not reach a replay")
			}
			return err
		})
		if !errors.Is(err, db.ErrUnavailable) {
			t.Fatalf("replay of an answer the standby has not confirmed: err = %v, want ErrUnavailable (a 201 here is a write a failover loses)", err)
		}
	})

	t.Run("retry of a key whose first attempt waits for the standby", func(t *testing.T) {
		// The first attempt, on the service's own role: it holds its key's
		// lock and its COMMIT waits for the standby for good.
		const lockKey, otherKey = int64(-7), int64(8)
		first, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			t.Fatal(err)
		}
		committed := make(chan error, 1)
		go func() {
			tx, err := first.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey)
			}
			if err == nil {
				_, err = tx.Exec(ctx, "INSERT INTO workspaces (id, name) VALUES ($1, 'first attempt')", uuid.New())
			}
			if err == nil {
				err = tx.Commit(ctx)
			}
			committed <- err
		}()
		var waiting int
		dbtest.Eventually(t, 10*time.Second, "the first attempt's COMMIT waiting for the standby", func() bool {
			return super.QueryRow(ctx, `SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
				WHERE a.wait_event = 'SyncRep' AND l.locktype = 'advisory' AND l.objid = 4294967289`).Scan(&waiting) == nil
		})
		defer func() {
			_, _ = super.Exec(ctx, "SELECT pg_terminate_backend($1)", waiting)
			<-committed
			_ = first.Close(ctx)
		}()

		d, err := db.OpenConfig(ctx, db.Config{URL: c.URL, StatementTimeout: 2 * time.Second, TenantShare: -1, PrimaryLease: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		claim := func(key int64) error {
			return d.WithTx(ctx, func(tx db.DBTX) error {
				_, err := db.Q.IdempotencyClaim(ctx, tx, dbsqlc.IdempotencyClaimParams{WorkspaceID: uuid.New(), ClientID: uuid.New(),
					Path: "/c", Key: "k", RequestHash: []byte{1}, LockKey: key, FreshSince: time.Now().Add(-time.Hour)})
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return err
			})
		}
		if err := claim(lockKey); !errors.Is(err, db.ErrUnavailable) || errors.Is(err, db.ErrKeyInFlight) {
			t.Fatalf("retry while the first attempt waits for the standby: err = %v, want ErrUnavailable (503), not in flight (409)", err)
		}

		// A key held by a request that is still running is in flight, as before.
		hc, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = hc.Close(ctx) }()
		holder, err := hc.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = holder.Rollback(ctx) }()
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", otherKey); err != nil {
			t.Fatal(err)
		}
		if err := claim(otherKey); !errors.Is(err, db.ErrKeyInFlight) {
			t.Fatalf("retry while the first attempt runs: err = %v, want ErrKeyInFlight (409)", err)
		}
	})

	t.Run("wait cancelled by someone else", func(t *testing.T) {
		d, err := db.OpenConfig(ctx, db.Config{URL: c.URL, StatementTimeout: time.Minute, TenantShare: -1, PrimaryLease: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		id := uuid.New()
		done := make(chan error, 1)
		go func() { done <- d.WithTx(ctx, func(tx db.DBTX) error { return create(tx, id) }) }()
		var pid int
		dbtest.Eventually(t, 10*time.Second, "a COMMIT waiting for the standby", func() bool {
			return super.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' LIMIT 1").Scan(&pid) == nil
		})
		if _, err := super.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		err = <-done
		if !errors.Is(err, db.ErrUnavailable) {
			t.Fatalf("commit whose synchronous wait was cancelled: err = %v, want ErrUnavailable", err)
		}
		if !stored(t, id) {
			t.Fatal("no row: the cancel did not reach the synchronous wait")
		}
	})
}

// TestAServerWhoseFilesChangedSaysSo: SQLSTATE 58P01 ("could not load
// library", after PostgreSQL's package was upgraded in place under a
// running server) is a 503 whose error, which the request log carries,
// says what happened and what to do (issue 24, item 11).
func TestAServerWhoseFilesChangedSaysSo(t *testing.T) {
	t.Parallel()
	err := db.ItemError("58P01", "")
	if !errors.Is(err, db.ErrUnavailable) {
		t.Fatalf("58P01: %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "upgraded") || !strings.Contains(err.Error(), "restart PostgreSQL") {
		t.Fatalf("58P01 reads %q; want it to name the upgrade in place and the restart", err)
	}
}
