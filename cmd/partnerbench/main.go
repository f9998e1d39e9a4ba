// Command partnerbench measures the service under load against bare
// baselines run on the same machine in the same run, and prints a table
// (see docs/performance.md). It starts a private PostgreSQL, the real
// `partnerapi serve` binary and a baseline server, each in its own
// process, and drives them from a closed-loop Go load generator on
// loopback.
//
//	go run ./cmd/partnerbench [-duration 10s] [-concurrency 16] [-contacts 100000]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/db/procenv"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// goToolchainEnv names the go command's variables (go help environment)
// and the runtime's.
var goToolchainEnv = []string{"GOAMD64", "GOARCH", "GOAUTH", "GOBIN", "GOCACHE", "GOCOVERDIR", "GODEBUG", "GOENV", "GOEXPERIMENT",
	"GOFIPS140", "GOFLAGS", "GOGC", "GOINSECURE", "GOMAXPROCS", "GOMEMLIMIT", "GOMODCACHE", "GONOPROXY", "GONOSUMDB", "GOOS",
	"GOPATH", "GOPRIVATE", "GOPROXY", "GOROOT", "GOSUMDB", "GOTELEMETRY", "GOTMPDIR", "GOTOOLCHAIN", "GOTRACEBACK", "GOVCS", "GOWORK"}

// batchSize is the number of leads in one request of scenario (f).
const batchSize = 100

func main() {
	if len(os.Args) > 1 && os.Args[1] == "scale" {
		if err := runScale(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "partnerbench scale:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "chart" {
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: partnerbench chart SCALE.csv OUT.png")
			os.Exit(2)
		}
		if err := chart(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "partnerbench chart:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "baseline-server" {
		if err := baselineServer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "baseline-server:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "partnerbench:", err)
		os.Exit(1)
	}
}

type config struct {
	duration, warm time.Duration
	concurrency    int
	contacts       int
	serverBin      string
	skipAllocs     bool
	profileDir     string
	only           string
	pgSettings     settingList
}

// settingList collects repeated -pg-setting flags.
type settingList []string

func (l *settingList) String() string     { return strings.Join(*l, ",") }
func (l *settingList) Set(v string) error { *l = append(*l, v); return nil }

func run() error {
	var c config
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per scenario")
	flag.DurationVar(&c.warm, "warm", 2*time.Second, "warm-up time per scenario")
	flag.IntVar(&c.concurrency, "concurrency", 16, "concurrent connections")
	flag.IntVar(&c.contacts, "contacts", 100_000, "contacts in the workspace of scenario (d)")
	flag.StringVar(&c.serverBin, "server", "bin/partnerapi", "the partnerapi binary to run")
	flag.BoolVar(&c.skipAllocs, "skip-allocs", false, "skip the Go allocation benchmarks")
	flag.StringVar(&c.profileDir, "profile", "", "write a server CPU profile of each scenario into this directory")
	flag.StringVar(&c.only, "only", "", "run only scenarios whose name contains this, e.g. (b)")
	flag.Var(&c.pgSettings, "pg-setting", "an extra PostgreSQL server setting, name=value (repeatable), e.g. for auto_explain")
	flag.Parse()
	ctx, stop := signalContext()
	defer stop()

	dir, err := os.MkdirTemp("", "partnerbench-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	defer os.RemoveAll(dir)
	fmt.Println("starting PostgreSQL …")
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg"), Settings: c.pgSettings})
	if err != nil {
		return err
	}
	defer pg.Stop(context.Background())
	d, err := db.Open(ctx, pg.URL)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := db.Migrate(ctx, d); err != nil {
		return err
	}
	// The bench's own statements (its table, seeding, statistics) run on a
	// pool of their own: the service's pool is not exported.
	raw, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		return err
	}
	defer raw.Close()
	if err := createBenchTable(ctx, raw); err != nil {
		return err
	}

	publicAddr, adminAddr, baseAddr := freeAddr(), freeAddr(), freeAddr()
	server := exec.CommandContext(ctx, c.serverBin, "serve")
	server.Env = procenv.Env(serverEnv, "DATABASE_URL="+pg.URL, "PARTNER_HTTP_ADDR="+publicAddr, "PARTNER_ADMIN_ADDR="+adminAddr, "PARTNER_ADMIN_TOKEN=", "PARTNER_SECRET_KEY="+secretKey)
	if c.profileDir != "" {
		// The loopback admin listener serves /debug/pprof only when asked.
		server.Env = append(server.Env, "PARTNER_PPROF=1")
	}
	var serverLog bytes.Buffer
	server.Stdout, server.Stderr = &serverLog, &serverLog
	if err := server.Start(); err != nil {
		return fmt.Errorf("start %s (run `make build` first): %w", c.serverBin, err)
	}
	defer func() { _ = server.Process.Signal(syscall.SIGTERM); _ = server.Wait() }()
	if err := waitReady("http://"+publicAddr+"/readyz", time.Minute); err != nil {
		return fmt.Errorf("%w\n%s", err, serverLog.String())
	}
	base := "http://" + publicAddr

	// Fixtures through the real admin API.
	admin := adminv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+adminAddr)
	ws, err := admin.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Bench"}))
	if err != nil {
		return err
	}
	m, err := admin.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws.Msg.GetId(), Email: "bench@x.co", SettingsAccess: true}))
	if err != nil {
		return err
	}
	// The rate limiter stays on, as in production; the bench client gets
	// its own rates far above what the load generator can send.
	cl, err := admin.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: ws.Msg.GetId(), MemberId: m.Msg.GetId(),
		Name: "bench", Scopes: []string{"contacts:read", "contacts:write", "leads:read", "leads:write"}, ReadRate: &fastRate, WriteRate: &fastRate}))
	if err != nil {
		return err
	}
	basic := "Basic " + basicAuth(cl.Msg.GetClientId(), cl.Msg.GetClientSecret())
	token, err := getToken(base, basic)
	if err != nil {
		return err
	}
	wsID, _ := opaqueid.Parse(opaqueid.Workspace, ws.Msg.GetId())
	fmt.Printf("seeding %d contacts …\n", c.contacts)
	if err := seed(ctx, raw, wsID, c.contacts); err != nil {
		return err
	}
	if err := defineBenchFields(ctx, raw, wsID); err != nil {
		return err
	}
	meJSON, err := get(base+"/api/v1/me", token)
	if err != nil {
		return err
	}

	baseline := exec.CommandContext(ctx, os.Args[0], "baseline-server", "-addr", baseAddr, "-database-url", pg.URL, "-workspace", wsID.String(), "-me", string(meJSON))
	baseline.Env = procenv.Env(serverEnv)
	baseline.Stderr = os.Stderr
	if err := baseline.Start(); err != nil {
		return err
	}
	defer func() { _ = baseline.Process.Kill(); _ = baseline.Wait() }()
	if err := waitReady("http://"+baseAddr+"/baseline/me", time.Minute); err != nil {
		return err
	}
	bb := "http://" + baseAddr

	// No Accept-Encoding: the baselines do not compress, so neither may we.
	tr := &http.Transport{MaxIdleConnsPerHost: c.concurrency * 2, MaxConnsPerHost: c.concurrency * 2, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	post := postRequest
	getReq := func(u string, hdr ...string) request {
		return func(int64) (*http.Request, error) {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			return req, err
		}
	}
	bearer := "Bearer " + token
	leadReq := func(i int64) (*http.Request, error) {
		body := fmt.Sprintf(`{"contact":{"email":"lead-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"}}`, i%1000)
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/leads", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearer)
		req.Header.Set("Idempotency-Key", "bench-"+strconv.FormatInt(i, 10)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		return req, nil
	}

	var batchSeq, custom atomic.Int64
	batchReq := batchRequest(base, token, &batchSeq)

	tokenOn := func(s *ownServer) request {
		return post(s.srv.base+"/api/oauth/token", "application/x-www-form-urlencoded", "grant_type=client_credentials", "Authorization", s.tenant.basic)
	}
	leadOn := func(s *ownServer) request { return leadRequest(s.srv.base, s.tenant.token, &s.seq, false) }
	batchOn := func(s *ownServer) request { return batchRequest(s.srv.base, s.tenant.token, &s.seq) }

	// The lines of issue 13: every ratio is to a baseline measured in the
	// same run, right before the scenario.
	type scenario struct {
		name, baseName string
		target         float64
		status         int
		mk, baseline   request
		baseStatus     int
		// perRequest is how many records one request carries; throughput
		// and the ratio count records.
		perRequest int
		// maxP99 is a latency line of the scenario, 0 when it has none.
		maxP99 time.Duration
		// previous is the request on a server of the write lines against
		// the previous release, nil for the scenarios without that line.
		previous func(*ownServer) request
		// inTurns measures the scenario against its baseline, a request
		// to the same server, in turns (turns.go) rather than once each:
		// the line is a ratio close to 1 of two requests to one server, and
		// a pair measured once moved by ±0.1 from run to run.
		inTurns bool
	}
	scenarios := []scenario{
		{"(a) token issuance, Basic auth", "INSERT + commit", 1.0, 200,
			post(base+"/api/oauth/token", "application/x-www-form-urlencoded", "grant_type=client_credentials", "Authorization", basic),
			post(bb+"/baseline/insert", "application/json", "{}"), 200, 1, 0, tokenOn, false},
		{"(b) GET /api/v1/me, REST", "fixed JSON", 0.8, 200,
			getReq(base+"/api/v1/me", "Authorization", bearer), getReq(bb + "/baseline/me"), 200, 1, 10 * time.Millisecond, nil, false},
		// Generated Connect clients (Go, TypeScript) send binary protobuf.
		{"(c) GetMe, Connect", "fixed JSON", 0.8, 200,
			post(base+"/partner.identity.v1.IdentityService/GetMe", "application/proto", "", "Authorization", bearer, "Connect-Protocol-Version", "1"),
			getReq(bb + "/baseline/me"), 200, 1, 0, nil, false},
		{"(d) GET /api/v1/contacts?limit=100", "same SQL + encoding/json", 1.5, 200,
			getReq(base+"/api/v1/contacts?limit=100", "Authorization", bearer), getReq(bb + "/baseline/contacts"), 200, 1, 0, nil, false},
		{"(e) POST /api/v1/leads, Idempotency-Key, inline contact", "INSERT + commit", 1.0, 201,
			leadReq, post(bb+"/baseline/insert", "application/json", "{}"), 200, 1, 0, leadOn, false},
		{"(f) POST /api/v1/leads/batch, 100 leads, leads/s", "INSERT + commit", 5, 200,
			batchReq, post(bb+"/baseline/insert", "application/json", "{}"), 200, batchSize, 0, batchOn, false},
		// Issue 35: ten custom values cost at most a tenth of the rate of
		// the same lead without them, measured right before.
		{"(e10) POST /api/v1/leads as (e), 10 custom values", "(e) without values", 0.9, 201,
			customLeadRequest(base, token, &custom), leadReq, 201, 1, 0, nil, true},
		// Requests of 100 leads each on both sides: the ratio is the leads'.
		{"(f10) POST /api/v1/leads/batch as (f), 10 custom values each, batches/s", "(f) without values", 0.9, 200,
			customBatchRequest(base, token, &custom), batchReq, 200, 1, 0, nil, true},
	}
	// The write lines against the previous release: its server and this
	// code's, each on a database of its own, up until the webhook
	// scenarios.
	var ab *writeAB
	if slices.ContainsFunc(scenarios, func(sc scenario) bool { return sc.previous != nil && strings.Contains(sc.name, c.only) }) {
		if ab, err = startWriteAB(ctx, c, pg, raw, client); err != nil {
			fmt.Fprintf(os.Stderr, "the write lines against the previous release (skipped): %v\n", err)
		} else if ab != nil {
			defer ab.stop()
		}
	}
	type row struct {
		name, baseName string
		s, b           result
		target         float64
		maxP99         time.Duration
		dbPerReq       float64
		// cpu and baseCPU are the CPU time of each process during the
		// scenario and during its baseline, warm-up included.
		cpu, baseCPU cpuSplit
		// previous is the scenario against the previous release, in
		// turns; nil when it has none or it was skipped.
		previous *abResult
		// turns is the scenario against its baseline in turns (inTurns),
		// nil when measured once each.
		turns *abResult
	}
	// ratio is a row's line: the median of its turns' ratios, else the
	// scenario's throughput over its baseline's.
	ratio := func(r row) float64 {
		if r.turns != nil {
			return r.turns.median
		}
		return r.s.rps / r.b.rps
	}
	self := &serverProc{cmd: server, base: base, admin: adminAddr}
	var rows []row
	for i, sc := range scenarios {
		if c.only != "" && !strings.Contains(sc.name, c.only) {
			continue
		}
		if sc.inTurns {
			fmt.Printf("running %s against %s, in turns …\n", sc.name, sc.baseName)
			before := dbStatements(ctx, raw)
			t := abTurns{client: client, concurrency: c.concurrency, turns: valueTurns, warm: valueWarm, d: valueTurn,
				want: sc.status, perRequest: sc.perRequest, pg: pg, profileDir: c.profileDir}
			ab, err := t.run(ctx, abSide{srv: self, mk: sc.baseline}, abSide{srv: self, mk: sc.mk, profile: fmt.Sprintf("scenario-%c", 'a'+i)})
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", sc.name, err, tailString(serverLog.String()))
			}
			short, _, _ := strings.Cut(sc.name, ",")
			fmt.Print(ab.describe(short+" vs "+sc.baseName, "without", "with", "req/s"))
			// Both sides ran on the one server: its CPU is the scenario's
			// in the turns of one side and the baseline's in the other's.
			base := cpuSplit{baseline: ab.refCPU.server, postgres: ab.refCPU.postgres, client: ab.refCPU.client}
			perReq := float64(dbStatements(ctx, raw)-before) / float64(ab.cur.all+ab.ref.all)
			rows = append(rows, row{name: sc.name, baseName: sc.baseName, s: ab.cur, b: ab.ref, target: sc.target, maxP99: sc.maxP99,
				dbPerReq: perReq, cpu: ab.curCPU, baseCPU: base, turns: &ab})
			continue
		}
		fmt.Printf("running %s …\n", sc.name)
		cpu0 := cpuNow(server.Process.Pid, baseline.Process.Pid, pg)
		b, err := load(ctx, client, c.concurrency, c.warm, c.duration, sc.baseStatus, sc.baseline)
		if err != nil {
			return fmt.Errorf("%s baseline: %w", sc.name, err)
		}
		cpu1 := cpuNow(server.Process.Pid, baseline.Process.Pid, pg)
		before := dbStatements(ctx, raw)
		profileDone := make(chan struct{})
		if c.profileDir != "" {
			go func() {
				defer close(profileDone)
				time.Sleep(c.warm)
				u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", adminAddr, int(c.duration.Seconds())-1)
				b, err := getURL(u)
				if err != nil {
					fmt.Fprintf(os.Stderr, "profile of %s: %v\n", sc.name, err)
					return
				}
				_ = os.MkdirAll(c.profileDir, 0o755)
				_ = os.WriteFile(filepath.Join(c.profileDir, fmt.Sprintf("scenario-%c.pprof", 'a'+i)), b, 0o644)
			}()
		} else {
			close(profileDone)
		}
		s, err := load(ctx, client, c.concurrency, c.warm, c.duration, sc.status, sc.mk)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", sc.name, err, tailString(serverLog.String()))
		}
		<-profileDone
		cpu2 := cpuNow(server.Process.Pid, baseline.Process.Pid, pg)
		// The count spans the warm-up too; scale the requests to match.
		perReq := float64(dbStatements(ctx, raw)-before) / (float64(s.requests+s.errors) * float64(c.warm+c.duration) / float64(c.duration))
		s.rps *= float64(sc.perRequest)
		r := row{name: sc.name, baseName: sc.baseName, s: s, b: b, target: sc.target, maxP99: sc.maxP99, dbPerReq: perReq, cpu: cpu2.sub(cpu1), baseCPU: cpu1.sub(cpu0)}
		if ab != nil && sc.previous != nil {
			short, _, _ := strings.Cut(sc.name, ",")
			fmt.Printf("running %s against %s, in turns …\n", short, ab.name)
			p, err := ab.measure(ctx, sc.name[1:2], sc.status, sc.perRequest, sc.previous)
			if err != nil {
				return fmt.Errorf("%s against %s: %w\n%s", short, ab.name, err, tailString(ab.cur.srv.log.String()+ab.prev.srv.log.String()))
			}
			fmt.Print(p.describe(short+" vs "+ab.name, ab.short, "current", "req/s"))
			r.previous = &p
		}
		rows = append(rows, r)
	}
	if ab != nil {
		// Not up during the webhook scenarios.
		ab.stop()
	}
	hookLines, err := runWebhookScenarios(ctx, c, pg, raw)
	if err != nil {
		return err
	}
	if len(rows) == 0 && len(hookLines) == 0 {
		return errors.New("no scenario matched -only")
	}
	rss := peakRSS(server.Process.Pid)

	fmt.Printf("\n%s, %d CPUs, %s, concurrency %d, %s per scenario\n\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), cpuModel(), c.concurrency, c.duration)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "scenario\treq/s\tp50\tp99\terrors\tdb tx/req\tbaseline\tbaseline req/s\tratio\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t%.2f\t%s\t%.0f\t%.2f\t\n", r.name, r.s.rps, ms(r.s.p50), ms(r.s.p99), r.s.errors,
			r.dbPerReq, r.baseName, r.b.rps, ratio(r))
	}
	tw.Flush()

	// Where the CPU went: per request (warm-up included), for the
	// scenario and for its baseline. The two cores are shared by all.
	fmt.Println("\nCPU per request, µs (server or baseline server | PostgreSQL | load generator):")
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "scenario\tserver\tpostgres\tclient\tbaseline\tpostgres\tclient\t")
	for _, r := range rows {
		n, bn := r.s.all, r.b.all
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name,
			perRequest(r.cpu.server, n), perRequest(r.cpu.postgres, n), perRequest(r.cpu.client, n),
			perRequest(r.baseCPU.baseline, bn), perRequest(r.baseCPU.postgres, bn), perRequest(r.baseCPU.client, bn))
	}
	tw.Flush()

	if ab != nil {
		fmt.Printf("\nthe write lines against %s (%s), %d turns of %s + %s a server, both up on databases of their own (ratio: the median of the turns'; CPU µs per request, warm-ups included; CPU ratio: %s's server + PostgreSQL over this code's):\n",
			ab.name, *prevRev, ab.turns.turns, prevWarm, ab.turns.d, ab.short)
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintf(tw, "scenario\treq/s\t%s req/s\tratio\tserver\tpostgres\t%s server\tpostgres\tCPU ratio\tmachine idle\t\n", ab.short, ab.short)
		for _, r := range rows {
			if p := r.previous; p != nil {
				cs, cp := cpuPerRequest(p.curCPU, p.cur.all)
				ps, pp := cpuPerRequest(p.refCPU, p.ref.all)
				fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f%%\t\n", r.name, p.cur.rps, p.ref.rps, p.median, cs, cp, ps, pp, p.cpuRatio(),
					p.curMachine.add(p.refMachine).idleShare()*100)
			}
		}
		tw.Flush()
	}

	// The lines of the issue, each with its measured figure.
	var lines []benchLine
	for _, r := range rows {
		short, _, _ := strings.Cut(r.name, ",")
		lines = append(lines, benchLine{short + " vs " + r.baseName, fmt.Sprintf("%.2fx", ratio(r)), fmt.Sprintf("≥ %.1fx", r.target), ratio(r) >= r.target})
		if strings.HasPrefix(r.name, "(a)") {
			lines = append(lines, benchLine{short + " vs Ory Hydra (~330 req/s)", fmt.Sprintf("%.1fx", r.s.rps/hydraRPS), fmt.Sprintf("≥ %.0fx", hydraTarget), r.s.rps/hydraRPS >= hydraTarget})
		}
		if r.maxP99 > 0 {
			lines = append(lines, benchLine{short + " p99", ms(r.s.p99), "≤ " + ms(r.maxP99), r.s.p99 <= r.maxP99})
		}
		if r.s.errors > 0 {
			lines = append(lines, benchLine{short + " errors", strconv.FormatInt(r.s.errors, 10), "0", false})
		}
		if p := r.previous; p != nil {
			lines = append(lines, benchLine{short + " vs " + ab.name, fmt.Sprintf("%.2fx", p.median), fmt.Sprintf("≥ %.2fx", minVsPrevious), p.median >= minVsPrevious})
			if n := p.cur.errors + p.ref.errors; n > 0 {
				lines = append(lines, benchLine{short + " vs " + ab.name + " errors", strconv.FormatInt(n, 10), "0", false})
			}
		}
	}
	lines = append(lines, hookLines...)
	lines = append(lines, benchLine{"server peak RSS, whole run", fmt.Sprintf("%.0f MiB", float64(rss)/(1<<20)), fmt.Sprintf("< %d MiB", maxRSS>>20), rss < maxRSS})
	fmt.Println()
	missed := printLines(os.Stdout, lines)
	if missed > 0 {
		fmt.Printf("\n%d of %d lines MISSED\n", missed, len(lines))
	} else {
		fmt.Printf("\nall %d lines ok\n", len(lines))
	}

	if !c.skipAllocs {
		fmt.Println("\nallocations per request (go test -bench, no network; the server benchmarks include their database work):")
		goTest := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", allocBenchmarks, "-benchmem", "-benchtime", "2000x",
			"./internal/security/auth", "./service/server", "./internal/edge/jsoncodec")
		// The toolchain's settings and caches, and the test database's;
		// named one by one, since a "GO*" would pass GOOGLE_* credentials.
		goTest.Env = procenv.Env(append(goToolchainEnv, "CGO_*", "CC", "CXX", "HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
			"PARTNER_PG_BINDIR", "TEST_DATABASE_URL", "CI"))
		out, err := goTest.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go test -bench: %v\n%s", err, out)
		}
		re := regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+([\d.]+ ns/op).*?(\d+ B/op)\s+(\d+ allocs/op)`)
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				fmt.Printf("  %-40s %14s %12s %16s\n", m[1], m[2], m[3], m[4])
			}
		}
	}
	return nil
}

// The lines that are not ratios to a same-run baseline.
const (
	// hydraRPS is Ory Hydra's published client-credentials figure
	// (300-360 req/s); token issuance must reach hydraTarget times it.
	hydraRPS    = 330
	hydraTarget = 20.0
	// maxRSS bounds the server's peak resident memory over the whole run.
	maxRSS = 256 << 20
)

// allocBenchmarks are the Go benchmarks of the hot paths: the token check,
// GET /me over REST and Connect (and a bare handler), a page of 100
// contacts and its encoder, a lead create, a token issuance.
const allocBenchmarks = "BenchmarkTokenCheck|BenchmarkMe|BenchmarkListContacts|BenchmarkEncodeContactPage|BenchmarkCreateLead|BenchmarkIssueToken"

// benchLine is one line of the table with its measured figure.
type benchLine struct {
	name, got, target string
	ok                bool
}

// printLines prints the lines, marking each ok or MISSED, and returns how
// many were missed.
func printLines(w io.Writer, lines []benchLine) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "line\tmeasured\ttarget\t\t")
	missed := 0
	for _, l := range lines {
		mark := "ok"
		if !l.ok {
			mark, missed = "MISSED", missed+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", l.name, l.got, l.target, mark)
	}
	tw.Flush()
	return missed
}

// dbStatements counts committed and rolled-back transactions in the
// database (every statement outside a transaction is one): the warm-up
// and measured phases of a scenario both count, so the caller divides by
// all requests of the measured phase only as an estimate.
func dbStatements(ctx context.Context, d *pgxpool.Pool) int64 {
	var n int64
	_ = d.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&n)
	return n
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func tailString(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls u until it answers 200, for at most timeout.
func waitReady(u string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		res, err := http.Get(u)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("not ready: " + u)
}

func basicAuth(id, secret string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

func getToken(base, basic string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/api/oauth/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", basic)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.AccessToken == "" {
		return "", fmt.Errorf("get token: status %d", res.StatusCode)
	}
	return body.AccessToken, nil
}

func getURL(u string) ([]byte, error) {
	res, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", u, res.StatusCode)
	}
	return b, err
}

func get(u, token string) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return io.ReadAll(res.Body)
}

// seed copies n contacts into the workspace.
func seed(ctx context.Context, d *pgxpool.Pool, ws [16]byte, n int) error {
	now := time.Now().Add(-24 * time.Hour)
	rows := make([][]any, 0, n)
	for i := range n {
		ts := now.Add(time.Duration(i) * time.Millisecond)
		email := fmt.Sprintf("seed-%d@bench.test", i)
		first, last, company := "Ada", "Lovelace", "Analytical Engines Ltd"
		rows = append(rows, []any{ws, opaqueid.New(), email, first, last, company, ts, ts})
	}
	_, err := d.CopyFrom(ctx, pgx.Identifier{"contacts"},
		[]string{"workspace_id", "id", "email", "first_name", "last_name", "company_name", "created_at", "updated_at"}, pgx.CopyFromRows(rows))
	if err != nil {
		return err
	}
	// Settle before measuring: statistics of the seeded table, and no
	// checkpoint of the seed competing with the first scenario. Only the
	// seeded table: a VACUUM of an empty table records it as known to be
	// empty, and a statement planned while it is (the PL/pgSQL lookups of
	// idempotency keys) would keep a sequential scan while the scenario
	// fills it, until autovacuum's next ANALYZE. A service's tables are not
	// vacuumed empty just before its traffic begins.
	if _, err := d.Exec(ctx, "VACUUM ANALYZE contacts"); err != nil {
		return err
	}
	_, err = d.Exec(ctx, "CHECKPOINT")
	return err
}

// peakRSS is the high-water mark of a process's resident memory.
func peakRSS(pid int) int64 { return procStatus(pid, "VmHWM:") }

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "model name") {
			_, v, _ := strings.Cut(line, ":")
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// postRequest builds POST u of body with header pairs.
func postRequest(u, ctype, body string, hdr ...string) request {
	return func(int64) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", ctype)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return req, nil
	}
}

// batchRequest is scenario (f)'s request: a lead source replaying a day
// of form submissions, 100 leads a request, each with an inline contact
// (a mix of known and new emails) and a unique externalId.
func batchRequest(base, token string, seq *atomic.Int64) request {
	return func(int64) (*http.Request, error) {
		n := seq.Add(1)
		var b strings.Builder
		b.WriteString(`{"leads":[`)
		for j := range batchSize {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"contact":{"email":"batch-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"},"externalId":"form-%d-%d"}`,
				(n*batchSize+int64(j))%5000, n, j)
		}
		b.WriteString("]}")
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/leads/batch", strings.NewReader(b.String()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "bench-batch-"+strconv.FormatInt(n, 10)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		return req, nil
	}
}
