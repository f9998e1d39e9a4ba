package delivery

import (
	"sync/atomic"
	"time"
)

// The pacing of the engine's rounds. Writes wake the engine with every
// commit, and a backlog's deliveries end by the thousand a second: the
// pacer gathers those wakes into few rounds, and says of each round
// whether it fans out, whether it claims, and how long until the next.
//
// minGap is the least time between two rounds, and refillGap between two
// rounds that refill slots a backlog's deliveries freed: a round started
// by writes gathers the writes of minGap into one fan-out; a backlog is
// refilled once half of the last claim has ended, which bounds the rounds
// by the work (each claims at least half of the one before) rather than
// by a clock (20 ms between rounds capped 32 slots in flight at 1,600
// deliveries a second in make bench (g)).
const (
	minGap    = 20 * time.Millisecond
	refillGap = 2 * time.Millisecond
	// refillMin is the smallest claim that makes its end worth a round
	// of its own.
	refillMin = 8
	// restNoEndpoints is how long a replica that found no enabled endpoint
	// waits before it fans out again, unless an endpoint changes on it: an
	// endpoint enabled through another replica gets its first deliveries
	// within about this much more.
	restNoEndpoints = time.Second
	// A fan-out that moved analyzeAfter deliveries since the last
	// analysis has the delivery table analysed, at most every
	// analyzeEvery (see Engine.analyze).
	analyzeAfter = 1000
	analyzeEvery = 5 * time.Second
	// heldEvery is the longest wait for the next fan-out while the last
	// one held an endpoint at its backlog bound (webhook_fanout_bounded):
	// its deliveries may end with no write to wake the engine, and it
	// counts its pending deliveries again at most once a second.
	heldEvery = time.Second
	// lookAgainFor is how long after a write's wake a fan-out that found
	// endpoints and moved nothing is made again, every heldEvery: the
	// fan-out moves only events below the watermark (the cluster's oldest
	// running transaction), so a write committed while an older
	// transaction runs is held back, and when that one ends no write wakes
	// the engine (without this, the event waited for a round a lease
	// later). At most one statement a second, and only after writes.
	lookAgainFor = time.Minute
)

// pacer is the engine's pacing state. The atomic fields are set from
// other goroutines (a write's Wake, an endpoint's Changed, a worker's
// end); the others belong to Run's goroutine, which alone calls the
// methods that read them.
type pacer struct {
	// woken says that a write (or a replay, a re-enable) woke the engine
	// since its last fan-out.
	woken atomic.Bool
	// changed says that deliveries changed other than by a fan-out since
	// the last round (a replay, a re-enable).
	changed atomic.Bool
	// endpointChanges counts the endpoint changes made through this
	// replica: one ends a rest (see noEndpoints).
	endpointChanges atomic.Int64
	// claimed is the size of the last claim, ends the deliveries ended
	// since, and refill says that they are half of it (the next round
	// then starts after refillGap).
	claimed, ends atomic.Int64
	refill        atomic.Bool

	// fannedOut is when the last fan-out ran (or was tried), fanoutMore
	// that it moved events (more may be left), fanoutHeld that it held an
	// endpoint at its backlog bound (events are left in the feed for it).
	fannedOut  time.Time
	fanoutMore bool
	fanoutHeld bool
	// fanoutEmpty says that the last fan-out found an enabled endpoint and
	// moved nothing, and wokeAt is when a write's wake last started one:
	// within lookAgainFor of it, an empty fan-out is made again (see
	// lookAgainFor).
	fanoutEmpty bool
	wokeAt      time.Time
	// noEndpoints says that the last fan-out found no enabled endpoint in
	// the database: the next ones wait for restNoEndpoints, or for an
	// endpoint change on this replica (a rise of endpointChanges since
	// noEndpointsGen), so that an ingest with no endpoint to feed pays
	// about one statement a second for its wakes, not fifty. rested says
	// that a fan-out was put off by the rest.
	noEndpoints    bool
	noEndpointsGen int64
	rested         bool
	// idle says that nothing was due within a lease at idleAt.
	idle   bool
	idleAt time.Time
	// moved counts the deliveries fanned out since analyzed.
	moved    int
	analyzed time.Time
}

// wake notes a write, a replay or a re-enable: the next round fans out.
func (p *pacer) wake() { p.woken.Store(true) }

// endpointChanged notes a change of an endpoint or its deliveries through
// this replica: the next round fans out even during a rest, and claims
// even when idle.
func (p *pacer) endpointChanged() {
	p.endpointChanges.Add(1)
	p.changed.Store(true)
	p.woken.Store(true)
}

// gap is the least time since the last round before the next starts:
// refillGap once half of a large claim has ended, else minGap.
func (p *pacer) gap() time.Duration {
	if p.refill.Swap(false) {
		return refillGap
	}
	return minGap
}

// fanOut says whether this round fans out, and if it does notes it (now)
// and returns the count of endpoint changes it starts from. A round that
// only refills slots skips it: the writes that woke the engine, a fan-out
// that moved events (more may be left), or minGap since the last one make
// the next round fan out; a rest after one found no endpoint puts that
// off, unless an endpoint changed here since.
func (p *pacer) fanOut() (ok bool, gen int64) {
	woken := p.woken.Swap(false)
	if woken {
		p.wokeAt = time.Now()
	}
	ok = woken || p.fanoutMore || time.Since(p.fannedOut) >= minGap
	if ok && p.noEndpoints && p.endpointChanges.Load() == p.noEndpointsGen && time.Since(p.fannedOut) < restNoEndpoints {
		// No endpoint to feed a moment ago: the writes since stay in the
		// feed, where an endpoint enabled later finds them (each starts
		// from its own place in the feed).
		p.rested = true
		return false, 0
	}
	if ok {
		p.fannedOut, p.rested = time.Now(), false
	}
	return ok, p.endpointChanges.Load()
}

// fannedOutDone notes what a fan-out found (started at endpoint changes
// gen): whether any endpoint was enabled, how many deliveries it made,
// and how many endpoints it held at their backlog bound. It says whether
// the delivery table should be analysed now: once fan-outs have moved
// analyzeAfter deliveries since the last time, at most every
// analyzeEvery.
func (p *pacer) fannedOutDone(gen int64, enabled bool, moved, held int) (analyze bool) {
	p.noEndpoints, p.noEndpointsGen = !enabled, gen
	p.fanoutMore = moved > 0
	p.fanoutHeld = held > 0
	p.fanoutEmpty = enabled && moved == 0
	p.moved += moved
	if p.moved < analyzeAfter || time.Since(p.analyzed) < analyzeEvery {
		return false
	}
	p.moved, p.analyzed = 0, time.Now()
	return true
}

// idleFor says how long the engine stays idle before it claims again, or
// ok false when it should claim now. Idle (nothing was due within a
// lease when last looked), writes wake the engine for their fan-out, and
// only what that moved, a change or a lease's time makes it claim again,
// so that a server with no endpoint pays one statement a round, not
// three.
func (p *pacer) idleFor(lease time.Duration) (wait time.Duration, ok bool) {
	if p.changed.Swap(false) || p.fanoutMore {
		p.idle = false
	}
	if idle := time.Since(p.idleAt); p.idle && idle < lease {
		return lease - idle, true
	}
	p.idle = false
	return 0, false
}

// claimedN notes the size of a claim; the ends of its deliveries count
// from it (ended).
func (p *pacer) claimedN(n int) {
	p.claimed.Store(int64(n))
	p.ends.Store(0)
}

// ended notes the end of a delivery (any goroutine): once as many
// deliveries as half of a large last claim have ended since it, the next
// round refills after refillGap rather than minGap.
func (p *pacer) ended() {
	if n := p.claimed.Load(); n >= refillMin && p.ends.Add(1) >= n/2 {
		p.refill.Store(true)
	}
}

// nextDueIn notes when the next delivery falls due after a claim that
// found nothing: when not within lease, the engine is idle from now.
func (p *pacer) nextDueIn(wait, lease time.Duration) {
	if wait >= lease {
		p.idle, p.idleAt = true, time.Now()
	}
}

// restEnd bounds the wait for the next round by the end of the rest, when
// a fan-out was put off by it: the fan-out is made then; by heldEvery
// while the last fan-out held an endpoint at its bound; and by heldEvery
// while the last fan-out moved nothing within lookAgainFor of a write's
// wake (events an older transaction holds back).
func (p *pacer) restEnd(next time.Duration) time.Duration {
	if p.rested {
		next = min(next, restNoEndpoints-time.Since(p.fannedOut))
	}
	if p.fanoutHeld || p.fanoutEmpty && time.Since(p.wokeAt) < lookAgainFor {
		next = min(next, heldEvery)
	}
	return next
}
