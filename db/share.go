package db

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ErrBusy means the tenant a request works for already holds its share of
// the pool's connections and none came free in time. It is the tenant's
// own load, not an outage: the request is answered 429 (rate_limited,
// Retry-After), and other tenants, whose share is untouched, never wait
// for a connection because of it.
var ErrBusy = errors.New("db: the workspace's share of database connections is in use; retry later")

// Tenant is whom a request's database work is for: a workspace and one of
// its API clients.
type Tenant struct {
	Workspace, Client uuid.UUID
}

type tenantKey struct{}

// tenantHold is one request's claim on its tenant's share. A request
// counts once however many connections it holds at a time (a transaction
// and a statement beside it), so its own nested work never waits for a
// slot it holds itself.
type tenantHold struct {
	Tenant
	mu sync.Mutex
	n  int // connections of the request now held
}

// WithTenant says whom the database work under ctx is for. The gate sets
// it once a request's bearer token is verified; [DB] then bounds how many
// connections the tenant's requests hold at once ([Config.TenantShare]).
func WithTenant(ctx context.Context, workspace, client uuid.UUID) context.Context {
	return context.WithValue(ctx, tenantKey{}, &tenantHold{Tenant: Tenant{Workspace: workspace, Client: client}})
}

// shares bounds the connections that each workspace's, and each client's,
// requests hold at once. Waiting for a share holds no connection.
type shares struct {
	perWorkspace, perClient int

	mu sync.Mutex
	// used counts the requests holding connections, by workspace id and by
	// client id (both random UUIDs, so they share one map). An entry
	// leaves the map when it drops to zero: the map holds only tenants at
	// work.
	used    map[uuid.UUID]int
	waiters int
	// freed is closed, and replaced, when a request leaves while others
	// wait.
	freed chan struct{}
}

func newShares(perWorkspace, perClient int) *shares {
	return &shares{perWorkspace: perWorkspace, perClient: perClient, used: map[uuid.UUID]int{}, freed: make(chan struct{})}
}

// enter claims a slot of h's tenant for the request, waiting at most wait
// for one to come free. It is a no-op for a request that already holds
// one.
func (s *shares) enter(ctx context.Context, h *tenantHold, wait time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n > 0 {
		h.n++
		return nil
	}
	var timer *time.Timer
	for {
		s.mu.Lock()
		if s.used[h.Workspace] < s.perWorkspace && s.used[h.Client] < s.perClient {
			s.used[h.Workspace]++
			s.used[h.Client]++
			s.mu.Unlock()
			h.n = 1
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		s.waiters++
		freed := s.freed
		s.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		var err error
		select {
		case <-freed:
		case <-timer.C:
			err = ErrBusy
		case <-ctx.Done():
			err = ctx.Err()
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errBudgetSpent):
				// The request's own budget ran out while it waited for
				// its tenant's share: the tenant's load, as above, not
				// an outage.
				err = fmt.Errorf("%w (%v)", ErrBusy, cause)
			case errors.Is(cause, ErrUnavailable):
				// The server is shutting down, or another bound of
				// ours: answered as unavailable.
				err = fmt.Errorf("%w: waiting for the workspace's share of connections", cause)
			}
		}
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
		if err != nil {
			timer.Stop()
			return err
		}
	}
}

// leave gives back one connection of the request, and its tenant's slot
// with the last one.
func (s *shares) leave(h *tenantHold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	if h.n > 0 {
		return
	}
	s.mu.Lock()
	for _, id := range [2]uuid.UUID{h.Workspace, h.Client} {
		if s.used[id] <= 1 {
			delete(s.used, id)
		} else {
			s.used[id]--
		}
	}
	if s.waiters > 0 {
		close(s.freed)
		s.freed = make(chan struct{})
	}
	s.mu.Unlock()
}

// claim enters ctx's tenant's share, when ctx has a tenant and shares are
// bounded, and returns what gives it back.
func (d *DB) claim(ctx context.Context) (func(), error) {
	h, ok := ctx.Value(tenantKey{}).(*tenantHold)
	if !ok || d.shares == nil {
		return nil, nil
	}
	if err := d.shares.enter(ctx, h, d.acquire); err != nil {
		return nil, err
	}
	return func() { d.shares.leave(h) }, nil
}
