package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// errHelp means the help was printed on request: exit 0.
var errHelp = errors.New("help shown")

// version names the build: set at link time (-ldflags "-X
// main.version=v1.2.3"; make build sets the tag or the commit). Without
// it: the module version of a `go install`, else a pseudo-version from the
// commit Go stamped into the binary, else "devel". The release number is
// [release]; `partnerapi version` prints both.
var version = ""

func versionString() string {
	v := version
	var rev, when string
	dirty := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" && len(rev) >= 12 {
		// A Go pseudo-version: v0.0.0-yyyymmddhhmmss-abcdefabcdef.
		stamp := strings.NewReplacer("-", "", ":", "", "T", "", "Z", "").Replace(when)
		v = "v0.0.0-" + stamp + "-" + rev[:12]
		if dirty {
			v += "-dirty"
		}
	}
	if v == "" {
		v = "devel"
	}
	return fmt.Sprintf("partnerapi %s (build %s) %s/%s %s", release, v, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// envVar is one setting read from the environment.
type envVar struct{ name, def, meaning string }

// environment lists every environment variable the binary reads; `serve
// --help` and `partnerapi help` print it, and TestCLIHelpAndVersion ("serve
// help lists every environment variable") fails when the code under cmd/,
// internal/ or db/ names one that is not here.
var environment = []envVar{
	{"PARTNER_HTTP_ADDR", ":8080", "public listener: REST, Connect, gRPC (h2c), gRPC-Web, reflection, /healthz, /readyz, /openapi.json (--http-addr)"},
	{"PARTNER_ADMIN_ADDR", "127.0.0.1:8081", "admin listener: the management API and /metrics (--admin-addr)"},
	{"PARTNER_ADMIN_TOKEN", "unset", "when set, admin calls and /metrics need Authorization: Bearer <it>; the CLI sends it (--admin-token)"},
	{"DATABASE_URL", "unset", "PostgreSQL URL; unset runs an embedded PostgreSQL (--database-url)"},
	{"PARTNER_DIRECT_DATABASE_URL", "DATABASE_URL", "PostgreSQL without a transaction pooler (PgBouncer), for LISTEN and the migration lock (--direct-database-url)"},
	{"PARTNER_READ_DATABASE_URL", "unset", "hot standbys (one or several hosts, target_session_attrs=standby or prefer-standby) for GETs, lists, sync and the events feed; a read goes there once the standby has replayed every write acknowledged before it arrived, else to the primary (--read-database-url)"},
	{"PARTNER_DB_MAX_CONNS", "max(8, 4 x cores)", "connections of the pool; each replica also holds one listening connection (--db-max-conns)"},
	{"PARTNER_DB_TENANT_CONNS", "half the pool", "pooled connections one workspace's (and one client's) requests may hold at once; beyond it they wait up to the acquire timeout, holding none, then get 429 (--db-tenant-conns)"},
	{"PARTNER_DB_ACQUIRE_TIMEOUT", "1s", "wait for a pooled connection before answering 503 (--db-acquire-timeout)"},
	{"PARTNER_DB_STATEMENT_TIMEOUT", "2s", "bound of each statement, cancelled on the server too (--db-statement-timeout)"},
	{"PARTNER_DB_PRIMARY_LEASE", "1s", "with synchronous replication, how long a beat the primary confirmed lets its connections serve; a primary cut off from its standbys serves nothing after it; 0 turns the beats off (--db-primary-lease)"},
	{"PARTNER_REQUEST_TIMEOUT", "4s", "bound of a request's database work: a database that cannot serve is answered 503 within 5 s (--request-timeout)"},
	{"PARTNER_SHUTDOWN_DELAY", "0s", "after SIGTERM, keep serving with /readyz at 503 this long (the load balancer's deregistration time) (--shutdown-delay)"},
	{"PARTNER_SHUTDOWN_TIMEOUT", "25s", "after SIGTERM, exit within this in every case, cancelling database work still running (--shutdown-timeout)"},
	{"PARTNER_WEBHOOK_ALLOWED_NETWORKS", "none", "CIDRs webhook deliveries may reach although private, loopback or link-local (and over http), e.g. a receiver inside the cluster (--webhook-allowed-networks)"},
	{"PARTNER_WEBHOOK_TIMEOUT", "10s", "bound of one webhook delivery attempt; slower is a failed attempt (--webhook-timeout)"},
	{"PARTNER_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,24h,24h", "the wait before each retry after a delivery's first attempt; an endpoint with no success for a whole schedule is disabled (--webhook-retry-schedule)"},
	{"PARTNER_WEBHOOK_CONCURRENCY", "8", "webhook requests in flight per endpoint, across replicas; one record's events still go one at a time (--webhook-concurrency)"},
	{"PARTNER_WEBHOOK_MAX_PENDING", "100000", "pending webhook deliveries per endpoint: the rest waits in the event feed, and an endpoint held there without a success for the delivery timeout + 2 s is disabled (disabledReason backlog; enabled again, it resumes) (--webhook-max-pending)"},
	{"PARTNER_EVENT_RETENTION", "720h", "how long GET /api/v1/events keeps events (30 days); an older cursor is 410 cursor_expired (--event-retention)"},
	{"PARTNER_DATA_DIR", "./.data", "where the embedded PostgreSQL keeps its files (--data-dir)"},
	{"PARTNER_SECRET_KEY", "a key made in $PARTNER_DATA_DIR/secret-key with the embedded PostgreSQL; required with DATABASE_URL", "keys that seal webhook secrets at rest: comma-separated base64 of 32 bytes (openssl rand -base64 32), the first seals, each opens; no flag, so that it never shows in a process list"},
	{"PARTNER_PG_BINDIR", "found", "directory of the PostgreSQL server binaries for the embedded database"},
	{"PARTNER_ADMIN_URL", "http://127.0.0.1:8081", "where the management commands connect (--admin-url); unset, they derive it from PARTNER_ADMIN_ADDR (default 127.0.0.1:8081)"},
	{"BASE_URL", "unset", "the public listener's URL, as the README's quickstart sets it: without PARTNER_ADMIN_URL, a management command refuses an admin URL it derived for another server than BASE_URL's (the default admin listener goes with the public listener PARTNER_HTTP_ADDR, default :8080)"},
	{"PARTNER_PUBLIC_URL", "unset", "the public base URL, the OAuth issuer, never the request's Host; set it in production (--public-url)"},
	{"PARTNER_RATE_READ", "100", "read requests per second per client, burst twice that; 0 turns the default off (--rate-read)"},
	{"PARTNER_RATE_WRITE", "50", "write requests per second per client (creates, updates, batches, token requests); 0 off (--rate-write)"},
	{"PARTNER_RATE_AUTH_FAILURES", "10", "failed client authentications per minute per client id and source address, 30x per source address; 0 off (--rate-auth-failures)"},
	{"PARTNER_TRUSTED_PROXIES", "unset", "CIDRs of the proxies whose X-Forwarded-For is believed for the source address (--trusted-proxies)"},
	{"PARTNER_PPROF", "unset", "serve /debug/pprof on the admin listener without an admin token (--pprof)"},
	{"PARTNER_SETTINGS_URL", "the admin listener's /settings", "public base URL of the workspace settings page, e.g. https://crm.example.com/partner-settings: its sign-in links, trusted origin and Secure cookie (--settings-url)"},
	{"PARTNER_SETTINGS_FRAME_ANCESTORS", "'none'", "CSP frame-ancestors of the settings page, e.g. https://crm.example.com to let the CRM embed it (--settings-frame-ancestors)"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "unset", "when set (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), traces are exported over OTLP/HTTP; the other OTEL_EXPORTER_OTLP_* variables (HEADERS, TIMEOUT, CERTIFICATE, COMPRESSION, ...) apply"},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "unset", "the traces endpoint, overriding OTEL_EXPORTER_OTLP_ENDPOINT"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "only http/protobuf is supported"},
	{"OTEL_SDK_DISABLED", "false", "true turns tracing off even with an endpoint"},
	{"OTEL_TRACES_EXPORTER", "otlp", "none turns tracing off even with an endpoint"},
	{"OTEL_SERVICE_NAME", "partnerapi", "service.name of the spans (OTEL_RESOURCE_ATTRIBUTES adds attributes; OTEL_TRACES_SAMPLER picks the sampler)"},
	{"GOGC", "400", "Go garbage collector target percentage"},
	{"GOMEMLIMIT", "192MiB", "Go soft memory limit"},
}

func writeEnvironment(w io.Writer) { writeVariables(w, nil) }

// migrateSettings are the flags and variables `migrate` reads: it opens
// the database and migrates, nothing else.
var migrateSettings = map[string]bool{
	"database-url": true, "direct-database-url": true, "data-dir": true,
	"db-max-conns": true, "db-acquire-timeout": true, "db-statement-timeout": true,
	"DATABASE_URL": true, "PARTNER_DIRECT_DATABASE_URL": true, "PARTNER_DATA_DIR": true, "PARTNER_PG_BINDIR": true, "PARTNER_SECRET_KEY": true,
	"PARTNER_DB_MAX_CONNS": true, "PARTNER_DB_ACQUIRE_TIMEOUT": true, "PARTNER_DB_STATEMENT_TIMEOUT": true,
}

// writeVariables lists the environment variables (only those named in
// only, when given).
func writeVariables(w io.Writer, only map[string]bool) {
	fmt.Fprintln(w, "environment (a flag of the same meaning overrides it):")
	for _, e := range environment {
		if only == nil || only[e.name] {
			fmt.Fprintf(w, "  %-36s %s (default %s)\n", e.name, e.meaning, e.def)
		}
	}
}

// once makes a single-value flag refuse a second value: "last wins"
// would silently drop what a script meant.
type once struct {
	flag.Value
	name string
	set  bool
}

func (o *once) Set(v string) error {
	if o.set {
		return fmt.Errorf("--%s is given more than once", o.name)
	}
	o.set = true
	return o.Value.Set(v)
}

// IsBoolFlag keeps --settings-access working without a value.
func (o *once) IsBoolFlag() bool {
	b, ok := o.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// singleValued wraps every flag of fs that is not repeatable in [once].
func singleValued(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, repeatable := f.Value.(*multi); !repeatable {
			f.Value = &once{Value: f.Value, name: f.Name}
		}
	})
}

// parse parses args with fs. -h and --help print help (the command's
// synopsis, its flags and the extra text) on stdout and return errHelp.
func parse(fs *flag.FlagSet, args []string, synopsis string, only map[string]bool, extra func(io.Writer)) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(os.Stdout, fs, synopsis, only, extra)
		return errHelp
	}
	if err != nil {
		return usageError{msg: fs.Name() + ": " + err.Error()}
	}
	return nil
}

// printHelp writes a command's help: the synopsis and its flags (only
// those named in only, when given), their meanings in one column.
func printHelp(w io.Writer, fs *flag.FlagSet, synopsis string, only map[string]bool, extra func(io.Writer)) {
	fmt.Fprintf(w, "usage: partnerapi %s\n\nflags:\n", synopsis)
	var flags []*flag.Flag
	var names []string
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		if only != nil && !only[f.Name] {
			return
		}
		name := "  --" + f.Name
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			name += " " + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		}
		flags, names, width = append(flags, f), append(names, name), max(width, len(name))
	})
	for i, f := range flags {
		fmt.Fprintf(w, "%-*s  %s", width, names[i], f.Usage)
		// A zero default means "unset": the usage says what that is.
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && !strings.Contains(f.Name, "token") && !strings.Contains(f.Name, "database") {
			fmt.Fprintf(w, " (default %q)", d)
		}
		fmt.Fprintln(w)
	}
	if extra != nil {
		fmt.Fprintln(w)
		extra(w)
	}
}
