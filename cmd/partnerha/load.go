package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/svat/partnerapi/db/procenv"
	adminv1 "github.com/svat/partnerapi/gen/partner/admin/v1"
	"github.com/svat/partnerapi/gen/partner/admin/v1/adminv1connect"
)

// replica is one `partnerapi serve` process.
type replica struct {
	name          string
	dbURL         string
	public, admin string
	cmd           *exec.Cmd
	exited        chan struct{}
}

func (r *replica) start(bin, logPath string) error {
	r.public, r.admin = freeAddr(), freeAddr()
	r.cmd = exec.Command(bin, "serve")
	// Configured explicitly; of this process's environment only the Go
	// runtime's knobs (db/procenv).
	r.cmd.Env = procenv.Env([]string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOTRACEBACK"},
		"DATABASE_URL="+r.dbURL, "PARTNER_HTTP_ADDR="+r.public, "PARTNER_ADMIN_ADDR="+r.admin, "PARTNER_ADMIN_TOKEN=",
		"PARTNER_PUBLIC_URL=http://ha.test", "PARTNER_SHUTDOWN_TIMEOUT=5s", "PARTNER_SECRET_KEY="+secretKey)
	if err := startLogged(r.cmd, logPath); err != nil {
		return fmt.Errorf("start replica %s: %w", r.name, err)
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	return until(context.Background(), 90*time.Second, "replica "+r.name+" to be ready", func() bool {
		if r.gone() {
			return true
		}
		res, err := http.Get("http://" + r.public + "/readyz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})
}

// gone tells whether the process has exited: the service must ride
// through every failover without one.
func (r *replica) gone() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

func (r *replica) kill() {
	if r.cmd != nil && r.cmd.Process != nil && !r.gone() {
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

type tenant struct{ clientID, secret, token string }

// fastRate is the client's own read and write rate: the rate limiter stays
// on, but the load must not be refused by it.
var fastRate int32 = 1_000_000

func fixtures(ctx context.Context, r *replica) (tenant, error) {
	admin := adminv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+r.admin)
	ws, err := admin.CreateWorkspace(ctx, connect.NewRequest(&adminv1.CreateWorkspaceRequest{Name: "HA Co"}))
	if err != nil {
		return tenant{}, fmt.Errorf("create workspace: %w", err)
	}
	m, err := admin.AddMember(ctx, connect.NewRequest(&adminv1.AddMemberRequest{WorkspaceId: ws.Msg.GetId(), Email: "ops@ha.test", SettingsAccess: true}))
	if err != nil {
		return tenant{}, fmt.Errorf("add member: %w", err)
	}
	cl, err := admin.CreateApiClient(ctx, connect.NewRequest(&adminv1.CreateApiClientRequest{WorkspaceId: ws.Msg.GetId(), MemberId: m.Msg.GetId(),
		Name: "ha", Scopes: []string{"contacts:read", "contacts:write", "leads:read", "leads:write"}, ReadRate: &fastRate, WriteRate: &fastRate}))
	if err != nil {
		return tenant{}, fmt.Errorf("create api client: %w", err)
	}
	t := tenant{clientID: cl.Msg.GetClientId(), secret: cl.Msg.GetClientSecret()}
	res := issue(r, t)
	if res.status != 200 {
		return t, fmt.Errorf("token: %d %s", res.status, res.body)
	}
	t.token = accessToken(res.body)
	return t, nil
}

func accessToken(body []byte) string {
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal(body, &tok)
	return tok.AccessToken
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// answer is one request's outcome; status 0 is a connection error.
type answer struct {
	start    time.Time
	dur      time.Duration
	status   int
	body     []byte
	replayed bool // Idempotent-Replayed: true
}

func issue(r *replica, t tenant) answer {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {t.clientID}, "client_secret": {t.secret}}
	return do(http.MethodPost, "http://"+r.public+"/api/oauth/token", "", "application/x-www-form-urlencoded", form.Encode(), "")
}

func revoke(r *replica, t tenant, token string) answer {
	form := url.Values{"token": {token}}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(t.clientID)+":"+url.QueryEscape(t.secret)))
	return do(http.MethodPost, "http://"+r.public+"/api/oauth/revoke", basic, "application/x-www-form-urlencoded", form.Encode(), "")
}

// do sends one request; auth is a whole Authorization header or a bearer
// token.
func do(method, u, auth, contentType, body, key string) answer {
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	switch {
	case strings.HasPrefix(auth, "Basic "):
		req.Header.Set("Authorization", auth)
	case auth != "":
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	a := answer{start: time.Now()}
	res, err := client.Do(req)
	if err != nil {
		a.dur, a.body = time.Since(a.start), []byte(err.Error())
		return a
	}
	defer res.Body.Close()
	a.body, _ = io.ReadAll(res.Body)
	a.dur, a.status = time.Since(a.start), res.StatusCode
	a.replayed = res.Header.Get("Idempotent-Replayed") == "true"
	return a
}

// sample is one request of the load, as the checks read it.
type sample struct {
	answer
	kind    string
	replica int
	miss    bool // a 200 read that did not find a create acknowledged before it
}

// create is one keyed create and what became of it after its retries.
type create struct {
	kind    string // "contact" or "lead"
	key     string
	email   string // contacts: the row's email; leads: the inline contact's
	first   time.Time
	acked   time.Time // the 2xx; zero when never acknowledged
	final   int       // the last answer's status
	retries int
	done    bool     // no more retries
	history []string // each attempt: replica, status, when
}

// syncPoint is a syncCursor the walker got, and when.
type syncPoint struct {
	at     time.Time
	cursor string
}

type load struct {
	replicas []*replica
	tenant   tenant

	seq     atomic.Int64
	mu      sync.Mutex
	samples []sample
	creates []*create
	cursors []syncPoint
}

func (l *load) record(s sample) {
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// start runs workers-1 clients of mixed requests and one sync walker, at
// rate requests a second in all, until stop is called.
func (l *load) start(workers int, rate float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	// Each client sends rate/workers requests a second; a mixed client's
	// five steps are six requests (the token cycle is two).
	interval := time.Duration(float64(time.Second) * float64(workers) / rate)
	mixed := interval * 6 / 5
	for w := range workers {
		wg.Go(func() {
			next := time.Now()
			cursor := ""
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(time.Until(next)):
				}
				if w == workers-1 {
					next = next.Add(interval)
				} else {
					next = next.Add(mixed)
				}
				if now := time.Now(); next.Before(now) {
					next = now // behind (a slow answer): no burst to catch up
				}
				ri := (w + i) % len(l.replicas)
				if w == workers-1 {
					cursor = l.syncPage(ri, cursor)
					continue
				}
				switch i % 5 {
				case 0:
					l.createContact(ri)
				case 1:
					l.read(ri, "/api/v1/contacts?limit=10", "list")
				case 2:
					l.createLead(ri)
				case 3:
					l.readOne(ri)
				case 4:
					l.tokenCycle(ri)
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

func (l *load) read(ri int, path, kind string) answer {
	a := do(http.MethodGet, "http://"+l.replicas[ri].public+path, l.tenant.token, "", "", "")
	l.record(sample{answer: a, kind: kind, replica: ri})
	return a
}

// readOne reads a contact acknowledged a moment ago: a 404 would be a
// lost write.
func (l *load) readOne(ri int) {
	var email string
	l.mu.Lock()
	for i := len(l.creates) - 1; i >= 0 && i >= len(l.creates)-20; i-- {
		if c := l.creates[i]; c.kind == "contact" && !c.acked.IsZero() {
			email = c.email
			break
		}
	}
	l.mu.Unlock()
	if email == "" {
		l.read(ri, "/api/v1/contacts?limit=1", "list")
		return
	}
	a := do(http.MethodGet, "http://"+l.replicas[ri].public+"/api/v1/contacts?limit=1&email="+url.QueryEscape(email), l.tenant.token, "", "", "")
	var p page
	miss := a.status == 200 && (json.Unmarshal(a.body, &p) != nil || len(p.Contacts) != 1)
	l.record(sample{answer: a, kind: "get", replica: ri, miss: miss})
}

func (l *load) createContact(ri int) {
	n := l.seq.Add(1)
	c := &create{kind: "contact", key: fmt.Sprintf("c-%d", n), email: fmt.Sprintf("c-%d@ha.test", n)}
	l.keyed(ri, c, "/api/v1/contacts", `{"email":"`+c.email+`","firstName":"Ha"}`)
}

func (l *load) createLead(ri int) {
	n := l.seq.Add(1)
	c := &create{kind: "lead", key: fmt.Sprintf("l-%d", n), email: fmt.Sprintf("l-%d@ha.test", n)}
	l.keyed(ri, c, "/api/v1/leads", `{"contact":{"email":"`+c.email+`"},"source":"web_form","campaign":"`+c.key+`"}`)
}

// retryFor bounds a create's keyed retries.
const retryFor = 120 * time.Second

// keyed sends a create and, while its outcome is open ([retryable]),
// retries it with the same Idempotency-Key and body (to the next replica,
// as a client behind a load balancer would) until it resolves.
func (l *load) keyed(ri int, c *create, path, body string) {
	l.mu.Lock()
	l.creates = append(l.creates, c)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		c.done = true
		l.mu.Unlock()
	}()
	for attempt := 0; ; attempt++ {
		r := (ri + attempt) % len(l.replicas)
		a := do(http.MethodPost, "http://"+l.replicas[r].public+path, l.tenant.token, "application/json", body, c.key)
		l.record(sample{answer: a, kind: c.kind, replica: r})
		l.mu.Lock()
		if attempt == 0 {
			c.first = a.start
		}
		c.final, c.retries = a.status, attempt
		h := fmt.Sprintf("%s %s→%d", l.replicas[r].name, a.start.Format("15:04:05.000"), a.status)
		if a.replayed {
			h += " (Idempotent-Replayed)"
		}
		if a.status != 0 && a.status != 503 && (a.status < 200 || a.status >= 300) {
			h += " " + problemCode(a.body)
		}
		c.history = append(c.history, h)
		if a.status >= 200 && a.status < 300 {
			c.acked = a.start.Add(a.dur)
		}
		l.mu.Unlock()
		if !retryable(a) {
			return
		}
		if time.Since(c.first) > retryFor {
			return
		}
		// Stopping or not, the retries go on: the checks need every create
		// resolved.
		time.Sleep(250 * time.Millisecond)
	}
}

// problemCode is the code of a problem+json or OAuth error body.
func problemCode(body []byte) string {
	var p struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Code + p.Error
}

// retryable tells whether a create's answer leaves its outcome open: 503,
// 429, no answer, or 409 idempotency_key_in_use (an earlier attempt with
// the key still running on the server; "retry later").
func retryable(a answer) bool {
	switch a.status {
	case 0, 429, 503:
		return true
	case 409:
		return strings.Contains(string(a.body), "idempotency_key_in_use")
	}
	return false
}

// tokenCycle issues a token and revokes it.
func (l *load) tokenCycle(ri int) {
	r := l.replicas[ri]
	a := issue(r, l.tenant)
	l.record(sample{answer: a, kind: "token", replica: ri})
	if a.status != 200 {
		return
	}
	l.record(sample{answer: revoke(r, l.tenant, accessToken(a.body)), kind: "revoke", replica: ri})
}

// page is the part of a list answer the walker reads.
type page struct {
	Contacts []struct {
		Email string `json:"email"`
	} `json:"contacts"`
	Pagination struct {
		NextCursor string `json:"nextCursor"`
		SyncCursor string `json:"syncCursor"`
	} `json:"pagination"`
}

// syncPage reads the next page of the contacts sync feed and keeps every
// syncCursor it gets, with its time.
func (l *load) syncPage(ri int, cursor string) string {
	path := "/api/v1/contacts?sort=updatedAt&limit=100"
	if cursor != "" {
		path += "&cursor=" + url.QueryEscape(cursor)
	}
	a := l.read(ri, path, "sync")
	if a.status == 410 {
		// cursor_expired: the history this cursor saw was lost in a
		// failover; start again from the beginning, as docs/api.md says.
		return ""
	}
	if a.status != 200 {
		return cursor
	}
	var p page
	if err := json.Unmarshal(a.body, &p); err != nil {
		return cursor
	}
	if p.Pagination.NextCursor != "" {
		return p.Pagination.NextCursor
	}
	if p.Pagination.SyncCursor != "" {
		l.mu.Lock()
		l.cursors = append(l.cursors, syncPoint{at: a.start.Add(a.dur), cursor: p.Pagination.SyncCursor})
		l.mu.Unlock()
		return p.Pagination.SyncCursor
	}
	return cursor
}

// walkResult is what a walk from a cursor to the end of the feed saw.
type walkResult struct {
	emails  map[string]bool
	expired bool // 410 cursor_expired
	cursor  string
	err     error
}

// walk follows a cursor to the end of the contacts sync feed through r,
// waiting out 503s; since, when set, is the feed's updatedSince filter.
func walk(r *replica, token, cursor, since string) walkResult {
	res := walkResult{emails: map[string]bool{}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		path := "/api/v1/contacts?sort=updatedAt&limit=100"
		if since != "" {
			path += "&updatedSince=" + url.QueryEscape(since)
		}
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		a := do(http.MethodGet, "http://"+r.public+path, token, "", "", "")
		switch {
		case a.status == 410:
			res.expired = true
			return res
		case a.status == 503 || a.status == 429 || a.status == 0:
			time.Sleep(200 * time.Millisecond)
			continue
		case a.status != 200:
			res.err = fmt.Errorf("sync page: %d %s", a.status, a.body)
			return res
		}
		var p page
		if err := json.Unmarshal(a.body, &p); err != nil {
			res.err = fmt.Errorf("sync page: %w", err)
			return res
		}
		for _, c := range p.Contacts {
			res.emails[c.Email] = true
		}
		if p.Pagination.NextCursor != "" {
			cursor = p.Pagination.NextCursor
			continue
		}
		res.cursor = p.Pagination.SyncCursor
		return res
	}
	res.err = fmt.Errorf("sync walk: no end within 60 s")
	return res
}

func logPath(dir, name string) string {
	return dir + string(os.PathSeparator) + name + ".log"
}
