package delivery

import (
	"sync"

	"github.com/google/uuid"
)

// shares is how a replica's workers are shared among workspaces, so that
// one workspace's slow or hanging receivers never take the workers
// another's deliveries need (product.md, "Events and webhooks": every
// workspace gets a fair share of a replica's delivery slots).
//
// A receiver that accepts a request and never answers holds its worker
// for the whole timeout (10 s by default), and the engine cannot know in
// advance which will: a fair share has to hold before the slow requests
// start, not after. So:
//
//   - reserve workers are never any one workspace's: a workspace gets at
//     most pool = workers - reserve, and a workspace that has due
//     deliveries finds at least reserve workers free of every other
//     workspace at once (reserve is PARTNER_WEBHOOK_CONCURRENCY, 8 of the
//     64 by default, at most a quarter of them);
//   - the pool is divided among the workspaces with due deliveries or with
//     deliveries in flight here: each gets pool / their number, and never
//     less than least (one endpoint's concurrency, so that a workspace with
//     one busy endpoint is not held below what it may have in flight);
//   - the claim (webhook_claim_due) takes each workspace's candidates up to
//     its share less what it has in flight here, round-robin: every
//     workspace's first delivery before any workspace's second.
//
// A lone workspace so has 56 of the 64 workers, and two have 28 each.
// Shares only bound what a claim hands out: a workspace above its share
// (it had the pool alone a moment ago) keeps the requests it has in
// flight and gets no more until it is under it again. With many
// workspaces the shares (at least least each) may add up to more than the
// pool; each workspace still holds at most its own, and the reserve is
// still free of any single one.
//
// An endpoint that keeps timing out gets one slot in all (see
// webhook_claim_due and webhook_attempts_end), so hanging receivers hold
// few workers after their first timeout.
type shares struct {
	pool, least int

	mu sync.Mutex
	// inFlight is this replica's deliveries in flight by workspace.
	inFlight map[uuid.UUID]int
}

func newShares(workers, perEndpoint int) shares {
	reserve := max(1, min(perEndpoint, workers/4))
	pool := max(1, workers-reserve)
	return shares{pool: pool, least: min(perEndpoint, pool), inFlight: map[uuid.UUID]int{}}
}

// start notes a delivery of workspace in flight.
func (s *shares) start(workspace uuid.UUID) {
	s.mu.Lock()
	s.inFlight[workspace]++
	s.mu.Unlock()
}

// end notes the end of one.
func (s *shares) end(workspace uuid.UUID) {
	s.mu.Lock()
	if s.inFlight[workspace]--; s.inFlight[workspace] <= 0 {
		delete(s.inFlight, workspace)
	}
	s.mu.Unlock()
}

// busy lists the workspaces with deliveries in flight, and how many each,
// pairwise, as webhook_claim_due takes them.
func (s *shares) busy() ([]uuid.UUID, []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, n := make([]uuid.UUID, 0, len(s.inFlight)), make([]int32, 0, len(s.inFlight))
	for w, k := range s.inFlight {
		ws, n = append(ws, w), append(n, int32(k))
	}
	return ws, n
}

// InFlight is how many deliveries of workspace this replica has in
// flight (tests hold a workspace to its share by it).
func (e *Engine) InFlight(workspace uuid.UUID) int {
	e.shares.mu.Lock()
	defer e.shares.mu.Unlock()
	return e.shares.inFlight[workspace]
}

// Share is the most deliveries one workspace may have in flight on this
// replica: the whole pool when it is the only one with work.
func (e *Engine) Share() int { return e.shares.pool }
