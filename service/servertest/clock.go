package servertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
)

// WaitPastStamp waits until the database's clock has passed stamp, an
// RFC 3339 time the service wrote (an updatedAt, say), so that a write
// from now on is stamped later. Records are stamped by the database's
// now(), a clock [Clock] does not move: tests wait on it, not for a
// guessed while.
func (h *Harness) WaitPastStamp(t testing.TB, stamp string) {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		t.Fatalf("parse stamp %q: %v", stamp, err)
	}
	ctx := context.Background()
	var qerr error
	dbtest.Eventually(t, 5*time.Second, "the database clock to pass "+stamp, func() bool {
		var past bool
		qerr = h.DB.WithTx(ctx, func(tx db.DBTX) error {
			if err := tx.QueryRow(ctx, "SELECT clock_timestamp() > $1", at).Scan(&past); err != nil {
				return fmt.Errorf("read the database clock: %w", err)
			}
			return nil
		})
		return qerr == nil && past
	})
}
