package main

import (
	"fmt"
	"sync"
	"time"
)

// tally counts the answers of one kind of request in one phase.
type tally struct{ ok, bad int }

// failure is one request that was not served as it should have been.
type failure struct {
	at      time.Time
	phase   string
	kind    string
	replica string
	class   string // what went wrong, without what differs between requests: "500 internal_error", "no answer"
	detail  string
}

func (f failure) String() string {
	return fmt.Sprintf("%s %-9s %-14s %-9s %s", f.at.Format("15:04:05.000"), f.phase, f.kind, f.replica, f.detail)
}

// failureGroup is the failures of one kind, phase and replica that went
// wrong the same way.
type failureGroup struct {
	first failure
	n     int
}

func (g failureGroup) String() string {
	return fmt.Sprintf("%-9s %-14s %-9s %5d× %s", g.first.phase, g.first.kind, g.first.replica, g.n, g.first.class)
}

// grouped groups failures by phase, kind, replica and class, in the order
// of their first occurrence.
func grouped(fs []failure) []failureGroup {
	var out []failureGroup
	index := map[[4]string]int{}
	for _, f := range fs {
		k := [4]string{f.phase, f.kind, f.replica, f.class}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, failureGroup{first: f})
		}
		out[i].n++
	}
	return out
}

// stats is every request's outcome by phase and kind.
type stats struct {
	mu       sync.Mutex
	tallies  map[string]map[string]*tally // phase -> kind
	failures []failure
}

func newStats() *stats { return &stats{tallies: map[string]map[string]*tally{}} }

func (s *stats) at(phase, kind string) *tally {
	if s.tallies[phase] == nil {
		s.tallies[phase] = map[string]*tally{}
	}
	t := s.tallies[phase][kind]
	if t == nil {
		t = &tally{}
		s.tallies[phase][kind] = t
	}
	return t
}

func (s *stats) ok(phase, kind string) {
	s.mu.Lock()
	s.at(phase, kind).ok++
	s.mu.Unlock()
}

func (s *stats) fail(f failure) {
	s.mu.Lock()
	s.at(f.phase, f.kind).bad++
	s.failures = append(s.failures, f)
	s.mu.Unlock()
}

// count returns the tally of kind in phase.
func (s *stats) count(phase, kind string) tally {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tallies[phase][kind]; t != nil {
		return *t
	}
	return tally{}
}

// totals are the requests served as they should be, and the others.
func (s *stats) totals() (ok, bad int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ph := range s.tallies {
		for _, t := range ph {
			ok += t.ok
			bad += t.bad
		}
	}
	return ok, bad
}

// failed returns a copy of the failures.
func (s *stats) failed() []failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]failure(nil), s.failures...)
}
