package main

import (
	"fmt"
	"testing"
	"time"
)

func TestRedactHidesThePasswordOfEveryURLForm(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cret@10.0.0.1:5432,10.0.0.2:5432/app?target_session_attrs=read-write": "postgres://app:xxx@10.0.0.1:5432,10.0.0.2:5432/app?target_session_attrs=read-write",
		"postgres://app:s3cret@haproxy:5000/app":                                                "postgres://app:xxx@haproxy:5000/app",
		"postgres://haproxy:5000/app":                                                           "postgres://haproxy:5000/app",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWindowTimesTheOutage checks the numbers the docs quote: the longest
// stretch without a 2xx create, when each replica wrote again after the
// new leader, and that a connection error counts only after all did.
func TestWindowTimesTheOutage(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	l := &load{replicas: []*replica{{name: "A"}, {name: "B"}}}
	add := func(start, dur float64, status int, kind string, r int) {
		l.record(sample{answer: answer{start: at(start), dur: time.Duration(dur * float64(time.Second)), status: status}, kind: kind, replica: r})
	}
	add(0, 0.01, 201, "contact", 0) // before the fault
	add(1, 0.01, 201, "contact", 1) // after the fault, before the failure
	add(2, 2, 503, "lead", 0)       // first failure, done at 4
	add(4.5, 6, 200, "token", 1)    // slow, not a create
	add(12, 0.1, 201, "contact", 1) // B resumes (new leader at 10)
	add(12.5, 0.1, 0, "list", 0)    // a connection error before A resumed
	add(13, 0.1, 201, "lead", 0)    // A resumes
	add(14, 0.1, 0, "list", 1)      // a connection error after both did
	add(15, 0.1, 500, "contact", 1) // an answer outside the promise
	add(30, 0.1, 201, "contact", 0) // outside the window
	s := l.window(at(0), at(20), at(0.5), at(10))

	if s.requests != 9 {
		t.Errorf("requests = %d, want 9 (the one at 30 s is outside)", s.requests)
	}
	if want := 11.09 * float64(time.Second); float64(s.writeGap) < want-1e6 || float64(s.writeGap) > want+1e6 {
		t.Errorf("writeGap = %v, want 11.09s (from 1.01 s to 12.1 s)", s.writeGap)
	}
	if got := s.resumed["B"].Sub(at(10)); got != 2100*time.Millisecond {
		t.Errorf("B resumed %v after the new leader, want 2.1s", got)
	}
	if got := s.resumed["A"].Sub(at(10)); got != 3100*time.Millisecond {
		t.Errorf("A resumed %v after the new leader, want 3.1s", got)
	}
	if s.connErrAfter != 1 {
		t.Errorf("connErrAfter = %d, want 1", s.connErrAfter)
	}
	if s.slow != 1 || s.maxLatency != 6*time.Second {
		t.Errorf("slow = %d, max %v; want 1, 6s", s.slow, s.maxLatency)
	}
	r := &result{stats: s}
	r.judge()
	want := map[string]bool{
		"1 answers 500": true,
		"1 connection errors after every replica served again": true,
		"1 answers slower than 5s (max 6s)":                    true,
	}
	if len(r.violations) != len(want) {
		t.Errorf("violations = %q, want %d", r.violations, len(want))
	}
	for _, v := range r.violations {
		if !want[v] {
			t.Errorf("unexpected violation %q", v)
		}
	}
}

func TestWalkerCursorsSpreadOverTheSpanEndingWithTheLast(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	l := &load{}
	for i := range 10 {
		l.cursors = append(l.cursors, syncPoint{at: t0.Add(time.Duration(i) * time.Second), cursor: fmt.Sprint(i)})
	}
	got := l.walkerCursors(t0.Add(500*time.Millisecond), t0.Add(8500*time.Millisecond), 4)
	var names []string
	for _, p := range got {
		names = append(names, p.cursor)
	}
	if fmt.Sprint(names) != "[1 4 6 8]" {
		t.Errorf("cursors %v, want [1 4 6 8] (1 to 8, spread, the last included)", names)
	}
	if got := l.walkerCursors(t0.Add(2500*time.Millisecond), t0.Add(4500*time.Millisecond), 4); len(got) != 2 {
		t.Errorf("%d cursors in a span holding 2, want 2", len(got))
	}
}
