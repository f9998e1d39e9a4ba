// Package pgserver runs a private PostgreSQL server from the machine's own
// server binaries (Debian's postgresql package). `partnerapi serve` uses it
// when DATABASE_URL is unset, and the tests use it for a throwaway cluster
// per package.
//
// PostgreSQL refuses to run as root, so when the process is root the server
// runs as the "postgres" user, and the data directory is handed to it.
// The server listens only on a unix socket in a short private directory
// (socket paths must stay under about 107 bytes), so clusters never share a
// port and nothing is reachable over the network.
//
// The server programs (initdb, postgres, pg_config) start with a minimal
// environment (db/procenv), never this process's: that holds
// PARTNER_ADMIN_TOKEN and the like, which the postgres account could read
// in /proc and a database superuser through COPY … FROM PROGRAM.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/procenv"
)

// Options configure a server.
type Options struct {
	// DataDir holds the cluster. It is created and initialised (initdb) the
	// first time, and reused afterwards.
	DataDir string
	// Database is created if missing. Default "partnerapi".
	Database string
	// Ephemeral trades durability for speed (fsync off). For tests only.
	Ephemeral bool
	// Settings are extra server settings ("name=value"), applied last.
	Settings []string
	// Logger receives progress and the server's output on failure.
	Logger *slog.Logger
	// RunAs names the OS user to run as when the process is root.
	// Default "postgres".
	RunAs string
	// Role is the login role URL connects as. It is created if missing, is
	// not a superuser (so it cannot take the connections reserved for
	// one), and owns Database. Empty: URL connects as the superuser.
	Role string
}

// Server is a running PostgreSQL.
type Server struct {
	// URL connects to Database over the unix socket, as Role.
	URL string

	cmd       *exec.Cmd
	socketDir string
	logFile   *os.File
	exited    chan struct{}
	superURL  string
	stopOnce  sync.Once
	stopErr   error
	log       *slog.Logger
}

// BinDir finds the directory of the PostgreSQL server binaries: the newest
// /usr/lib/postgresql/<version>/bin, then `pg_config --bindir`, then PATH.
// PARTNER_PG_BINDIR overrides the search.
func BinDir() (string, error) {
	if dir := os.Getenv("PARTNER_PG_BINDIR"); dir != "" {
		return dir, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	pgConfig := exec.Command("pg_config", "--bindir")
	pgConfig.Env = procenv.Env(nil)
	if out, err := pgConfig.Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("find postgresql server binaries: none found; install them with `apt-get install -y postgresql` (or run `make deps`)")
}

func version(postgresPath string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(postgresPath))), 64)
	return v
}

// Start initialises DataDir if needed, starts the server and waits until it
// accepts connections and Database exists.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Database == "" {
		opts.Database = "partnerapi"
	}
	if opts.RunAs == "" {
		opts.RunAs = "postgres"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if !validRole(opts.Role) {
		return nil, fmt.Errorf("role %q: use lower-case letters, digits and underscores", opts.Role)
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve data dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	cred, err := credentialFor(opts.RunAs)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := handOver(dataDir, cred, opts.Logger); err != nil {
			return nil, err
		}
	}

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		opts.Logger.Info("initialising embedded postgresql", "dir", dataDir)
		args := []string{"-D", dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"}
		if opts.Ephemeral {
			args = append(args, "--no-sync")
		}
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = procenv.Env(nil)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %w: %s", err, tail(out))
		}
	}

	socketDir, err := os.MkdirTemp("", "pgsock-")
	if err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if cred != nil {
		if err := os.Chown(socketDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown socket dir: %w", err)
		}
	}
	logFile, err := os.CreateTemp("", "pglog-")
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	args := []string{"-D", dataDir, "-k", socketDir, "-p", "5432",
		"-c", "listen_addresses=", "-c", "max_connections=200", "-c", "shared_buffers=128MB",
		// Our writes take locks in one order and never deadlock each
		// other; a deadlock with anything else is found in 100 ms instead
		// of holding both connections for PostgreSQL's default second.
		"-c", "deadlock_timeout=100ms"}
	if opts.Ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, kv := range opts.Settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Not this process's environment: it holds PARTNER_ADMIN_TOKEN and
	// DATABASE_URL-like secrets, and a server's environment is readable
	// in /proc/<pid>/environ by its OS account and, through COPY … FROM
	// PROGRAM, by any database superuser (db/procenv).
	cmd.Env = procenv.Env(nil)
	// Pdeathsig stops the server if this process dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	s := &Server{cmd: cmd, socketDir: socketDir, logFile: logFile, exited: make(chan struct{}), log: opts.Logger}
	started := make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig when the thread that started the child
		// exits, not the process (golang/go#27505), and Go retires threads.
		// This goroutine keeps its thread locked until the server exits, and
		// the thread ends with it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}

	s.socketDir = socketDir
	s.superURL = s.urlFor("postgres", opts.Database)
	s.URL = s.superURL
	if opts.Role != "" {
		s.URL = s.urlFor(opts.Role, opts.Database)
	}
	if err := s.waitReady(ctx, opts.Database, opts.Role); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	opts.Logger.Info("embedded postgresql ready", "dir", dataDir, "socket", socketDir)
	return s, nil
}

func (s *Server) urlFor(user, database string) string {
	return (&url.URL{
		Scheme:   "postgres",
		User:     url.User(user),
		Path:     "/" + database,
		RawQuery: url.Values{"host": {s.socketDir}, "port": {"5432"}, "sslmode": {"disable"}}.Encode(),
	}).String()
}

// AdminURL connects to the "postgres" maintenance database as the
// superuser.
func (s *Server) AdminURL() string { return s.urlFor("postgres", "postgres") }

// SuperuserURL connects to Database as the superuser (benchmarks and
// tests that look behind the service's back).
func (s *Server) SuperuserURL() string { return s.superURL }

func (s *Server) waitReady(ctx context.Context, database, role string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.AdminURL())
		if err == nil {
			defer conn.Close(ctx)
			return s.prepare(ctx, conn, database, role)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during start-up: %s", s.serverLog())
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres: %w (last error: %v): %s", ctx.Err(), err, s.serverLog())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// prepare creates the role and the database it owns. A database made by
// an earlier version, owned by the superuser, is handed to the role with
// everything the migrations created in it.
func (s *Server) prepare(ctx context.Context, conn *pgx.Conn, database, role string) error {
	if role != "" {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
			return fmt.Errorf("look up role: %w", err)
		}
		if !exists {
			if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
				return fmt.Errorf("create role: %w", err)
			}
		}
	}
	var owner string
	err := conn.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", database).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		stmt := "CREATE DATABASE " + pgx.Identifier{database}.Sanitize()
		if role != "" {
			stmt += " OWNER " + pgx.Identifier{role}.Sanitize()
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create database: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("look up database: %w", err)
	case role == "" || owner == role:
		return nil
	}
	s.log.Info("handing the database to its own role", "database", database, "role", role)
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{database}.Sanitize()+" OWNER TO "+pgx.Identifier{role}.Sanitize()); err != nil {
		return fmt.Errorf("hand database to %s: %w", role, err)
	}
	dbConn, err := pgx.Connect(ctx, s.superURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", database, err)
	}
	defer dbConn.Close(ctx)
	// Tables take their indexes and identity sequences along.
	_, err = dbConn.Exec(ctx, `DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid::regclass AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm') AND c.relowner <> '`+role+`'::regrole LOOP
    EXECUTE format('ALTER TABLE %s OWNER TO %I', r.name, '`+role+`');
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'public' AND p.proowner <> '`+role+`'::regrole LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO %I', r.name, '`+role+`');
  END LOOP;
END $$`)
	if err != nil {
		return fmt.Errorf("hand database objects to %s: %w", role, err)
	}
	return nil
}

func (s *Server) serverLog() string {
	b, _ := os.ReadFile(s.logFile.Name())
	return tail(b)
}

// Stop shuts the server down cleanly (a fast shutdown: open sessions are
// ended, committed data is safe) and removes its socket directory.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.Thaw() // a frozen server would not see the signal
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-ctx.Done():
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("stop postgres: %w", ctx.Err())
		case <-time.After(60 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = errors.New("stop postgres: timed out, killed")
		}
		_ = os.RemoveAll(s.socketDir)
		_ = s.logFile.Close()
		_ = os.Remove(s.logFile.Name())
	})
	return s.stopErr
}

// PID is the postmaster's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Backends lists the postmaster's children: backends and auxiliary
// processes.
func (s *Server) Backends() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(s.PID()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Freeze stops the whole cluster (SIGSTOP), as a hung host would: the
// postmaster and every child, since backends call setsid and a signal to
// the process group would miss them. Thaw resumes it. For fault tests.
func (s *Server) Freeze() { s.signalAll(syscall.SIGSTOP) }

// Thaw resumes a frozen cluster.
func (s *Server) Thaw() { s.signalAll(syscall.SIGCONT) }

func (s *Server) signalAll(sig syscall.Signal) {
	_ = syscall.Kill(s.PID(), sig)
	for _, pid := range s.Backends() {
		_ = syscall.Kill(pid, sig)
	}
}

// credentialFor returns nil when the process is not root; otherwise the
// credential of the unprivileged user the server must run as.
func credentialFor(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up user %q to run postgresql as (it refuses to run as root): %w", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// handOver gives dir to the server's user, and makes sure that user can
// reach it: every ancestor needs the search (x) permission. Directories
// that deny it (a 0700 home or mktemp directory) get o+x, which lets others
// pass through but not list them; this is logged.
func handOver(dir string, cred *syscall.Credential, log *slog.Logger) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			log.Warn("granting search permission so the postgres user can reach the data dir", "dir", p)
			if err := os.Chmod(p, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("make %s searchable for postgres: %w", p, err)
			}
		}
		if p == "/" || p == "." {
			break
		}
	}
	if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == cred.Uid {
			return nil // already handed over on an earlier start
		}
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}

func validRole(r string) bool {
	for i, c := range r {
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func tail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
