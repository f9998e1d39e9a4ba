package customfield

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
)

// CacheTTL is how long a process keeps a workspace's live definitions
// before reading them again. Every create, patch and answer needs them,
// and a lead create is otherwise one statement: reading them each time
// would add a round trip to the hot path (docs/performance.md). A change
// made through this process is seen at once ([Forget]); one made through
// another instance, within CacheTTL.
const CacheTTL = time.Second

type cacheKey struct {
	ws     uuid.UUID
	object Object
}

type cacheEntry struct {
	defs  []Definition
	byKey map[string]Definition
	at    time.Time
}

var cache sync.Map // cacheKey -> *cacheEntry

// forgets counts the calls of [Forget]. A read of the definitions that a
// Forget overtook may hold them as they were before the change (its
// statement began before the change committed): it answers its own
// request, but is not cached, where it would hide the change from this
// process for up to CacheTTL.
var forgets atomic.Uint64

// readDone, when set (by a test), runs between a read of the definitions
// and its caching.
var readDone func()

// Set is the live definitions of one object of a workspace, as read by
// [Cached].
type Set struct {
	Defs  []Definition
	ByKey map[string]Definition
}

// Cached is [Live] served from the process's cache of at most [CacheTTL].
func Cached(ctx context.Context, q db.DBTX, workspace uuid.UUID, object Object) (Set, error) {
	k := cacheKey{workspace, object}
	if e, ok := cache.Load(k); ok {
		if e := e.(*cacheEntry); time.Since(e.at) < CacheTTL {
			return Set{Defs: e.defs, ByKey: e.byKey}, nil
		}
	}
	gen, at := forgets.Load(), time.Now()
	defs, err := Live(ctx, q, workspace, object)
	if err != nil {
		return Set{}, err
	}
	if readDone != nil {
		readDone()
	}
	e := &cacheEntry{defs: defs, byKey: ByKey(defs), at: at}
	if forgets.Load() == gen {
		cache.Store(k, e)
		// A Forget between the check and the store deletes before it
		// stored: take the entry back.
		if forgets.Load() != gen {
			cache.CompareAndDelete(k, e)
		}
	}
	return Set{Defs: e.defs, ByKey: e.byKey}, nil
}

// Forget drops the cached definitions of a workspace. Whatever changes
// its definitions calls it once the change has committed (not inside
// its transaction: a read between the Forget and the commit would cache
// the definitions from before), so that this process checks and answers
// values with the change at once.
func Forget(workspace uuid.UUID) {
	forgets.Add(1)
	cache.Delete(cacheKey{workspace, Contact})
	cache.Delete(cacheKey{workspace, Lead})
}

// Checker is a [Checker] of values against s.
func (s Set) Checker() *Checker { return &Checker{Defs: s.Defs, byKey: s.ByKey} }
