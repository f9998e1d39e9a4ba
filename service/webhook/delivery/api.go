// Package delivery sends the event feed to webhook endpoints: a fan-out
// that moves each enabled endpoint's place in the feed forward and makes
// one delivery row per (endpoint, event), and workers that claim due
// deliveries with leases, sign each attempt (Standard Webhooks) and post
// it through the outbound client, retrying on the schedule.
package delivery

import (
	"context"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
)

// Start is the feed position of a new endpoint of workspace: it gets the
// events that become visible after it is created, and none before but
// those a transaction older than them still held below the watermark
// (WebhookStart). It is a real position of the feed (the workspace's last
// event below the watermark, or (0, 0) before its first), so that a
// replay, a list or an older release's fan-out compares it as any other.
func Start(ctx context.Context, q db.DBTX, workspace uuid.UUID) (afterXID, afterSeq int64, err error) {
	return start(ctx, q, workspace)
}

// Replay makes every event after (afterXID, afterSeq) up to the
// endpoint's place in the feed that it subscribes to due again, in the
// caller's transaction, and wakes the workers once it commits (call Wake).
func Replay(ctx context.Context, q db.DBTX, workspace, endpoint uuid.UUID, afterXID, afterSeq int64) (int64, error) {
	return replay(ctx, q, workspace, endpoint, afterXID, afterSeq)
}

// Resume makes the given-up deliveries of a re-enabled endpoint due again,
// so that it resumes from its oldest event not delivered with success.
func Resume(ctx context.Context, q db.DBTX, workspace, endpoint uuid.UUID) error {
	return resume(ctx, q, workspace, endpoint)
}
