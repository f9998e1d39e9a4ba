package lead

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/work/groupcommit"
)

// Writer runs single lead creates. Under load, concurrent creates share
// one statement, lead_create_item_requests, and so one transaction and one commit
// ([groupcommit]): the commit was a fifth of PostgreSQL's time per create.
// Each create runs in its own subtransaction there, so one that fails (a
// taken external id, an idempotency refusal) fails alone, with the error
// its own statement would have had. A request is answered only after the
// statement holding its lead has ended.
type Writer struct {
	DB *db.DB
	// MaxGroup bounds a group below [GroupLimit] (tests use smaller
	// groups); 0 or anything above means GroupLimit.
	MaxGroup int

	once   sync.Once
	q      groupcommit.Queue[dbsqlc.LeadCreateParams, created]
	active atomic.Int64
}

// Active is how many creates are in [Writer.Create] now, queued, in a
// group or running alone. Tests wait on it to line creates up, instead of
// sleeping.
func (w *Writer) Active() int { return int(w.active.Load()) }

type created struct {
	row dbsqlc.Lead
	err error
	// alone means the group could not settle this create (it waited too
	// long for a lock, or the group failed as a whole and was rolled
	// back): its caller runs it on its own.
	alone bool
}

// Create runs the create arg, alone or in a group, with the errors of
// [answer]: the 422 of an unknown contactId, the 409 of a taken external
// id, [rounds.ErrConflictGone], the idempotency refusals.
func (w *Writer) Create(ctx context.Context, arg dbsqlc.LeadCreateParams) (dbsqlc.Lead, error) {
	w.active.Add(1)
	defer w.active.Add(-1)
	w.init()
	c, err := w.q.Do(ctx, arg)
	if err != nil {
		return dbsqlc.Lead{}, err
	}
	return w.settle(ctx, arg, c)
}

// settle is the outcome of arg from its group's answer c: c's own, or that
// of running arg alone when the group could not settle it.
func (w *Writer) settle(ctx context.Context, arg dbsqlc.LeadCreateParams, c created) (dbsqlc.Lead, error) {
	if c.alone {
		return createAlone(ctx, w.DB.Conn(), arg)
	}
	return c.row, c.err
}

// Run groups creates until ctx ends, then returns once every queued one is
// written. The server runs it; without it, Create writes each lead on its
// own.
func (w *Writer) Run(ctx context.Context) error {
	w.init()
	return w.q.Run(ctx)
}

// GroupLockBudget bounds all the lock waits of one group together (see
// lead_create_item_requests, migrations 00073 and 00080). One group at a time serves every tenant, so a tenant
// whose creates wait for locks (its own batch holding their contacts'
// emails) must not keep the group, and every other tenant's creates queued
// behind it, waiting: past the budget, a create that would wait is run
// alone by its own caller, under its own budget and its tenant's share of
// the pool, and the rest of the group goes on.
const GroupLockBudget = 50 * time.Millisecond

// GroupLimit is the bound of a group. Each create of a group that
// writes is a subtransaction with its own transaction id, and PostgreSQL
// caches at most 64 of them per transaction: past that, every snapshot
// taken in the cluster while the group runs has to consult pg_subtrans
// ("suboverflowed"), which slows all sessions down. 32 keeps well below,
// and groups are a handful of creates at 16 concurrent requests.
const GroupLimit = 32

func (w *Writer) init() {
	w.once.Do(func() {
		w.q.Write, w.q.MaxBatch = w.write, w.MaxGroup
		if w.q.MaxBatch <= 0 || w.q.MaxBatch > GroupLimit {
			w.q.MaxBatch = GroupLimit
		}
	})
}

// write runs a group. When the group as a whole fails without having
// written anything ([db.NotApplied]: it lost a deadlock, an item met an
// error the group does not catch, it got no connection, or the earliest
// budget of its callers ran out and cancelled it), each item is run on its
// own by its caller, to its own outcome, under its own deadline and all at
// once (not one after another here, where one slow item would hold up the
// rest); so is an item that waited too long for a lock. Only when the
// group's outcome is unknown (the connection died mid-statement) does
// every item share its error, which is a 503.
func (w *Writer) write(ctx context.Context, items []dbsqlc.LeadCreateParams) []created {
	// A group of one is a group too: its lock waits are bounded, so no
	// create holds up the ones queued behind it for long.
	out := make([]created, len(items))
	budget := GroupLockBudget
	outcomes, err := createRequests(ctx, w.DB.Conn(), items, &budget)
	if err != nil {
		// A group that certainly wrote nothing (no connection, the budget
		// of one of its callers spent, a deadlock lost, an item's error it
		// does not catch) leaves each create to its own caller, under that
		// caller's own budget: one caller's failure or deadline never
		// decides another's outcome. Only a group whose outcome is unknown
		// (its connection died) answers every item with its error.
		notApplied := db.NotApplied(err)
		for i := range out {
			out[i] = created{err: err, alone: notApplied}
		}
		return out
	}
	for _, o := range outcomes {
		if o.ErrCode != nil && *o.ErrCode == lockNotAvailable {
			// It waited too long for a lock, or would have once the
			// group's budget was spent: its caller runs it alone.
			out[o.Idx] = created{alone: true}
			continue
		}
		row, err := answer(o)
		out[o.Idx] = created{row: row, err: err}
	}
	return out
}
