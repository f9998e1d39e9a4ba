// Package retention deletes what the service no longer needs, in bounded
// background sweeps the server runs every hour: access tokens 30 days
// after they expired (a refused token stays explainable for a month),
// audit events after 400 days (a year of history and a margin), and
// events of the feed after PARTNER_EVENT_RETENTION (30 days by default;
// an older feed cursor is then refused with 410). Each run
// deletes at most MaxBatches batches of Batch rows of each kind, oldest
// first, so one run never holds a long transaction or floods the
// database; a backlog is worked off over the following runs.
package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

// Retention periods.
const (
	TokenGrace = 30 * 24 * time.Hour
	AuditAge   = 400 * 24 * time.Hour
	// EventAge is the default retention of the event feed.
	EventAge = 30 * 24 * time.Hour
)

// Bounds of one run.
const (
	Batch      = 1000
	MaxBatches = 100
)

// Result counts the rows one run deleted.
type Result struct {
	Tokens, AuditEvents, Events int64
	// Webhooks counts delivery log rows and ended deliveries.
	Webhooks int64
}

// Sweep runs one bounded sweep as of now, keeping events for eventAge
// (EventAge when 0).
func Sweep(ctx context.Context, d *db.DB, now time.Time, eventAge time.Duration) (Result, error) {
	return SweepBounded(ctx, d, now, eventAge, Batch, MaxBatches)
}

// SweepBounded is Sweep with explicit bounds: at most maxBatches
// statements of at most batch rows for each kind.
func SweepBounded(ctx context.Context, d *db.DB, now time.Time, eventAge time.Duration, batch, maxBatches int) (Result, error) {
	var r Result
	var err error
	r.Tokens, err = drain(batch, maxBatches, func(n int32) (int64, error) {
		return db.Q.AccessTokenDeleteExpired(ctx, d.Conn(), dbsqlc.AccessTokenDeleteExpiredParams{Before: now.Add(-TokenGrace), MaxRows: n})
	})
	if err != nil {
		return r, fmt.Errorf("delete expired tokens: %w", err)
	}
	r.AuditEvents, err = drain(batch, maxBatches, func(n int32) (int64, error) {
		return db.Q.AuditEventDeleteOld(ctx, d.Conn(), dbsqlc.AuditEventDeleteOldParams{Before: now.Add(-AuditAge), MaxRows: n})
	})
	if err != nil {
		return r, fmt.Errorf("delete old audit events: %w", err)
	}
	if eventAge <= 0 {
		eventAge = EventAge
	}
	r.Events, err = drain(batch, maxBatches, func(n int32) (int64, error) {
		return db.Q.EventDeleteExpired(ctx, d.Conn(), dbsqlc.EventDeleteExpiredParams{Cutoff: now.Add(-eventAge), MaxRows: n})
	})
	if err != nil {
		return r, fmt.Errorf("delete old events: %w", err)
	}
	// The delivery log and ended deliveries go with the events they were of.
	r.Webhooks, err = drain(batch, maxBatches, func(n int32) (int64, error) {
		return db.Q.WebhookAttemptsDeleteOld(ctx, d.Conn(), dbsqlc.WebhookAttemptsDeleteOldParams{Before: now.Add(-eventAge), MaxRows: n})
	})
	if err != nil {
		return r, fmt.Errorf("delete old webhook attempts: %w", err)
	}
	n, err := drain(batch, maxBatches, func(n int32) (int64, error) {
		return db.Q.WebhookDeliveriesDeleteOld(ctx, d.Conn(), dbsqlc.WebhookDeliveriesDeleteOldParams{Before: now.Add(-eventAge), MaxRows: n})
	})
	r.Webhooks += n
	if err != nil {
		return r, fmt.Errorf("delete old webhook deliveries: %w", err)
	}
	return r, nil
}

func drain(batch, maxBatches int, del func(int32) (int64, error)) (int64, error) {
	var total int64
	for range maxBatches {
		n, err := del(int32(batch))
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
	}
	return total, nil
}
