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

// TestAFrozenFirstHostLeavesTimeForTheNext: a multi-host URL whose first
// host accepts TCP and never answers (a frozen primary) must not spend the
// whole acquire timeout: the next host is tried in time, and the request
// is served (issue 23, item 4). Each host gets a part of the acquire
// timeout; before, each got a statement's 2 s, so every request waited its
// full second and failed.
func TestAFrozenFirstHostLeavesTimeForTheNext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})

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
	_, frozenPort, _ := net.SplitHostPort(ln.Addr().String())
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
	mu.Lock()
	n := len(held)
	mu.Unlock()
	if n == 0 {
		t.Fatal("the frozen host was never tried: the test proves nothing")
	}
	t.Logf("served after %v, %d attempt(s) held by the frozen host", time.Since(start), n)
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
