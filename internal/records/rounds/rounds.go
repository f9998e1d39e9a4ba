// Package rounds runs a read-merge-write update that must not lose a
// concurrent writer's change, nor give up while the record is busy: a few
// optimistic rounds (read, merge, write only if the record did not change
// in between), then a last one that reads the record with a row lock, in
// one transaction, and so cannot lose.
package rounds

import (
	"context"
	"errors"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/internal/contract/apierror"
)

// ErrConflictGone means a write failed on a unique value whose holder let
// go of it (a concurrent patch changed it) before the holder could be
// named: the write may now succeed, so it is tried again. A create answers
// 503 once [WriteAttempts] tries all lost that way.
var ErrConflictGone = errors.New("the holder of the conflicting value changed it")

// WriteAttempts bounds the tries of a create that keeps losing a unique
// value to concurrent writes that then give it up.
const WriteAttempts = 3

// ConflictsKeepMoving is the 503 of a create after [WriteAttempts] tries
// lost to [ErrConflictGone]: there is no holder to name, and the client
// should retry.
func ConflictsKeepMoving(err error) error {
	return &apierror.Error{Code: apierror.CodeUnavailable, Message: "a value of this record kept changing hands among concurrent writes; retry", Cause: err}
}

// Attempts is how many rounds an update gets: two optimistic ones, then
// the locked one.
const Attempts = 3

// errLost rolls back the locked last round when it lost a race all the
// same (the holder of a taken value let go of it): the transaction may be
// aborted, and there is nothing to commit.
var errLost = errors.New("update lost a race to concurrent writers")

// Run runs round up to [Attempts] times: on single statements (lock false)
// while it reports again (it lost a race and should run again), and the
// last time inside one transaction with lock true. resolve turns a
// round's error into its final error, or into again (a race lost after
// all); it runs once the round's transaction has ended, so that what it
// looks up is not read while that transaction holds a connection and a
// lock. lost reports that the last round lost too.
func Run[R any](ctx context.Context, d *db.DB,
	round func(q db.DBTX, lock bool) (row R, again bool, err error),
	resolve func(err error) (again bool, final error)) (row R, lost bool, err error) {
	for attempt := 1; ; attempt++ {
		var again bool
		if attempt < Attempts {
			row, again, err = round(d.Conn(), false)
		} else {
			err = d.WithTx(ctx, func(tx db.DBTX) error {
				var err error
				if row, again, err = round(tx, true); again {
					return errLost
				}
				return err
			})
		}
		if err != nil && !again {
			again, err = resolve(err)
		}
		switch {
		case again && attempt < Attempts:
			continue
		case again:
			return row, true, nil
		}
		return row, false, err
	}
}
