// Package batch holds what the batch creates share: the size rule, the
// problem object of a failed item, and running the batch's transaction
// under its Idempotency-Key, again when it lost a deadlock to another
// batch.
package batch

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/svat/partnerapi/db"
	problemv1 "github.com/svat/partnerapi/gen/partner/problem/v1"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/idempotency"
)

// Max is the most items a batch may carry.
const Max = 100

// attempts bounds the runs of a batch transaction that lose deadlocks.
const attempts = 3

// CheckSize refuses a batch of no items or more than Max (400): the whole
// request is malformed, not one of its items.
func CheckSize(field string, n int) error {
	if n >= 1 && n <= Max {
		return nil
	}
	msg := "send 1 to " + strconv.Itoa(Max) + " items; got " + strconv.Itoa(n)
	e := apierror.Malformed(field + ": " + msg)
	e.Fields = []apierror.FieldViolation{{Field: field, Code: "invalid_value", Message: msg}}
	return e
}

// Text turns an optional value into the element of the contact batch's
// text arrays (ContactCreateMany), where an element cannot be NULL: the
// empty string stands for it, and no valid value is empty. Lead creates
// send their items as JSON read by name, where null is null (migration
// 00080), and need no stand-in.
func Text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Problem is the problem object the single create of an item would have
// answered for err, with this request's id.
func Problem(ctx context.Context, err error) *problemv1.Problem {
	var e *apierror.Error
	if !errors.As(err, &e) {
		e = apierror.Internal(err)
	}
	return e.Problem(requestid.FromContext(ctx))
}

// Run runs fn, which writes the batch's answer into resp, in one
// transaction under k (see idempotency.InTx), and runs it again when a
// concurrent batch made it lose a deadlock. fn must build resp afresh on
// each run.
func Run(ctx context.Context, d *db.DB, k idempotency.Key, resp proto.Message, fn func(tx db.DBTX) error) (replayed bool, err error) {
	for i := 1; ; i++ {
		replayed, err = idempotency.InTx(ctx, d, k, resp, fn)
		switch {
		case !errors.Is(err, db.ErrRetry):
			return replayed, err
		case i == attempts:
			return false, &apierror.Error{Code: apierror.CodeUnavailable, Message: "the batch kept conflicting with concurrent writes; retry it", Cause: err}
		}
	}
}
