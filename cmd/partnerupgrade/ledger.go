package main

import (
	"math/rand/v2"
	"sync"
)

// record is a contact or a lead the load created, and what the API must
// show of it at the end: each acknowledged write, in the order the
// answers came. A record is handed to one patch or delete at a time, so
// that order is the order of its writes.
type record struct {
	kind     string // "contact" or "lead"
	id       string
	email    string // contact: its email
	campaign string // lead: its campaign
	jobTitle string // contact: set by its acknowledged patch
	status   string // lead: set by its acknowledged patch; empty: "new"
	patched  bool   // a patch of it was acknowledged
	deleted  bool   // its delete was acknowledged
	// uncertain: a patch or delete of it got no clear answer (a failure
	// already); its final state is not checked.
	uncertain bool
	phase     string // created in
	// replay is a keyed create kept for replays: it is never patched
	// or deleted, so every replay must answer its first answer.
	replay *replayable
}

// replayable is what a replay of a keyed create sends and must get back.
type replayable struct {
	key, path string
	body      any
	answer    []byte
}

// ledger is every record the load created, and the queues that hand them
// to patches and deletes.
type ledger struct {
	mu      sync.Mutex
	records []*record
	fresh   map[string][]*record // kind: acknowledged, not yet patched
	patched map[string][]*record // kind: patched, may be deleted
	replays []*record
}

func newLedger() *ledger {
	return &ledger{fresh: map[string][]*record{}, patched: map[string][]*record{}}
}

// created adds an acknowledged create. One in four keyed single creates
// is kept for replays; the others go to the patches.
func (lg *ledger) created(r *record) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.records = append(lg.records, r)
	if r.replay != nil {
		lg.replays = append(lg.replays, r)
		return
	}
	lg.fresh[r.kind] = append(lg.fresh[r.kind], r)
}

// toPatch hands out the oldest record of kind not yet patched.
func (lg *ledger) toPatch(kind string) *record { return lg.pop(lg.fresh, kind) }

// toDelete hands out the oldest patched record of kind.
func (lg *ledger) toDelete(kind string) *record { return lg.pop(lg.patched, kind) }

func (lg *ledger) pop(q map[string][]*record, kind string) *record {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(q[kind]) == 0 {
		return nil
	}
	r := q[kind][0]
	q[kind] = q[kind][1:]
	return r
}

// patchedOK records an acknowledged patch and makes the record one a
// delete may take. The contacts here are those of contact creates, never
// a lead's inline contact, so a delete of one never meets a lead.
func (lg *ledger) patchedOK(r *record, apply func(*record)) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	apply(r)
	r.patched = true
	lg.patched[r.kind] = append(lg.patched[r.kind], r)
}

// settle records the outcome of a patch or delete of r.
func (lg *ledger) settle(r *record, apply func(*record)) {
	lg.mu.Lock()
	apply(r)
	lg.mu.Unlock()
}

// replayPick is a random record kept for replays.
func (lg *ledger) replayPick() *record {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.replays) == 0 {
		return nil
	}
	return lg.replays[rand.IntN(len(lg.replays))]
}

// snapshot is a copy of every record, for the checks at the end.
func (lg *ledger) snapshot() []record {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := make([]record, len(lg.records))
	for i, r := range lg.records {
		out[i] = *r
	}
	return out
}
