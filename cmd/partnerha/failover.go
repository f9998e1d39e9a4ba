package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// failover is one fault of the primary: inject starts it and returns when
// it is over (a frozen or cut-off node resumed), leaving the node to
// rejoin by itself; after runs once a new leader is elected.
type failover struct {
	name   string
	what   string
	inject func(h *harness, old *node, elected <-chan struct{}) error
}

var failovers = []failover{
	{"switchover", "planned switchover to the synchronous standby (Patroni REST POST /switchover)", func(h *harness, old *node, _ <-chan struct{}) error {
		cand := h.cl.syncStandby()
		if cand == nil {
			return fmt.Errorf("no synchronous standby to switch over to")
		}
		return h.cl.switchover(old, cand)
	}},
	{"crash", "the primary's node dies: SIGKILL to its Patroni, postmaster and every backend; Patroni restarted once a new leader is elected", func(h *harness, old *node, elected <-chan struct{}) error {
		old.crash()
		select {
		case <-elected:
		case <-time.After(120 * time.Second):
		}
		return h.cl.startPatroni(old)
	}},
	{"freeze", "the primary's PostgreSQL freezes (SIGSTOP to the postmaster and every child; Patroni keeps running)", func(h *harness, old *node, _ <-chan struct{}) error {
		pids := old.postgresPids()
		if len(pids) == 0 {
			return fmt.Errorf("no postmaster on %s", old.name)
		}
		signalAll(pids, syscall.SIGSTOP)
		time.Sleep(h.hold)
		signalAll(pids, syscall.SIGCONT)
		return nil
	}},
	{"partition", "the primary is cut off from its standbys and from etcd: its Patroni agent and its WAL senders stopped (SIGSTOP; no iptables here), its PostgreSQL still serving clients", func(h *harness, old *node, _ <-chan struct{}) error {
		agent := old.cmd.Process.Pid
		stopped := map[int]bool{agent: true}
		_ = syscall.Kill(agent, syscall.SIGSTOP)
		for end := time.Now().Add(h.hold); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			// A standby that reconnects gets a new WAL sender: stop it too.
			for _, p := range old.walsenders() {
				if !stopped[p] {
					_ = syscall.Kill(p, syscall.SIGSTOP)
					stopped[p] = true
				}
			}
		}
		for p := range stopped {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
		return nil
	}},
}

// harness runs the failovers one after the other on one cluster and one
// load, each in its window of time.
type harness struct {
	ctx         context.Context
	cl          *cluster
	l           *load
	replicas    []*replica
	hold        time.Duration
	windowStart time.Time
	lastLeader  string // the leader the previous failover elected
}

// result is what one failover's window showed.
type result struct {
	name, what           string
	oldLeader, newLeader string
	windowStart, end     time.Time
	fault, elected       time.Time // the fault began; a new leader was running
	healed               time.Time // all three nodes back, one timeline
	injectErr            error

	revocation []revocationCheck
	cursors    []cursorCheck
	stats      windowStats
	violations []string
}

type revocationCheck struct {
	on, seenOn string
	latency    time.Duration // from the revoke's 200 to the first 401
	seen       bool
	servedLate int // 2xx with the revoked token more than 1 s after the revoke
	note       string
}

type cursorCheck struct {
	name     string
	taken    time.Time
	expected int // creates acknowledged after the cursor was taken
	missing  []string
	// missingHistory is the attempts of the first few missing creates.
	missingHistory []string
	expired        bool
	err            error
	none           bool
}

const (
	preFault  = 5 * time.Second
	postHeal  = 5 * time.Second
	maxAnswer = 5 * time.Second
	revokeBy  = time.Second
)

func (h *harness) run(f failover) (*result, error) {
	res := &result{name: f.name, what: f.what, windowStart: h.windowStart}
	fmt.Printf("\n== %s: %s\n", f.name, f.what)
	if err := h.cl.waitHealthy(h.ctx, 180*time.Second); err != nil {
		return nil, err
	}
	old := h.cl.leader()
	if old == nil {
		return nil, fmt.Errorf("no leader")
	}
	res.oldLeader = old.name
	if h.lastLeader != "" && h.lastLeader != old.name {
		res.violations = append(res.violations, fmt.Sprintf("the leader changed without a fault before this one (%s, now %s): Patroni's timing is too tight for this machine", h.lastLeader, old.name))
	}
	// A cursor from before the failover, on a filtered feed (updatedSince)
	// so it is quick to take.
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	before := walk(h.replicas[1], h.l.tenant.token, "", since)
	if before.err != nil || before.cursor == "" {
		return nil, fmt.Errorf("take a sync cursor before the failover: %v", before.err)
	}
	beforeAt := time.Now()
	time.Sleep(preFault)

	res.fault = time.Now()
	fmt.Printf("  fault at %s on %s (leader)\n", res.fault.Format("15:04:05.000"), old.name)
	elected := make(chan struct{})
	injected := make(chan error, 1)
	go func() { injected <- f.inject(h, old, elected) }()
	leader, err := h.cl.waitLeader(h.ctx, old.name, 150*time.Second)
	if err != nil {
		return nil, err
	}
	res.elected = time.Now()
	res.newLeader = leader.name
	close(elected)
	fmt.Printf("  new leader %s running %v after the fault\n", leader.name, res.elected.Sub(res.fault).Round(time.Millisecond))
	res.revocation = h.revocation()
	res.injectErr = <-injected
	if res.injectErr != nil {
		return nil, res.injectErr
	}
	if err := h.cl.waitHealthy(h.ctx, 240*time.Second); err != nil {
		return nil, err
	}
	res.healed = time.Now()
	fmt.Printf("  cluster whole again %v after the fault\n", res.healed.Sub(res.fault).Round(time.Millisecond))
	time.Sleep(postHeal)
	// Every create begun in the window has resolved (or given up).
	res.end = time.Now()
	h.l.waitResolved(res.end, retryFor+10*time.Second)

	res.stats = h.l.window(res.windowStart, res.end, res.fault, res.elected)
	present, err := h.checkCreates(res)
	if err != nil {
		return nil, err
	}
	// The cursor from before, and the walker's between the fault and the
	// new leader (they may have read transactions the failover then
	// discarded). A lost create is counted as lost, not as a gap.
	res.cursors = append(res.cursors, h.checkCursor("before the fault", before.cursor, since, beforeAt, res.end, present))
	walker := h.l.walkerCursors(res.fault, res.elected, 4)
	for _, p := range walker {
		name := fmt.Sprintf("walker's at fault +%.1f s", p.at.Sub(res.fault).Seconds())
		res.cursors = append(res.cursors, h.checkCursor(name, p.cursor, "", p.at, res.end, present))
	}
	if len(walker) == 0 {
		res.cursors = append(res.cursors, cursorCheck{name: "walker's between the fault and the new leader", none: true})
	}
	for _, r := range h.replicas {
		if r.gone() {
			res.violations = append(res.violations, fmt.Sprintf("replica %s exited (restart needed)", r.name))
		}
	}
	if l := h.cl.leader(); l == nil || l.name != res.newLeader {
		res.violations = append(res.violations, fmt.Sprintf("the leader changed again after %s took over", res.newLeader))
	}
	h.lastLeader = res.newLeader
	res.judge()
	h.windowStart = res.end
	printResult(res)
	return res, nil
}

// revocation checks, once a new leader runs, that a token revoked on
// replica A is refused by B and C within a second: issue it on A, use it on
// B and C (cached there), revoke it on A, then poll B and C.
func (h *harness) revocation() []revocationCheck {
	a, others := h.replicas[0], h.replicas[1:]
	tn := h.l.tenant
	deadline := time.Now().Add(90 * time.Second)
	retry := func(f func() answer) answer {
		for {
			ans := f()
			if ans.status != 503 && ans.status != 429 && ans.status != 0 || time.Now().After(deadline) {
				return ans
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var out []revocationCheck
	fail := func(note string) []revocationCheck {
		for _, o := range others {
			out = append(out, revocationCheck{on: a.name, seenOn: o.name, note: note})
		}
		return out
	}
	iss := retry(func() answer { return issue(a, tn) })
	if iss.status != 200 {
		return fail(fmt.Sprintf("issue on A: %d %s", iss.status, iss.body))
	}
	token := accessToken(iss.body)
	for _, o := range others {
		use := retry(func() answer { return use(o, token) })
		if use.status != 200 {
			return fail(fmt.Sprintf("use on %s before the revoke: %d %s", o.name, use.status, use.body))
		}
	}
	rev := retry(func() answer { return revoke(a, tn, token) })
	if rev.status != 200 {
		return fail(fmt.Sprintf("revoke on A: %d %s", rev.status, rev.body))
	}
	revoked := rev.start.Add(rev.dur)
	for _, o := range others {
		c := revocationCheck{on: a.name, seenOn: o.name}
		for time.Since(revoked) < 15*time.Second {
			ans := use(o, token)
			if ans.status == 401 {
				c.seen, c.latency = true, ans.start.Add(ans.dur).Sub(revoked)
				break
			}
			if ans.status == 200 && ans.start.Sub(revoked) > revokeBy {
				c.servedLate++
			}
			time.Sleep(10 * time.Millisecond)
		}
		out = append(out, c)
	}
	return out
}

func use(r *replica, token string) answer {
	return do(http.MethodGet, "http://"+r.public+"/api/v1/contacts?limit=1", token, "", "", "")
}

// checkCursor walks the contacts feed from cursor (with the filter it was
// taken with) and checks it holds every contact create first sent after
// the cursor was taken and acknowledged before end (and present: a lost
// one is counted as lost), or answers 410 cursor_expired.
func (h *harness) checkCursor(name, cursor, since string, taken, end time.Time, present map[string]bool) cursorCheck {
	c := cursorCheck{name: name, taken: taken}
	w := walk(h.replicas[1], h.l.tenant.token, cursor, since)
	c.expired, c.err = w.expired, w.err
	for _, cr := range h.l.createsBetween(taken, end) {
		if cr.kind != "contact" || !present[cr.email] {
			continue
		}
		c.expected++
		if !c.expired && c.err == nil && !w.emails[cr.email] {
			c.missing = append(c.missing, cr.email)
			if len(c.missingHistory) < 3 {
				c.missingHistory = append(c.missingHistory, cr.key+": "+strings.Join(cr.history, "; "))
			}
		}
	}
	return c
}

func (r *result) judge() {
	v := &r.violations
	s := r.stats
	for status, n := range s.byStatus {
		if !(status >= 200 && status < 300 || status == 503 || status == 429 || status == 0) {
			*v = append(*v, fmt.Sprintf("%d answers %d", n, status))
		}
	}
	if s.connErrAfter > 0 {
		*v = append(*v, fmt.Sprintf("%d connection errors after every replica served again", s.connErrAfter))
	}
	if s.slow > 0 {
		*v = append(*v, fmt.Sprintf("%d answers slower than %v (max %v)", s.slow, maxAnswer, s.maxLatency.Round(time.Millisecond)))
	}
	if s.readMisses > 0 {
		*v = append(*v, fmt.Sprintf("%d reads did not find a create acknowledged before them", s.readMisses))
	}
	for name, at := range s.resumed {
		if at.IsZero() {
			*v = append(*v, fmt.Sprintf("replica %s served no write after the new leader", name))
		}
	}
	if s.lost > 0 {
		*v = append(*v, fmt.Sprintf("%d acknowledged creates lost", s.lost))
	}
	if s.twice > 0 {
		*v = append(*v, fmt.Sprintf("%d creates applied twice", s.twice))
	}
	if s.unresolved > 0 {
		*v = append(*v, fmt.Sprintf("%d creates unresolved after %v of keyed retries", s.unresolved, retryFor))
	}
	for _, c := range r.revocation {
		switch {
		case !c.seen:
			*v = append(*v, fmt.Sprintf("revocation on %s not seen on %s (%s)", c.on, c.seenOn, c.note))
		case c.latency > revokeBy || c.servedLate > 0:
			*v = append(*v, fmt.Sprintf("revocation on %s seen on %s after %v", c.on, c.seenOn, c.latency.Round(time.Millisecond)))
		}
	}
	for _, c := range r.cursors {
		switch {
		case c.err != nil:
			*v = append(*v, fmt.Sprintf("cursor %s: %v", c.name, c.err))
		case len(c.missing) > 0:
			*v = append(*v, fmt.Sprintf("cursor %s: %d of %d later contacts missing (a silent gap, not 410)", c.name, len(c.missing), c.expected))
		}
	}
}

// redact hides the password of a URL (one host or several) for printing.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	userinfo, hosts, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 {
		return u
	}
	user, _, _ := strings.Cut(userinfo, ":")
	return scheme + "://" + user + ":xxx@" + hosts
}
