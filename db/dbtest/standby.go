package dbtest

import (
	"context"
	"fmt"
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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/db/procenv"
)

// Standby is a streaming standby of a [Cluster], for tests of a failover:
// stop it ([Standby.Detach]) and what the primary commits from then on
// never reaches it, as the last transactions of a primary cut off from
// its standbys; promote it ([Standby.Promote]) and it is a new primary on
// the next timeline, whose history lacks them and which hands their
// transaction ids out again.
type Standby struct {
	*pgserver.Server
	dataDir string
}

// NewStandby copies c with pg_basebackup and starts the copy as its
// streaming standby. It stops when t ends.
func NewStandby(t testing.TB, c *Cluster) *Standby {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "partnerapi-standby-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cred, err := postgresCredential()
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(c.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	bin, err := pgserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// -R writes standby.signal and the primary's conninfo; a fast
	// checkpoint starts the copy at once.
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_basebackup"), "-D", data,
		"-h", u.Query().Get("host"), "-p", u.Query().Get("port"), "-U", "postgres",
		"-X", "stream", "-R", "-c", "fast", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Env = procenv.Env(nil)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v: %s", err, out)
	}
	s := &Standby{dataDir: data}
	s.start(t)
	return s
}

// start starts the copy; settings are applied after its own.
func (s *Standby) start(t testing.TB, settings ...string) {
	t.Helper()
	srv, err := pgserver.Start(context.Background(), pgserver.Options{DataDir: s.dataDir, Database: "partnerapi",
		Role: Role, Ephemeral: true, Settings: append([]string{"synchronous_commit=on"}, settings...)})
	if err != nil {
		t.Fatalf("start standby: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	s.Server = srv
}

// CatchUp waits until the standby has replayed everything c committed
// before the call.
func (s *Standby) CatchUp(t testing.TB, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	var target string
	if err := c.Super(t).QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	Eventually(t, time.Minute, "the standby to replay up to "+target, func() bool {
		var done bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", target).Scan(&done)
		return err == nil && done
	})
}

// Detach stops the standby, as a partition would cut it off: nothing the
// primary commits from now on reaches it.
func (s *Standby) Detach(t testing.TB) {
	t.Helper()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("stop standby: %v", err)
	}
}

// Promote starts a detached standby without its primary and promotes it:
// it becomes a primary on the next timeline, with the history it had
// replayed when it was detached. Its URL and SuperuserURL change.
func (s *Standby) Promote(t testing.TB) {
	t.Helper()
	s.start(t, "primary_conninfo=")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var promoted bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil || !promoted {
		t.Fatalf("promote standby: %v (promoted: %v)", err, promoted)
	}
}

// postgresCredential is the OS user the servers run as when this process
// is root (PostgreSQL refuses to run as root), as pgserver does; nil
// otherwise.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("look up user postgres: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// Super opens a superuser pool on the standby's database, closed when t
// ends.
func (s *Standby) Super(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), s.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Switchover is a planned switchover to the standby: the primary c stops
// cleanly (a fast shutdown, which sends its standbys everything it wrote,
// its shutdown checkpoint last), the standby replays all of it and is
// promoted, without a restart, to a primary on the next timeline whose
// history holds everything c ever committed. Its URL stays the same.
func (s *Standby) Switchover(t testing.TB, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	var last string
	if err := c.Super(t).QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&last); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop primary: %v", err)
	}
	conn, err := pgx.Connect(ctx, s.SuperuserURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The shutdown checkpoint lies after every position read before.
	Eventually(t, time.Minute, "the standby to replay the primary's shutdown checkpoint, after "+last, func() bool {
		var done bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() > $1::text::pg_lsn", last).Scan(&done)
		return err == nil && done
	})
	var promoted bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil || !promoted {
		t.Fatalf("promote standby: %v (promoted: %v)", err, promoted)
	}
}

// Restart stops the standby, or the primary it was promoted to, cleanly
// and starts it again. Its URL and SuperuserURL change.
func (s *Standby) Restart(t testing.TB) {
	t.Helper()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.start(t, "primary_conninfo=")
}

// Crash stops the standby, or the primary it was promoted to, at once, as
// a crash would (an immediate shutdown: the next start recovers from its
// WAL), and starts it again. Its URL and SuperuserURL change.
func (s *Standby) Crash(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(s.PID(), syscall.SIGQUIT); err != nil {
		t.Fatalf("crash: %v", err)
	}
	_ = s.Stop(context.Background()) // waits for the exit
	s.start(t, "primary_conninfo=")
}
