// Command partnerfault injects faults into a running deployment under
// load and reports what the clients saw: two `partnerapi serve` replicas
// on a private PostgreSQL behind a load balancer that polls /readyz, a
// load of creates (with Idempotency-Key), token
// requests and reads, and in turn a database crash (a backend killed: the
// server restarts every session and recovers), a database freeze (every
// PostgreSQL process stopped) and a SIGTERM of one replica.
//
// It checks the promises of docs/operations.md: every answer is 2xx or 503
// (never 500 or 504), every acknowledged create is in the database
// afterwards, and a retry of each 503 create with its key leaves exactly
// one record. It exits non-zero when one is broken.
//
//	make build && go run ./cmd/partnerfault            (or: make fault)
//	go run ./cmd/partnerfault -phase 5s -workers 8 -bin bin/partnerapi
package main

import (
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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	"github.com/svat/partnerapi/db/pgserver"
	"github.com/svat/partnerapi/db/procenv"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "partnerfault:", err)
		os.Exit(1)
	}
}

type config struct {
	bin     string
	phase   time.Duration
	workers int
}

func run() error {
	var c config
	flag.StringVar(&c.bin, "bin", "bin/partnerapi", "the partnerapi binary (make build)")
	flag.DurationVar(&c.phase, "phase", 5*time.Second, "length of each phase")
	flag.IntVar(&c.workers, "workers", 8, "concurrent clients")
	flag.Parse()
	if _, err := os.Stat(c.bin); err != nil {
		return fmt.Errorf("%s: %w (run `make build`)", c.bin, err)
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "partnerfault-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	defer os.RemoveAll(dir)
	fmt.Println("starting PostgreSQL (durable: fsync and synchronous commit on) …")
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg"), Role: "partnerapi"})
	if err != nil {
		return err
	}
	defer pg.Stop(context.Background())

	replicas := []*replica{{name: "A"}, {name: "B"}}
	balancer, stopBalancer := context.WithCancel(ctx)
	defer stopBalancer()
	for _, r := range replicas {
		r.public, r.admin = freeAddr(), freeAddr()
		if err := r.start(c.bin, pg.URL); err != nil {
			return err
		}
		defer r.kill()
		go r.healthCheck(balancer)
	}
	tn, err := fixtures(ctx, replicas[0])
	if err != nil {
		return err
	}
	l := &load{replicas: replicas, tenant: tn, stats: map[string]map[string]int{}}
	stop := l.start(c.workers)

	phase := func(name string, fault func() error) error {
		l.setPhase(name)
		fmt.Printf("phase %-9s …\n", name)
		if fault != nil {
			if err := fault(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		} else {
			time.Sleep(c.phase)
		}
		return nil
	}
	err = errors.Join(
		phase("baseline", nil),
		phase("crash", func() error { return crash(ctx, pg, c.phase) }),
		phase("recovered", nil),
		phase("freeze", func() error { pg.Freeze(); time.Sleep(c.phase); pg.Thaw(); return nil }),
		phase("thawed", nil),
		phase("sigterm", func() error { return restart(replicas[0], c.bin, pg.URL, c.phase) }),
		phase("after", nil),
	)
	stop()
	if err != nil {
		return err
	}
	return l.verify(ctx, pg)
}

type replica struct {
	name          string
	public, admin string
	cmd           *exec.Cmd
	down          atomic.Bool
}

func (r *replica) start(bin, dbURL string) error {
	r.cmd = exec.Command(bin, "serve")
	// Configured explicitly; of this process's environment only the Go
	// runtime's knobs (db/procenv).
	r.cmd.Env = procenv.Env([]string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOTRACEBACK"}, "DATABASE_URL="+dbURL, "PARTNER_HTTP_ADDR="+r.public, "PARTNER_ADMIN_ADDR="+r.admin,
		"PARTNER_ADMIN_TOKEN=", "PARTNER_SHUTDOWN_TIMEOUT=10s", "PARTNER_SHUTDOWN_DELAY=1s", "PARTNER_SECRET_KEY="+secretKey)
	r.cmd.Stdout, r.cmd.Stderr = io.Discard, io.Discard
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start replica %s: %w", r.name, err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get("http://" + r.public + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				r.down.Store(false)
				return nil
			}
		}
	}
	return fmt.Errorf("replica %s not ready", r.name)
}

// healthCheck is the load balancer's: it polls /readyz every 100 ms and
// sends no new requests to a replica that is not ready.
func (r *replica) healthCheck(ctx context.Context) {
	c := &http.Client{Timeout: time.Second}
	for ctx.Err() == nil {
		res, err := c.Get("http://" + r.public + "/readyz")
		ready := err == nil && res.StatusCode == 200
		if err == nil {
			res.Body.Close()
		}
		r.down.Store(!ready)
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *replica) kill() {
	if r.cmd != nil && r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// crash kills one client backend: PostgreSQL then ends every session and
// runs crash recovery, refusing connections until it is consistent.
func crash(ctx context.Context, pg *pgserver.Server, phase time.Duration) error {
	time.Sleep(phase / 4)
	conn, err := pgx.Connect(ctx, pg.SuperuserURL())
	if err != nil {
		return err
	}
	var pid int32
	err = conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE usename = 'partnerapi' AND backend_type = 'client backend'
		AND state = 'active' ORDER BY random() LIMIT 1`).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		err = conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE usename = 'partnerapi' AND backend_type = 'client backend' LIMIT 1`).Scan(&pid)
	}
	_ = conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("find a backend: %w", err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(10 * time.Millisecond)
	for time.Since(start) < phase {
		if conn, err := pgx.Connect(ctx, pg.SuperuserURL()); err == nil {
			_ = conn.Close(ctx)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("  PostgreSQL accepted sessions again %v after the crash\n", time.Since(start).Round(time.Millisecond))
	time.Sleep(max(0, phase*3/4-time.Since(start)))
	return nil
}

// restart sends SIGTERM to a replica under load, waits for it to exit
// and starts it again.
func restart(r *replica, bin, dbURL string, phase time.Duration) error {
	time.Sleep(phase / 4)
	start := time.Now()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	err := r.cmd.Wait()
	fmt.Printf("  replica %s exited %v after SIGTERM (%v)\n", r.name, time.Since(start).Round(time.Millisecond), err)
	if err := r.start(bin, dbURL); err != nil {
		return err
	}
	time.Sleep(phase / 2)
	return nil
}

type tenant struct{ clientID, secret, token string }

func fixtures(ctx context.Context, r *replica) (tenant, error) {
	admin := adminv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+r.admin)
	ws, err := admin.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "Fault Co"}))
	if err != nil {
		return tenant{}, err
	}
	m, err := admin.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws.Msg.GetId(), Email: "ops@fault.test", SettingsAccess: true}))
	if err != nil {
		return tenant{}, err
	}
	cl, err := admin.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: ws.Msg.GetId(), MemberId: m.Msg.GetId(),
		Name: "fault", Scopes: []string{"contacts:read", "contacts:write"}, ReadRate: &fastRate, WriteRate: &fastRate}))
	if err != nil {
		return tenant{}, err
	}
	t := tenant{clientID: cl.Msg.GetClientId(), secret: cl.Msg.GetClientSecret()}
	s, body := issue(r, t)
	if s != 200 {
		return t, fmt.Errorf("token: %d %s", s, body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal(body, &tok)
	t.token = tok.AccessToken
	return t, nil
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func issue(r *replica, t tenant) (int, []byte) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {t.clientID}, "client_secret": {t.secret}}
	return do(http.MethodPost, "http://"+r.public+"/api/oauth/token", "", "application/x-www-form-urlencoded", form.Encode(), "")
}

func do(method, u, token, contentType, body, key string) (int, []byte) {
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

type create struct{ key, email string }

type load struct {
	replicas []*replica
	tenant   tenant
	phase    atomic.Value

	mu        sync.Mutex
	stats     map[string]map[string]int // phase -> outcome -> count
	acked     []create
	uncertain []create
	odd       []string
}

func (l *load) setPhase(p string) { l.phase.Store(p) }

func (l *load) record(outcome string) {
	p, _ := l.phase.Load().(string)
	l.mu.Lock()
	if l.stats[p] == nil {
		l.stats[p] = map[string]int{}
	}
	l.stats[p][outcome]++
	l.mu.Unlock()
}

func (l *load) start(workers int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				// Round robin over the replicas the load balancer deems
				// ready (both, when neither is: the database is down).
				r := l.replicas[(w+i)%len(l.replicas)]
				if other := l.replicas[(w+i+1)%len(l.replicas)]; r.down.Load() && !other.down.Load() {
					r = other
				}
				base := "http://" + r.public
				n := seq.Add(1)
				var s int
				var body []byte
				kind := ""
				switch n % 4 {
				case 0, 1:
					kind = "create"
					c := create{key: fmt.Sprintf("k%d", n), email: fmt.Sprintf("c%d@fault.test", n)}
					s, body = do(http.MethodPost, base+"/api/v1/contacts", l.tenant.token, "application/json", `{"email":"`+c.email+`"}`, c.key)
					l.mu.Lock()
					switch {
					case s == 201:
						l.acked = append(l.acked, c)
					case s == 503 || s == 0:
						l.uncertain = append(l.uncertain, c)
					}
					l.mu.Unlock()
				case 2:
					kind = "token"
					s, body = issue(r, l.tenant)
				case 3:
					kind = "read"
					s, body = do(http.MethodGet, base+"/api/v1/contacts?limit=10", l.tenant.token, "", "", "")
				}
				switch {
				case s == 0:
					l.record("connection refused/reset")
				case s >= 200 && s < 300:
					l.record("2xx")
				case s == 503:
					l.record("503")
				default:
					l.record(fmt.Sprintf("%d", s))
					l.mu.Lock()
					l.odd = append(l.odd, fmt.Sprintf("%s %s: %d %s", l.phase.Load(), kind, s, body))
					l.mu.Unlock()
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// verify checks every acknowledged create is stored and resolves every
// uncertain one with a retry of the same key.
func (l *load) verify(ctx context.Context, pg *pgserver.Server) error {
	conn, err := pgx.Connect(ctx, pg.SuperuserURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	count := func(email string) int {
		var n int
		_ = conn.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE email = $1", email).Scan(&n)
		return n
	}
	lost := 0
	for _, c := range l.acked {
		if count(c.email) != 1 {
			lost++
		}
	}
	resolved, twice, unresolved := 0, 0, 0
	base := "http://" + l.replicas[1].public
	for _, c := range l.uncertain {
		s, _ := do(http.MethodPost, base+"/api/v1/contacts", l.tenant.token, "application/json", `{"email":"`+c.email+`"}`, c.key)
		switch n := count(c.email); {
		case s == 201 && n == 1:
			resolved++
		case n > 1:
			twice++
		default:
			unresolved++
		}
	}

	fmt.Println()
	fmt.Println("| phase | 2xx | 503 | connection refused/reset | other |")
	fmt.Println("|---|---:|---:|---:|---:|")
	others := 0
	for _, p := range []string{"baseline", "crash", "recovered", "freeze", "thawed", "sigterm", "after"} {
		st := l.stats[p]
		other := 0
		for k, v := range st {
			if k != "2xx" && k != "503" && k != "connection refused/reset" {
				other += v
			}
		}
		others += other
		fmt.Printf("| %s | %d | %d | %d | %d |\n", p, st["2xx"], st["503"], st["connection refused/reset"], other)
	}
	fmt.Println()
	fmt.Printf("acknowledged creates: %d; lost: %d\n", len(l.acked), lost)
	fmt.Printf("creates answered 503 or cut off: %d; a retry with the same Idempotency-Key resolved %d exactly once, %d twice, %d not\n",
		len(l.uncertain), resolved, twice, unresolved)
	fmt.Printf("answers outside {2xx, 503}: %d\n", others)
	sort.Strings(l.odd)
	for i, o := range l.odd {
		if i == 10 {
			fmt.Printf("  … %d more\n", len(l.odd)-10)
			break
		}
		fmt.Println("  ", o)
	}
	if lost > 0 || twice > 0 || unresolved > 0 || others > 0 {
		return errors.New("a promise was broken (see above)")
	}
	return nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// fastRate is the client's own read and write rate: the rate limiter stays
// on, but the load must not be refused by it.
var fastRate int32 = 1_000_000
