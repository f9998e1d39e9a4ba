package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/internal/observe"
	"github.com/svat/partnerapi/internal/security/ratelimit"
	"github.com/svat/partnerapi/internal/security/sealed"
	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/work/retention"
	"github.com/svat/partnerapi/service/server"
	"github.com/svat/partnerapi/service/webhook/delivery"
	"github.com/svat/partnerapi/service/webhook/secrets"
)

type serveConfig struct {
	httpAddr, adminAddr, adminToken, databaseURL, directURL, dataDir string
	readURL                                                          string
	publicURL, trustedProxies                                        string
	settingsURL, settingsFrameAncestors                              string
	webhookNetworks, webhookSchedule                                 string
	webhookConcurrency, webhookMaxPending                            int
	rateRead, rateWrite, rateAuthFailures                            int
	pprof                                                            bool
	sealWebhookSecrets                                               bool
	maxConns, tenantConns                                            int
	acquireTimeout, statementTimeout, requestTimeout                 time.Duration
	primaryLease                                                     time.Duration
	shutdownDelay, shutdownTimeout, eventRetention, webhookTimeout   time.Duration
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
	fs.StringVar(&c.readURL, "read-database-url", env("PARTNER_READ_DATABASE_URL", ""), "PostgreSQL URL of hot standbys (target_session_attrs=standby or prefer-standby) for GETs, lists, sync and the events feed; empty: the database URL")
	fs.StringVar(&c.dataDir, "data-dir", env("PARTNER_DATA_DIR", "./.data"), "embedded PostgreSQL data directory")
	fs.StringVar(&c.publicURL, "public-url", env("PARTNER_PUBLIC_URL", ""), "public base URL, the OAuth issuer (required in production)")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", env("PARTNER_TRUSTED_PROXIES", ""), "CIDRs of proxies whose X-Forwarded-For is believed")
	fs.StringVar(&c.settingsURL, "settings-url", env("PARTNER_SETTINGS_URL", ""), "public base URL of the workspace settings page, e.g. https://crm.example.com/partner-settings; empty: the admin listener's own /settings")
	fs.StringVar(&c.webhookNetworks, "webhook-allowed-networks", env("PARTNER_WEBHOOK_ALLOWED_NETWORKS", ""), "CIDRs webhook deliveries may reach although private or loopback (over http too), e.g. 10.0.5.0/24")
	fs.StringVar(&c.webhookSchedule, "webhook-retry-schedule", env("PARTNER_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,24h,24h"), "the wait before each retry of a webhook delivery, comma-separated Go durations")
	fs.StringVar(&c.settingsFrameAncestors, "settings-frame-ancestors", env("PARTNER_SETTINGS_FRAME_ANCESTORS", ""), "CSP frame-ancestors of the settings page, e.g. https://crm.example.com; empty: 'none'")
	defaults := ratelimit.DefaultConfig()
	for _, f := range []struct {
		flag, env string
		dst       *int
		def       int
		help      string
	}{
		{"rate-read", "PARTNER_RATE_READ", &c.rateRead, defaults.Read, "read requests per second per client; 0 turns the default off"},
		{"rate-write", "PARTNER_RATE_WRITE", &c.rateWrite, defaults.Write, "write requests per second per client; 0 turns the default off"},
		{"rate-auth-failures", "PARTNER_RATE_AUTH_FAILURES", &c.rateAuthFailures, defaults.AuthFailures, "failed client authentications per minute per client id and source address (30x per source); 0 turns them off"},
	} {
		def := f.def
		if v, ok := os.LookupEnv(f.env); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return c, usageError{msg: fmt.Sprintf("%s=%q: want a whole number, 0 or more", f.env, v)}
			}
			def = n
		}
		fs.IntVar(f.dst, f.flag, def, f.help)
	}
	pprofDefault := env("PARTNER_PPROF", "") != "" && env("PARTNER_PPROF", "") != "0" && env("PARTNER_PPROF", "") != "false"
	fs.BoolVar(&c.pprof, "pprof", pprofDefault, "serve /debug/pprof on the admin listener even without an admin token")
	fs.IntVar(&c.maxConns, "db-max-conns", 0, "connections of the pool (PARTNER_DB_MAX_CONNS; default max(8, 4 x cores))")
	fs.IntVar(&c.tenantConns, "db-tenant-conns", 0, "pooled connections one workspace's requests may hold at once (PARTNER_DB_TENANT_CONNS; default half the pool)")
	// A timeout must be above 0: there is no "no timeout", and 0 would arm
	// the exit watchdog with nothing (the delay alone may be 0).
	durations := []struct {
		p         *time.Duration
		flag, env string
		def       time.Duration
		usage     string
		zeroOK    bool
	}{
		{&c.acquireTimeout, "db-acquire-timeout", "PARTNER_DB_ACQUIRE_TIMEOUT", db.DefaultAcquireTimeout, "wait for a pooled connection", false},
		{&c.statementTimeout, "db-statement-timeout", "PARTNER_DB_STATEMENT_TIMEOUT", db.DefaultStatementTimeout, "bound of each statement", false},
		{&c.primaryLease, "db-primary-lease", "PARTNER_DB_PRIMARY_LEASE", db.DefaultPrimaryLease, "with synchronous replication, how long a confirmed beat lets a server serve; 0: no beats", true},
		{&c.requestTimeout, "request-timeout", "PARTNER_REQUEST_TIMEOUT", server.DefaultRequestTimeout, "bound of a request's database work", false},
		{&c.shutdownDelay, "shutdown-delay", "PARTNER_SHUTDOWN_DELAY", 0, "serve on after SIGTERM, /readyz 503", true},
		{&c.shutdownTimeout, "shutdown-timeout", "PARTNER_SHUTDOWN_TIMEOUT", server.DefaultShutdownTimeout, "exit within this after SIGTERM", false},
		{&c.eventRetention, "event-retention", "PARTNER_EVENT_RETENTION", retention.EventAge, "how long the event feed keeps events", false},
		{&c.webhookTimeout, "webhook-timeout", "PARTNER_WEBHOOK_TIMEOUT", outbound.DefaultTimeout, "bound of one webhook delivery attempt", false},
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
			return c, usageError{msg: fmt.Sprintf("PARTNER_DB_MAX_CONNS=%q: want a positive number", v)}
		}
		c.maxConns = n
	}
	c.webhookConcurrency = delivery.DefaultConcurrency
	if v := os.Getenv("PARTNER_WEBHOOK_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, usageError{msg: fmt.Sprintf("PARTNER_WEBHOOK_CONCURRENCY=%q: want a positive number", v)}
		}
		c.webhookConcurrency = n
	}
	fs.IntVar(&c.webhookConcurrency, "webhook-concurrency", c.webhookConcurrency, "webhook requests in flight per endpoint (PARTNER_WEBHOOK_CONCURRENCY)")
	c.webhookMaxPending = delivery.DefaultMaxPending
	if v := os.Getenv("PARTNER_WEBHOOK_MAX_PENDING"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return c, usageError{msg: fmt.Sprintf("PARTNER_WEBHOOK_MAX_PENDING=%q: want a positive number", v)}
		}
		c.webhookMaxPending = n
	}
	fs.IntVar(&c.webhookMaxPending, "webhook-max-pending", c.webhookMaxPending, "pending webhook deliveries per endpoint, beyond which a stalled endpoint is disabled (PARTNER_WEBHOOK_MAX_PENDING)")
	if v := os.Getenv("PARTNER_DB_TENANT_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, usageError{msg: fmt.Sprintf("PARTNER_DB_TENANT_CONNS=%q: want a positive number", v)}
		}
		c.tenantConns = n
	}
	singleValued(fs)
	only, extra := map[string]bool(nil), writeEnvironment
	if name == "migrate" {
		fs.BoolVar(&c.sealWebhookSecrets, "seal-webhook-secrets", false,
			"stop keeping plaintext copies of webhook secrets for release 1.1.0, and seal them now; run it once no 1.1.0 replica serves (docs/operations.md, \"Secret keys\")")
		only, extra = migrateSettings, func(w io.Writer) { writeVariables(w, migrateSettings) }
	}
	if err := parse(fs, args, name+" [flags]", only, extra); err != nil {
		return c, err
	}
	if envErr != nil {
		return c, usageError{msg: envErr.Error()}
	}
	if fs.NArg() > 0 {
		return c, usageError{msg: fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	for _, d := range durations {
		if *d.p < 0 || (*d.p == 0 && !d.zeroOK) {
			return c, usageError{msg: fmt.Sprintf("%s: --%s (%s) is %v; want a duration above 0", name, d.flag, d.env, *d.p)}
		}
	}
	if c.maxConns < 0 {
		return c, usageError{msg: fmt.Sprintf("%s: --db-max-conns is %d; want a positive number", name, c.maxConns)}
	}
	for _, n := range []int{c.rateRead, c.rateWrite, c.rateAuthFailures} {
		if n < 0 {
			return c, usageError{msg: fmt.Sprintf("%s: rates are 0 or more", name)}
		}
	}
	return c, nil
}

// serverConfig turns the settings into the server's, checking what can
// be checked before anything starts.
func (c serveConfig) serverConfig() (server.Config, error) {
	var out server.Config
	if err := server.CheckAdminAddr(c.adminAddr, c.adminToken); err != nil {
		return out, err
	}
	if c.publicURL != "" {
		u, err := url.Parse(c.publicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return out, fmt.Errorf("PARTNER_PUBLIC_URL %q: want an absolute http(s) URL such as https://api.example.com, without query or fragment", c.publicURL)
		}
	}
	trusted, err := ratelimit.ParseTrusted(c.trustedProxies)
	if err != nil {
		return out, fmt.Errorf("PARTNER_TRUSTED_PROXIES: %w", err)
	}
	nets, err := outbound.ParseNetworks(c.webhookNetworks)
	if err != nil {
		return out, fmt.Errorf("PARTNER_WEBHOOK_ALLOWED_NETWORKS: %w", err)
	}
	schedule, err := delivery.ParseSchedule(c.webhookSchedule)
	if err != nil {
		return out, fmt.Errorf("PARTNER_WEBHOOK_RETRY_SCHEDULE: %w", err)
	}
	if c.webhookConcurrency < 1 {
		return out, fmt.Errorf("--webhook-concurrency is %d; want a positive number", c.webhookConcurrency)
	}
	if c.webhookMaxPending < 1 || c.webhookMaxPending > math.MaxInt32 {
		return out, fmt.Errorf("--webhook-max-pending is %d; want a positive number", c.webhookMaxPending)
	}
	limits := ratelimit.DefaultConfig()
	limits.Read, limits.Write, limits.AuthFailures = c.rateRead, c.rateWrite, c.rateAuthFailures
	return server.Config{AdminToken: c.adminToken, Issuer: c.publicURL, Limits: &limits, TrustedProxies: trusted, Pprof: c.pprof,
		RequestTimeout: c.requestTimeout, ShutdownDelay: c.shutdownDelay, ShutdownTimeout: c.shutdownTimeout,
		EventRetention: c.eventRetention, WebhookAllowedNetworks: nets, WebhookSchedule: schedule,
		WebhookTimeout: c.webhookTimeout, WebhookConcurrency: c.webhookConcurrency, WebhookMaxPending: c.webhookMaxPending,
		SettingsURL: c.settingsURL, SettingsFrameAncestors: c.settingsFrameAncestors}, nil
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
// primaryLease is the db.Config.PrimaryLease of the setting, whose 0
// turns beats off.
func primaryLease(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

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
	d, err := db.OpenConfig(ctx, db.Config{URL: url, DirectURL: c.directURL, ReadURL: c.readURL, MaxConns: int32(c.maxConns),
		AcquireTimeout: c.acquireTimeout, StatementTimeout: c.statementTimeout, TenantShare: c.tenantConns,
		PrimaryLease: primaryLease(c.primaryLease), Release: release})
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
	log.Info("database ready", "migrations_applied", n, "embedded", pg != nil, "max_conns", d.MaxConns(), "read_pool", d.HasReadPool())
	return d, func() { d.Close(); stopPG() }, nil
}

// secretKeys are the keys that seal webhook secrets at rest:
// PARTNER_SECRET_KEY, or with the embedded PostgreSQL a key kept beside
// its files (made on the first start). A server on an external database
// without it does not start: a key made on one replica would not open
// what another sealed.
func secretKeys(c serveConfig) (*sealed.Keyring, error) {
	if v := os.Getenv("PARTNER_SECRET_KEY"); v != "" {
		k, err := sealed.Parse(v)
		if err != nil {
			return nil, fmt.Errorf("PARTNER_SECRET_KEY: %w", err)
		}
		return k, nil
	}
	if c.databaseURL == "" {
		return sealed.LoadOrCreate(filepath.Join(c.dataDir, "secret-key"))
	}
	return nil, errors.New("PARTNER_SECRET_KEY is required with DATABASE_URL: the keys that seal webhook secrets at rest, comma-separated, each the base64 of 32 random bytes (make one with `openssl rand -base64 32`; docs/operations.md, \"Secret keys\")")
}

func serve(ctx context.Context, args []string) error {
	c, err := serveFlags("serve", args)
	if err != nil {
		return err
	}
	cfg, err := c.serverConfig()
	if err != nil {
		return err
	}
	if cfg.SecretKeys, err = secretKeys(c); err != nil {
		return err
	}
	// The log is batched (one write per 50 ms or 32 KiB, warnings and
	// errors at once) and flushed when serve returns.
	logOut := observe.NewLogWriter(os.Stderr, 50*time.Millisecond)
	defer logOut.Close()
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tuneGC()
	tp, stopTracing, err := observe.TracerProviderFromEnv(ctx, versionString())
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()
	// Bind first: a port in use fails at once, before a PostgreSQL is
	// started or a migration applied for a server that cannot serve. The
	// listeners queue connections until Serve takes them.
	public, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on PARTNER_HTTP_ADDR %s: %w", c.httpAddr, err)
	}
	adminL, err := net.Listen("tcp", c.adminAddr)
	if err != nil {
		_ = public.Close()
		return fmt.Errorf("listen on PARTNER_ADMIN_ADDR %s: %w", c.adminAddr, err)
	}
	closeListeners := func() { _ = public.Close(); _ = adminL.Close() }
	d, closeDB, err := openDB(ctx, c, log)
	if err != nil {
		closeListeners()
		return err
	}
	defer closeDB()
	// Whatever happens below, the process exits within the shutdown timeout
	// of the signal: an orchestrator's SIGKILL must never land first.
	go func() {
		<-ctx.Done()
		time.AfterFunc(c.shutdownTimeout, func() {
			log.Error("shutdown timeout reached; exiting now")
			_ = logOut.Close()
			os.Exit(1)
		})
	}()
	cfg.DB, cfg.Log, cfg.TracerProvider = d, log, tp
	srv, err := server.New(ctx, cfg)
	if err != nil {
		closeListeners()
		return err
	}
	if c.publicURL == "" {
		log.Warn("PARTNER_PUBLIC_URL is not set: the OAuth issuer is derived from each request's Host; set it in production")
	}
	log.Info("serving", "public", public.Addr().String(), "admin", adminL.Addr().String(), "admin_token_required", c.adminToken != "",
		"tracing", tp != nil, "version", versionString())
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
	var keys *sealed.Keyring
	if c.sealWebhookSecrets {
		// Before the database: a missing key fails at once.
		if keys, err = secretKeys(c); err != nil {
			return err
		}
	}
	d, closeDB, err := openDB(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeDB()
	if !c.sealWebhookSecrets {
		return nil
	}
	if err := db.Q.WebhookSecretsSealOnly(ctx, d.Conn()); err != nil {
		return fmt.Errorf("stop keeping plaintext webhook secrets: %w", err)
	}
	n, unopened, err := secrets.Sweep(ctx, d, secrets.Box{Keys: keys})
	if err != nil {
		return err
	}
	log.Info("sealed webhook secrets; no plaintext copy is kept", "sealed", n, "unopened", unopened)
	if unopened > 0 {
		return fmt.Errorf("seal webhook secrets: %d endpoints' secrets open with no key of PARTNER_SECRET_KEY; put back the key that sealed them", unopened)
	}
	return nil
}
