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
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
)

const templateName = "partnerapi_template"

// Role is the role tests connect as, as the service does: not a superuser.
const Role = "partnerapi"

var (
	once      sync.Once
	server    *pgserver.Server
	adminURL  string
	roleURL   string // the role's URL, whose database name URL replaces
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
		adminURL = server.AdminURL()
		roleURL, setupErr = ensureRole(ctx, adminURL)
		if setupErr != nil {
			return
		}
	}
	if roleURL == "" {
		roleURL = adminURL
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
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{tmpl}.Sanitize()+owner()); err != nil {
		setupErr = fmt.Errorf("create template database: %w", err)
		return
	}
	d, err := db.Open(ctx, withDatabase(roleURL, tmpl))
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

// MainLeakChecked is [Main] for packages whose code starts goroutines:
// after the tests pass, it fails the run if any goroutine is left (idle
// HTTP keep-alive connections of the default client are closed first).
func MainLeakChecked(m *testing.M, opts ...goleak.Option) int {
	code := Main(m)
	if code != 0 {
		return code
	}
	http.DefaultClient.CloseIdleConnections()
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left after the tests:", err)
		return 1
	}
	return 0
}

// ensureRole creates the test role on a private cluster and returns its
// URL.
func ensureRole(ctx context.Context, admin string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to test cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE ROLE "+Role+" LOGIN"); err != nil {
		return "", fmt.Errorf("create test role: %w", err)
	}
	u, _ := url.Parse(admin)
	u.User = url.User(Role)
	return u.String(), nil
}

func owner() string {
	if external {
		return ""
	}
	return " OWNER " + Role
}

// AdminURL is a superuser's URL of the cluster's maintenance database, for
// tests that look behind the service's back (pg_stat_activity of every
// role). Empty with TEST_DATABASE_URL.
func AdminURL(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatalf("set up test database: %v", setupErr)
	}
	if external {
		return ""
	}
	return adminURL
}

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
	return createDatabase(t, "t", true)
}

// EmptyURL creates an empty database for t (no migration applied) and
// returns its URL, for tests of the migrations themselves. The database
// is dropped when t ends.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "e", false)
}

// createDatabase creates a database named with prefix, a clone of the
// migrated template when migrated, else empty; it is dropped when t ends.
func createDatabase(t testing.TB, prefix string, migrated bool) string {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatalf("set up test database: %v", setupErr)
	}
	ctx := context.Background()
	name := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), dbCounter.Add(1))
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect to test cluster: %v", err)
	}
	defer conn.Close(ctx)
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if migrated {
		create += " TEMPLATE " + pgx.Identifier{templateDB}.Sanitize()
	}
	if _, err := conn.Exec(ctx, create+owner()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return withDatabase(roleURL, name)
}

// New returns a pool on a fresh migrated database, closed when t ends.
func New(t testing.TB) *db.DB {
	t.Helper()
	u := URL(t)
	// Generous bounds: test packages share two cores, and opening a
	// connection can take more than the production second then. Tests of
	// the bounds themselves open their database with the defaults.
	d, err := db.OpenConfig(context.Background(), db.Config{URL: u, AcquireTimeout: 5 * time.Second, StatementTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	urls.Store(d, u)
	t.Cleanup(func() { urls.Delete(d); d.Close() })
	return d
}

// urls remembers the URL of each database New made, for Raw.
var urls sync.Map

// Raw opens a plain pgx pool on the database of d (made by New), closed
// when t ends: tests seed and inspect tables with statements of their own
// there, since the service's pool is not exported.
func Raw(t testing.TB, d *db.DB) *pgxpool.Pool {
	t.Helper()
	u, ok := urls.Load(d)
	if !ok {
		t.Fatal("dbtest.Raw: the database was not made by dbtest.New")
	}
	pool, err := pgxpool.New(context.Background(), u.(string))
	if err != nil {
		t.Fatalf("open raw pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Cluster is a private PostgreSQL cluster for one test, for tests that
// freeze, crash or exhaust it: the package's shared cluster serves other
// tests at the same time.
type Cluster struct {
	*pgserver.Server
}

// NewCluster starts a private cluster with a migrated database
// "partnerapi" owned by [Role]; URL connects as Role. It stops when t ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "partnerapi-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// No fsync (no machine crash is simulated), but every commit in the WAL
	// before it is acknowledged: a crash of PostgreSQL loses nothing.
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir + "/data", Database: "partnerapi", Role: Role, Ephemeral: true,
		Settings: []string{"synchronous_commit=on"}})
	if err != nil {
		t.Fatalf("start private cluster: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	d, err := db.Open(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := db.Migrate(ctx, d); err != nil {
		t.Fatalf("migrate private cluster: %v", err)
	}
	return &Cluster{Server: s}
}

// Super opens a superuser pool on the cluster's database, closed when t
// ends: it sees every session in pg_stat_activity.
func (c *Cluster) Super(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), c.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
