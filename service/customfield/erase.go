package customfield

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
	"github.com/svat/partnerapi/internal/records/customfield"
)

// Bounds of the erasure (product.md: a deleted field's values are erased
// within 24 h, in bounded steps).
const (
	// EraseBatch is how many records one statement reads.
	EraseBatch = 1000
	// EraseMaxBatches bounds one run: 100 statements, 100,000 records.
	// The server runs Erase every minute while there is work, so a field
	// of a workspace of 10M records is erased in under two hours.
	EraseMaxBatches = 100
	// EraseGrace is how long after its deletion a field's values are left
	// alone: a write that read the definitions before the delete committed
	// (a request, a lead group) has ended by then, so no value of the
	// deleted field is written after the walk has passed its record.
	EraseGrace = 5 * time.Minute
)

// EraseResult counts one run's work.
type EraseResult struct {
	// Erased counts the records a value was removed from.
	Erased int64
	// Purged counts the definitions removed, their keys free again.
	Purged int64
	// Batches counts the statements run.
	Batches int
}

// Erase removes the values of deleted definitions from storage, at most
// maxBatches statements of batch records each (EraseBatch and
// EraseMaxBatches when 0), and then each definition whose walk is over,
// freeing its key. It walks the workspace's records of the field's object
// by primary key and keeps its place in the definition (erased_through),
// so a run that stops resumes where it stopped, on this replica or
// another (each batch claims its definition with SKIP LOCKED).
//
// Each batch is a transaction that writes no events and keeps the
// records' change_xid and updated_at (CustomFieldEraseQuiet): the values
// left every answer when the field was deleted, so nothing a partner sees
// changes, and a sync walk is not made to serve every record again.
// more reports whether work is left.
func Erase(ctx context.Context, d *db.DB, now time.Time, batch, maxBatches int) (r EraseResult, more bool, err error) {
	if batch <= 0 {
		batch = EraseBatch
	}
	if maxBatches <= 0 {
		maxBatches = EraseMaxBatches
	}
	for r.Batches < maxBatches {
		done := false
		err := d.WithTx(ctx, func(tx db.DBTX) error {
			f, err := db.Q.CustomFieldNextDeleted(ctx, tx, now.Add(-EraseGrace))
			if errors.Is(err, db.ErrNotFound) {
				done = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("claim deleted custom field: %w", err)
			}
			if err := db.Q.CustomFieldEraseQuiet(ctx, tx); err != nil {
				return fmt.Errorf("quiet erasure: %w", err)
			}
			r.Batches++
			var last []uuid.UUID
			var n int32
			if customfield.Object(f.Object) == customfield.Contact {
				row, err := db.Q.CustomFieldEraseContacts(ctx, tx, dbsqlc.CustomFieldEraseContactsParams{
					WorkspaceID: f.WorkspaceID, AfterID: f.ErasedThrough, MaxRows: int32(batch), Key: f.Key})
				if err != nil {
					return fmt.Errorf("erase custom field values of contacts: %w", err)
				}
				last, n = row.LastID, row.Erased
			} else {
				row, err := db.Q.CustomFieldEraseLeads(ctx, tx, dbsqlc.CustomFieldEraseLeadsParams{
					WorkspaceID: f.WorkspaceID, AfterID: f.ErasedThrough, MaxRows: int32(batch), Key: f.Key})
				if err != nil {
					return fmt.Errorf("erase custom field values of leads: %w", err)
				}
				last, n = row.LastID, row.Erased
			}
			r.Erased += int64(n)
			if len(last) == 0 {
				// The walk is over: the key is free again.
				k, err := db.Q.CustomFieldPurge(ctx, tx, dbsqlc.CustomFieldPurgeParams{WorkspaceID: f.WorkspaceID, ID: f.ID})
				if err != nil {
					return fmt.Errorf("purge custom field: %w", err)
				}
				r.Purged += k
				return nil
			}
			through := last[0]
			if err := db.Q.CustomFieldEraseProgress(ctx, tx, dbsqlc.CustomFieldEraseProgressParams{
				WorkspaceID: f.WorkspaceID, ID: f.ID, ErasedThrough: &through}); err != nil {
				return fmt.Errorf("keep erasure progress: %w", err)
			}
			return nil
		})
		if err != nil {
			return r, true, err
		}
		if done {
			return r, false, nil
		}
	}
	return r, true, nil
}
