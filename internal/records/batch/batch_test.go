package batch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/observe/requestid"
	"github.com/svat/partnerapi/internal/records/batch"
	"github.com/svat/partnerapi/internal/records/idempotency"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

// TestCheckSize: 1 to Max items pass; none or more is a 400 of the whole
// request naming the list.
func TestCheckSize(t *testing.T) {
	for _, n := range []int{1, 2, batch.Max} {
		if err := batch.CheckSize("leads", n); err != nil {
			t.Errorf("%d items: %v", n, err)
		}
	}
	for _, n := range []int{-1, 0, batch.Max + 1, 1000} {
		err := batch.CheckSize("leads", n)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != apierror.CodeMalformedRequest || apierror.HTTPStatus(e.Code) != 400 ||
			len(e.Fields) != 1 || e.Fields[0].Field != "leads" || e.Fields[0].Code != "invalid_value" {
			t.Errorf("%d items: %#v, want a 400 naming leads", n, err)
		}
	}
}

// TestProblemIsTheSingleCreatesAnswer: an API error becomes its problem
// object with the request's id; any other error is the 500 a single
// create would answer, telling nothing of the cause.
func TestProblemIsTheSingleCreatesAnswer(t *testing.T) {
	ctx := requestid.WithID(context.Background(), "req-1")
	p := batch.Problem(ctx, fmt.Errorf("item 3: %w", &apierror.Error{Code: apierror.CodeDuplicate, Message: "taken", ExistingID: "con_x"}))
	if p.GetStatus() != 409 || p.GetCode() != apierror.CodeDuplicate || p.GetExistingId() != "con_x" || p.GetRequestId() != "req-1" {
		t.Errorf("duplicate: %v", p)
	}
	p = batch.Problem(ctx, errors.New("connection reset by the secret host db-7"))
	if p.GetStatus() != http.StatusInternalServerError || p.GetCode() != apierror.CodeInternal || p.GetRequestId() != "req-1" {
		t.Errorf("plain error: %v", p)
	}
	if p.GetTitle() == "" || strings.Contains(p.String(), "db-7") || strings.Contains(p.String(), "secret host") {
		t.Errorf("the 500 tells its cause: %v", p)
	}
}

// TestRunRetriesLostDeadlocks: a run that loses a deadlock runs again,
// building its answer afresh; after three lost runs the batch is a 503
// that keeps the cause; another error ends it at once.
func TestRunRetriesLostDeadlocks(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	retry := fmt.Errorf("insert: %w", db.ErrRetry)

	runs := 0
	var resp wrapperspb.StringValue
	replayed, err := batch.Run(ctx, d, idempotency.Key{}, &resp, func(db.DBTX) error {
		runs++
		resp.Value = fmt.Sprint("run ", runs)
		if runs < 3 {
			return retry
		}
		return nil
	})
	if err != nil || replayed || runs != 3 || resp.Value != "run 3" {
		t.Fatalf("two lost runs then one: replayed %v, %v after %d runs, answer %q", replayed, err, runs, resp.Value)
	}

	runs = 0
	_, err = batch.Run(ctx, d, idempotency.Key{}, &resp, func(db.DBTX) error { runs++; return retry })
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.CodeUnavailable || !errors.Is(err, db.ErrRetry) || runs != 3 {
		t.Fatalf("always lost: %v after %d runs, want a 503 after 3", err, runs)
	}

	runs = 0
	bad := errors.New("bad")
	if _, err := batch.Run(ctx, d, idempotency.Key{}, &resp, func(db.DBTX) error { runs++; return bad }); !errors.Is(err, bad) || runs != 1 {
		t.Fatalf("another error: %v after %d runs, want it after one", err, runs)
	}
}

// TestRunUnderAKeyReplays: the batch's answer is stored under its key
// and replayed to a retry, which runs nothing.
func TestRunUnderAKeyReplays(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	req := wrapperspb.String(`{"leads":[…]}`)
	h := http.Header{}
	h.Set(idempotency.Header, "batch-1")
	k, err := idempotency.NewKey(uuid.New(), uuid.New(), "/api/v1/leads/batch", h, req)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	fn := func(resp *wrapperspb.StringValue) func(db.DBTX) error {
		return func(db.DBTX) error { runs++; resp.Value = fmt.Sprint("answer ", runs); return nil }
	}
	var first, second wrapperspb.StringValue
	if replayed, err := batch.Run(ctx, d, k, &first, fn(&first)); err != nil || replayed {
		t.Fatalf("first: replayed %v, %v", replayed, err)
	}
	replayed, err := batch.Run(ctx, d, k, &second, fn(&second))
	if err != nil || !replayed || runs != 1 || second.Value != "answer 1" {
		t.Fatalf("retry: replayed %v, %v, %d runs, %q, want the first answer", replayed, err, runs, second.Value)
	}
}
