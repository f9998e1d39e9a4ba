// Package dbtest gives each test its own migrated database, cloned from a
// template in 25–50 ms.
//
// A test package calls [Main] from TestMain. The first test that asks for a
// database starts one private PostgreSQL cluster for the package (or uses
// TEST_DATABASE_URL), migrates a template database once, and every test then
// gets `CREATE DATABASE … TEMPLATE`. Packages run in parallel without sharing
// ports: each cluster listens on its own unix socket.
package dbtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
)

const templateName = "partnerapi_template"

var (
	once      sync.Once
	server    *pgserver.Server
	adminURL  string
	setupErr  error
	dataDir   string
	dbCounter atomic.Int64
	external  bool
)

// Main runs the package's tests and then stops the package's cluster.
func Main(m *testing.M) int {
	code := m.Run()
	if server != nil {
		_ = server.Stop(context.Background())
	}
	if dataDir != "" {
		_ = os.RemoveAll(dataDir)
	}
	return code
}

func setup() {
	ctx := context.Background()
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		external = true
		adminURL = u
	} else {
		// Not t.TempDir: as root, its 0700 parent would hide the cluster from
		// the postgres user.
		dataDir, setupErr = os.MkdirTemp("", "partnerapi-testdb-")
		if setupErr != nil {
			return
		}
		server, setupErr = pgserver.Start(ctx, pgserver.Options{DataDir: dataDir, Database: "postgres", Ephemeral: true})
		if setupErr != nil {
			return
		}
		adminURL = server.URL
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		setupErr = fmt.Errorf("connect to test cluster: %w", err)
		return
	}
	defer conn.Close(ctx)
	tmpl := templateName
	if external {
		tmpl = fmt.Sprintf("%s_%d", templateName, os.Getpid())
	}
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{tmpl}.Sanitize())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		setupErr = fmt.Errorf("create template database: %w", err)
		return
	}
	d, err := db.Open(ctx, withDatabase(adminURL, tmpl))
	if err != nil {
		setupErr = err
		return
	}
	if _, err := db.Migrate(ctx, d); err != nil {
		setupErr = err
	}
	d.Close()
	templateDB = tmpl
}

var templateDB string

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

// URL creates a fresh migrated database for t and returns its URL. The
// database is dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatalf("set up test database: %v", setupErr)
	}
	ctx := context.Background()
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbCounter.Add(1))
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect to test cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{templateDB}.Sanitize())); err != nil {
		t.Fatalf("clone test database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(adminURL, name)
}

// New returns a pool on a fresh migrated database, closed when t ends.
func New(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}
