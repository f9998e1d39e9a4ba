package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/internal/server"
)

type serveConfig struct {
	httpAddr, adminAddr, adminToken, databaseURL, directURL, dataDir string
	maxConns                                                         int
	acquireTimeout, statementTimeout, requestTimeout                 time.Duration
	shutdownDelay, shutdownTimeout                                   time.Duration
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func serveFlags(name string, args []string) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.httpAddr, "http-addr", env("PARTNER_HTTP_ADDR", ":8080"), "public listener address")
	fs.StringVar(&c.adminAddr, "admin-addr", env("PARTNER_ADMIN_ADDR", "127.0.0.1:8081"), "admin listener address")
	fs.StringVar(&c.adminToken, "admin-token", env("PARTNER_ADMIN_TOKEN", ""), "bearer token required on admin calls")
	fs.StringVar(&c.databaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL URL; empty runs an embedded PostgreSQL")
	fs.StringVar(&c.directURL, "direct-database-url", env("PARTNER_DIRECT_DATABASE_URL", ""), "PostgreSQL URL without a transaction pooler, for LISTEN and the migration lock; empty: the database URL")
	fs.StringVar(&c.dataDir, "data-dir", env("PARTNER_DATA_DIR", "./.data"), "embedded PostgreSQL data directory")
	fs.IntVar(&c.maxConns, "db-max-conns", 0, "connections of the pool (PARTNER_DB_MAX_CONNS; default max(8, 4 x cores))")
	durations := []struct {
		p         *time.Duration
		flag, env string
		def       time.Duration
		usage     string
	}{
		{&c.acquireTimeout, "db-acquire-timeout", "PARTNER_DB_ACQUIRE_TIMEOUT", db.DefaultAcquireTimeout, "wait for a pooled connection"},
		{&c.statementTimeout, "db-statement-timeout", "PARTNER_DB_STATEMENT_TIMEOUT", db.DefaultStatementTimeout, "bound of each statement"},
		{&c.requestTimeout, "request-timeout", "PARTNER_REQUEST_TIMEOUT", server.DefaultRequestTimeout, "bound of a request's database work"},
		{&c.shutdownDelay, "shutdown-delay", "PARTNER_SHUTDOWN_DELAY", 0, "serve on after SIGTERM, /readyz 503"},
		{&c.shutdownTimeout, "shutdown-timeout", "PARTNER_SHUTDOWN_TIMEOUT", server.DefaultShutdownTimeout, "exit within this after SIGTERM"},
	}
	var envErr error
	for _, d := range durations {
		v, err := envDuration(d.env, d.def)
		if err != nil && envErr == nil {
			envErr = err
		}
		fs.DurationVar(d.p, d.flag, v, d.usage+" ("+d.env+")")
	}
	if v := os.Getenv("PARTNER_DB_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, usageError{fmt.Sprintf("PARTNER_DB_MAX_CONNS=%q: want a positive number", v)}
		}
		c.maxConns = n
	}
	if err := fs.Parse(args); err != nil {
		return c, usageError{err.Error()}
	}
	if envErr != nil {
		return c, usageError{envErr.Error()}
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	return c, nil
}

// envDuration reads a duration such as "10s" or "1500ms"; a bare number
// is seconds.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 10s", name, v)
	}
	return d, nil
}

func newLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// openDB connects to DATABASE_URL, or starts the embedded PostgreSQL. It
// migrates the schema either way. The returned stop closes everything.
func openDB(ctx context.Context, c serveConfig, log *slog.Logger) (*db.DB, func(), error) {
	url := c.databaseURL
	var pg *pgserver.Server
	if url == "" {
		var err error
		pg, err = pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(c.dataDir, "postgres"), Logger: log, Role: embeddedRole})
		if err != nil {
			return nil, nil, fmt.Errorf("start embedded postgresql: %w", err)
		}
		url = pg.URL
	}
	stopPG := func() {
		if pg != nil {
			if err := pg.Stop(context.Background()); err != nil {
				log.Warn("stop embedded postgresql", "err", err)
			}
		}
	}
	d, err := db.OpenConfig(ctx, db.Config{URL: url, DirectURL: c.directURL, MaxConns: int32(c.maxConns),
		AcquireTimeout: c.acquireTimeout, StatementTimeout: c.statementTimeout})
	if err != nil {
		stopPG()
		return nil, nil, err
	}
	n, err := db.Migrate(ctx, d)
	if err != nil {
		d.Close()
		stopPG()
		return nil, nil, err
	}
	log.Info("database ready", "migrations_applied", n, "embedded", pg != nil, "max_conns", d.MaxConns())
	return d, func() { d.Close(); stopPG() }, nil
}

func serve(ctx context.Context, args []string) error {
	c, err := serveFlags("serve", args)
	if err != nil {
		return err
	}
	log := newLogger()
	tuneGC()
	d, closeDB, err := openDB(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeDB()
	// Whatever happens below, the process exits within the shutdown timeout
	// of the signal: an orchestrator's SIGKILL must never land first.
	go func() {
		<-ctx.Done()
		time.AfterFunc(c.shutdownTimeout, func() {
			log.Error("shutdown timeout reached; exiting now")
			os.Exit(1)
		})
	}()
	srv, err := server.New(ctx, server.Config{DB: d, Log: log, AdminToken: c.adminToken,
		RequestTimeout: c.requestTimeout, ShutdownDelay: c.shutdownDelay, ShutdownTimeout: c.shutdownTimeout})
	if err != nil {
		return err
	}
	public, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on PARTNER_HTTP_ADDR %s: %w", c.httpAddr, err)
	}
	adminL, err := net.Listen("tcp", c.adminAddr)
	if err != nil {
		_ = public.Close()
		return fmt.Errorf("listen on PARTNER_ADMIN_ADDR %s: %w", c.adminAddr, err)
	}
	log.Info("serving", "public", public.Addr().String(), "admin", adminL.Addr().String(), "admin_token_required", c.adminToken != "")
	err = srv.Serve(ctx, public, adminL)
	log.Info("stopped")
	return err
}

// embeddedRole is the role the service connects to its embedded PostgreSQL
// as: not a superuser, so it cannot take the connections reserved for one.
const embeddedRole = "partnerapi"

// tuneGC trades memory the service does not need for CPU it does: the
// live heap is a few MiB plus the bounded token cache, so collecting at
// 4x the live heap instead of 2x halves GC work, and a 192 MiB soft limit
// keeps the process well under its 256 MiB budget. GOGC and GOMEMLIMIT
// still win when set.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(192 << 20)
	}
}

func migrate(ctx context.Context, args []string) error {
	c, err := serveFlags("migrate", args)
	if err != nil {
		return err
	}
	log := newLogger()
	_, closeDB, err := openDB(ctx, c, log)
	if err != nil {
		return err
	}
	closeDB()
	return nil
}
