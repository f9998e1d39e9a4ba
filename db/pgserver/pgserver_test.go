package pgserver_test

import (
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/pgserver"
)

// workDir returns a directory the postgres user can reach even when the
// tests run as root (t.TempDir sits under a 0700 parent then).
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestRestartKeepsData starts a cluster, writes a row, stops it, starts it
// again on the same directory and reads the row back. Whoever runs the
// test (root or not) exercises that path of Start.
func TestRestartKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(workDir(t), "data")

	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("postmaster.pid still present after Stop: %v", err)
	}

	s, err = pgserver.Start(ctx, pgserver.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	defer s.Stop(ctx)
	conn, err = pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "still here" {
		t.Fatalf("row after restart = %q, %v", v, err)
	}
	if os.Geteuid() == 0 {
		st, _ := os.Stat(dir)
		pg, _ := user.Lookup("postgres")
		if uid := strconv.Itoa(int(st.Sys().(*syscall.Stat_t).Uid)); uid != pg.Uid {
			t.Fatalf("data dir owner uid = %s, want the postgres user (%s)", uid, pg.Uid)
		}
	}
}

// TestStartAsNonRoot runs TestRestartKeepsData again as an unprivileged
// user when the suite runs as root, so both paths of Start are covered.
func TestStartAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already not root: TestRestartKeepsData covers the non-root path")
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres user")
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir := workDir(t)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	// Copy the test binary where the unprivileged user can execute it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pgserver.test")
	copyFile(t, self, bin)

	cmd := exec.Command(bin, "-test.run", "^TestRestartKeepsData$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as user postgres: %v\n%s", err, out)
	}
	t.Logf("as user postgres:\n%s", out)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStartBehindPrivateDirectory: as root, a data directory under a 0700
// directory (a mktemp directory, a home) is made reachable for the
// postgres user by adding only the search bit.
func TestStartBehindPrivateDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the data directory to another user")
	}
	ctx := context.Background()
	private := filepath.Join(workDir(t), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(private, "data")})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer s.Stop(ctx)
	st, _ := os.Stat(private)
	if got := st.Mode().Perm(); got != 0o701 {
		t.Fatalf("private dir mode = %o, want 701 (search only for others)", got)
	}
}

// TestOwnRole: with Role set, URL connects as that role, which is not a
// superuser (so it cannot take the connections reserved for one) and owns
// the database. A database made before, by the superuser, is handed over
// with its tables on the next start.
func TestOwnRole(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(workDir(t), "data")
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE older (v text)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	s, err = pgserver.Start(ctx, pgserver.Options{DataDir: dir, Ephemeral: true, Role: "partnerapi"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	conn, err = pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var user, dbOwner, tableOwner string
	var super bool
	if err := conn.QueryRow(ctx, `SELECT current_user, rolsuper, pg_get_userbyid(d.datdba), (SELECT tableowner FROM pg_tables WHERE tablename = 'older')
		FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()`).Scan(&user, &super, &dbOwner, &tableOwner); err != nil {
		t.Fatal(err)
	}
	if user != "partnerapi" || super || dbOwner != "partnerapi" || tableOwner != "partnerapi" {
		t.Fatalf("connected as %s (superuser %v); database owned by %s, table by %s; want partnerapi, not a superuser, owning both",
			user, super, dbOwner, tableOwner)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO older VALUES ('mine'); CREATE TABLE newer (v text)"); err != nil {
		t.Fatalf("the role cannot use its database: %v", err)
	}
}

// TestServerEnvironmentHoldsNoSecrets: the embedded PostgreSQL does not
// inherit this process's environment. The postgres account can read the
// postmaster's /proc/<pid>/environ, and any superuser session reads a
// backend's environment with COPY … FROM PROGRAM 'env'; neither may show
// PARTNER_ADMIN_TOKEN or anything else of the service's environment, only
// PATH, TZ and LC_ALL=C.
func TestServerEnvironmentHoldsNoSecrets(t *testing.T) {
	const sentinel = "sentinel-3c9f1e"
	t.Setenv("PARTNER_ADMIN_TOKEN", "admin-"+sentinel)
	t.Setenv("DATABASE_URL", "postgres://partner:pw-"+sentinel+"@db/partnerapi")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-"+sentinel)
	t.Setenv("PGPASSWORD", "pg-"+sentinel)
	allowed := map[string]bool{"PATH": true, "TZ": true, "LC_ALL": true}
	postgresOwn := map[string]bool{"PGLOCALEDIR": true, "PGSYSCONFDIR": true}

	ctx := context.Background()
	dir := filepath.Join(workDir(t), "data")
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)

	// The postmaster's pid, as anyone on the host finds it.
	pidFile, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _, _ := strings.Cut(string(pidFile), "\n")
	if pid != strconv.Itoa(s.PID()) {
		t.Fatalf("postmaster.pid names %q, the server is %d", pid, s.PID())
	}
	environ, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	// check asserts vars hold no secret, and no name but those allowed
	// and PostgreSQL's own: it exports PGLOCALEDIR and PGSYSCONFDIR, and
	// swaps LC_ALL for its LC_* settings, all "C", in its backends.
	check := func(where string, vars []string, need ...string) {
		t.Helper()
		names := map[string]bool{}
		for _, kv := range vars {
			if kv == "" {
				continue
			}
			if strings.Contains(kv, sentinel) {
				t.Errorf("%s holds a secret of the service: %s", where, kv)
			}
			name, _, _ := strings.Cut(kv, "=")
			names[name] = true
			if !allowed[name] && !postgresOwn[name] && !(strings.HasPrefix(name, "LC_") && strings.HasSuffix(kv, "=C")) {
				t.Errorf("%s has %s: want only %v, and PostgreSQL's own %v and LC_*=C", where, name,
					slices.Sorted(maps.Keys(allowed)), slices.Sorted(maps.Keys(postgresOwn)))
			}
		}
		for _, kv := range need {
			if !slices.Contains(vars, kv) && !names[kv] {
				t.Errorf("%s lacks %s; it has %v", where, kv, slices.Sorted(maps.Keys(names)))
			}
		}
	}
	check("/proc/"+pid+"/environ", strings.Split(string(environ), "\x00"), "PATH", "LC_ALL=C")

	// What a superuser session sees.
	conn, err := pgx.Connect(ctx, s.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE env (line text); COPY env FROM PROGRAM 'env'"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT line FROM env")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	// The shell adds PWD, SHLVL and _ of its own.
	var fromServer []string
	for _, l := range lines {
		if name, _, _ := strings.Cut(l, "="); name != "PWD" && name != "SHLVL" && name != "_" && name != "OLDPWD" {
			fromServer = append(fromServer, l)
		}
	}
	check("COPY FROM PROGRAM 'env'", fromServer, "PATH")
}
