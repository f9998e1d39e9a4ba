package dbtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/procenv"
)

// PgBouncerBin is where Debian's pgbouncer package puts the binary
// (scripts/install-deps.sh installs it).
const PgBouncerBin = "/usr/sbin/pgbouncer"

// PgBouncer runs Debian's PgBouncer (1.18) in transaction pooling mode in
// front of a private cluster, as the postgres user when the tests run as
// root (it refuses root), and returns a URL template: the cluster's URL
// with PgBouncer's address. Any database of the cluster is reachable
// through it. It stops when t ends.
func PgBouncer(t testing.TB, c *Cluster) string {
	t.Helper()
	if _, err := os.Stat(PgBouncerBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("pgbouncer is not installed (scripts/install-deps.sh installs it): %v", err)
		}
		t.Skipf("pgbouncer is not installed; `make deps` installs it: %v", err)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	users := filepath.Join(dir, "users.txt")
	conf := filepath.Join(dir, "pgbouncer.ini")
	logFile := filepath.Join(dir, "pgbouncer.log")
	write := func(name, text string) {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(users, `"`+Role+`" ""`+"\n"+`"postgres" ""`+"\n")
	write(conf, fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = %s
`, q.Get("host"), q.Get("port"), port, users, logFile))
	cmd := exec.Command(PgBouncerBin, conf)
	cmd.Env = procenv.Env(nil) // nothing of ours: it needs only its config file
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	out, _ := os.Create(filepath.Join(dir, "stdout"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = out.Close()
	})
	q.Set("host", "127.0.0.1")
	q.Set("port", strconv.Itoa(port))
	u.RawQuery = q.Encode()
	through := u.String()
	gone := false
	ready := Until(10*time.Second, func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		cfg, _ := pgx.ParseConfig(through)
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		var conn *pgx.Conn
		if conn, err = pgx.ConnectConfig(context.Background(), cfg); err != nil {
			return false
		}
		err = conn.Ping(context.Background())
		_ = conn.Close(context.Background())
		return err == nil
	})
	if gone {
		log, _ := os.ReadFile(logFile)
		stdout, _ := os.ReadFile(filepath.Join(dir, "stdout"))
		t.Fatalf("pgbouncer exited: %s%s", stdout, log)
	}
	if !ready {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("pgbouncer not ready: %v\n%s", err, log)
	}
	return through
}

// WithDatabase returns u with another database name.
func WithDatabase(u, name string) string { return withDatabase(u, name) }
