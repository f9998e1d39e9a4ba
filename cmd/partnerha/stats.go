package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// windowStats is what the load saw in one failover's window.
type windowStats struct {
	requests   int
	byStatus   map[int]int
	maxLatency time.Duration
	slow       int // slower than maxAnswer
	readMisses int
	// syncRestarts are sync pages answered 410 cursor_expired: the walker
	// held a cursor the new history could not serve and starts again, as
	// a partner is told to (allowed: gap-free or 410).
	syncRestarts int
	connErrAfter int // connection errors after every replica served again

	writeGap  time.Duration        // the longest stretch after the fault without a 2xx create
	firstFail time.Time            // the first create answered other than 2xx after the fault
	first2xx  time.Time            // the first 2xx create after firstFail
	resumed   map[string]time.Time // per replica: the first 2xx create sent after the new leader ran

	baseRate float64 // requests a second before the fault

	acked, retried, lost, twice, unresolved, conflicts int
	lostKeys                                           []string // a line each: key, then every attempt
	odd                                                []string // answers outside {2xx, 503, 429}
}

func (l *load) window(from, to, fault, elected time.Time) windowStats {
	s := windowStats{byStatus: map[int]int{}, resumed: map[string]time.Time{}}
	for _, r := range l.replicas {
		s.resumed[r.name] = time.Time{}
	}
	l.mu.Lock()
	samples := make([]sample, 0, len(l.samples))
	for _, x := range l.samples {
		if !x.start.Before(from) && x.start.Before(to) {
			samples = append(samples, x)
		}
	}
	l.mu.Unlock()
	sort.Slice(samples, func(i, j int) bool {
		return samples[i].start.Add(samples[i].dur).Before(samples[j].start.Add(samples[j].dur))
	})
	before := 0
	for _, x := range samples {
		if x.start.Before(fault) && x.start.After(fault.Add(-preFault)) {
			before++
		}
	}
	s.baseRate = float64(before) / preFault.Seconds()
	for _, x := range samples {
		s.requests++
		if x.kind == "sync" && x.status == 410 && strings.Contains(string(x.body), "cursor_expired") {
			s.syncRestarts++
			s.maxLatency = max(s.maxLatency, x.dur)
			continue
		}
		s.byStatus[x.status]++
		s.maxLatency = max(s.maxLatency, x.dur)
		if x.dur > maxAnswer {
			s.slow++
		}
		if x.miss {
			s.readMisses++
		}
		if !(x.status >= 200 && x.status < 300 || x.status == 503 || x.status == 429 || x.status == 0) && len(s.odd) < 10 {
			s.odd = append(s.odd, fmt.Sprintf("%s %s on %s: %d %s", x.start.Format("15:04:05.000"), x.kind, l.replicas[x.replica].name, x.status, strings.TrimSpace(string(x.body))))
		}
		if x.kind != "contact" && x.kind != "lead" {
			continue
		}
		done := x.start.Add(x.dur)
		ok := x.status >= 200 && x.status < 300
		if !ok && s.firstFail.IsZero() && !x.start.Before(fault) {
			s.firstFail = done
		}
		if ok && !s.firstFail.IsZero() && s.first2xx.IsZero() && x.start.After(s.firstFail) {
			s.first2xx = done
		}
		name := l.replicas[x.replica].name
		if ok && !x.start.Before(elected) && s.resumed[name].IsZero() {
			s.resumed[name] = done
		}
	}
	last := fault
	for _, x := range samples {
		done := x.start.Add(x.dur)
		if (x.kind == "contact" || x.kind == "lead") && x.status >= 200 && x.status < 300 && done.After(fault) {
			s.writeGap = max(s.writeGap, done.Sub(last))
			last = done
		}
	}
	var allResumed time.Time
	for _, at := range s.resumed {
		if at.IsZero() {
			allResumed = to
			break
		}
		if at.After(allResumed) {
			allResumed = at
		}
	}
	for _, x := range samples {
		if x.status == 0 && x.start.After(allResumed) {
			s.connErrAfter++
		}
	}
	return s
}

// waitResolved waits until every create begun before t has its final
// answer (its keyed retries are over).
func (l *load) waitResolved(t time.Time, limit time.Duration) {
	_ = until(context.Background(), limit, "keyed retries to resolve", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.creates {
			if c.first.Before(t) && !c.done {
				return false
			}
		}
		return true
	})
}

// walkerCursors are up to n of the walker's syncCursors got between from
// and to, spread over the span, the last one always among them.
func (l *load) walkerCursors(from, to time.Time, n int) []syncPoint {
	l.mu.Lock()
	var in []syncPoint
	for _, p := range l.cursors {
		if p.at.After(from) && p.at.Before(to) {
			in = append(in, p)
		}
	}
	l.mu.Unlock()
	if len(in) <= n {
		return in
	}
	out := make([]syncPoint, 0, n)
	for k := n - 1; k >= 0; k-- {
		out = append(out, in[len(in)-1-k*(len(in)-1)/(n-1)])
	}
	return out
}

// createsBetween lists the creates first sent after from and acknowledged
// before to.
func (l *load) createsBetween(from, to time.Time) []create {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []create
	for _, c := range l.creates {
		if c.first.After(from) && !c.acked.IsZero() && c.acked.Before(to) {
			out = append(out, *c)
		}
	}
	return out
}

// checkCreates counts, on the new primary, the rows of every create begun
// in the window: an acknowledged one must be there once, a retried one
// once at most, resolved by its retries. It returns the contact emails
// present.
func (h *harness) checkCreates(res *result) (map[string]bool, error) {
	h.l.mu.Lock()
	var mine []create
	for _, c := range h.l.creates {
		if !c.first.Before(res.windowStart) && c.first.Before(res.end) {
			mine = append(mine, *c)
		}
	}
	h.l.mu.Unlock()
	leader := h.cl.leader()
	if leader == nil {
		return nil, fmt.Errorf("no leader to count rows on")
	}
	ctx := h.ctx
	conn, err := pgx.Connect(ctx, strings.Replace(h.cl.superURL(leader.pgAddr), "/postgres?", "/"+appRole+"?", 1))
	if err != nil {
		return nil, fmt.Errorf("connect to the new primary: %w", err)
	}
	defer conn.Close(ctx)
	var emails, campaigns []string
	for _, c := range mine {
		if c.kind == "contact" {
			emails = append(emails, c.email)
		} else {
			campaigns = append(campaigns, c.key)
		}
	}
	count := map[string]int{}
	for _, q := range []struct {
		sql  string
		keys []string
	}{
		{"SELECT email, count(*) FROM contacts WHERE email = ANY($1) GROUP BY email", emails},
		{"SELECT campaign, count(*) FROM leads WHERE campaign = ANY($1) GROUP BY campaign", campaigns},
	} {
		rows, err := conn.Query(ctx, q.sql, q.keys)
		if err != nil {
			return nil, fmt.Errorf("count rows: %w", err)
		}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				return nil, fmt.Errorf("count rows: %w", err)
			}
			count[k] = n
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("count rows: %w", err)
		}
	}
	s := &res.stats
	for _, c := range mine {
		k := c.email
		if c.kind == "lead" {
			k = c.key
		}
		n := count[k]
		if c.retries > 0 {
			s.retried++
		}
		if c.final == 409 {
			s.conflicts++ // the row exists but the key did not replay it
		}
		switch {
		case !c.acked.IsZero() && n == 0:
			s.acked++
			s.lost++
			s.lostKeys = append(s.lostKeys, c.key+": "+strings.Join(c.history, "; "))
		case !c.acked.IsZero():
			s.acked++
		case c.final == 0 || c.final == 503 || c.final == 429 || c.final == 409:
			s.unresolved++
		}
		if n > 1 {
			s.twice++
		}
	}
	present := map[string]bool{}
	for _, e := range emails {
		if count[e] > 0 {
			present[e] = true
		}
	}
	return present, nil
}

func ms(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func since(t, from time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return ms(t.Sub(from))
}

func printResult(r *result) {
	s := r.stats
	fmt.Printf("  requests %d (%.0f a second before the fault): 2xx %d, 503 %d, 429 %d, connection errors %d, sync pages 410 (walk restarted) %d, max latency %v\n",
		s.requests, s.baseRate, count2xx(s.byStatus), s.byStatus[503], s.byStatus[429], s.byStatus[0], s.syncRestarts, s.maxLatency.Round(time.Millisecond))
	fmt.Printf("  longest stretch without a 2xx create: %s; first create failed %s after the fault, next 2xx %s after it; every replica wrote again %s after the new leader (A %s, B %s, C %s)\n",
		ms(s.writeGap), since(s.firstFail, r.fault), since(s.first2xx, s.firstFail), since(latest(s.resumed), r.elected),
		since(s.resumed["A"], r.elected), since(s.resumed["B"], r.elected), since(s.resumed["C"], r.elected))
	fmt.Printf("  creates: %d acknowledged, %d lost, %d retried with their key, %d applied twice, %d unresolved, %d retries answered 409\n",
		s.acked, s.lost, s.retried, s.twice, s.unresolved, s.conflicts)
	for _, c := range r.revocation {
		fmt.Printf("  revocation on %s seen on %s: %s\n", c.on, c.seenOn, c.describe())
	}
	for _, c := range r.cursors {
		fmt.Printf("  sync cursor %s: %s\n", c.name, c.describe())
		for _, h := range c.missingHistory {
			fmt.Println("    missing", h)
		}
	}
	for i, k := range s.lostKeys {
		if i == 10 {
			fmt.Printf("    … %d more lost\n", len(s.lostKeys)-10)
			break
		}
		fmt.Println("    lost", k)
	}
	for _, o := range s.odd {
		fmt.Println("    answer", o)
	}
	for _, v := range r.violations {
		fmt.Println("  VIOLATION:", v)
	}
}

func (c revocationCheck) describe() string {
	switch {
	case !c.seen && c.note != "":
		return "not checked: " + c.note
	case !c.seen:
		return "never refused within 15 s"
	case c.servedLate > 0:
		return fmt.Sprintf("after %v, served %d times more than 1 s after the revoke", c.latency.Round(time.Millisecond), c.servedLate)
	}
	return fmt.Sprintf("after %v", c.latency.Round(time.Millisecond))
}

func (c cursorCheck) describe() string {
	switch {
	case c.none:
		return "none taken between the fault and the new leader"
	case c.err != nil:
		return "error: " + c.err.Error()
	case c.expired:
		return fmt.Sprintf("410 cursor_expired (%d later contacts)", c.expected)
	case len(c.missing) > 0:
		ex := c.missing
		if len(ex) > 3 {
			ex = ex[:3]
		}
		return fmt.Sprintf("GAP: %d of %d contacts created after it missing (e.g. %s)", len(c.missing), c.expected, strings.Join(ex, ", "))
	}
	return fmt.Sprintf("gap-free (%d contacts created after it, all served)", c.expected)
}

func (c cursorCheck) short() string {
	switch {
	case c.none:
		return "none"
	case c.err != nil:
		return "error"
	case c.expired:
		return "410"
	case len(c.missing) > 0:
		return fmt.Sprintf("gap %d/%d", len(c.missing), c.expected)
	}
	return fmt.Sprintf("ok %d", c.expected)
}

// walkerSummary is the walker's cursors in one cell: how many were
// checked, and the gaps and 410s among them.
func walkerSummary(cs []cursorCheck) string {
	if len(cs) == 1 && cs[0].none {
		return "none"
	}
	var gaps, expired, errs []string
	for _, c := range cs {
		switch {
		case c.err != nil:
			errs = append(errs, "error")
		case c.expired:
			expired = append(expired, "410")
		case len(c.missing) > 0:
			gaps = append(gaps, fmt.Sprintf("%d/%d", len(c.missing), c.expected))
		}
	}
	out := fmt.Sprintf("%d checked", len(cs))
	if len(gaps) > 0 {
		out += ", gaps " + strings.Join(gaps, " ")
	}
	if len(expired) > 0 {
		out += fmt.Sprintf(", %d × 410", len(expired))
	}
	if len(errs) > 0 {
		out += fmt.Sprintf(", %d errors", len(errs))
	}
	if len(gaps)+len(expired)+len(errs) == 0 {
		out += ", gap-free"
	}
	return out
}

func count2xx(m map[int]int) int {
	n := 0
	for s, v := range m {
		if s >= 200 && s < 300 {
			n += v
		}
	}
	return n
}

func earliest(m map[string]time.Time) time.Time {
	var t time.Time
	for _, at := range m {
		if !at.IsZero() && (t.IsZero() || at.Before(t)) {
			t = at
		}
	}
	return t
}

func latest(m map[string]time.Time) time.Time {
	var t time.Time
	for _, at := range m {
		if at.IsZero() {
			return time.Time{}
		}
		if at.After(t) {
			t = at
		}
	}
	return t
}

// report prints one row per failover and tells whether any broke a
// promise.
func report(results []*result, l *load) bool {
	fmt.Println()
	fmt.Println("| failover | leader | new leader after | longest without a 2xx create | first 2xx create after new leader | every replica after new leader | requests | 503 | 429 | conn. errors | other | max latency | acked | lost | retried | twice | unresolved | revocation B, C | cursor before | walker's cursors during the failover | result |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|")
	failed := false
	for _, r := range results {
		s := r.stats
		other := s.requests - count2xx(s.byStatus) - s.byStatus[503] - s.byStatus[429] - s.byStatus[0] - s.syncRestarts
		var rev []string
		for _, c := range r.revocation {
			if c.seen {
				rev = append(rev, fmt.Sprintf("%d ms", c.latency.Milliseconds()))
			} else {
				rev = append(rev, "not seen")
			}
		}
		verdict := "ok"
		if len(r.violations) > 0 {
			verdict = "FAIL"
			failed = true
		}
		fmt.Printf("| %s | %s → %s | %s | %s | %s | %s | %d | %d | %d | %d | %d | %v | %d | %d | %d | %d | %d | %s | %s | %s | %s |\n",
			r.name, r.oldLeader, r.newLeader, ms(r.elected.Sub(r.fault)), ms(s.writeGap), since(earliest(s.resumed), r.elected), since(latest(s.resumed), r.elected),
			s.requests, s.byStatus[503], s.byStatus[429], s.byStatus[0], other, s.maxLatency.Round(time.Millisecond),
			s.acked, s.lost, s.retried, s.twice, s.unresolved, strings.Join(rev, ", "), r.cursors[0].short(), walkerSummary(r.cursors[1:]), verdict)
	}
	fmt.Println()
	for _, r := range results {
		for _, v := range r.violations {
			fmt.Printf("%s: %s\n", r.name, v)
		}
	}
	l.mu.Lock()
	fmt.Printf("load: %d requests, %d keyed creates\n", len(l.samples), len(l.creates))
	l.mu.Unlock()
	return failed
}
