package lead

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/batch"
	"github.com/svat/partnerapi/internal/work/groupcommit"
)

// Writer runs single lead creates. Under load, concurrent creates share
// one statement, lead_create_group, and so one transaction and one commit
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

	once sync.Once
	q    groupcommit.Queue[dbsqlc.LeadCreateParams, created]
}

type created struct {
	row dbsqlc.Lead
	err error
	// alone means the group could not settle this create (it waited too
	// long for a lock, or the group failed as a whole and was rolled
	// back): its caller runs it on its own.
	alone bool
}

// Create runs LeadCreate for arg, alone or in a group, with its errors:
// [db.ErrNotFound] when arg.ContactID names no contact, a
// [db.ConflictError] for a taken email or external id, the idempotency
// refusals.
func (w *Writer) Create(ctx context.Context, arg dbsqlc.LeadCreateParams) (dbsqlc.Lead, error) {
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
		return db.Q.LeadCreate(ctx, w.DB.Conn(), arg)
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
// migration 00073). One group at a time serves every tenant, so a tenant
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
	// A group of one is a group too: lead_create_group bounds its lock
	// waits, so no create holds up the ones queued behind it for long.
	out := make([]created, len(items))
	p := groupParams(items)
	p.LockBudgetMs = int32(GroupLockBudget / time.Millisecond)
	rows, err := db.Q.LeadCreateGroup(ctx, w.DB.Conn(), p)
	if err == nil && len(rows) != len(items) {
		err = errors.New("lead_create_group answered a row count other than its items'")
	}
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
	for _, r := range rows {
		out[r.Idx] = groupResult(r)
	}
	return out
}

// groupParams spells the items as lead_create_group's arrays, where the
// empty string, the nil UUID and -1 stand for NULL (see [batch.Text]).
func groupParams(items []dbsqlc.LeadCreateParams) dbsqlc.LeadCreateGroupParams {
	p := dbsqlc.LeadCreateGroupParams{Path: Path}
	for _, a := range items {
		p.WorkspaceIDs = append(p.WorkspaceIDs, a.WorkspaceID.String())
		p.ClientIDs = append(p.ClientIDs, a.ClientID.String())
		p.Keys = append(p.Keys, batch.Text(a.Key))
		p.RequestHashes = append(p.RequestHashes, a.RequestHash)
		var lock int64
		if a.LockKey != nil {
			lock = *a.LockKey
		}
		p.LockKeys = append(p.LockKeys, lock)
		var fresh time.Time
		if a.FreshSince != nil {
			fresh = *a.FreshSince
		}
		p.FreshSince = append(p.FreshSince, fresh)
		p.IDs = append(p.IDs, a.ID.String())
		p.ContactIDs = append(p.ContactIDs, batch.ID(a.ContactID).String())
		p.ContactNewIDs = append(p.ContactNewIDs, a.ContactNewID.String())
		p.ContactEmails = append(p.ContactEmails, batch.Text(a.ContactEmail))
		p.ContactPhones = append(p.ContactPhones, batch.Text(a.ContactPhone))
		p.ContactFirstNames = append(p.ContactFirstNames, batch.Text(a.ContactFirstName))
		p.ContactLastNames = append(p.ContactLastNames, batch.Text(a.ContactLastName))
		p.ContactCompanyNames = append(p.ContactCompanyNames, batch.Text(a.ContactCompanyName))
		p.ContactJobTitles = append(p.ContactJobTitles, batch.Text(a.ContactJobTitle))
		p.Titles = append(p.Titles, batch.Text(a.Title))
		p.Statuses = append(p.Statuses, a.Status)
		p.Sources = append(p.Sources, batch.Text(a.Source))
		p.Campaigns = append(p.Campaigns, batch.Text(a.Campaign))
		p.Messages = append(p.Messages, batch.Text(a.Message))
		p.ValueAmounts = append(p.ValueAmounts, batch.Amount(a.ValueAmount))
		p.ValueCurrencies = append(p.ValueCurrencies, batch.Text(a.ValueCurrency))
		p.ExternalIDs = append(p.ExternalIDs, batch.Text(a.ExternalID))
	}
	return p
}

// lockNotAvailable is the SQLSTATE of an item that waited longer than the
// group's lock_timeout.
const lockNotAvailable = "55P03"

// groupResult turns one row of lead_create_group into what LeadCreate
// would have returned for the item.
func groupResult(r dbsqlc.LeadCreateGroupRow) created {
	switch {
	case r.ErrCode == lockNotAvailable:
		return created{alone: true}
	case r.ErrCode != "":
		return created{err: db.ItemError(r.ErrCode, r.ErrConstraint)}
	case r.ID == uuid.Nil:
		return created{err: db.ErrNotFound}
	}
	return created{row: dbsqlc.Lead{
		WorkspaceID: r.WorkspaceID, ID: r.ID, ContactID: r.ContactID, Title: r.Title, Status: r.Status,
		Source: orNil(r.Source, ""), Campaign: orNil(r.Campaign, ""), Message: orNil(r.Message, ""),
		ValueAmount: orNil(r.ValueAmount, -1), ValueCurrency: orNil(r.ValueCurrency, ""),
		ExternalID: orNil(r.ExternalID, ""), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ChangeXID: r.ChangeXID,
	}}
}

// orNil is v, or nil when v is the element that stands for NULL.
func orNil[T comparable](v, null T) *T {
	if v == null {
		return nil
	}
	return &v
}
